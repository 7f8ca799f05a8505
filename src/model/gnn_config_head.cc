// The config-node head of layout models (ModelSpec.config_node_head): a score per configurable
// node from its last-layer state and its configuration inputs, optionally with attention across
// the configurations of the batch (ModelSpec.config_attention), pooled into one column of the
// head input G; and the adjoint.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "gnn_stages.h"
#include "tpugraphs/model/gnn.h"
#include "tpugraphs/model/row_product.h"

namespace tpugraphs::model::internal {

namespace {

// Cross-configuration attention of ModelSpec.config_attention. x: [k * nc, din] node head inputs,
// row c * nc + j = configurable node j in configuration c; w: [din, 3A] = [W_q | W_k | W_v].
// For every node j separately, over the k configurations: S = Q K^T / sqrt(A), P = row softmax
// of S, O = P V. Fills qkv [k * nc, 3A], p [nc * k, k] (node j's P at rows j * k ..) and
// o [k * nc, A].
template <typename T>
void ConfigAttentionForward(const MatrixT<T>& x, const T* w_att, int64_t A, int64_t k, int64_t nc,
                            MatrixT<T>* qkv, MatrixT<T>* p, MatrixT<T>* o) {
  ConstMatrixRefT<T> w(w_att, x.cols(), 3 * A);
  qkv->noalias() = x * w;
  p->resize(nc * k, k);
  o->resize(k * nc, A);
  const T scale = T(1) / std::sqrt(T(A));
  MatrixT<T> q(k, A), kk(k, A), v(k, A);
  for (int64_t j = 0; j < nc; ++j) {
    for (int64_t c = 0; c < k; ++c) {
      const auto row = qkv->row(c * nc + j);
      q.row(c) = row.segment(0, A);
      kk.row(c) = row.segment(A, A);
      v.row(c) = row.segment(2 * A, A);
    }
    auto pj = p->middleRows(j * k, k);
    pj.noalias() = (q * kk.transpose()) * scale;
    for (int64_t c = 0; c < k; ++c) {
      auto r = pj.row(c);
      const T top = r.maxCoeff();
      r = (r.array() - top).exp().matrix();
      r /= r.sum();
    }
    const MatrixT<T> oj = pj * v;
    for (int64_t c = 0; c < k; ++c) o->row(c * nc + j) = oj.row(c);
  }
}

// Adjoint of ConfigAttentionForward: given d_o [k * nc, A], adds d loss / d W to grad_w [din, 3A]
// and d loss / d x to dx [k * nc, din].
template <typename T>
void ConfigAttentionBackward(const MatrixT<T>& x, const T* w_att, int64_t A, int64_t k, int64_t nc,
                             const MatrixT<T>& qkv, const MatrixT<T>& p, const MatrixT<T>& d_o,
                             T* grad_w, MatrixT<T>* dx) {
  const T scale = T(1) / std::sqrt(T(A));
  MatrixT<T> dqkv(k * nc, 3 * A);
  MatrixT<T> q(k, A), kk(k, A), v(k, A), dout(k, A);
  for (int64_t j = 0; j < nc; ++j) {
    for (int64_t c = 0; c < k; ++c) {
      const auto row = qkv.row(c * nc + j);
      q.row(c) = row.segment(0, A);
      kk.row(c) = row.segment(A, A);
      v.row(c) = row.segment(2 * A, A);
      dout.row(c) = d_o.row(c * nc + j);
    }
    const auto pj = p.middleRows(j * k, k);
    const MatrixT<T> dv = pj.transpose() * dout;  // [k, A]
    const MatrixT<T> dp = dout * v.transpose();   // [k, k]
    // Softmax adjoint per row: dS = P .* (dP - sum(dP .* P)), then the 1/sqrt(A) scale.
    const VectorT<T> inner = (dp.array() * pj.array()).rowwise().sum().matrix();
    MatrixT<T> ds = (pj.array() * (dp.colwise() - inner).array()).matrix() * scale;
    const MatrixT<T> dq = ds * kk;             // [k, A]
    const MatrixT<T> dk = ds.transpose() * q;  // [k, A]
    for (int64_t c = 0; c < k; ++c) {
      auto row = dqkv.row(c * nc + j);
      row.segment(0, A) = dq.row(c);
      row.segment(A, A) = dk.row(c);
      row.segment(2 * A, A) = dv.row(c);
    }
  }
  ConstMatrixRefT<T> w(w_att, x.cols(), 3 * A);
  MatrixRefT<T>(grad_w, x.cols(), 3 * A).noalias() += x.transpose() * dqkv;
  dx->noalias() += dqkv * w.transpose();
}

// The node scores s [k * nc] (row c * nc + j: node j in configuration c) -> column head_in of
// G [k, g_width] (per configuration the sum, or the log-sum-exp, of its nodes' scores) and
// node_weight [k * nc], dG / ds_v (1, or the softmax of the configuration's scores).
template <typename T>
void PoolNodeScores(const StageContext<T>& s, int64_t nc, const VectorT<T>& scores,
                    VectorT<T>* node_weight, MatrixT<T>* G) {
  const int64_t k = G->rows();
  node_weight->resize(k * nc);
  const bool lse = s.spec.config_node_head_pooling() == ModelSpec::NODE_HEAD_POOLING_LOGSUMEXP;
  // Scalar loops in node order: Eigen's vectorised sum and exp peel by the segment's address
  // (c * nc), so a configuration's pooled score followed its position in the batch.
  for (int64_t c = 0; c < k; ++c) {
    const T* sc = scores.data() + c * nc;
    T* wc = node_weight->data() + c * nc;
    if (!lse) {
      T total = T(0);
      for (int64_t j = 0; j < nc; ++j) total += sc[j], wc[j] = T(1);
      (*G)(c, s.layout.head_in) = total;
    } else if (nc == 0) {
      (*G)(c, s.layout.head_in) = T(0);
    } else {
      // log Sum exp(s_v), shifted by the maximum; the weights are the softmax of s.
      T top = sc[0];
      for (int64_t j = 1; j < nc; ++j) top = std::max(top, sc[j]);
      T total = T(0);
      for (int64_t j = 0; j < nc; ++j) wc[j] = std::exp(sc[j] - top), total += wc[j];
      (*G)(c, s.layout.head_in) = top + std::log(total);
      for (int64_t j = 0; j < nc; ++j) wc[j] /= total;
    }
  }
}

}  // namespace

template <typename T>
void NodeHeadForward(const StageContext<T>& s, const GraphStructure& gs, const MatrixT<T>& hl,
                     GnnTape<T>* tp, MatrixT<T>* G) {
  // Per-configurable-node score s_v = w2 . act(W1 [h_v ; e_v] + b1), summed into column head_in.
  const int64_t H = s.layout.hidden, k = G->rows();
  const int64_t RL = gs.plan(s.layout.num_layers).rows();
  const int64_t nc = static_cast<int64_t>(gs.config_nodes.size());
  const int64_t W = s.layout.node_head, din = H + s.layout.cfg_in;
  tp->node_x.resize(k * nc, din);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t j = 0; j < nc; ++j) {
      tp->node_x.row(c * nc + j).head(H) = hl.row(c * RL + gs.config_rows_last[j]);
      tp->node_x.row(c * nc + j).tail(s.layout.cfg_in) = tp->cfg_in.row(c * nc + j);
    }
  }
  const int64_t A = s.layout.attention;
  ConstMatrixRefT<T> w1(s.params + s.layout.w_node1, din + A, W);
  Eigen::Map<const RowVectorT<T>> b1(s.params + s.layout.b_node1, W);
  Eigen::Map<const VectorT<T>> w2(s.params + s.layout.w_node2, W);
  RowProductInto<T>(tp->node_x, w1.topRows(din), &tp->node_pre);
  if (A > 0) {
    ConfigAttentionForward(tp->node_x, s.params + s.layout.w_att, A, k, nc, &tp->att_qkv,
                           &tp->att_p, &tp->att_o);
    RowProductAdd<T>(tp->att_o, w1.bottomRows(A), tp->node_pre);
  }
  tp->node_pre.rowwise() += b1;
  const MatrixT<T> act = s.gnn.ActMat(tp->node_pre);
  VectorT<T> scores(k * nc);  // [k nc]
  RowProduct<T>(act.data(), k * nc, W, W, w2.data(), 1, 1, scores.data(), 1,
                /*accumulate=*/false);
  if (s.layout.w_node_linear >= 0) {  // s_v += u . x_v
    Eigen::Map<const VectorT<T>> u(s.params + s.layout.w_node_linear, din);
    scores.noalias() += tp->node_x * u;
  }
  PoolNodeScores(s, nc, scores, &tp->node_weight, G);
}

