// CostModel: the GNN that scores the configurations of one graph (lower score = predicted
// faster). Architecture, shapes and the shared-computation argument: docs/model.md.
//
// Lifecycle:
//   auto m = CostModel::Create(spec, task);          // parameter count fixed here
//   for (g : training graphs) m->transform().Accumulate(g);
//   m->transform().Finalize();
//   m->InitParameters(seed);
//   auto pg = m->Prepare(g);                          // once per graph; parameter-independent
//   m->Forward(*pg, batch, scores, tape);             // any number of times, any parameters
//   m->Backward(*pg, batch, *tape, dscores, grad);
//
// Prepare() does not depend on the parameters (only on the graph, the spec and the feature
// transform), so a PreparedGraph stays valid across optimizer steps and may be cached for a whole
// training run. Forward() computes the configuration-independent node states once per call and
// only the configuration-dependent part per configuration (exact; see docs/model.md).
//
// Thread-safety: Create/InitParameters/parameters()/transform() mutation must not race with
// Forward/Backward. Forward/Backward are const and keep no shared mutable state: concurrent calls
// are safe with one tape per thread. Results are pure functions of (parameters, inputs).
#ifndef TPUGRAPHS_MODEL_COST_MODEL_H_
#define TPUGRAPHS_MODEL_COST_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/model.pb.h"
#include "tpugraphs/model/feature_transform.h"
#include "tpugraphs/model/layout_flow.h"

namespace tpugraphs {
class ThreadPool;
}

namespace tpugraphs::model {

namespace internal {
template <typename T>
class Gnn;
}  // namespace internal

// The k configurations to score, for one graph.
struct ConfigBatch {
  int64_t num_configs = 0;
  std::vector<float> tile_feat;     // tile: [k, 24] raw config_feat rows (as in Graph)
  std::vector<int8_t> layout_feat;  // layout: [k, nc, 18] raw values (as in Graph)
};

class CostModel;
struct PreparedGraphStats;

// Facts about the configurable nodes that need the whole graph (a while loop and its body, a
// convolution and the consumers its layout flows to, are far apart): computed before pruning or
// segmentation cut the graph, and handed with the cut graph to PrepareExact. Entries are in
// node_config_ids order; an empty member means the spec does not use it.
struct WholeGraphContext {
  std::vector<int32_t> loop_depth;  // ModelSpec.config_loop_depth: [nc] (model/loop_depth.h)
  LayoutFlow flow;                  // ModelSpec.layout_flow_features (model/layout_flow.h)
};
// The context of a subset of the configurable nodes (`slots`, indices into c's order).
WholeGraphContext SliceContext(const WholeGraphContext& c, const std::vector<int64_t>& slots);

// Config-independent and parameter-independent per-graph state (opaque; made by Prepare).
class PreparedGraph {
 public:
  struct Impl;
  explicit PreparedGraph(std::unique_ptr<Impl> impl);
  ~PreparedGraph();
  PreparedGraph(const PreparedGraph&) = delete;
  PreparedGraph& operator=(const PreparedGraph&) = delete;
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// The configurations [begin, end) of a batch (its own copy of their rows); num_config_nodes:
// the graph's nc (layout batches hold nc * 18 values per configuration).
ConfigBatch SliceBatch(const ConfigBatch& batch, int64_t begin, int64_t end,
                       int64_t num_config_nodes);

// Activations recorded by Forward for Backward, and reusable buffers (opaque; made by NewTape).
class ForwardTape {
 public:
  struct Impl;
  ForwardTape();
  ~ForwardTape();
  ForwardTape(const ForwardTape&) = delete;
  ForwardTape& operator=(const ForwardTape&) = delete;
  Impl& impl() { return *impl_; }
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// d loss / d one graph's configuration-independent states, as the per-configuration backward
// pass of a chunk leaves it (opaque; see CostModel::BackwardConfigs). Buffers are reused.
class SharedGradient {
 public:
  struct Impl;
  SharedGradient();
  ~SharedGradient();
  SharedGradient(const SharedGradient&) = delete;
  SharedGradient& operator=(const SharedGradient&) = delete;
  Impl& impl() { return *impl_; }
  const Impl& impl() const { return *impl_; }
  // The sum of two chunks' parts (of one graph) is AddRows over [0, rows()), in any split of
  // the range (row-parallel), then AddPooled; several chunks are summed in a fixed chunk order.
  // rows(): the rows of node state a chunk writes (few: next to the configurable nodes).
  int64_t rows() const;
  void AddRows(const SharedGradient& o, int64_t begin, int64_t end);
  void AddPooled(const SharedGradient& o);
  // The same as one vector of flat_size() floats (for sums across processes): Flatten writes a
  // chunk's part, AddFlat adds such a vector (element by element, as AddRows and AddPooled).
  int64_t flat_size() const;
  void Flatten(float* out) const;
  void AddFlat(const float* in);

