// The GNN computation behind CostModel, templated on the scalar type so that the same code runs
// in float (training, inference) and in double (finite-difference gradient checks).
//
// Notation (docs/model.md): n nodes, k configs, H = hidden_dim, L = num_layers, S_l = the nodes
// whose layer-l state depends on the configuration (S_0 = configurable nodes for layout, all
// nodes for tile early join, none for tile late join; S_l = S_{l-1} plus its neighbours).
// Per-config states are stacked config-major: row c * |S_l| + i is node S_l[i] in config c.
// "Base" states [n, H] are the configuration-independent states, exact outside S_l.
//
// Thread-safety: GraphStructure is immutable after BuildGraphStructure; Gnn methods are const;
// each thread needs its own GnnTape.
#ifndef TPUGRAPHS_MODEL_GNN_H_
#define TPUGRAPHS_MODEL_GNN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/eigen_types.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/model.pb.h"
#include "tpugraphs/model/layout_flow.h"
#include "tpugraphs/model/tile_features.h"

namespace tpugraphs {
class ThreadPool;
}

namespace tpugraphs::model::internal {

// Rows per shard of the row-parallel layer kernels. Shard boundaries depend only on the row
// count, never on the thread count, and per-shard partial sums are added in shard order, so the
// results are the same whatever the number of threads.
inline constexpr int64_t kLayerRowGrain = 512;

// Offsets of the parameter tensors in the flat buffer (row-major blocks).
struct ParamLayout {
  struct Block {
    std::string name;
    int64_t offset = 0, rows = 0, cols = 0;
  };
  std::vector<Block> blocks;
  int64_t total = 0;
  int hidden = 0, num_layers = 0, head_in = 0, num_pools = 0;
  int cfg_in = 0;             // rows of w_cfg: 24 (tile early), 18 * d_e (layout), 0
  int64_t op_table = -1;      // [num_opcodes, D_op]
  int64_t w_op = -1;          // [D_op, H]
  int64_t w_feat = -1;        // [140, H] (rows of dropped columns unused)
  int64_t w_cfg = -1;         // [cfg_in, H]
  int64_t layout_table = -1;  // [layout_value_max + 3, d_e]
  int64_t b_in = -1;          // [H]
  std::vector<int64_t> w_layer, b_layer, ln_gain, ln_bias;  // [3H, H], [H], [H], [H] per layer
  std::vector<int64_t> w_head, b_head;  // per head layer: [in, out], [out]; last out = 1
  std::vector<int> head_dims;           // head_in, hidden..., 1
  // Layout config_node_head: width W (0 = off), [H + cfg_in, W], [W], [W, 1]. When on, G has one
  // extra last column (the summed node scores), so g_width = head_in + 1; else g_width = head_in.
  int node_head = 0;
  int64_t w_node1 = -1, b_node1 = -1, w_node2 = -1;
  // Layout config_node_head_linear: u [H + cfg_in] (-1 = off), s_v += u . x_v.
  int64_t w_node_linear = -1;
  // Layout config_attention: width A (0 = off); w_node1 then has A more rows (the attention
  // output o_v joins the node head input), and w_att [H + cfg_in, 3A] holds the query, key and
  // value projections side by side.
  int attention = 0;
  int64_t w_att = -1;
  // Layout layout_dimension_tokens: width E (0 = off); the encoder's w_dim [14, E] and b_dim [E].
  // Its 3 E output columns are the last of cfg_in.
  int dim_tokens = 0;
  int64_t w_dim = -1, b_dim = -1;
  int g_width = 0;
};
ParamLayout MakeParamLayout(const ModelSpec& spec, TaskKind task);

// Tile config columns the model reads: the 24 raw ones, then the derived ones
// (ModelSpec.tile_derived_features, model/tile_features.h) at 24..29.
int TileConfigColumns(const ModelSpec& spec);

// Which nodes are recomputed per config at one layer, and where their inputs come from.
// A "ref" r >= 0 is a row index into the previous layer's per-config rows; r < 0 is the base
// state of node -(r + 1).
struct LayerPlan {
  std::vector<int64_t> nodes;           // S_l
  std::vector<int64_t> self_ref;        // [|S_l|] (layers >= 1)
  std::vector<int64_t> op_ptr, op_ref;  // CSR over S_l: operands (producers) of each node
  std::vector<int64_t> us_ptr, us_ref;  // CSR over S_l: users (consumers) of each node
  // The whole graph's plan (GraphStructure::full): S = all nodes, refs are node ids, and v is
  // an operand of u exactly as often as u is a user of v, so Scatter can pull, row-parallel.
  bool whole = false;
  int64_t rows() const { return static_cast<int64_t>(nodes.size()); }
};

struct GraphStructure {
  int64_t n = 0, m = 0;
  std::vector<int32_t> opcode;           // [n], ids >= num_opcodes mapped to 0
  std::vector<int64_t> config_nodes;     // layout: [nc] node ids in node_config_ids order
  LayerPlan full;                        // S = all nodes, every ref local (the base pass)
  std::vector<LayerPlan> plans;          // [L + 1]; empty plans mean "use full"
  std::vector<uint8_t> use_full;         // [L + 1]: plan l is `full`
  bool all_affected = false;             // S_0 = all nodes: no base pass needed
  std::vector<int64_t> unaffected_last;  // nodes outside S_L
  // [L]: the base nodes whose layer-l states plan l + 1 reads (its refs < 0), ascending; the rows
  // the per-configuration backward pass writes into the base states' gradient.
  std::vector<std::vector<int64_t>> base_rows;
  std::vector<int64_t> config_rows_first;  // layout: row in S_0 of each configurable node
  std::vector<int64_t> config_rows_last;   // layout: row in S_L of each configurable node
  std::vector<int> node_cols;              // kept raw node feature columns
  std::vector<int> cfg_cols;               // kept raw tile config columns, then derived ones
  // layout: [nc, 3, 12] raw dims (6) and graph minor_to_major (6) of each configurable node's
  // output, operand 0 and operand 1 (FillLayoutTensorInfo); empty = all derived features 0.
  std::vector<float> tensor_info;
  // layout: [nc, 3, kLayoutTensorLogWidth] the logarithms the tensor and size features take of
  // each tensor's dims, per dimension and per pair of minor dimensions (FillLayoutTensorInfo), so
  // that a configuration's features are looked up, not recomputed; empty = computed per call.
  std::vector<double> tensor_logs;
  // layout, ModelSpec.config_loop_depth: [nc] while loops around each configurable node
  // (model/loop_depth.h); empty = 0.
  std::vector<float> config_loop_depth;
  // layout, ModelSpec.config_random_walk = K: [nc, K] random-walk return probabilities of each
  // configurable node on this structure's graph (model/random_walk.h); empty = 0.
  std::vector<float> config_random_walk;
  // layout, ModelSpec.layout_flow_features: the whole graph's layout flow of the configurable
  // nodes (model/layout_flow.h; sliced to a segment's nodes under GST); empty = features 0.
  LayoutFlow flow;
  const LayerPlan& plan(int l) const { return use_full[l] ? full : plans[l]; }
};

// Builds the CSR adjacency and the per-layer plans. naive = true makes every layer recompute all
// nodes per config (the reference path the shared computation is tested against).
// Checks edges and node_config_ids; `what` prefixes error messages.
StatusOr<GraphStructure> BuildGraphStructure(const ModelSpec& spec, TaskKind task,
                                             const std::vector<uint8_t>& opcodes,
                                             const std::vector<int64_t>& edge_index,
                                             const std::vector<int64_t>& config_nodes,
                                             std::vector<int> node_cols, std::vector<int> cfg_cols,
                                             bool naive, const std::string& what);

// Layout tensor features (ModelSpec.layout_tensor_features): 6 per tensor, 3 tensors.
inline constexpr int kLayoutTensorFeatureCount = 18;
inline constexpr int kLayoutTensorInfoWidth = 36;  // 3 tensors x (6 dims + 6 minor_to_major)

// Per tensor of tensor_logs: log1p(d[i]) / 8, the padding terms to 128 and to 8 of each dim i
// (6 each), log1p of all its elements / 16, log1p of the elements of its leading rank / 16,
// then per pair (m0, m1) of minor dims in -1..5 the two padded-size terms of LayoutSizeFeatures.
inline constexpr int kLayoutTensorLogWidth = 20 + 2 * 7 * 7;

// Fills gs->tensor_info from the raw node features [n, 140] (shape dims 21-26, layout
// minor_to_major 134-139) of each configurable node and of its first two operands (edge order),
// and gs->tensor_logs from it.
// rank_aware (ModelSpec.layout_rank_aware): minor_to_major slots beyond the tensor's rank (its
// leading dims >= 1) become -1, "no such dimension", instead of the official features' 0.
void FillLayoutTensorInfo(const float* raw_node_feat, GraphStructure* gs, bool rank_aware = false);
// Fills gs->tensor_logs from gs->tensor_info.
void FillLayoutTensorLogs(GraphStructure* gs);

// LayoutTensorFeatures and LayoutSizeFeatures from a row of tensor_logs (logs [3 *
// kLayoutTensorLogWidth]) instead of computing the logarithms: the same values to the bit
// (layout_tensor_features_test compares them with the functions below on every value).
template <typename T>
void LayoutTensorFeaturesLookup(const float* info, const double* logs, const int8_t* vals, T* out);
template <typename T>
void LayoutSizeFeaturesLookup(const float* info, const double* logs, const int8_t* vals, T* out);

// The 18 derived features of one configurable node: info [36] (one row of tensor_info), vals
// [18] its raw config values (output, input, kernel minor_to_major; -1 = compiler default).
// Per tensor with dims d and values v: [log1p(d[v0]) / 8, log1p(d[v1]) / 8,
// log(roundup(d[v0], 128) / d[v0]) / log(128), log(roundup(d[v1], 8) / d[v1]) / log(8),
// 1 if v0 names a dimension, log1p(elements of the tensor) / 16 if the values differ from the
// graph's minor_to_major (else 0)];
// a term whose value does not name a dimension of size >= 1 is 0.
template <typename T>
void LayoutTensorFeatures(const float* info, const int8_t* vals, T* out);

// The kLayoutFlowFeatureCount flow features of configurable node j in one configuration (vals:
// that configuration's [nc, 18] raw values): [copy at the input, copy at the kernel (each
// log1p(elements of the tensor) / 16 when a layout is set for it and differs from the layout it
// arrives in), copy back of the output (the same, when the output layout is set, differs from
// the graph's and the output has fixed-layout readers), the follower size]. REQUIRES: tensor_info
// and flow filled for every configurable node.
template <typename T>
void LayoutFlowFeatures(const GraphStructure& gs, int64_t j, const int8_t* vals, T* out);

// Layout size features (ModelSpec.layout_size_features): 3 per tensor, 3 tensors.
inline constexpr int kLayoutSizeFeatureCount = 9;

// The 9 size features of one configurable node: info [36] (one row of tensor_info), vals [18]
// its raw config values. Per tensor with rank r (its leading dims >= 1) and the layout in
// effect m (the values when the first one names a dimension below r, else the graph's
// minor_to_major): [log1p(E) / 16, log(P / E) / log(1024), log1p(P) / 16], E the elements,
// P = E / d[m0] * roundup(d[m0], 128) / d[m1] * roundup(d[m1], 8) (m1 only when r >= 2, each
// factor only when it names a dimension below r); all 0 for a missing tensor (r = 0).
template <typename T>
void LayoutSizeFeatures(const float* info, const int8_t* vals, T* out);

// Layout dimension-split features (ModelSpec.layout_dim_split_features): 4 per tensor, 3 tensors.
inline constexpr int kLayoutDimSplitFeatureCount = 12;

// The 12 dimension-split features of one configurable node: info [36], vals [18]. Per tensor
// with rank r and the minor dims m0, m1 of the layout in effect (as LayoutSizeFeatures):
// [(d[m0] mod 128) / 128, log1p(d[m0] div 128) / 8, (d[m1] mod 8) / 8, log1p(d[m1] div 8) / 8],
// a pair 0 where its dimension does not exist.
template <typename T>
void LayoutDimSplitFeatures(const float* info, const int8_t* vals, T* out);

// Layout dimension tokens (ModelSpec.layout_dimension_tokens): one token per dimension below the
// rank of each of a configurable node's three tensors, kDimensionTokenWidth values each.
inline constexpr int kDimensionTokenWidth = 14;

// The number of tokens of one configurable node's info [36]: the sum of its tensors' ranks (the
// leading dims >= 1), the same for every configuration.
int LayoutDimensionTokenCount(const float* info);

// The tokens of one configurable node: info [36], vals [18] -> tokens [count, 14] row-major and
// tensor [count] (0 output, 1 input, 2 kernel), tensor by tensor, dimensions ascending. Returns
// count (LayoutDimensionTokenCount). For dimension i of size x of a tensor of rank r and E
// elements, with g its slot in the graph's minor_to_major (-1 when none of the first r names
// it) and e its slot in the layout in effect (the configuration's values when the first names a
// dimension below r, then -1 when none of the first r names i; else g):
// [log1p(x) / 8, (x mod 128) / 128, log1p(x div 128) / 8, (x mod 8) / 8, log1p(x div 8) / 8,
//  g = 0, g = 1, (g + 1) / 6 (0 when g = -1), e = 0, e = 1, (e + 1) / 6 (0 when e = -1),
//  the configuration sets the layout, it sets it and e != g, log1p(E) / 16].
template <typename T>
int LayoutDimensionTokens(const float* info, const int8_t* vals, T* tokens, int8_t* tensor);

// Per-call inputs of the GNN.
template <typename T>
struct GnnInputs {
  const T* node_feat = nullptr;  // [n, node_cols.size()] transformed
  int64_t k = 0;
  const T* tile_cfg = nullptr;         // tile: [k, cfg_cols.size()] transformed
  const int8_t* layout_cfg = nullptr;  // layout: [k, nc, 18] raw values
};

// Activations of one message-passing layer (per-config or base).
template <typename T>
struct LayerTape {
  MatrixT<T> z;     // [R, 3H] = [self, agg operands, agg users]
  MatrixT<T> a;     // [R, H] pre-activation
  MatrixT<T> xhat;  // [R, H] normalised (LayerNorm) or the pre-norm sum
  VectorT<T> rstd;  // [R]
  MatrixT<T> h;     // [R, H] output
  // Scratch of the backward pass, kept here so that buffers are reused across steps:
  // d xhat / d pre-activation [R, H], dz [R, 3H], per-shard parameter gradient partials.
  mutable MatrixT<T> dpre, dz, partial;
};

template <typename T>
struct GnnTape {
  int64_t k = 0;
  // Forward only (no Backward will follow): layers keep only their outputs h, not z, a and
  // xhat, which cuts activation memory from 6H to H floats per row and layer.
  bool inference = false;
  MatrixT<T> a0_base;              // [n, H] input pre-activation of every node
  MatrixT<T> h0_base;              // [n, H] base layer-0 states (empty when all_affected)
  std::vector<LayerTape<T>> base;  // [L + 1] base layers (index 0 unused; .h = base states)
  // Pooling's configuration-independent part, over the last layer's base states outside S_L:
  // their sum [H] and maximum [H] with its node (-1: none), once per shared pass.
  RowVectorT<T> base_sum, base_max;
  std::vector<int64_t> base_arg;
  MatrixT<T> cfg_in;                 // layout: [k * nc, 18 d_e]; tile early: [k, 24]
  std::vector<int32_t> layout_rows;  // layout: [k * nc * 18] embedding rows
  // layout_dimension_tokens: the tokens of every row of cfg_in [Q, 14], their encoder's
  // pre-activations [Q, E] and the block each one is summed into (row r of cfg_in, tensor t:
  // r * 3 + t) [Q].
  MatrixT<T> dim_tokens, dim_pre;
  std::vector<int64_t> dim_slot;
  MatrixT<T> a0;                     // [k * |S_0|, H]
  MatrixT<T> h0;                     // [k * |S_0|, H] per-config layer-0 states
  std::vector<LayerTape<T>> layers;  // [L + 1] per-config layers (index 0 unused)
  std::vector<int64_t> max_ref;      // [k, H] argmax ref of max pooling
  MatrixT<T> node_x;                 // config_node_head: [k * nc, H + cfg_in] inputs [h_v ; e_v]
  MatrixT<T> node_pre;               // config_node_head: [k * nc, W] pre-activations
  VectorT<T> node_weight;            // config_node_head: [k * nc] dScore/ds_v (1, or softmax)
  MatrixT<T> att_qkv;                // config_attention: [k * nc, 3A] queries, keys, values
  MatrixT<T> att_p;                  // config_attention: [nc * k, k] softmax of node j at j*k+c
  MatrixT<T> att_o;                  // config_attention: [k * nc, A] attention outputs
  // config_attention, a chunk's passes split at the attention (Gnn::ForwardConfigsToAttention
  // ...): the head input before the node scores' column [k, g_width]; then, backward, dG
  // [k, g_width], the node head inputs' gradient without the attention's part [k * nc, din], the
  // attention outputs' gradient d_o [k * nc, A] and the attention's d qkv [k * nc, 3A].
  MatrixT<T> pooled;
  mutable MatrixT<T> dG, node_dx, att_do, att_dqkv;
  std::vector<MatrixT<T>> head_in;   // per head layer input [k, in]
  std::vector<MatrixT<T>> head_pre;  // per hidden head layer pre-activation [k, out]
};

// What the adjoint of pooling sends to the base states of the last layer: the mean pool's
// gradient, the same for every node outside S_L, and the max pool's per column, for the base
// node that holds that column's maximum (BaseMax: the same node whatever the configuration).
template <typename T>
struct PooledBaseGrad {
  RowVectorT<T> mean;  // [H]
  RowVectorT<T> max;   // [H]
};

// d loss / d the configuration-independent states of one graph: what the per-configuration
// backward pass (Gnn::BackwardConfigs) hands to the shared one (Gnn::BackwardShared). Linear in
// the configurations' gradients, so the parts of several chunks of configurations are summed
// (in a fixed order) before the shared backward pass runs once. A chunk writes few rows: the
// configurable nodes' of da0_base and, per layer, the base nodes next to S_{l+1}
// (GraphStructure::base_rows); Reset and AddRows touch only those.
template <typename T>
struct SharedGrad {
  MatrixT<T> da0_base;            // [n, H] input pre-activations (rows of S_0)
  std::vector<MatrixT<T>> dbase;  // [L] x [n, H] base states of layers 0..L-1 (rows base_rows[l])
  PooledBaseGrad<T> last;         // of the base states of layer L
  // Zeros of the graph's shapes (buffers reused; rows written since the last Reset are zeroed).
  void Reset(const GraphStructure& gs, int hidden, int num_layers);
  // Rows written by the per-configuration passes, all matrices back to back.
  int64_t rows() const;
  // this += o on those rows [b, e) (the same graph's), for row-parallel sums.
  void AddRows(const SharedGrad& o, int64_t b, int64_t e);
  // this.last += o.last.
  void AddPooled(const SharedGrad& o);
  // Everything a chunk writes, as one vector: the rows() touched rows (H values each), then
  // last.mean and last.max (flat_size() values); AddFlat adds such a vector.
  int64_t flat_size() const;
  void Flatten(T* out) const;
  void AddFlat(const T* in);
  // The rows written per matrix (da0_base, then dbase[0..L-1]); dirty: written everywhere.
  std::vector<std::vector<int64_t>> touched;
  bool dirty = true;
};

template <typename T>
class Gnn {
 public:
  Gnn(const ModelSpec& spec, TaskKind task);
  const ParamLayout& layout() const { return layout_; }
  // Threads for the row-parallel layer kernels (nullptr = the calling thread only). Results do
  // not depend on it. The pool must not be running another ParallelFor during Forward/Backward.
  void set_pool(ThreadPool* pool) { pool_ = pool; }

