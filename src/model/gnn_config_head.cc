// The config-node head of layout models (ModelSpec.config_node_head): a score per configurable
// node from its last-layer state and its configuration inputs, optionally with attention across
// the configurations of the batch (ModelSpec.config_attention), pooled into one column of the
// head input G; and the adjoint.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gnn_stages.h"
#include "tpugraphs/model/gnn.h"
#include "tpugraphs/model/row_product.h"

namespace tpugraphs::model::internal {

namespace {

// Cross-configuration attention of ModelSpec.config_attention, node by node. The q, k, v of a
// batch's configurations lie in the att_qkv [kc * nc, 3A] of one or more tapes (chunks of the
// batch, in configuration order; row c * nc + j = configurable node j in the chunk's
// configuration c, [W_q | W_k | W_v] applied to the node head inputs). For every node j
// separately, over the batch's k configurations: S = Q K^T / sqrt(A), P = row softmax of S,
// O = P V. AttentionNodesForward writes P to p [nc * k, k] (node j's at rows j * k ..) and O to
// each chunk's att_o rows, for nodes [j0, j1).
// fn(tape, row, c) for node j's row in every chunk, c counting the batch's configurations.
template <typename Tape, typename Fn>
void ForNodeRows(const std::vector<Tape*>& chunks, int64_t nc, int64_t j, const Fn& fn) {
  int64_t c = 0;
  for (Tape* t : chunks) {
    for (int64_t i = 0; i < t->k; ++i, ++c) fn(*t, i * nc + j, c);
  }
}

// Node j's q, k, v [k, A] over the chunks' configurations.
template <typename T>
struct NodeRows {
  NodeRows(int64_t A, int64_t k) : A(A), q(k, A), kk(k, A), v(k, A) {}
  template <typename Tape>
  void Gather(const std::vector<Tape*>& chunks, int64_t nc, int64_t j) {
    ForNodeRows(chunks, nc, j, [&](const Tape& t, int64_t r, int64_t c) {
      const auto row = t.att_qkv.row(r);
      q.row(c) = row.segment(0, A);
      kk.row(c) = row.segment(A, A);
      v.row(c) = row.segment(2 * A, A);
    });
  }
  int64_t A;
  MatrixT<T> q, kk, v;
};

template <typename T>
int64_t ConfigsOf(const std::vector<T*>& chunks) {
  int64_t k = 0;
  for (const T* t : chunks) k += t->k;
  return k;
}

}  // namespace

template <typename T>
void AttentionNodesForward(int64_t A, int64_t nc, const std::vector<GnnTape<T>*>& chunks,
                           int64_t j0, int64_t j1, MatrixT<T>* p) {
  const int64_t k = ConfigsOf(chunks);
  const T scale = T(1) / std::sqrt(T(A));
  NodeRows<T> r(A, k);
  MatrixT<T> oj(k, A);
  for (int64_t j = j0; j < j1; ++j) {
    r.Gather(chunks, nc, j);
    auto pj = p->middleRows(j * k, k);
    pj.noalias() = (r.q * r.kk.transpose()) * scale;
    for (int64_t c = 0; c < k; ++c) {
      auto row = pj.row(c);
      const T top = row.maxCoeff();
      row = (row.array() - top).exp().matrix();
      row /= row.sum();
    }
    oj.noalias() = pj * r.v;
    ForNodeRows(chunks, nc, j,
                [&](GnnTape<T>& t, int64_t row, int64_t c) { t.att_o.row(row) = oj.row(c); });
  }
}

// Adjoint of AttentionNodesForward for nodes [j0, j1): from each chunk's att_do [kc * nc, A]
// (d loss / d O) and p, each chunk's att_dqkv [kc * nc, 3A] (d loss / d q, k, v).
template <typename T>
void AttentionNodesBackward(int64_t A, int64_t nc, const std::vector<const GnnTape<T>*>& chunks,
                            const MatrixT<T>& p, int64_t j0, int64_t j1) {
  const int64_t k = ConfigsOf(chunks);
  const T scale = T(1) / std::sqrt(T(A));
  NodeRows<T> r(A, k);
  MatrixT<T> dout(k, A);
  for (int64_t j = j0; j < j1; ++j) {
    r.Gather(chunks, nc, j);
    ForNodeRows(chunks, nc, j, [&](const GnnTape<T>& t, int64_t row, int64_t c) {
      dout.row(c) = t.att_do.row(row);
    });
    const auto pj = p.middleRows(j * k, k);
    const MatrixT<T> dv = pj.transpose() * dout;   // [k, A]
    const MatrixT<T> dp = dout * r.v.transpose();  // [k, k]
    // Softmax adjoint per row: dS = P .* (dP - sum(dP .* P)), then the 1/sqrt(A) scale.
    const VectorT<T> inner = (dp.array() * pj.array()).rowwise().sum().matrix();
    MatrixT<T> ds = (pj.array() * (dp.colwise() - inner).array()).matrix() * scale;
    const MatrixT<T> dq = ds * r.kk;             // [k, A]
    const MatrixT<T> dk = ds.transpose() * r.q;  // [k, A]
    ForNodeRows(chunks, nc, j, [&](const GnnTape<T>& t, int64_t at, int64_t c) {
      auto row = t.att_dqkv.row(at);  // scratch of a const tape (mutable)
      row.segment(0, A) = dq.row(c);
      row.segment(A, A) = dk.row(c);
      row.segment(2 * A, A) = dv.row(c);
    });
  }
}

namespace {

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
void NodeHeadInputs(const StageContext<T>& s, const GraphStructure& gs, const MatrixT<T>& hl,
                    int64_t k, GnnTape<T>* tp) {
  const int64_t H = s.layout.hidden;
  const int64_t RL = gs.plan(s.layout.num_layers).rows();
  const int64_t nc = static_cast<int64_t>(gs.config_nodes.size());
  const int64_t din = H + s.layout.cfg_in, A = s.layout.attention;
  tp->node_x.resize(k * nc, din);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t j = 0; j < nc; ++j) {
      tp->node_x.row(c * nc + j).head(H) = hl.row(c * RL + gs.config_rows_last[j]);
      tp->node_x.row(c * nc + j).tail(s.layout.cfg_in) = tp->cfg_in.row(c * nc + j);
    }
  }
  if (A > 0) {
    // Row by row, so that a chunk's q, k, v are those of the whole batch.
    RowProductInto<T>(tp->node_x, ConstMatrixRefT<T>(s.params + s.layout.w_att, din, 3 * A),
                      &tp->att_qkv);
    tp->att_o.resize(k * nc, A);
  }
}

