// The stage kernels of the GNN (model/gnn.h), forward and backward, which Gnn<T> strings
// together. Gnn::ForwardPooled runs, in order:
//   input layer (gnn_input.cc)          node features [n, kept] -> a0_base [n, H]
//   base pass (gnn_layers.cc)           configuration-independent states, per layer [n, H]
//   layer 0 (gnn_config_input.cc)       a0_base + config inputs -> a0 [k * R0, H]
//   message passing (gnn_layers.cc)     [k * R_{l-1}, H] -> [k * R_l, H], l = 1..L
//   pooling (gnn_pooling.cc)            [k * RL, H] -> G [k, g_width] (head_in columns)
//   config-node head (gnn_config_head.cc)  [k * nc, H + cfg_in] -> column head_in of G
// and Gnn::ForwardHead the output head (gnn_output_head.cc): G [k, g_width] -> scores [k].
// The backward kernels are their adjoints, run in the reverse order by Gnn::BackwardHead and
// Gnn::BackwardPooled; each adds its parameter gradients into `grad` (a ParamLayout-sized
// buffer) and returns or adds the gradient of its input. Besides the passes, model/gnn.h's graph
// structure is built in gnn_graph_structure.cc and the layout derived features are computed in
// gnn_layout_features.cc; gnn.cc holds the parameter layout and the orchestration.
//
// Notation as in model/gnn.h: n nodes, k configurations, nc configurable nodes, H hidden width,
// R_l = |S_l| rows per configuration at layer l (R0, RL for l = 0, L), kept = node feature
// columns kept (gs.node_cols), kc = tile config columns kept (gs.cfg_cols). "[rows, cols]"
// gives a matrix's shape; per-config matrices stack configurations config-major (row
// c * R + i is row i of configuration c).
#ifndef TPUGRAPHS_SRC_MODEL_GNN_STAGES_H_
#define TPUGRAPHS_SRC_MODEL_GNN_STAGES_H_

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>

#include "tpugraphs/common/eigen_types.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/model.pb.h"
#include "tpugraphs/model/gnn.h"

namespace tpugraphs::model::internal {

#ifndef NDEBUG
#define TPUG_CHECK_FINITE(m) assert((m).allFinite() && "non-finite values after a kernel")
#else
#define TPUG_CHECK_FINITE(m) ((void)0)
#endif

// What every stage kernel reads: the model's spec and parameter layout, the Gnn (for its
// activation functions), the flat parameter buffer [layout.total] and the task's variant.
template <typename T>
struct StageContext {
  const ModelSpec& spec;
  const ParamLayout& layout;
  const Gnn<T>& gnn;
  const T* params;
  bool is_layout = false;   // TaskKind::kLayout
  bool tile_early = false;  // tile task, TILE_JOIN_EARLY
};

// ---------------------------------------------------------------------------------------------
// Activations and the row sharding, shared by the kernels of every stage.

template <typename T>
T Gnn<T>::Act(T x) const {
  if (spec_.activation() == ModelSpec::ACTIVATION_GELU) {
    return T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2)));
  }
  return x > T(0) ? x : T(spec_.leaky_relu_slope()) * x;
}

template <typename T>
T Gnn<T>::ActGrad(T x) const {
  if (spec_.activation() == ModelSpec::ACTIVATION_GELU) {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
    const T pdf = std::exp(T(-0.5) * x * x) * T(0.3989422804014327);
    return cdf + x * pdf;
  }
  return x > T(0) ? T(1) : T(spec_.leaky_relu_slope());
}

template <typename T>
MatrixT<T> Gnn<T>::ActMat(const MatrixT<T>& a) const {
  if (spec_.activation() == ModelSpec::ACTIVATION_GELU) {
    return a.unaryExpr([this](T x) { return Act(x); });
  }
  const T slope = T(spec_.leaky_relu_slope());
  return (a.array() > T(0)).select(a.array(), a.array() * slope).matrix();
}

template <typename T>
MatrixT<T> Gnn<T>::ActGradMat(const MatrixT<T>& a) const {
  if (spec_.activation() == ModelSpec::ACTIVATION_GELU) {
    return a.unaryExpr([this](T x) { return ActGrad(x); });
  }
  const T slope = T(spec_.leaky_relu_slope());
  return ((a.array() > T(0)).template cast<T>() * (T(1) - slope) + slope).matrix();
}

template <typename T>
template <typename Fn>
void Gnn<T>::ForRows(int64_t rows, int64_t grain, const Fn& fn) const {
  const int64_t shards = ThreadPool::NumShards(rows, grain);
  if (pool_ == nullptr || pool_->num_threads() <= 1 || shards <= 1) {
    for (int64_t s = 0; s < shards; ++s) fn(s, s * grain, std::min(rows, (s + 1) * grain));
    return;
  }
  pool_->ParallelFor(rows, grain, [&fn](int64_t s, int64_t b, int64_t e) { fn(s, b, e); });
}