  void Forward(const T* params, const GraphStructure& gs, const GnnInputs<T>& in, T* scores,
               GnnTape<T>* tape) const;
  // grad += d/dparams; optional input gradients (+=): dnode_feat [n, kept], dtile_cfg [k, kept].
  void Backward(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                const GnnTape<T>& tape, const T* dscores, T* grad, T* dnode_feat = nullptr,
                T* dtile_cfg = nullptr) const;

  // Forward and Backward split at the configuration-independent computation, so that chunks of
  // one graph's configurations can run apart (on threads or ranks) over one shared pass:
  //   ForwardShared(gs, node_feat) -> shared       (input layer and base pass, once per graph)
  //   ForwardConfigs(gs, in, shared) -> scores     (per chunk; tape: the chunk's own)
  //   BackwardConfigs(..., dscores) -> grad, dshared += the chunk's part
  //   BackwardShared(shared, sum of dshared) -> grad
  // Forward == ForwardShared + ForwardConfigs and Backward == BackwardConfigs + BackwardShared
  // exactly; splitting the configurations changes only the order of float sums. shared.k is
  // unused; ForwardConfigs fills tape's per-config members only (shared may be tape itself).
  void ForwardShared(const T* params, const GraphStructure& gs, const T* node_feat,
                     GnnTape<T>* shared) const;
  void ForwardConfigs(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                      const GnnTape<T>& shared, T* scores, GnnTape<T>* tape) const;
  // grad: added to element by element (see BackwardHead), or, when it is at Eigen's packet
  // alignment (EIGEN_MAX_ALIGN_BYTES), accumulated into directly (the same as adding to a
  // zeroed buffer). dshared must be Reset for gs.
  // The per-config pass reads only its own tape (max_ref names the shared pass's rows by id).
  void BackwardConfigs(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                       const GnnTape<T>& tape, const T* dscores, T* grad, SharedGrad<T>* dshared,
                       T* dtile_cfg = nullptr) const;
  // Consumes dshared (its dbase is overwritten).
  void BackwardShared(const T* params, const GraphStructure& gs, const T* node_feat,
                      const GnnTape<T>& shared, SharedGrad<T>* dshared, T* grad,
                      T* dnode_feat = nullptr) const;