template <typename T>
void NodeHeadScores(const StageContext<T>& s, const GraphStructure& gs, GnnTape<T>* tp,
                    MatrixT<T>* G) {
  // Per-configurable-node score s_v = w2 . act(W1 [h_v ; e_v ; o_v] + b1), into column head_in.
  const int64_t k = G->rows();
  const int64_t nc = static_cast<int64_t>(gs.config_nodes.size());
  const int64_t W = s.layout.node_head, din = s.layout.hidden + s.layout.cfg_in;
  const int64_t A = s.layout.attention;
  ConstMatrixRefT<T> w1(s.params + s.layout.w_node1, din + A, W);
  Eigen::Map<const RowVectorT<T>> b1(s.params + s.layout.b_node1, W);
  Eigen::Map<const VectorT<T>> w2(s.params + s.layout.w_node2, W);
  RowProductInto<T>(tp->node_x, w1.topRows(din), &tp->node_pre);
  if (A > 0) RowProductAdd<T>(tp->att_o, w1.bottomRows(A), tp->node_pre);
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
void NodeHeadForward(const StageContext<T>& s, const GraphStructure& gs, const MatrixT<T>& hl,
                     GnnTape<T>* tp, MatrixT<T>* G) {
  NodeHeadInputs(s, gs, hl, G->rows(), tp);
  const int64_t A = s.layout.attention;
  if (A > 0) {
    const int64_t nc = static_cast<int64_t>(gs.config_nodes.size()), k = G->rows();
    tp->k = k;
    tp->att_p.resize(nc * k, k);
    AttentionNodesForward<T>(A, nc, {tp}, 0, nc, &tp->att_p);
  }
  NodeHeadScores(s, gs, tp, G);
}

template <typename T>
void NodeHeadBackwardToAttention(const StageContext<T>& s, const GraphStructure& gs, int64_t k,
                                 const GnnTape<T>& tp, const MatrixT<T>& dG, T* grad) {
  const int64_t H = s.layout.hidden;
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
  RowProductTransposedInto<T>(dpre, w1.topRows(din), &tp.node_dx);  // [k nc, din]
  if (s.layout.w_node_linear >= 0) {
    Eigen::Map<const RowVectorT<T>> u(s.params + s.layout.w_node_linear, din);
    Eigen::Map<VectorT<T>>(grad + s.layout.w_node_linear, din).noalias() +=
        tp.node_x.transpose() * ds;
    tp.node_dx.noalias() += ds * u;
  }
  if (A > 0) {
    gw1.bottomRows(A).noalias() += tp.att_o.transpose() * dpre;
    RowProductTransposedInto<T>(dpre, w1.bottomRows(A), &tp.att_do);  // [k nc, A]
    tp.att_dqkv.resize(k * nc, 3 * A);
  }
}

template <typename T>
MatrixT<T> NodeHeadBackwardFromAttention(const StageContext<T>& s, const GraphStructure& gs,
                                         int64_t k, const GnnTape<T>& tp, T* grad, MatrixT<T>* dh) {
  const int64_t H = s.layout.hidden;
  const int64_t RL = gs.plan(s.layout.num_layers).rows();
  const int64_t nc = static_cast<int64_t>(gs.config_nodes.size());
  const int64_t din = H + s.layout.cfg_in, A = s.layout.attention;
  MatrixT<T>& dx = tp.node_dx;
  if (A > 0) {
    ConstMatrixRefT<T> w(s.params + s.layout.w_att, din, 3 * A);
    MatrixRefT<T>(grad + s.layout.w_att, din, 3 * A).noalias() +=
        tp.node_x.transpose() * tp.att_dqkv;
    dx.noalias() += tp.att_dqkv * w.transpose();
  }
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t j = 0; j < nc; ++j) {
      dh->row(c * RL + gs.config_rows_last[j]) += dx.row(c * nc + j).head(H);
    }
  }
  return dx.rightCols(s.layout.cfg_in);
}