 private:
  std::unique_ptr<Impl> impl_;
};

// Checks a spec's ranges (positive widths, num_layers in [0, 16], ...); messages name the field.
Status ValidateModelSpec(const ModelSpec& spec);

class CostModel {
 public:
  // inference_block_rows() unless set: the fastest of bench-model.sh's block sizes on the layout
  // recipe's network (docs/model.md, "Inference in blocks").
  static constexpr int64_t kDefaultInferenceBlockRows = 4096;

  ~CostModel();
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // Fails on an invalid spec. Parameters start at zero; call InitParameters.
  static StatusOr<std::unique_ptr<CostModel>> Create(const ModelSpec& spec, TaskKind task);

  const ModelSpec& spec() const { return spec_; }
  TaskKind task() const { return task_; }

  // One flat parameter buffer (docs/model.md, "Parameter layout").
  int64_t num_parameters() const { return static_cast<int64_t>(params_.size()); }
  float* parameters() { return params_.data(); }
  const float* parameters() const { return params_.data(); }
  // Names and [offset, offset + size) of the parameter tensors, in buffer order.
  struct ParameterBlock {
    std::string name;
    int64_t offset = 0, rows = 0, cols = 0;
  };
  std::vector<ParameterBlock> parameter_blocks() const;

  // Deterministic in seed: Glorot-uniform weights, zero biases, unit LayerNorm gains, small
  // uniform embeddings. Weight rows of feature columns the transform dropped are zero.
  void InitParameters(uint64_t seed);

  FeatureTransform& transform() { return transform_; }
  const FeatureTransform& transform() const { return transform_; }

  // Everything that depends neither on the configuration nor on the parameters: transformed
  // node features, CSR adjacency, the L-hop neighbourhoods of the configurable nodes.
  // g may come without layout config values (node_config_feat empty). REQUIRES:
  // transform().finalized(). Fails (naming g.name) on graphs whose kind differs from task(),
  // bad shapes, out-of-range edges or duplicate node_config_ids.
  StatusOr<std::unique_ptr<PreparedGraph>> Prepare(const Graph& g) const;

  // Prepare() first applies the graph surgery the spec asks for (docs/gst.md): pruning to the
  // prune_hops-hop neighbourhood of the configurable nodes (layout, prune_hops >= 0), then
  // dropping the edges that cross segment boundaries (segment_size > 0). PrepareExact() prepares
  // g exactly as given (used for the segments of Graph Segment Training).
  // context: what the spec needs from the graph before its surgery (ContextOf of that graph,
  // sliced to g's configurable nodes); nullptr = compute it from g itself.
  StatusOr<std::unique_ptr<PreparedGraph>> PrepareExact(
      const Graph& g, const WholeGraphContext* context = nullptr) const;
  // The whole-graph facts the spec asks for (loop depths, layout flow); empty for tile models.
  WholeGraphContext ContextOf(const Graph& g) const;

  std::unique_ptr<ForwardTape> NewTape() const;