  // With config_attention the configurations of a batch attend to one another at each
  // configurable node, so a chunk's passes stop at the attention and resume after it, around a
  // join over the graph's chunks (all of them, in configuration order):
  //   ForwardConfigsToAttention(gs, in, shared, &t_i)      per chunk: everything up to the
  //                                                        attention's q, k, v (t_i.att_qkv)
  //   AttendForward(gs, {&t_0, &t_1, ...}, &join)          the attention of every node (rows
  //                                                        split over the pool): t_i.att_o
  //   ForwardConfigsFromAttention(gs, in, &t_i, s_i)       per chunk: the scores
  //   BackwardConfigsToAttention(gs, in, t_i, ds_i, g_i)   per chunk: down to d_o (t_i.att_do)
  //   AttendBackward(gs, {&t_0, ...}, join)                t_i.att_dqkv
  //   BackwardConfigsFromAttention(gs, in, t_i, g_i, &d_i) per chunk: the rest, as
  //                                                        BackwardConfigs
  // join: a tape whose att_p [nc * k, k] keeps the attention weights. With one chunk of the
  // whole batch this computes Forward's scores bit for bit; the gradient differs from Backward's
  // by the order of its sums over the chunks. grad: as BackwardConfigs (aligned or not).
  void ForwardConfigsToAttention(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                                 const GnnTape<T>& shared, GnnTape<T>* tape) const;
  void AttendForward(const T* params, const GraphStructure& gs,
                     const std::vector<GnnTape<T>*>& chunks, GnnTape<T>* join) const;
  void ForwardConfigsFromAttention(const T* params, const GraphStructure& gs,
                                   const GnnInputs<T>& in, GnnTape<T>* tape, T* scores) const;
  void BackwardConfigsToAttention(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                                  const GnnTape<T>& tape, const T* dscores, T* grad) const;
  void AttendBackward(const T* params, const GraphStructure& gs,
                      const std::vector<const GnnTape<T>*>& chunks, const GnnTape<T>& join) const;
  void BackwardConfigsFromAttention(const T* params, const GraphStructure& gs,
                                    const GnnInputs<T>& in, const GnnTape<T>& tape, T* grad,
                                    SharedGrad<T>* dshared, T* dtile_cfg = nullptr) const;