template <typename T>
MatrixT<T> NodeHeadBackward(const StageContext<T>& s, const GraphStructure& gs, int64_t k,
                            const GnnTape<T>& tp, const MatrixT<T>& dG, T* grad, MatrixT<T>* dh) {
  NodeHeadBackwardToAttention(s, gs, k, tp, dG, grad);
  if (s.layout.attention > 0) {
    const int64_t nc = static_cast<int64_t>(gs.config_nodes.size());
    AttentionNodesBackward<T>(s.layout.attention, nc, {&tp}, tp.att_p, 0, nc);
  }
  return NodeHeadBackwardFromAttention(s, gs, k, tp, grad, dh);
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

#define TPUG_NODE_HEAD_SPLIT(T)                                                                    \
  template void NodeHeadInputs<T>(const StageContext<T>&, const GraphStructure&,                   \
                                  const MatrixT<T>&, int64_t, GnnTape<T>*);                        \
  template void NodeHeadScores<T>(const StageContext<T>&, const GraphStructure&, GnnTape<T>*,      \
                                  MatrixT<T>*);                                                    \
  template void NodeHeadBackwardToAttention<T>(const StageContext<T>&, const GraphStructure&,      \
                                               int64_t, const GnnTape<T>&, const MatrixT<T>&, T*); \
  template MatrixT<T> NodeHeadBackwardFromAttention<T>(                                            \
      const StageContext<T>&, const GraphStructure&, int64_t, const GnnTape<T>&, T*, MatrixT<T>*); \
  template void AttentionNodesForward<T>(int64_t, int64_t, const std::vector<GnnTape<T>*>&,        \
                                         int64_t, int64_t, MatrixT<T>*);                           \
  template void AttentionNodesBackward<T>(int64_t, int64_t, const std::vector<const GnnTape<T>*>&, \
                                          const MatrixT<T>&, int64_t, int64_t);
TPUG_NODE_HEAD_SPLIT(float)
TPUG_NODE_HEAD_SPLIT(double)
#undef TPUG_NODE_HEAD_SPLIT

}  // namespace tpugraphs::model::internal
