#include "tpugraphs/model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "tpugraphs/common/rng.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/ingest/opcodes.h"
#include "tpugraphs/model/chain_folding.h"
#include "tpugraphs/model/gnn.h"
#include "tpugraphs/model/layout_flow.h"
#include "tpugraphs/model/loop_depth.h"
#include "tpugraphs/model/pruning.h"
#include "tpugraphs/model/random_walk.h"
#include "tpugraphs/model/repeat_merging.h"
#include "tpugraphs/model/segment.h"
#include "tpugraphs/model/tile_features.h"
#include "tpugraphs/model/virtual_node.h"

namespace tpugraphs::model {

struct PreparedGraph::Impl {
  internal::GraphStructure gs;
  TileShapes tile_shapes;        // ModelSpec.tile_derived_features
  std::vector<float> node_feat;  // [n, kept] transformed
  std::string name;
};
PreparedGraph::PreparedGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreparedGraph::~PreparedGraph() = default;

struct ForwardTape::Impl {
  internal::GnnTape<float> tape;
  std::vector<float> tile_cfg;  // [k, kept_config] transformed
};
ForwardTape::ForwardTape() : impl_(std::make_unique<Impl>()) {}
ForwardTape::~ForwardTape() = default;

struct SharedGradient::Impl {
  internal::SharedGrad<float> d;
};
SharedGradient::SharedGradient() : impl_(std::make_unique<Impl>()) {}
SharedGradient::~SharedGradient() = default;
int64_t SharedGradient::rows() const { return impl_->d.rows(); }
void SharedGradient::AddRows(const SharedGradient& o, int64_t begin, int64_t end) {
  impl_->d.AddRows(o.impl_->d, begin, end);
}
void SharedGradient::AddPooled(const SharedGradient& o) { impl_->d.AddPooled(o.impl_->d); }
int64_t SharedGradient::flat_size() const { return impl_->d.flat_size(); }
void SharedGradient::Flatten(float* out) const { impl_->d.Flatten(out); }
void SharedGradient::AddFlat(const float* in) { impl_->d.AddFlat(in); }

ConfigBatch SliceBatch(const ConfigBatch& batch, int64_t begin, int64_t end,
                       int64_t num_config_nodes) {
  ConfigBatch out;
  out.num_configs = end - begin;
  if (!batch.tile_feat.empty()) {
    out.tile_feat.assign(batch.tile_feat.begin() + begin * kTileConfigFeatureCount,
                         batch.tile_feat.begin() + end * kTileConfigFeatureCount);
  }
  if (!batch.layout_feat.empty()) {
    const int64_t per = num_config_nodes * kLayoutConfigFeatureCount;
    out.layout_feat.assign(batch.layout_feat.begin() + begin * per,
                           batch.layout_feat.begin() + end * per);
  }
  return out;
}

PreparedGraphStats GetPreparedGraphStats(const PreparedGraph& graph) {
  const PreparedGraph::Impl& pg = graph.impl();
  PreparedGraphStats s;
  s.num_nodes = pg.gs.n;
  s.num_edges = pg.gs.m;
  s.num_config_nodes = static_cast<int64_t>(pg.gs.config_nodes.size());
  for (size_t l = 0; l < pg.gs.use_full.size(); ++l) {
    s.affected_per_layer.push_back(pg.gs.plan(static_cast<int>(l)).rows());
  }
  return s;
}

Status ValidateModelSpec(const ModelSpec& s) {
  auto range = [](const char* field, int64_t v, int64_t lo, int64_t hi) -> Status {
    if (v < lo || v > hi) {
      return InvalidArgumentError(std::string("model spec: ") + field + " = " + std::to_string(v) +
                                  " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                  "]");
    }
    return Status::Ok();
  };
  TPUG_RETURN_IF_ERROR(range("hidden_dim", s.hidden_dim(), 1, 4096));
  TPUG_RETURN_IF_ERROR(range("num_layers", s.num_layers(), 0, 16));
  TPUG_RETURN_IF_ERROR(range("opcode_embedding_dim", s.opcode_embedding_dim(), 1, 4096));
  TPUG_RETURN_IF_ERROR(range("num_opcodes", s.num_opcodes(), 1, 256));
  TPUG_RETURN_IF_ERROR(range("layout_value_embedding_dim", s.layout_value_embedding_dim(), 1, 256));
  TPUG_RETURN_IF_ERROR(range("layout_value_max", s.layout_value_max(), 0, 126));
  TPUG_RETURN_IF_ERROR(range("head_hidden_dim", s.head_hidden_dim(), 1, 4096));
  TPUG_RETURN_IF_ERROR(range("head_layers", s.head_layers(), 0, 8));
  TPUG_RETURN_IF_ERROR(range("config_node_head", s.config_node_head(), 0, 4096));
  TPUG_RETURN_IF_ERROR(range("config_attention", s.config_attention(), 0, 1024));
  TPUG_RETURN_IF_ERROR(range("config_random_walk", s.config_random_walk(), 0, 64));
  TPUG_RETURN_IF_ERROR(range("layout_dimension_tokens", s.layout_dimension_tokens(), 0, 64));
  TPUG_RETURN_IF_ERROR(range("config_attention_batch", s.config_attention_batch(), 1, 1 << 16));
  TPUG_RETURN_IF_ERROR(
      range("config_attention_permutations", s.config_attention_permutations(), 1, 64));
  if (s.config_node_head_linear() && s.config_node_head() == 0) {
    return InvalidArgumentError(
        "model spec: config_node_head_linear needs config_node_head > 0 (it is a term of the "
        "per-node score)");
  }
  if (s.config_attention() > 0 && s.config_node_head() == 0) {
    return InvalidArgumentError(
        "model spec: config_attention needs config_node_head > 0 (it works inside the per-node "
        "score term)");
  }
  if (s.config_attention() > 0 && s.segment_size() > 0) {
    return InvalidArgumentError(
        "model spec: config_attention does not support segment_size > 0 (Graph Segment "
        "Training scores segments without the permutation batches that define attention "
        "inference)");
  }
  if (s.virtual_node() != ModelSpec::VIRTUAL_NODE_NONE) {
    if (s.segment_size() > 0) {
      return InvalidArgumentError(
          "model spec: virtual_node does not support segment_size > 0 (a segment would need a "
          "virtual node of its own)");
    }
    if (s.num_opcodes() <= ingest::kNumOpcodeIds) {
      return InvalidArgumentError(
          "model spec: virtual_node takes the opcode embedding's last row, num_opcodes - 1, "
          "which must lie above the release's opcode ids 0.." +
          std::to_string(ingest::kMaxOpcodeId) + "; num_opcodes is " +
          std::to_string(s.num_opcodes()));
    }
  }
  if (!(s.leaky_relu_slope() >= 0 && s.leaky_relu_slope() < 1)) {
    return InvalidArgumentError("model spec: leaky_relu_slope must be in [0, 1)");
  }
  if (!(s.layer_norm_epsilon() > 0) || !std::isfinite(s.layer_norm_epsilon())) {
    return InvalidArgumentError("model spec: layer_norm_epsilon must be finite and > 0");
  }
  TPUG_RETURN_IF_ERROR(range("prune_hops", s.prune_hops(), -1, 64));
  TPUG_RETURN_IF_ERROR(range("segment_size", s.segment_size(), 0, int64_t{1} << 40));
  if (!(s.init_scale() > 0) || !std::isfinite(s.init_scale())) {
    return InvalidArgumentError("model spec: init_scale must be finite and > 0");
  }
  if (!s.pool_mean() && !s.pool_max() && s.config_pooling() == ModelSpec::CONFIG_POOLING_NONE) {
    return InvalidArgumentError("model spec: every pooling is disabled");
  }
  return Status::Ok();
}

CostModel::CostModel(const ModelSpec& spec, TaskKind task)
    : spec_(spec), task_(task), gnn_(std::make_unique<internal::Gnn<float>>(spec, task)) {
  params_.assign(gnn_->layout().total, 0.0f);
}

CostModel::~CostModel() = default;

StatusOr<std::unique_ptr<CostModel>> CostModel::Create(const ModelSpec& spec, TaskKind task) {
  TPUG_RETURN_IF_ERROR(ValidateModelSpec(spec));
  if (task == TaskKind::kTile && !spec.pool_mean() && !spec.pool_max()) {
    return InvalidArgumentError("model spec: tile models need pool_mean or pool_max");
  }
  return std::unique_ptr<CostModel>(new CostModel(spec, task));
}

std::vector<CostModel::ParameterBlock> CostModel::parameter_blocks() const {
  std::vector<ParameterBlock> out;
  for (const auto& b : internal::MakeParamLayout(spec_, task_).blocks) {
    out.push_back({b.name, b.offset, b.rows, b.cols});
  }
  return out;
}

void CostModel::InitParameters(uint64_t seed) {
  const internal::ParamLayout pl = internal::MakeParamLayout(spec_, task_);
  std::fill(params_.begin(), params_.end(), 0.0f);
  for (size_t i = 0; i < pl.blocks.size(); ++i) {
    const auto& b = pl.blocks[i];
    Rng rng(DeriveSeed(seed, "init", i));
    float* p = params_.data() + b.offset;
    const int64_t size = b.rows * b.cols;
    const std::string& name = b.name;
    const bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
    if (name.find("norm_gain") != std::string::npos) {
      std::fill(p, p + size, 1.0f);
    } else if (is_bias || name == "node_head.linear") {
      // zero: the linear term of the node head starts as no term
    } else if (name.find("embedding") != std::string::npos) {
      for (int64_t j = 0; j < size; ++j) p[j] = static_cast<float>(rng.Uniform() - 0.5);
    } else {
      const double limit = spec_.init_scale() * std::sqrt(6.0 / double(b.rows + b.cols));
      for (int64_t j = 0; j < size; ++j) {
        p[j] = static_cast<float>((2.0 * rng.Uniform() - 1.0) * limit);
      }
    }
  }
  // Rows of w_features for columns the transform dropped stay zero (they never see input).
  if (transform_.finalized()) {
    std::vector<uint8_t> kept(kNodeFeatureCount, 0);
    for (int c : transform_.kept_node_column_ids()) kept[c] = 1;
    const int H = spec_.hidden_dim();
    for (int c = 0; c < kNodeFeatureCount; ++c) {
      if (!kept[c]) std::fill_n(params_.data() + pl.w_feat + int64_t(c) * H, H, 0.0f);
    }
  }
}

WholeGraphContext SliceContext(const WholeGraphContext& c, const std::vector<int64_t>& slots) {
  WholeGraphContext out;
  if (!c.loop_depth.empty()) {
    for (int64_t s : slots) out.loop_depth.push_back(c.loop_depth[s]);
  }
  out.flow = SliceLayoutFlow(c.flow, slots);
  return out;
}

WholeGraphContext CostModel::ContextOf(const Graph& g) const {
  WholeGraphContext c;
  if (task_ != TaskKind::kLayout) return c;
  if (spec_.config_loop_depth()) c.loop_depth = ConfigNodeLoopDepths(g);
  if (spec_.layout_flow_features()) c.flow = ConfigLayoutFlow(g);
  return c;
}

StatusOr<std::unique_ptr<PreparedGraph>> CostModel::Prepare(const Graph& g) const {
  const bool prune = task_ == TaskKind::kLayout && spec_.prune_hops() >= 0;
  const bool virtual_node =
      task_ == TaskKind::kLayout && spec_.virtual_node() != ModelSpec::VIRTUAL_NODE_NONE;
  const bool fold = task_ == TaskKind::kLayout && spec_.fold_chains();
  const bool merge = task_ == TaskKind::kLayout && spec_.merge_repeated();
  if (!prune && !virtual_node && !fold && !merge && spec_.segment_size() <= 0) {
    return PrepareExact(g);
  }
  // Loop depths and layout flow need the whole graph; pruning keeps the configurable nodes in
  // order, and cutting segment edges keeps every node.
  WholeGraphContext context = ContextOf(g);
  Graph work;
  const Graph* src = &g;
  if (fold) {
    TPUG_ASSIGN_OR_RETURN(work, FoldChains(g, nullptr));
    src = &work;
  }
  if (merge) {
    TPUG_ASSIGN_OR_RETURN(work, MergeRepeated(*src, nullptr));
    src = &work;
  }
  if (prune) {
    TPUG_ASSIGN_OR_RETURN(work, PruneToConfigNeighbourhood(*src, spec_.prune_hops(), nullptr));
    src = &work;
  }
  if (virtual_node) {
    // Joined to the graph the model sees: the pruned one's outputs or configurable nodes.
    if (src != &work) work = GraphStructureOf(g);
    TPUG_RETURN_IF_ERROR(AddVirtualNode(spec_.virtual_node(), spec_.num_opcodes() - 1, &work));
    src = &work;
  }
  if (spec_.segment_size() > 0) {
    if (src != &work) work = g;
    TPUG_ASSIGN_OR_RETURN(std::vector<int64_t> bounds,
                          PartitionSegments(work.num_nodes(), work.node_splits,
                                            spec_.segment_size(), "graph " + g.name));
    DropCutEdges(bounds, &work.edge_index);
    // A segment sees only its own configurable nodes' layouts (Graph Segment Training slices
    // the flow to them): a source in another segment counts as absent here too.
    auto segment_of = [&](int64_t v) {
      return std::upper_bound(bounds.begin(), bounds.end(), v) - bounds.begin();
    };
    const std::vector<int64_t>& ids = work.node_config_ids;
    for (size_t i = 0; i < context.flow.source.size(); ++i) {
      int32_t& s = context.flow.source[i];
      if (s >= 0 && segment_of(ids[i / 2]) != segment_of(ids[s])) s = -1;
    }
    src = &work;
  }
  return PrepareExact(*src, &context);
}

StatusOr<std::unique_ptr<PreparedGraph>> CostModel::PrepareExact(
    const Graph& g, const WholeGraphContext* context) const {
  const std::string what = "graph " + g.name;
  if (!transform_.finalized()) {
    return FailedPreconditionError(what + ": the model's feature transform is not fitted");
  }
  TPUG_RETURN_IF_ERROR(transform_.CheckGraph(g));
  if (g.kind != task_) {
    return InvalidArgumentError(what + ": is a " + std::string(TaskKindName(g.kind)) +
                                " graph but the model is for " + std::string(TaskKindName(task_)));
  }
  const int64_t n = g.num_nodes();
  if (static_cast<int64_t>(g.node_feat.size()) != n * kNodeFeatureCount) {
    return InvalidArgumentError(what + ": node_feat has " + std::to_string(g.node_feat.size()) +
                                " values, expected " + std::to_string(n * kNodeFeatureCount));
  }
  auto pg = std::make_unique<PreparedGraph::Impl>();
  pg->name = g.name;
  // Tile: the derived config columns follow the kept raw ones (TransformTileConfigs).
  std::vector<int> cfg_cols = transform_.kept_config_column_ids();
  const bool derived = task_ == TaskKind::kTile && spec_.tile_derived_features();
  for (int j = 0; derived && j < kTileDerivedFeatureCount; ++j) {
    cfg_cols.push_back(kTileConfigFeatureCount + j);
  }
  TPUG_ASSIGN_OR_RETURN(
      pg->gs, internal::BuildGraphStructure(spec_, task_, g.node_opcode, g.edge_index,
                                            g.node_config_ids, transform_.kept_node_column_ids(),
                                            std::move(cfg_cols), false, what));
  if (derived) pg->tile_shapes = TileKernelShapes(g);
  const bool layout = task_ == TaskKind::kLayout;
  if (layout && (spec_.layout_tensor_features() || spec_.layout_size_features() ||
                 spec_.layout_dim_split_features() || spec_.layout_flow_features() ||
                 spec_.layout_dimension_tokens() > 0)) {
    internal::FillLayoutTensorInfo(g.node_feat.data(), &pg->gs, spec_.layout_rank_aware());
  }
  const WholeGraphContext own = context == nullptr ? ContextOf(g) : WholeGraphContext();
  const WholeGraphContext& c = context == nullptr ? own : *context;
  const size_t nc = g.node_config_ids.size();
  if (layout && spec_.config_loop_depth()) {
    if (c.loop_depth.size() != nc) {
      return InvalidArgumentError(what + ": " + std::to_string(c.loop_depth.size()) +
                                  " loop depths for " + std::to_string(nc) + " configurable nodes");
    }
    pg->gs.config_loop_depth.assign(c.loop_depth.begin(), c.loop_depth.end());
  }
  if (layout && spec_.config_random_walk() > 0) {
    // On the graph the model sees: the operands and users of the whole plan, both directions.
    const internal::LayerPlan& f = pg->gs.full;
    const int64_t nn = pg->gs.n;
    std::vector<int64_t> ptr(nn + 1, 0), adj;
    adj.reserve(f.op_ref.size() + f.us_ref.size());
    for (int64_t v = 0; v < nn; ++v) {
      adj.insert(adj.end(), f.op_ref.begin() + f.op_ptr[v], f.op_ref.begin() + f.op_ptr[v + 1]);
      adj.insert(adj.end(), f.us_ref.begin() + f.us_ptr[v], f.us_ref.begin() + f.us_ptr[v + 1]);
      ptr[v + 1] = static_cast<int64_t>(adj.size());
    }
    pg->gs.config_random_walk = RandomWalkReturnProbabilities(nn, ptr, adj, pg->gs.config_nodes,
                                                              spec_.config_random_walk());
  }
  if (layout && spec_.layout_flow_features()) {
    if (static_cast<size_t>(c.flow.size()) != nc) {
      return InvalidArgumentError(what + ": layout flow of " + std::to_string(c.flow.size()) +
                                  " nodes for " + std::to_string(nc) + " configurable nodes");
    }
    pg->gs.flow = c.flow;
  }
  pg->node_feat.resize(n * transform_.kept_node_columns());
  transform_.ApplyNodeFeatures(g.node_feat.data(), n, pg->node_feat.data());
  for (float v : pg->node_feat) {
    if (!std::isfinite(v)) return InvalidArgumentError(what + ": node_feat holds NaN or inf");
  }
  return std::make_unique<PreparedGraph>(std::move(pg));
}

std::unique_ptr<ForwardTape> CostModel::NewTape() const { return std::make_unique<ForwardTape>(); }

Status CostModel::ValidateBatch(const PreparedGraph& graph, const ConfigBatch& batch) const {
  const PreparedGraph::Impl& pg = graph.impl();
  const int64_t k = batch.num_configs;
  if (k < 0) return InvalidArgumentError("graph " + pg.name + ": negative config count");
  if (task_ == TaskKind::kTile) {
    if (static_cast<int64_t>(batch.tile_feat.size()) != k * kTileConfigFeatureCount) {
      return InvalidArgumentError("graph " + pg.name + ": tile batch has " +
                                  std::to_string(batch.tile_feat.size()) + " values, expected " +
                                  std::to_string(k * kTileConfigFeatureCount));
    }
    for (float v : batch.tile_feat) {
      if (!std::isfinite(v)) return InvalidArgumentError("graph " + pg.name + ": NaN config");
    }
  } else {
    const int64_t want =
        k * static_cast<int64_t>(pg.gs.config_nodes.size()) * kLayoutConfigFeatureCount;
    if (static_cast<int64_t>(batch.layout_feat.size()) != want) {
      return InvalidArgumentError("graph " + pg.name + ": layout batch has " +
                                  std::to_string(batch.layout_feat.size()) + " values, expected " +
                                  std::to_string(want));
    }
  }
  return Status::Ok();
}

namespace {

internal::GnnInputs<float> MakeInputs(const PreparedGraph::Impl& pg, const ConfigBatch& batch,
                                      const std::vector<float>& tile_cfg) {
  internal::GnnInputs<float> in;
  in.node_feat = pg.node_feat.data();
  in.k = batch.num_configs;
  in.tile_cfg = tile_cfg.data();
  in.layout_cfg = batch.layout_feat.data();
  return in;
}

// The batch's tile config features after the feature transform, then the derived ones when the
// spec asks for them ([k, pg.gs.cfg_cols.size()]); empty for layout.
void TransformTileConfigs(const FeatureTransform& transform, TaskKind task,
                          const PreparedGraph::Impl& pg, const ConfigBatch& batch,
                          std::vector<float>* out) {
  out->clear();
  if (task != TaskKind::kTile) return;
  const int64_t k = batch.num_configs, kept = transform.kept_config_columns();
  const int64_t width = static_cast<int64_t>(pg.gs.cfg_cols.size());
  out->resize(k * width);
  for (int64_t c = 0; c < k; ++c) {
    const float* raw = batch.tile_feat.data() + c * kTileConfigFeatureCount;
    float* row = out->data() + c * width;
    transform.ApplyConfigFeatures(raw, 1, row);
    if (width > kept) TileDerivedFeatures(pg.tile_shapes, raw, row + kept);
  }
}

// The network to compute with: the model's own on the calling thread, or, with a pool of
// several threads, a copy of it (the spec and the parameter layout; the parameters stay in
// the model) whose row-parallel kernels run on that pool. The pool is the call's argument, so
// calls with different pools share no state.
const internal::Gnn<float>& Bind(const internal::Gnn<float>& own, ThreadPool* kernels,
                                 std::optional<internal::Gnn<float>>* bound) {
  if (kernels == nullptr || kernels->num_threads() <= 1) return own;
  bound->emplace(own);
  (*bound)->set_pool(kernels);
  return **bound;
}

}  // namespace

void CostModel::Forward(const PreparedGraph& pg, const ConfigBatch& batch, float* scores,
                        ForwardTape* tape, ThreadPool* kernels) const {
  ForwardTape local;
  ForwardTape::Impl& t = tape != nullptr ? tape->impl() : local.impl();
  t.tape.inference = tape == nullptr;
  TransformTileConfigs(transform_, task_, pg.impl(), batch, &t.tile_cfg);
  std::optional<internal::Gnn<float>> bound;
  const internal::Gnn<float>& gnn = Bind(*gnn_, kernels, &bound);
  const PreparedGraph::Impl& p = pg.impl();
  const int64_t k = batch.num_configs;
  if (tape == nullptr && task_ == TaskKind::kLayout && spec_.config_attention() > 0 && k > 0) {
    // Cross-configuration attention: a score depends on the configurations scored with it.
    // Inference scores each configuration in batches of config_attention_batch under
    // config_attention_permutations orders (the given one, then seeded shuffles) and averages.
    // A last short batch is filled up with the order's first configurations, so every batch
    // has the size training used; the fillers' scores are not counted.
    const int64_t B = std::min<int64_t>(k, spec_.config_attention_batch());
    const int perms = spec_.config_attention_permutations();
    const int64_t per_layout = static_cast<int64_t>(p.gs.config_nodes.size()) * 18;
    std::vector<double> sum(k, 0.0);
    std::vector<int64_t> order(k);
    std::vector<int8_t> rows_cfg(B * per_layout);
    std::vector<float> sub(B);
    for (int r = 0; r < perms; ++r) {
      std::iota(order.begin(), order.end(), int64_t{0});
      if (r > 0) {
        Rng rng(DeriveSeed(0, "config_attention_order", static_cast<uint64_t>(r)));
        rng.Shuffle(order);
      }
      for (int64_t b0 = 0; b0 < k; b0 += B) {
        for (int64_t i = 0; i < B; ++i) {
          const int64_t c = order[(b0 + i) % k];
          std::copy_n(batch.layout_feat.data() + c * per_layout, per_layout,
                      rows_cfg.data() + i * per_layout);
        }
        internal::GnnInputs<float> in = MakeInputs(p, batch, t.tile_cfg);
        in.k = B;
        in.layout_cfg = rows_cfg.data();
        gnn.Forward(params_.data(), p.gs, in, sub.data(), &t.tape);
        for (int64_t i = 0; i < B && b0 + i < k; ++i) sum[order[b0 + i]] += sub[i];
      }
    }
    for (int64_t c = 0; c < k; ++c) scores[c] = static_cast<float>(sum[c] / perms);
    return;
  }
  const int64_t rows = std::max<int64_t>(1, p.gs.plan(spec_.num_layers()).rows());
  const int64_t chunk =
      std::max<int64_t>(1, std::min(inference_chunk_rows_, inference_block_rows_) / rows);
  if (tape != nullptr || k <= chunk) {
    gnn.Forward(params_.data(), p.gs, MakeInputs(p, batch, t.tile_cfg), scores, &t.tape);
    return;
  }
  // Inference in chunks: each config's score depends only on that config, bit for bit (see the
  // header). The configuration-independent pass runs once; the chunks reuse one tape, whose
  // buffers keep their size from chunk to chunk.
  ForwardTape shared;
  InferShared(pg, &shared, kernels);
  InferConfigs(pg, batch, shared, scores, kernels);
}

void CostModel::InferShared(const PreparedGraph& pg, ForwardTape* shared,
                            ThreadPool* kernels) const {
  ForwardTape::Impl& t = shared->impl();
  t.tape.inference = true;
  std::optional<internal::Gnn<float>> bound;
  Bind(*gnn_, kernels, &bound)
      .ForwardShared(params_.data(), pg.impl().gs, pg.impl().node_feat.data(), &t.tape);
}

void CostModel::InferConfigs(const PreparedGraph& pg, const ConfigBatch& batch,
                             const ForwardTape& shared, float* scores, ThreadPool* kernels) const {
  std::optional<internal::Gnn<float>> bound;
  const internal::Gnn<float>& gnn = Bind(*gnn_, kernels, &bound);
  ForwardTape local;
  ForwardTape::Impl& t = local.impl();
  t.tape.inference = true;
  TransformTileConfigs(transform_, task_, pg.impl(), batch, &t.tile_cfg);
  const PreparedGraph::Impl& p = pg.impl();
  const int64_t k = batch.num_configs;
  const int64_t rows = std::max<int64_t>(1, p.gs.plan(spec_.num_layers()).rows());
  const int64_t chunk =
      std::max<int64_t>(1, std::min(inference_chunk_rows_, inference_block_rows_) / rows);
  const int64_t kc = static_cast<int64_t>(p.gs.cfg_cols.size());
  const int64_t per_layout = static_cast<int64_t>(p.gs.config_nodes.size()) * 18;
  for (int64_t c0 = 0; c0 < k; c0 += chunk) {
    internal::GnnInputs<float> in = MakeInputs(p, batch, t.tile_cfg);
    in.k = std::min(chunk, k - c0);
    if (task_ == TaskKind::kTile) in.tile_cfg = t.tile_cfg.data() + c0 * kc;
    if (task_ == TaskKind::kLayout) in.layout_cfg = batch.layout_feat.data() + c0 * per_layout;
    gnn.ForwardConfigs(params_.data(), p.gs, in, shared.impl().tape, scores + c0, &t.tape);
  }
}

void CostModel::Backward(const PreparedGraph& pg, const ConfigBatch& batch, const ForwardTape& tape,
                         const float* dscores, float* grad, ThreadPool* kernels) const {
  std::optional<internal::Gnn<float>> bound;
  const internal::Gnn<float>& gnn = Bind(*gnn_, kernels, &bound);
  gnn.Backward(params_.data(), pg.impl().gs, MakeInputs(pg.impl(), batch, tape.impl().tile_cfg),
               tape.impl().tape, dscores, grad);
}

void CostModel::ForwardShared(const PreparedGraph& pg, ForwardTape* shared,
                              ThreadPool* kernels) const {
  std::optional<internal::Gnn<float>> bound;
  const internal::Gnn<float>& gnn = Bind(*gnn_, kernels, &bound);
  ForwardTape::Impl& t = shared->impl();
  t.tape.inference = false;
  gnn.ForwardShared(params_.data(), pg.impl().gs, pg.impl().node_feat.data(), &t.tape);
}

void CostModel::ForwardConfigs(const PreparedGraph& pg, const ConfigBatch& chunk,
                               const ForwardTape& shared, float* scores, ForwardTape* tape) const {
  const internal::Gnn<float>& gnn = *gnn_;
  ForwardTape::Impl& t = tape->impl();
  t.tape.inference = false;
  TransformTileConfigs(transform_, task_, pg.impl(), chunk, &t.tile_cfg);
  gnn.ForwardConfigs(params_.data(), pg.impl().gs, MakeInputs(pg.impl(), chunk, t.tile_cfg),
                     shared.impl().tape, scores, &t.tape);
}

void CostModel::BackwardConfigs(const PreparedGraph& pg, const ConfigBatch& chunk,
                                const ForwardTape& tape, const float* dscores, float* grad,
                                SharedGradient* dshared) const {
  const internal::Gnn<float>& gnn = *gnn_;
  const internal::GraphStructure& gs = pg.impl().gs;
  internal::SharedGrad<float>& d = dshared->impl().d;
  d.Reset(gs, spec_.hidden_dim(), spec_.num_layers());
  gnn.BackwardConfigs(params_.data(), gs, MakeInputs(pg.impl(), chunk, tape.impl().tile_cfg),
                      tape.impl().tape, dscores, grad, &d);
}

void CostModel::ForwardConfigsPooled(const PreparedGraph& pg, const ConfigBatch& chunk,
                                     const ForwardTape& shared, float* G, ForwardTape* tape) const {
  ForwardTape::Impl& t = tape->impl();
  t.tape.inference = false;
  TransformTileConfigs(transform_, task_, pg.impl(), chunk, &t.tile_cfg);
  MatrixT<float> g;
  gnn_->ForwardConfigsPooled(params_.data(), pg.impl().gs, MakeInputs(pg.impl(), chunk, t.tile_cfg),
                             shared.impl().tape, &g, &t.tape);
  std::copy(g.data(), g.data() + g.size(), G);
}

void CostModel::BackwardConfigsPooled(const PreparedGraph& pg, const ConfigBatch& chunk,
                                      const ForwardTape& tape, const float* dG, float* grad,
                                      SharedGradient* dshared) const {
  const internal::GraphStructure& gs = pg.impl().gs;
  internal::SharedGrad<float>& d = dshared->impl().d;
  d.Reset(gs, spec_.hidden_dim(), spec_.num_layers());
  const MatrixT<float> dg =
      Eigen::Map<const MatrixT<float>>(dG, chunk.num_configs, head_input_dim());
  gnn_->BackwardConfigsPooled(params_.data(), gs,
                              MakeInputs(pg.impl(), chunk, tape.impl().tile_cfg), tape.impl().tape,
                              dg, grad, &d);
}

void CostModel::ForwardConfigsToAttention(const PreparedGraph& pg, const ConfigBatch& chunk,
                                          const ForwardTape& shared, ForwardTape* tape) const {
  ForwardTape::Impl& t = tape->impl();
  t.tape.inference = false;
  TransformTileConfigs(transform_, task_, pg.impl(), chunk, &t.tile_cfg);
  gnn_->ForwardConfigsToAttention(params_.data(), pg.impl().gs,
                                  MakeInputs(pg.impl(), chunk, t.tile_cfg), shared.impl().tape,
                                  &t.tape);
}

void CostModel::AttendForward(const PreparedGraph& pg, const std::vector<ForwardTape*>& chunks,
                              ForwardTape* shared, ThreadPool* kernels) const {
  std::vector<internal::GnnTape<float>*> tapes;
  for (ForwardTape* c : chunks) tapes.push_back(&c->impl().tape);
  std::optional<internal::Gnn<float>> bound;
  Bind(*gnn_, kernels, &bound)
      .AttendForward(params_.data(), pg.impl().gs, tapes, &shared->impl().tape);
}

void CostModel::ForwardConfigsFromAttention(const PreparedGraph& pg, const ConfigBatch& chunk,
                                            ForwardTape* tape, float* scores) const {
  ForwardTape::Impl& t = tape->impl();
  gnn_->ForwardConfigsFromAttention(params_.data(), pg.impl().gs,
                                    MakeInputs(pg.impl(), chunk, t.tile_cfg), &t.tape, scores);
}

void CostModel::BackwardConfigsToAttention(const PreparedGraph& pg, const ConfigBatch& chunk,
                                           const ForwardTape& tape, const float* dscores,
                                           float* grad) const {
  gnn_->BackwardConfigsToAttention(params_.data(), pg.impl().gs,
                                   MakeInputs(pg.impl(), chunk, tape.impl().tile_cfg),
                                   tape.impl().tape, dscores, grad);
}

void CostModel::AttendBackward(const PreparedGraph& pg,
                               const std::vector<const ForwardTape*>& chunks,
                               const ForwardTape& shared, ThreadPool* kernels) const {
  std::vector<const internal::GnnTape<float>*> tapes;
  for (const ForwardTape* c : chunks) tapes.push_back(&c->impl().tape);
  std::optional<internal::Gnn<float>> bound;
  Bind(*gnn_, kernels, &bound)
      .AttendBackward(params_.data(), pg.impl().gs, tapes, shared.impl().tape);
}

void CostModel::BackwardConfigsFromAttention(const PreparedGraph& pg, const ConfigBatch& chunk,
                                             const ForwardTape& tape, float* grad,
                                             SharedGradient* dshared) const {
  const internal::GraphStructure& gs = pg.impl().gs;
  internal::SharedGrad<float>& d = dshared->impl().d;
  d.Reset(gs, spec_.hidden_dim(), spec_.num_layers());
  gnn_->BackwardConfigsFromAttention(params_.data(), gs,
                                     MakeInputs(pg.impl(), chunk, tape.impl().tile_cfg),
                                     tape.impl().tape, grad, &d);
}

int64_t CostModel::attention_row_floats(const PreparedGraph& pg, int64_t k, bool backward) const {
  const int64_t nc = static_cast<int64_t>(pg.impl().gs.config_nodes.size());
  return k * nc * (backward ? 1 : 3) * spec_.config_attention();
}

float* CostModel::AttentionRows(const PreparedGraph& pg, int64_t k, bool backward,
                                ForwardTape* tape) const {
  const int64_t nc = static_cast<int64_t>(pg.impl().gs.config_nodes.size());
  const int64_t A = spec_.config_attention();
  internal::GnnTape<float>& t = tape->impl().tape;
  t.k = k;
  // Resizing to the same shape keeps the values (one's own chunks).
  if (!backward) {
    t.att_qkv.resize(k * nc, 3 * A);
    t.att_o.resize(k * nc, A);
    return t.att_qkv.data();
  }
  t.att_do.resize(k * nc, A);
  t.att_dqkv.resize(k * nc, 3 * A);
  return t.att_do.data();
}

void CostModel::ZeroSharedGradient(const PreparedGraph& pg, SharedGradient* dshared) const {
  dshared->impl().d.Reset(pg.impl().gs, spec_.hidden_dim(), spec_.num_layers());
}

void CostModel::BackwardShared(const PreparedGraph& pg, const ForwardTape& shared,
                               SharedGradient* dshared, float* grad, ThreadPool* kernels) const {
  std::optional<internal::Gnn<float>> bound;
  const internal::Gnn<float>& gnn = Bind(*gnn_, kernels, &bound);
  gnn.BackwardShared(params_.data(), pg.impl().gs, pg.impl().node_feat.data(), shared.impl().tape,
                     &dshared->impl().d, grad);
}

int64_t CostModel::config_rows(const PreparedGraph& pg) const {
  const internal::GraphStructure& gs = pg.impl().gs;
  int64_t rows = gs.n + static_cast<int64_t>(gs.config_nodes.size());
  for (int l = 1; l <= spec_.num_layers(); ++l) rows += 3 * gs.plan(l).rows();
  return rows;
}

int64_t CostModel::head_input_dim() const {
  return internal::MakeParamLayout(spec_, task_).g_width;
}

int64_t CostModel::head_parameter_offset() const {
  return internal::MakeParamLayout(spec_, task_).w_head.front();
}

void CostModel::ForwardPooled(const PreparedGraph& pg, const ConfigBatch& batch, float* G,
                              ForwardTape* tape, ThreadPool* kernels) const {
  ForwardTape local;
  ForwardTape::Impl& t = tape != nullptr ? tape->impl() : local.impl();
  TransformTileConfigs(transform_, task_, pg.impl(), batch, &t.tile_cfg);
  std::optional<internal::Gnn<float>> bound;
  const internal::Gnn<float>& gnn = Bind(*gnn_, kernels, &bound);
  const PreparedGraph::Impl& p = pg.impl();
  MatrixT<float> g;
  gnn.ForwardPooled(params_.data(), p.gs, MakeInputs(p, batch, t.tile_cfg), &g, &t.tape);
  std::copy(g.data(), g.data() + g.size(), G);
}

void CostModel::ForwardHead(const float* G, int64_t k, float* scores, ForwardTape* tape,
                            ThreadPool* kernels) const {
  ForwardTape local;
  ForwardTape::Impl& t = tape != nullptr ? tape->impl() : local.impl();
  std::optional<internal::Gnn<float>> bound;
  const internal::Gnn<float>& gnn = Bind(*gnn_, kernels, &bound);
  const int64_t d = head_input_dim();
  MatrixT<float> g = Eigen::Map<const MatrixT<float>>(G, k, d);
  gnn.ForwardHead(params_.data(), std::move(g), scores, &t.tape);
}

void CostModel::BackwardHead(const ForwardTape& tape, int64_t k, const float* dscores, float* grad,
                             float* dG, ThreadPool* kernels) const {
  std::optional<internal::Gnn<float>> bound;
  const internal::Gnn<float>& gnn = Bind(*gnn_, kernels, &bound);
  const MatrixT<float> d = gnn.BackwardHead(params_.data(), tape.impl().tape, k, dscores, grad);
  std::copy(d.data(), d.data() + d.size(), dG);
}

void CostModel::BackwardPooled(const PreparedGraph& pg, const ConfigBatch& batch,
                               const ForwardTape& tape, const float* dG, float* grad,
                               ThreadPool* kernels) const {
  std::optional<internal::Gnn<float>> bound;
  const internal::Gnn<float>& gnn = Bind(*gnn_, kernels, &bound);
  const int64_t d = head_input_dim();
  const MatrixT<float> dg = Eigen::Map<const MatrixT<float>>(dG, batch.num_configs, d);
  gnn.BackwardPooled(params_.data(), pg.impl().gs,
                     MakeInputs(pg.impl(), batch, tape.impl().tile_cfg), tape.impl().tape, dg,
                     grad);
}

}  // namespace tpugraphs::model
