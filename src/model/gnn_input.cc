// The GNN's input layer: opcode embedding and node feature projection, the configuration-
// independent part of every node's layer-0 pre-activation.
#include <cstdint>

#include "gnn_stages.h"
#include "tpugraphs/model/gnn.h"

namespace tpugraphs::model::internal {

namespace {

// The rows of W_feat [140, H] of the kept node feature columns: [kept, H].
template <typename T>
MatrixT<T> KeptFeatureWeights(const StageContext<T>& s, const GraphStructure& gs) {
  const int64_t H = s.layout.hidden;
  const int64_t kept = static_cast<int64_t>(gs.node_cols.size());
  MatrixT<T> wfk(kept, H);
  for (int64_t j = 0; j < kept; ++j) {
    wfk.row(j) =
        Eigen::Map<const RowVectorT<T>>(s.params + s.layout.w_feat + gs.node_cols[j] * H, H);
  }
  return wfk;
}

}  // namespace

template <typename T>
void InputForward(const StageContext<T>& s, const GraphStructure& gs, const T* node_feat,
                  MatrixT<T>* a0_base) {
  const int64_t H = s.layout.hidden, n = gs.n;
  const int64_t kept = static_cast<int64_t>(gs.node_cols.size());
  const int64_t D_op = s.spec.opcode_embedding_dim();
  ConstMatrixRefT<T> op_table(s.params + s.layout.op_table, s.spec.num_opcodes(), D_op);
  ConstMatrixRefT<T> w_op(s.params + s.layout.w_op, D_op, H);
  MatrixT<T> op_proj = op_table * w_op;                 // [num_opcodes, H]
  const MatrixT<T> wfk = KeptFeatureWeights<T>(s, gs);  // [kept, H]
  ConstMatrixRefT<T> feat(node_feat, n, kept);
  a0_base->noalias() = feat * wfk;  // [n, H]
  Eigen::Map<const RowVectorT<T>> b_in(s.params + s.layout.b_in, H);
  for (int64_t v = 0; v < n; ++v) a0_base->row(v) += op_proj.row(gs.opcode[v]) + b_in;
  TPUG_CHECK_FINITE(*a0_base);
}

template <typename T>
void InputBackward(const StageContext<T>& s, const GraphStructure& gs, const T* node_feat,
                   const MatrixT<T>& da0_base, T* grad, T* dnode_feat) {
  const int64_t H = s.layout.hidden, n = gs.n;
  const int64_t kept = static_cast<int64_t>(gs.node_cols.size());
  const int64_t D_op = s.spec.opcode_embedding_dim();
  ConstMatrixRefT<T> feat(node_feat, n, kept);
  MatrixT<T> dwfk = feat.transpose() * da0_base;  // [kept, H]
  for (int64_t j = 0; j < kept; ++j) {
    Eigen::Map<RowVectorT<T>>(grad + s.layout.w_feat + gs.node_cols[j] * H, H) += dwfk.row(j);
  }
  Eigen::Map<RowVectorT<T>>(grad + s.layout.b_in, H) += da0_base.colwise().sum();
  MatrixT<T> dop_proj = MatrixT<T>::Zero(s.spec.num_opcodes(), H);  // [num_opcodes, H]
  for (int64_t v = 0; v < n; ++v) dop_proj.row(gs.opcode[v]) += da0_base.row(v);
  ConstMatrixRefT<T> op_table(s.params + s.layout.op_table, s.spec.num_opcodes(), D_op);
  ConstMatrixRefT<T> w_op(s.params + s.layout.w_op, D_op, H);
  MatrixRefT<T>(grad + s.layout.op_table, s.spec.num_opcodes(), D_op).noalias() +=
      dop_proj * w_op.transpose();
  MatrixRefT<T>(grad + s.layout.w_op, D_op, H).noalias() += op_table.transpose() * dop_proj;
  if (dnode_feat != nullptr) {
    const MatrixT<T> wfk = KeptFeatureWeights<T>(s, gs);
    MatrixRefT<T>(dnode_feat, n, kept).noalias() += da0_base * wfk.transpose();
  }
}

template void InputForward<float>(const StageContext<float>&, const GraphStructure&, const float*,
                                  MatrixT<float>*);
template void InputForward<double>(const StageContext<double>&, const GraphStructure&,
                                   const double*, MatrixT<double>*);
template void InputBackward<float>(const StageContext<float>&, const GraphStructure&, const float*,
                                   const MatrixT<float>&, float*, float*);
template void InputBackward<double>(const StageContext<double>&, const GraphStructure&,
                                    const double*, const MatrixT<double>&, double*, double*);

}  // namespace tpugraphs::model::internal