// ---------------------------------------------------------------------------------------------
// Input layer (gnn_input.cc).

// node_feat [n, kept] (transformed features, columns gs.node_cols) -> a0_base [n, H], the
// configuration-independent input pre-activation a0_base[v] = E[op_v] W_op + f_v W_feat + b_in
// (E: opcode table [num_opcodes, D_op], W_op [D_op, H], W_feat rows of the kept columns).
template <typename T>
void InputForward(const StageContext<T>& s, const GraphStructure& gs, const T* node_feat,
                  MatrixT<T>* a0_base);

// Adjoint of InputForward: da0_base [n, H] -> adds the grads of the opcode table, W_op, W_feat
// (kept rows) and b_in to grad; dnode_feat [n, kept] += d/d node_feat when not null.
template <typename T>
void InputBackward(const StageContext<T>& s, const GraphStructure& gs, const T* node_feat,
                   const MatrixT<T>& da0_base, T* grad, T* dnode_feat);

// ---------------------------------------------------------------------------------------------
// Layer 0 per configuration (gnn_config_input.cc).

// a0_base [n, H] (InputForward's output) and the configuration inputs -> tp->a0 [k * R0, H],
// row c * R0 + i = a0_base[S_0[i]] plus, for tile early join, cfg_in[c] W_cfg (every row of
// configuration c), for layout, cfg_in[c * nc + j] W_cfg (the row of configurable node j only).
// Fills tp->cfg_in (tile early: [k, cfg_in] raw columns at gs.cfg_cols, zeros elsewhere; layout:
// [k * nc, cfg_in] value embeddings [18 * d_e] then the derived columns) and, for layout,
// tp->layout_rows [k * nc * 18] (embedding table row of every value).
template <typename T>
void Layer0Forward(const StageContext<T>& s, const GraphStructure& gs, const GnnInputs<T>& in,
                   const MatrixT<T>& a0_base, GnnTape<T>* tp);

// Adjoint of Layer0Forward and of the activation after it, for k configurations: dh0 [k * R0, H]
// (gradient of h0 = act(a0)) -> da0_base [n, H] += the per-config rows summed into their nodes;
// adds the grads of W_cfg and of the layout value table (which also receives dnode_cfg [k * nc,
// cfg_in], the config-node head's gradient of cfg_in; empty without that head); dtile_cfg [k,
// kc] += d/d tile_cfg (tile early join) when not null.
template <typename T>
void Layer0Backward(const StageContext<T>& s, const GraphStructure& gs, int64_t k,
                    const GnnTape<T>& tp, const MatrixT<T>& dh0, const MatrixT<T>& dnode_cfg,
                    T* grad, T* dtile_cfg, MatrixT<T>* da0_base);

// ---------------------------------------------------------------------------------------------
// Pooling (gnn_pooling.cc).

// hl [k * RL, H] (per-config last-layer states), shared (its base_sum, base_max and base_arg:
// BasePools of the base last-layer states) -> G [k, g_width] (zeros on entry): columns
// [0, num_pools * H) the mean pool over all n nodes, the max pool (argmax refs in
// tp->max_ref [k * H]: row in S_L, or -(v + 1) for base node v) and the configurable-node pool,
// as enabled; for tile late join the tile config columns follow at gs.cfg_cols.
template <typename T>
void PoolForward(const StageContext<T>& s, const GraphStructure& gs, const GnnInputs<T>& in,
                 const MatrixT<T>& hl, const GnnTape<T>& shared, GnnTape<T>* tp, MatrixT<T>* G);

// The pools' configuration-independent part, once per shared pass: shared->base_sum (the sum of
// base_last [n, H] over the nodes outside S_L, zero when there are none), base_max and base_arg
// (BaseMax).
template <typename T>
void BasePools(const GraphStructure& gs, const MatrixT<T>& base_last, int64_t H,
               GnnTape<T>* shared);

// The max pool's base part: per column d of base_last [n, H] over the nodes outside S_L, the
// largest value and its node (the first in unaffected_last order; -1 when there is none).
template <typename T>
void BaseMax(const GraphStructure& gs, const MatrixT<T>& base_last, int64_t H,
             RowVectorT<T>* base_max, std::vector<int64_t>* base_arg);

// Adjoint of PoolForward: dG [k, g_width] -> dh [k * RL, H] += (zeros on entry), dlast += what
// reaches the base states of the last layer (null when gs.all_affected), dtile_cfg [k, kc] += the
// late-join tile config columns when not null.
template <typename T>
void PoolBackward(const StageContext<T>& s, const GraphStructure& gs, int64_t k,
                  const GnnTape<T>& tp, const MatrixT<T>& dG, MatrixT<T>* dh,
                  PooledBaseGrad<T>* dlast, T* dtile_cfg);