  // The passes below take `kernels`: the threads for the row-parallel kernels inside that one
  // call (nullptr, the default: the calling thread only). Results are identical whatever the
  // pool. The pool must not be running another ParallelFor during the call: callers that
  // already run graphs or chunks side by side on a pool pass another pool, or none. Calls with
  // different pools (or none) may run at once on one model.

  // The forward pass split at the head input (Graph Segment Training combines the pooled
  // representations of several segments before the head). head_input_dim() = columns of G.
  // ForwardPooled: G[k, head_input_dim()] row-major, the tape (if any) filled up to pooling.
  // ForwardHead: scores[k] from G; tape (if any) records the head for BackwardHead.
  // BackwardHead: grad += head parameter grads; dG[k, head_input_dim()] = d loss / d G.
  // BackwardPooled: grad += d loss / d params below the head, given dG.
  // Forward(pg, batch) == ForwardHead(ForwardPooled(pg, batch)) exactly.
  int64_t head_input_dim() const;
  void ForwardPooled(const PreparedGraph& pg, const ConfigBatch& batch, float* G, ForwardTape* tape,
                     ThreadPool* kernels = nullptr) const;
  void ForwardHead(const float* G, int64_t k, float* scores, ForwardTape* tape,
                   ThreadPool* kernels = nullptr) const;
  void BackwardHead(const ForwardTape& tape, int64_t k, const float* dscores, float* grad,
                    float* dG, ThreadPool* kernels = nullptr) const;
  void BackwardPooled(const PreparedGraph& pg, const ConfigBatch& batch, const ForwardTape& tape,
                      const float* dG, float* grad, ThreadPool* kernels = nullptr) const;
  // [offset, offset + size) of the head MLP's parameters in the flat buffer (they are last).
  int64_t head_parameter_offset() const;

  // scores[k]; lower = predicted faster. tape may be nullptr (inference); otherwise it receives
  // what Backward needs (its buffers are reused across calls). Without a tape, configurations
  // are scored in chunks of at most min(inference_chunk_rows(), inference_block_rows()) / |S_L|
  // configs, after one configuration-independent pass, to bound memory and stay in the cache
  // (each score depends only on its own config, bit for bit: docs/model.md, "Scores do not
  // depend on their neighbours"). With config_attention, scores
  // depend on the configurations scored together: with a tape they attend over the whole batch
  // (training); without one, over batches of config_attention_batch under
  // config_attention_permutations orders, averaged (ModelSpec). REQUIRES: batch shapes match pg
  // (tile: tile_feat.size() == 24k; layout: layout_feat.size() == k * nc * 18).
  void Forward(const PreparedGraph& pg, const ConfigBatch& batch, float* scores, ForwardTape* tape,
               ThreadPool* kernels = nullptr) const;

  // Inference in two parts, for callers that score one graph's configurations in several
  // calls or on several threads (ModelScorer): the configuration-independent pass once per graph
  // and parameters, then any batch against it, from any thread (InferConfigs writes only its own
  // tape). The scores equal Forward's bit for bit. Not for config_attention models
  // (supports_config_chunks()).
  void InferShared(const PreparedGraph& pg, ForwardTape* shared,
                   ThreadPool* kernels = nullptr) const;
  void InferConfigs(const PreparedGraph& pg, const ConfigBatch& batch, const ForwardTape& shared,
                    float* scores, ThreadPool* kernels = nullptr) const;

  // grad[num_parameters()] += d loss / d params, given dscores[k] = d loss / d scores.
  // REQUIRES: tape was filled by Forward(pg, batch, ...) with the current parameters.
  void Backward(const PreparedGraph& pg, const ConfigBatch& batch, const ForwardTape& tape,
                const float* dscores, float* grad, ThreadPool* kernels = nullptr) const;

