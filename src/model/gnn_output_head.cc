// The output head: an MLP from the pooled graph representation G to one score per
// configuration, plus the config-node head's pooled score when that head is on; and the adjoint.
#include <cstdint>
#include <utility>

#include "gnn_stages.h"
#include "tpugraphs/model/gnn.h"
#include "tpugraphs/model/row_product.h"

namespace tpugraphs::model::internal {

template <typename T>
void HeadForward(const StageContext<T>& s, MatrixT<T> G, T* scores, GnnTape<T>* tp) {
  const ParamLayout& pl = s.layout;
  const int64_t k = G.rows();
  const size_t nh = pl.w_head.size();
  tp->head_in.resize(nh);
  tp->head_pre.resize(nh);
  VectorT<T> node_score;  // [k]
  if (pl.node_head > 0) node_score = G.col(pl.head_in);
  tp->head_in[0] = G.leftCols(pl.head_in);
  for (size_t t = 0; t < nh; ++t) {
    ConstMatrixRefT<T> W(s.params + pl.w_head[t], pl.head_dims[t], pl.head_dims[t + 1]);
    Eigen::Map<const RowVectorT<T>> b(s.params + pl.b_head[t], pl.head_dims[t + 1]);
    RowProductInto<T>(tp->head_in[t], W, &tp->head_pre[t]);
    tp->head_pre[t].rowwise() += b;
    if (t + 1 < nh) tp->head_in[t + 1] = s.gnn.ActMat(tp->head_pre[t]);
  }
  TPUG_CHECK_FINITE(tp->head_pre[nh - 1]);
  for (int64_t c = 0; c < k; ++c) {
    scores[c] = tp->head_pre[nh - 1](c, 0) + (pl.node_head > 0 ? node_score[c] : T(0));
  }
}

template <typename T>
MatrixT<T> HeadBackward(const StageContext<T>& s, const GnnTape<T>& tp, int64_t k, const T* dscores,
                        T* grad) {
  const ParamLayout& pl = s.layout;
  const size_t nh = pl.w_head.size();
  MatrixT<T> dx(k, 1);  // gradient of the current layer's output, [k, head_dims[t + 1]]
  for (int64_t c = 0; c < k; ++c) dx(c, 0) = dscores[c];
  for (size_t t = nh; t-- > 0;) {
    const int64_t din = pl.head_dims[t], dout = pl.head_dims[t + 1];
    MatrixT<T> dpre = dx;
    if (t + 1 < nh) {
      dpre.array() *= s.gnn.ActGradMat(tp.head_pre[t]).array();
    }
    ConstMatrixRefT<T> W(s.params + pl.w_head[t], din, dout);
    MatrixRefT<T>(grad + pl.w_head[t], din, dout).noalias() += tp.head_in[t].transpose() * dpre;
    Eigen::Map<RowVectorT<T>>(grad + pl.b_head[t], dout) += dpre.colwise().sum();
    RowProductTransposedInto<T>(dpre, W, &dx);
  }
  if (pl.node_head > 0) {
    MatrixT<T> out(k, pl.g_width);
    out.leftCols(pl.head_in) = dx;
    for (int64_t c = 0; c < k; ++c) out(c, pl.head_in) = dscores[c];
    return out;
  }
  return dx;  // [k, g_width]
}

template void HeadForward<float>(const StageContext<float>&, MatrixT<float>, float*,
                                 GnnTape<float>*);
template void HeadForward<double>(const StageContext<double>&, MatrixT<double>, double*,
                                  GnnTape<double>*);
template MatrixT<float> HeadBackward<float>(const StageContext<float>&, const GnnTape<float>&,
                                            int64_t, const float*, float*);
template MatrixT<double> HeadBackward<double>(const StageContext<double>&, const GnnTape<double>&,
                                              int64_t, const double*, double*);

}  // namespace tpugraphs::model::internal