  // Forward split at the head input: ForwardPooled fills G [k, g_width] (the pooled graph
  // representation, plus the tile config columns for late join) and the tape up to pooling;
  // ForwardHead maps G to scores. Forward = ForwardPooled + ForwardHead (tape->head_in[0] = G).
  void ForwardPooled(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                     MatrixT<T>* G, GnnTape<T>* tape) const;
  void ForwardHead(const T* params, MatrixT<T> G, T* scores, GnnTape<T>* tape) const;
  // Adjoints: BackwardHead adds head parameter grads and returns dG [k, g_width];
  // BackwardPooled takes dG and adds the grads of everything below the head.
  // The parameter grads are accumulated in an internal buffer aligned for Eigen's packets and
  // then added to `grad` element by element: Eigen's vectorised kernels peel a different number
  // of scalar iterations depending on the destination's address, so writing into the caller's
  // buffer directly made the last bits of a gradient depend on where that buffer was allocated
  // (seen with AVX2 packets and malloc's 16-byte alignment).
  MatrixT<T> BackwardHead(const T* params, const GnnTape<T>& tape, int64_t k, const T* dscores,
                          T* grad) const;
  void BackwardPooled(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                      const GnnTape<T>& tape, const MatrixT<T>& dG, T* grad,
                      T* dnode_feat = nullptr, T* dtile_cfg = nullptr) const;
  // ForwardConfigs and BackwardConfigs stopped at the head input, for chunks of one segment's
  // configurations (Graph Segment Training): G [k, g_width] of a chunk over a shared pass, and
  // the chunk's adjoint given its dG rows. ForwardPooled == ForwardShared +
  // ForwardConfigsPooled exactly; BackwardPooled == BackwardConfigsPooled + BackwardShared up to
  // the order of the float sums over chunks. grad and dshared: as BackwardConfigs.
  void ForwardConfigsPooled(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                            const GnnTape<T>& shared, MatrixT<T>* G, GnnTape<T>* tape) const;
  void BackwardConfigsPooled(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                             const GnnTape<T>& tape, const MatrixT<T>& dG, T* grad,
                             SharedGrad<T>* dshared) const;