// ---------------------------------------------------------------------------------------------
// Config-node head of layout models (gnn_config_head.cc, ModelSpec.config_node_head).

// hl [k * RL, H], tp->cfg_in [k * nc, cfg_in] -> column head_in of G [k, g_width]: per
// configuration the sum (or log-sum-exp) over its configurable nodes of s_v =
// w2 . act(W1 [h_v ; e_v ; o_v] + b1) (o_v: config attention output, when on). Fills tp->node_x
// [k * nc, H + cfg_in], tp->node_pre [k * nc, W], tp->node_weight [k * nc] (dG / ds_v) and the
// attention activations tp->att_qkv [k * nc, 3A], tp->att_p [nc * k, k], tp->att_o [k * nc, A].
template <typename T>
void NodeHeadForward(const StageContext<T>& s, const GraphStructure& gs, const MatrixT<T>& hl,
                     GnnTape<T>* tp, MatrixT<T>* G);

// Adjoint of NodeHeadForward: column head_in of dG [k, g_width] -> adds the grads of W1, b1, w2
// and W_att; dh [k * RL, H] += at the rows of the configurable nodes; returns dnode_cfg
// [k * nc, cfg_in], the gradient of tp.cfg_in.
template <typename T>
MatrixT<T> NodeHeadBackward(const StageContext<T>& s, const GraphStructure& gs, int64_t k,
                            const GnnTape<T>& tp, const MatrixT<T>& dG, T* grad, MatrixT<T>* dh);

// NodeHeadForward and NodeHeadBackward in parts, around the attention across configurations
// (Gnn::ForwardConfigsToAttention ...); each is the same as that part of the whole.
// NodeHeadInputs: tp->node_x [k * nc, din] and, with attention, tp->att_qkv [k * nc, 3A] (row
// products: a row's q, k, v do not depend on the rows beside it) and tp->att_o's shape.
template <typename T>
void NodeHeadInputs(const StageContext<T>& s, const GraphStructure& gs, const MatrixT<T>& hl,
                    int64_t k, GnnTape<T>* tp);
// The attention of configurable nodes [j0, j1) over the configurations of chunks (in order):
// p [nc * k, k] and each chunk's att_o; the adjoint: each chunk's att_dqkv from its att_do.
template <typename T>
void AttentionNodesForward(int64_t A, int64_t nc, const std::vector<GnnTape<T>*>& chunks,
                           int64_t j0, int64_t j1, MatrixT<T>* p);
template <typename T>
void AttentionNodesBackward(int64_t A, int64_t nc, const std::vector<const GnnTape<T>*>& chunks,
                            const MatrixT<T>& p, int64_t j0, int64_t j1);
// From tp->node_x and tp->att_o: column head_in of G, tp->node_pre and tp->node_weight.
template <typename T>
void NodeHeadScores(const StageContext<T>& s, const GraphStructure& gs, GnnTape<T>* tp,
                    MatrixT<T>* G);
// Down to the attention: adds the grads of W1, b1, w2 (and u); tp.node_dx [k * nc, din] (without
// the attention's part) and tp.att_do [k * nc, A]; sizes tp.att_dqkv.
template <typename T>
void NodeHeadBackwardToAttention(const StageContext<T>& s, const GraphStructure& gs, int64_t k,
                                 const GnnTape<T>& tp, const MatrixT<T>& dG, T* grad);
// The rest, given tp.att_dqkv: adds W_att's grad, dh += at the configurable nodes' rows;
// returns dnode_cfg (tp.node_dx is updated in place).
template <typename T>
MatrixT<T> NodeHeadBackwardFromAttention(const StageContext<T>& s, const GraphStructure& gs,
                                         int64_t k, const GnnTape<T>& tp, T* grad, MatrixT<T>* dh);

// ---------------------------------------------------------------------------------------------
// Output head (gnn_output_head.cc).

// G [k, g_width] -> scores [k]: the MLP head_dims[0] -> ... -> 1 over the first head_in columns
// (tp->head_in[t] [k, head_dims[t]], tp->head_pre[t] [k, head_dims[t + 1]]), plus column head_in
// (the summed node scores) when the config-node head is on.
template <typename T>
void HeadForward(const StageContext<T>& s, MatrixT<T> G, T* scores, GnnTape<T>* tp);

// Adjoint of HeadForward: dscores [k] -> adds the head's grads; returns dG [k, g_width].
template <typename T>
MatrixT<T> HeadBackward(const StageContext<T>& s, const GnnTape<T>& tp, int64_t k, const T* dscores,
                        T* grad);

}  // namespace tpugraphs::model::internal

#endif  // TPUGRAPHS_SRC_MODEL_GNN_STAGES_H_