template <typename T>
MatrixT<T> NodeHeadBackward(const StageContext<T>& s, const GraphStructure& gs, int64_t k,
                            const GnnTape<T>& tp, const MatrixT<T>& dG, T* grad, MatrixT<T>* dh) {
  const int64_t H = s.layout.hidden;
  const int64_t RL = gs.plan(s.layout.num_layers).rows();
  const int64_t nc = static_cast<int64_t>(gs.config_nodes.size());
  const int64_t W = s.layout.node_head, din = H + s.layout.cfg_in, A = s.layout.attention;
  ConstMatrixRefT<T> w1(s.params + s.layout.w_node1, din + A, W);
  Eigen::Map<const RowVectorT<T>> w2(s.params + s.layout.w_node2, W);
  MatrixT<T> act = s.gnn.ActMat(tp.node_pre);
  MatrixT<T> dpre = s.gnn.ActGradMat(tp.node_pre);  // [k nc, W]
  VectorT<T> ds(k * nc);
  for (int64_t c = 0; c < k; ++c) {
    ds.segment(c * nc, nc) = dG(c, s.layout.head_in) * tp.node_weight.segment(c * nc, nc);
  }
  Eigen::Map<VectorT<T>>(grad + s.layout.w_node2, W).noalias() += act.transpose() * ds;
  dpre.array() *= (ds * w2).array();
  MatrixRefT<T> gw1(grad + s.layout.w_node1, din + A, W);
  gw1.topRows(din).noalias() += tp.node_x.transpose() * dpre;
  Eigen::Map<RowVectorT<T>>(grad + s.layout.b_node1, W) += dpre.colwise().sum();
  MatrixT<T> dx;  // [k nc, din]
  RowProductTransposedInto<T>(dpre, w1.topRows(din), &dx);
  if (s.layout.w_node_linear >= 0) {
    Eigen::Map<const RowVectorT<T>> u(s.params + s.layout.w_node_linear, din);
    Eigen::Map<VectorT<T>>(grad + s.layout.w_node_linear, din).noalias() +=
        tp.node_x.transpose() * ds;
    dx.noalias() += ds * u;
  }
  if (A > 0) {
    gw1.bottomRows(A).noalias() += tp.att_o.transpose() * dpre;
    MatrixT<T> d_o;  // [k nc, A]
    RowProductTransposedInto<T>(dpre, w1.bottomRows(A), &d_o);
    ConfigAttentionBackward(tp.node_x, s.params + s.layout.w_att, A, k, nc, tp.att_qkv, tp.att_p,
                            d_o, grad + s.layout.w_att, &dx);
  }
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t j = 0; j < nc; ++j) {
      dh->row(c * RL + gs.config_rows_last[j]) += dx.row(c * nc + j).head(H);
    }
  }
  return dx.rightCols(s.layout.cfg_in);
}

template void NodeHeadForward<float>(const StageContext<float>&, const GraphStructure&,
                                     const MatrixT<float>&, GnnTape<float>*, MatrixT<float>*);
template void NodeHeadForward<double>(const StageContext<double>&, const GraphStructure&,
                                      const MatrixT<double>&, GnnTape<double>*, MatrixT<double>*);
template MatrixT<float> NodeHeadBackward<float>(const StageContext<float>&, const GraphStructure&,
                                                int64_t, const GnnTape<float>&,
                                                const MatrixT<float>&, float*, MatrixT<float>*);
template MatrixT<double> NodeHeadBackward<double>(const StageContext<double>&,
                                                  const GraphStructure&, int64_t,
                                                  const GnnTape<double>&, const MatrixT<double>&,
                                                  double*, MatrixT<double>*);

}  // namespace tpugraphs::model::internal