  // Training in chunks of one graph's configurations (docs/model.md, "Chunks of
  // configurations"): the configuration-independent part once per graph, the rest per chunk,
  // each chunk on any thread or rank:
  //   ForwardShared(pg, &shared)                       once per graph and parameters
  //   ForwardConfigs(pg, chunk_i, shared, s_i, &t_i)   per chunk (scores of its configurations)
  //   ... the loss over all the graph's scores gives dscores ...
  //   BackwardConfigs(pg, chunk_i, t_i, ds_i, g_i, &d_i)           per chunk
  //   d = d_0 + d_1 + ... (AddRows and AddPooled, in chunk order); BackwardShared(pg, shared,
  //   &d, g)
  // The gradient g + g_0 + g_1 + ... equals Backward's on the whole batch up to float rounding
  // (the order of sums); it depends on the chunk boundaries only, not on who computes a chunk.
  // Not for config_attention models (their scores couple a batch's configurations): Status-free
  // REQUIRES, checked by supports_config_chunks(); they train in chunks around a join below.
  // The chunk passes use no kernel pool (they are meant to run side by side); the shared passes
  // may be given one.
  bool supports_config_chunks() const { return spec_.config_attention() == 0; }
  void ForwardShared(const PreparedGraph& pg, ForwardTape* shared,
                     ThreadPool* kernels = nullptr) const;
  void ForwardConfigs(const PreparedGraph& pg, const ConfigBatch& chunk, const ForwardTape& shared,
                      float* scores, ForwardTape* tape) const;
  // grad += the chunk's parameter gradient; dshared: set to the chunk's part (resized here).
  // The chunk's own tape is all it reads (it names the shared pass's rows by index).
  void BackwardConfigs(const PreparedGraph& pg, const ConfigBatch& chunk, const ForwardTape& tape,
                       const float* dscores, float* grad, SharedGradient* dshared) const;
  // The chunk passes stopped at the head input, for Graph Segment Training, whose head reads
  // the segments' pooled rows together (train/gst.h): G[chunk.num_configs, head_input_dim()]
  // row-major, and the chunk's adjoint given its dG rows (grad += its parameter gradient,
  // dshared set to its part). ForwardShared + ForwardConfigsPooled gives ForwardPooled's G bit
  // for bit; the chunks' gradients summed (with BackwardShared) give BackwardPooled's up to the
  // order of the sums. Not for config_attention models (supports_config_chunks()).
  void ForwardConfigsPooled(const PreparedGraph& pg, const ConfigBatch& chunk,
                            const ForwardTape& shared, float* G, ForwardTape* tape) const;
  void BackwardConfigsPooled(const PreparedGraph& pg, const ConfigBatch& chunk,
                             const ForwardTape& tape, const float* dG, float* grad,
                             SharedGradient* dshared) const;
  // dshared set to zeros of pg's shape (an accumulator for the chunks' parts).
  void ZeroSharedGradient(const PreparedGraph& pg, SharedGradient* dshared) const;
  // grad += the shared part's parameter gradient given the chunks' summed dshared (consumed).
  void BackwardShared(const PreparedGraph& pg, const ForwardTape& shared, SharedGradient* dshared,
                      float* grad, ThreadPool* kernels = nullptr) const;
  // config_attention models (attends_across_configs()) train in chunks too, each chunk's passes
  // split at the attention around a join over all of the graph's chunks, in configuration order
  // (docs/model.md, "Chunks of configurations"):
  //   ForwardShared(pg, &shared)
  //   ForwardConfigsToAttention(pg, chunk_i, shared, &t_i)   per chunk
  //   AttendForward(pg, {&t_0, &t_1, ...}, &shared)         once: every node's attention
  //   ForwardConfigsFromAttention(pg, chunk_i, &t_i, s_i)    per chunk: its scores
  //   BackwardConfigsToAttention(pg, chunk_i, t_i, ds_i, g_i)          per chunk
  //   AttendBackward(pg, {&t_0, &t_1, ...}, shared)                    once
  //   BackwardConfigsFromAttention(pg, chunk_i, t_i, g_i, &d_i)        per chunk
  //   then the sums and BackwardShared as above.
  // The join keeps the attention weights in the shared tape; its nodes may be split over a
  // kernel pool (the same bits). A chunk computed elsewhere (another rank) takes part through
  // its rows: AttentionRows sizes a tape for a chunk of k configurations (its q, k, v rows
  // forward, its d O rows backward, attention_row_floats(k) floats; the outputs' shapes too)
  // and gives where they lie, to be read (one's own chunks) or written (another's).
  bool attends_across_configs() const {
    return task_ == TaskKind::kLayout && spec_.config_attention() > 0;
  }
  void ForwardConfigsToAttention(const PreparedGraph& pg, const ConfigBatch& chunk,
                                 const ForwardTape& shared, ForwardTape* tape) const;
  void AttendForward(const PreparedGraph& pg, const std::vector<ForwardTape*>& chunks,
                     ForwardTape* shared, ThreadPool* kernels = nullptr) const;
  void ForwardConfigsFromAttention(const PreparedGraph& pg, const ConfigBatch& chunk,
                                   ForwardTape* tape, float* scores) const;
  void BackwardConfigsToAttention(const PreparedGraph& pg, const ConfigBatch& chunk,
                                  const ForwardTape& tape, const float* dscores, float* grad) const;
  void AttendBackward(const PreparedGraph& pg, const std::vector<const ForwardTape*>& chunks,
                      const ForwardTape& shared, ThreadPool* kernels = nullptr) const;
  void BackwardConfigsFromAttention(const PreparedGraph& pg, const ConfigBatch& chunk,
                                    const ForwardTape& tape, float* grad,
                                    SharedGradient* dshared) const;
  int64_t attention_row_floats(const PreparedGraph& pg, int64_t k, bool backward) const;
  float* AttentionRows(const PreparedGraph& pg, int64_t k, bool backward, ForwardTape* tape) const;