  // Kernels, public for tests (each has a reference loop version in gnn_reference.h).
  // out[R, 3H] = [src(self), agg(src over operands), agg(src over users)] for k configs.
  void Gather(const LayerPlan& p, int64_t k, const MatrixT<T>& prev, const MatrixT<T>* base,
              MatrixT<T>& z) const;
  // Adjoint of Gather: dprev (k * R', H) and dbase (n, H) += scattered dz.
  void Scatter(const LayerPlan& p, int64_t k, const MatrixT<T>& dz, MatrixT<T>& dprev,
               MatrixT<T>* dbase) const;
  T Act(T x) const;
  T ActGrad(T x) const;
  // Elementwise Act / ActGrad of a matrix (vectorised for leaky ReLU).
  MatrixT<T> ActMat(const MatrixT<T>& a) const;
  MatrixT<T> ActGradMat(const MatrixT<T>& a) const;

 private:
  // fn(shard, begin, end) over the fixed row shards of [0, rows), on pool_ when set.
  template <typename Fn>
  void ForRows(int64_t rows, int64_t grain, const Fn& fn) const;
  // Rows [b, e) of Gather's output.
  void GatherRows(const LayerPlan& p, int64_t k, const MatrixT<T>& prev, const MatrixT<T>* base,
                  T* z, int64_t b, int64_t e) const;
  void LayerForward(const T* params, int l, const LayerPlan& p, int64_t k, const MatrixT<T>& prev,
                    const MatrixT<T>* base, LayerTape<T>& t, bool keep) const;
  // BackwardHead / BackwardPooled into an aligned grad buffer (see the public ones).
  MatrixT<T> BackwardHeadAligned(const T* params, const GnnTape<T>& tape, int64_t k,
                                 const T* dscores, T* grad) const;
  void BackwardPooledAligned(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                             const GnnTape<T>& tape, const MatrixT<T>& dG, T* grad, T* dnode_feat,
                             T* dtile_cfg) const;
  // The per-configuration part of ForwardPooled / BackwardPooled (shared states from `shared`).
  void ConfigsPooled(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                     const GnnTape<T>& shared, MatrixT<T>* G, GnnTape<T>* tape) const;
  // ConfigsPooled without the config-node head's column; returns the last layer's states.
  const MatrixT<T>& ConfigLayers(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                                 const GnnTape<T>& shared, MatrixT<T>* G, GnnTape<T>* tape) const;
  // from_attention: the config-node head's part resumes after the attention's adjoint
  // (BackwardConfigsFromAttention), tape.dG is the head's gradient and dG is unused.
  void ConfigsBackwardAligned(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                              const GnnTape<T>& tape, const MatrixT<T>& dG, T* grad,
                              SharedGrad<T>* dshared, T* dtile_cfg,
                              bool from_attention = false) const;
  void SharedBackwardAligned(const T* params, const GraphStructure& gs, const T* node_feat,
                             const GnnTape<T>& shared, SharedGrad<T>* dshared, T* grad,
                             T* dnode_feat) const;
  // dh: [k R, H] gradient of the layer output. Adds parameter grads, scatters into dprev/dbase.
  void LayerBackward(const T* params, int l, const LayerPlan& p, int64_t k, const LayerTape<T>& t,
                     const MatrixT<T>& dh, T* grad, MatrixT<T>& dprev, MatrixT<T>* dbase) const;

  ModelSpec spec_;
  TaskKind task_;
  ParamLayout layout_;
  bool tile_early_ = false, is_layout_ = false;
  ThreadPool* pool_ = nullptr;
};

}  // namespace tpugraphs::model::internal

#endif  // TPUGRAPHS_MODEL_GNN_H_