  // Work of one configuration's forward and backward passes, in node-state rows (a proxy for
  // time: the nodes pooled plus three per message-passing row), and of the shared passes;
  // callers size chunks from them.
  int64_t config_rows(const PreparedGraph& pg) const;

  // Activation rows (configs x recomputed nodes) per inference chunk; default 1M (~1.5 GB at
  // hidden_dim 64). Not thread-safe against concurrent Forward calls.
  int64_t inference_chunk_rows() const { return inference_chunk_rows_; }
  void set_inference_chunk_rows(int64_t rows) { inference_chunk_rows_ = rows < 1 ? 1 : rows; }
  // Rows per inference pass within a chunk: the configurations go through the network in blocks
  // of about this many rows, so that a block's activations stay in the cache instead of
  // streaming through memory (and through fresh pages) once per matrix. A block of fewer rows
  // than one configuration has is one configuration. The scores are the same bits either way.
  int64_t inference_block_rows() const { return inference_block_rows_; }
  void set_inference_block_rows(int64_t rows) { inference_block_rows_ = rows < 1 ? 1 : rows; }

  // Checks a batch against a prepared graph (for callers that take batches from files).
  Status ValidateBatch(const PreparedGraph& pg, const ConfigBatch& batch) const;

 private:
  CostModel(const ModelSpec& spec, TaskKind task);

  ModelSpec spec_;
  TaskKind task_;
  int64_t inference_chunk_rows_ = 1 << 20;
  int64_t inference_block_rows_ = kDefaultInferenceBlockRows;
  // The network, built once, on the calling thread; a call given a pool computes with a copy
  // bound to it.
  std::unique_ptr<internal::Gnn<float>> gnn_;
  std::vector<float> params_;
  FeatureTransform transform_;
};

// Number of nodes, configurable nodes, and nodes whose state depends on the configuration at
// the last layer (for reports and benchmarks).
struct PreparedGraphStats {
  int64_t num_nodes = 0, num_edges = 0, num_config_nodes = 0;
  std::vector<int64_t> affected_per_layer;  // [L + 1]: |S_0|, ..., |S_L|
};
PreparedGraphStats GetPreparedGraphStats(const PreparedGraph& pg);

}  // namespace tpugraphs::model

#endif  // TPUGRAPHS_MODEL_COST_MODEL_H_
