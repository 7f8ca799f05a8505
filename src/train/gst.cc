#include "tpugraphs/train/gst.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "tpugraphs/common/rng.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/model/losses.h"
#include "tpugraphs/model/pruning.h"
#include "tpugraphs/model/segment.h"
#include "tpugraphs/train/config_sampling.h"

namespace tpugraphs::train {

using model::ConfigBatch;
using AlignedFloats = std::vector<float, Eigen::aligned_allocator<float>>;
using model::CostModel;

StatusOr<SegmentedGraph> PrepareSegmented(const CostModel& model, const Graph& g) {
  if (!g.is_layout() || model.task() != TaskKind::kLayout) {
    return InvalidArgumentError("graph " + g.name +
                                ": graph segment training is implemented for layout graphs only");
  }
  const ModelSpec& spec = model.spec();
  // Loop depths and layout flow come from the whole graph; pruning keeps the configurable nodes
  // in order, and each segment takes its slots' values.
  const model::WholeGraphContext context = model.ContextOf(g);
  Graph pruned;
  const Graph* src = &g;
  if (spec.prune_hops() >= 0) {
    TPUG_ASSIGN_OR_RETURN(pruned, model::PruneToConfigNeighbourhood(g, spec.prune_hops(), nullptr));
    src = &pruned;
  }
  SegmentedGraph sg;
  sg.name = g.name;
  sg.num_nodes = src->num_nodes();
  sg.num_config_nodes = src->num_config_nodes();
  const int64_t cap =
      spec.segment_size() > 0 ? spec.segment_size() : std::max<int64_t>(1, sg.num_nodes);
  TPUG_ASSIGN_OR_RETURN(
      sg.bounds, model::PartitionSegments(sg.num_nodes, src->node_splits, cap, "graph " + g.name));
  const int64_t S = static_cast<int64_t>(sg.bounds.size()) - 1;
  sg.segments.resize(S);
  sg.config_slots.resize(S);
  sg.seg_nodes.resize(S);
  sg.seg_config_nodes.resize(S);
  for (int64_t s = 0; s < S; ++s) {
    Graph part = model::ExtractSegment(*src, sg.bounds[s], sg.bounds[s + 1], &sg.config_slots[s]);
    part.node_config_feat.clear();
    sg.seg_nodes[s] = part.num_nodes();
    sg.seg_config_nodes[s] = part.num_config_nodes();
    const model::WholeGraphContext part_context = model::SliceContext(context, sg.config_slots[s]);
    TPUG_ASSIGN_OR_RETURN(sg.segments[s], model.PrepareExact(part, &part_context));
  }
  return sg;
}

ConfigBatch SegmentBatch(const SegmentedGraph& sg, int64_t s, const ConfigBatch& full) {
  ConfigBatch b;
  b.num_configs = full.num_configs;
  const std::vector<int64_t>& slots = sg.config_slots[s];
  const int64_t nc = sg.num_config_nodes, ns = static_cast<int64_t>(slots.size());
  constexpr int64_t F = kLayoutConfigFeatureCount;
  b.layout_feat.resize(full.num_configs * ns * F);
  for (int64_t c = 0; c < full.num_configs; ++c) {
    for (int64_t i = 0; i < ns; ++i) {
      std::copy_n(full.layout_feat.data() + (c * nc + slots[i]) * F, F,
                  b.layout_feat.data() + (c * ns + i) * F);
    }
  }
  return b;
}

PoolBlocks PoolBlocksOf(const ModelSpec& spec) {
  PoolBlocks pb;
  pb.hidden = spec.hidden_dim();
  int64_t off = 0;
  if (spec.pool_mean()) pb.mean = off, off += pb.hidden;
  if (spec.pool_max()) pb.max = off, off += pb.hidden;
  if (spec.config_pooling() != ModelSpec::CONFIG_POOLING_NONE) {
    pb.config = off, off += pb.hidden;
    pb.config_mean = spec.config_pooling() == ModelSpec::CONFIG_POOLING_MEAN;
  }
  pb.width = off;
  return pb;
}

namespace {

// Factors of part p in the mean and config blocks.
template <typename T>
void PartScales(const PoolBlocks& pb, int64_t n, int64_t nc, const SegmentPart<T>& p, T* mean_f,
                T* cfg_f) {
  *mean_f = static_cast<T>(p.weight * static_cast<double>(p.nodes) / static_cast<double>(n));
  if (pb.config_mean) {
    *cfg_f = nc > 0 ? static_cast<T>(p.weight * static_cast<double>(p.config_nodes) /
                                     static_cast<double>(nc))
                    : T(0);
  } else {
    *cfg_f = static_cast<T>(p.weight);
  }
}

}  // namespace

template <typename T>
void CombineSegments(const PoolBlocks& pb, int64_t k, int64_t n, int64_t nc,
                     const std::vector<SegmentPart<T>>& parts, T* G, std::vector<int32_t>* argmax) {
  const int64_t D = pb.width, H = pb.hidden;
  std::fill(G, G + k * D, T(0));
  if (pb.max >= 0) {
    argmax->assign(k * H, -1);
    for (int64_t c = 0; c < k; ++c) {
      std::fill(G + c * D + pb.max, G + c * D + pb.max + H, -std::numeric_limits<T>::infinity());
    }
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const SegmentPart<T>& p = parts[i];
    T mf, cf;
    PartScales(pb, n, nc, p, &mf, &cf);
    for (int64_t c = 0; c < k; ++c) {
      const T* src = p.g + (p.rows == 1 ? 0 : c) * D;
      T* dst = G + c * D;
      if (pb.mean >= 0) {
        for (int64_t d = 0; d < H; ++d) dst[pb.mean + d] += mf * src[pb.mean + d];
      }
      if (pb.config >= 0 && cf != T(0)) {
        for (int64_t d = 0; d < H; ++d) dst[pb.config + d] += cf * src[pb.config + d];
      }
      if (pb.max >= 0) {
        for (int64_t d = 0; d < H; ++d) {
          if (src[pb.max + d] > dst[pb.max + d]) {
            dst[pb.max + d] = src[pb.max + d];
            (*argmax)[c * H + d] = static_cast<int32_t>(i);
          }
        }
      }
    }
  }
}

template <typename T>
void SplitSegmentGradient(const PoolBlocks& pb, int64_t k, int64_t n, int64_t nc,
                          const std::vector<SegmentPart<T>>& parts,
                          const std::vector<int32_t>& argmax, int32_t i, const T* dG, T* dGi) {
  const int64_t D = pb.width, H = pb.hidden;
  T mf, cf;
  PartScales(pb, n, nc, parts[i], &mf, &cf);
  std::fill(dGi, dGi + k * D, T(0));
  for (int64_t c = 0; c < k; ++c) {
    const T* g = dG + c * D;
    T* out = dGi + c * D;
    if (pb.mean >= 0) {
      for (int64_t d = 0; d < H; ++d) out[pb.mean + d] = mf * g[pb.mean + d];
    }
    if (pb.config >= 0) {
      for (int64_t d = 0; d < H; ++d) out[pb.config + d] = cf * g[pb.config + d];
    }
    if (pb.max >= 0) {
      for (int64_t d = 0; d < H; ++d) {
        if (argmax[c * H + d] == i) out[pb.max + d] = g[pb.max + d];
      }
    }
  }
}

template void CombineSegments<float>(const PoolBlocks&, int64_t, int64_t, int64_t,
                                     const std::vector<SegmentPart<float>>&, float*,
                                     std::vector<int32_t>*);
template void CombineSegments<double>(const PoolBlocks&, int64_t, int64_t, int64_t,
                                      const std::vector<SegmentPart<double>>&, double*,
                                      std::vector<int32_t>*);
template void SplitSegmentGradient<float>(const PoolBlocks&, int64_t, int64_t, int64_t,
                                          const std::vector<SegmentPart<float>>&,
                                          const std::vector<int32_t>&, int32_t, const float*,
                                          float*);
template void SplitSegmentGradient<double>(const PoolBlocks&, int64_t, int64_t, int64_t,
                                           const std::vector<SegmentPart<double>>&,
                                           const std::vector<int32_t>&, int32_t, const double*,
                                           double*);

void HistoryTable::Push(int64_t graph, int64_t segment, const float* row, int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = rows_[{graph, segment}];
  e.row.assign(row, row + width_);
  e.step = step;
}

bool HistoryTable::Pull(int64_t graph, int64_t segment, int64_t now, float* row,
                        int64_t* age) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rows_.find({graph, segment});
  if (it == rows_.end()) return false;
  std::copy(it->second.row.begin(), it->second.row.end(), row);
  *age = now - it->second.step;
  return true;
}

int64_t HistoryTable::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(rows_.size());
}

int64_t HistoryTable::bytes() const { return entries() * width_ * 4; }

void HistoryTable::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  rows_.clear();
}

std::vector<uint8_t> StaleDropoutMask(int64_t count, double keep_probability, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> keep(std::max<int64_t>(0, count));
  for (auto& x : keep) x = rng.Uniform() < keep_probability ? 1 : 0;
  return keep;
}

namespace {

// Mean over the k rows of G_s: the config-independent row the table keeps.
std::vector<float> ConfigMean(const std::vector<float>& g, int64_t k, int64_t D) {
  std::vector<double> acc(D, 0.0);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t d = 0; d < D; ++d) acc[d] += g[c * D + d];
  }
  std::vector<float> out(D);
  for (int64_t d = 0; d < D; ++d) out[d] = static_cast<float>(acc[d] / std::max<int64_t>(1, k));
  return out;
}

// fn(begin, end) over the shards of [0, n) of `grain` items: ThreadPool::ParallelFor on the
// pool, or in order on the calling thread without one. Each shard writes only what is its own.
template <typename Fn>
void ForShards(ThreadPool* pool, int64_t n, int64_t grain, const Fn& fn) {
  if (pool != nullptr) {
    pool->ParallelFor(n, grain, [&fn](int64_t, int64_t b, int64_t e) { fn(b, e); });
    return;
  }
  for (int64_t b = 0; b < n; b += grain) fn(b, std::min(n, b + grain));
}

}  // namespace

StatusOr<GstPlan> PlanGstStep(const SegmentedGraph& sg, int64_t graph_key,
                              const GstOptions& options, int64_t step, uint64_t seed,
                              const HistoryTable* table,
                              const std::vector<int64_t>* sampled_override) {
  const int64_t S = sg.num_segments();
  GstPlan plan;
  // Which segments get a tape.
  plan.sampled.assign(S, 0);
  if (!options.head_only) {
    if (sampled_override != nullptr) {
      for (int64_t s : *sampled_override) {
        if (s < 0 || s >= S) return InvalidArgumentError("sampled segment out of range");
        plan.sampled[s] = 1;
      }
    } else {
      Rng rng(DeriveSeed(seed, "gst-segments"));
      const int64_t m = std::clamp<int64_t>(options.segments_per_step, 1, S);
      for (int64_t s : rng.SampleWithoutReplacement(S, m)) plan.sampled[s] = 1;
    }
  }
  plan.use_table = table != nullptr && !options.fresh_context && !options.head_only;
  const std::vector<uint8_t> keep =
      StaleDropoutMask(S, options.keep_probability, DeriveSeed(seed, "gst-dropout"));
  // A table row stands in for a segment not sampled when there is one (or nothing, when
  // dropped); every other segment is computed fresh.
  plan.source.assign(S, GstPlan::Source::kFresh);
  plan.stale_rows.assign(S, {});
  plan.ages.assign(S, 0);
  for (int64_t s = 0; s < S && plan.use_table; ++s) {
    std::vector<float> row(table->width());
    if (plan.sampled[s] || !table->Pull(graph_key, s, step, row.data(), &plan.ages[s])) continue;
    if (!keep[s] || options.keep_probability <= 0) {
      plan.source[s] = GstPlan::Source::kDropped;
    } else {
      plan.source[s] = GstPlan::Source::kStale;
      plan.stale_rows[s] = std::move(row);
    }
  }
  return plan;
}

StatusOr<GstStepStats> GstStep(const CostModel& model, const SegmentedGraph& sg, int64_t graph_key,
                               const ConfigBatch& batch, const double* runtimes,
                               const LossSpec& loss, const GstOptions& options, int64_t step,
                               uint64_t seed, HistoryTable* table, float* grad,
                               const std::vector<int64_t>* sampled_override, ThreadPool* pool,
                               ThreadPool* kernels) {
  TPUG_ASSIGN_OR_RETURN(GstPlan plan,
                        PlanGstStep(sg, graph_key, options, step, seed, table, sampled_override));
  return RunGstStep(model, sg, graph_key, std::move(plan), batch, runtimes, loss, options, step,
                    table, grad, pool, kernels);
}

StatusOr<GstStepStats> RunGstStep(const CostModel& model, const SegmentedGraph& sg,
                                  int64_t graph_key, GstPlan plan, const ConfigBatch& batch,
                                  const double* runtimes, const LossSpec& loss,
                                  const GstOptions& options, int64_t step, HistoryTable* table,
                                  float* grad, ThreadPool* pool, ThreadPool* kernels) {
  const int64_t S = sg.num_segments(), k = batch.num_configs;
  const bool several = pool != nullptr && pool->num_threads() > 1;
  // Row-parallel kernels for the passes that run one at a time: the step's pool when it has one.
  ThreadPool* const serial_kernels = pool != nullptr ? pool : kernels;
  const PoolBlocks pb = PoolBlocksOf(model.spec());
  const int64_t D = pb.width;
  if (D != model.head_input_dim()) {
    return InternalError("graph " + sg.name + ": head input width mismatch");
  }
  if (static_cast<int64_t>(batch.layout_feat.size()) !=
      k * sg.num_config_nodes * kLayoutConfigFeatureCount) {
    return InvalidArgumentError(
        "graph " + sg.name + ": layout batch has " + std::to_string(batch.layout_feat.size()) +
        " values, expected " + std::to_string(k * sg.num_config_nodes * kLayoutConfigFeatureCount));
  }
  if (static_cast<int64_t>(plan.sampled.size()) != S) {
    return InvalidArgumentError("graph " + sg.name + ": the GST plan is for another graph");
  }
  GstStepStats stats;
  const std::vector<uint8_t>& is_sampled = plan.sampled;
  std::vector<std::vector<float>> rows = std::move(plan.stale_rows);  // the G_s taking part
  std::vector<int64_t> unsampled;  // fresh segments without a tape, in segment order
  std::vector<ConfigBatch> seg_batches(S);
  std::vector<std::unique_ptr<model::ForwardTape>> shared(S);
  std::vector<GstChunk> chunks = PlanGstChunks(model, sg, plan, k, options.chunk_rows);
  for (int64_t s = 0; s < S; ++s) {
    if (plan.source[s] != GstPlan::Source::kFresh) continue;
    rows[s].resize(k * D);
    if (!is_sampled[s]) unsampled.push_back(s);
  }
  // The fresh segments not sampled, without a tape (their activations freed as each finishes):
  // a task each when there are several and threads for them, else one after another with the
  // kernels sharing each segment's rows. Each writes only its own rows.
  const int64_t nu = static_cast<int64_t>(unsampled.size());
  const bool unsampled_tasks = several && nu > 1;
  ForShards(unsampled_tasks ? pool : nullptr, nu, 1, [&](int64_t t, int64_t) {
    const int64_t s = unsampled[t];
    model.ForwardPooled(*sg.segments[s], SegmentBatch(sg, s, batch), rows[s].data(), nullptr,
                        unsampled_tasks ? nullptr : serial_kernels);
  });
  // The sampled segments: the configuration-independent pass of each (row-parallel), then
  // every (segment, chunk of configurations) as a task writing its rows of G_s. The chunks
  // follow the data alone, so the result does not depend on the pool.
  for (int64_t s = 0; s < S; ++s) {
    if (plan.source[s] != GstPlan::Source::kFresh || !is_sampled[s]) continue;
    seg_batches[s] = SegmentBatch(sg, s, batch);
    shared[s] = model.NewTape();
    model.ForwardShared(*sg.segments[s], shared[s].get(), serial_kernels);
  }
  const int64_t nt = static_cast<int64_t>(chunks.size());
  std::vector<std::unique_ptr<model::ForwardTape>> tapes(nt);
  std::vector<ConfigBatch> chunk_batches(nt);
  ForShards(several ? pool : nullptr, nt, 1, [&](int64_t t, int64_t) {
    const GstChunk& c = chunks[t];
    chunk_batches[t] =
        model::SliceBatch(seg_batches[c.segment], c.begin, c.end, sg.seg_config_nodes[c.segment]);
    tapes[t] = model.NewTape();
    model.ForwardConfigsPooled(*sg.segments[c.segment], chunk_batches[t], *shared[c.segment],
                               rows[c.segment].data() + c.begin * D, tapes[t].get());
  });
  // The parts in segment order; the table's rows pushed in the same order.
  std::vector<SegmentPart<float>> parts;
  std::vector<int64_t> part_segment;
  for (int64_t s = 0; s < S; ++s) {
    SegmentPart<float> p;
    p.nodes = sg.seg_nodes[s];
    p.config_nodes = sg.seg_config_nodes[s];
    if (plan.source[s] == GstPlan::Source::kDropped) {
      ++stats.dropped;
      continue;
    }
    if (plan.source[s] == GstPlan::Source::kStale) {
      p.rows = 1;
      p.weight = 1.0 / options.keep_probability;
      ++stats.stale;
      stats.staleness_sum += plan.ages[s];
    } else {
      p.rows = k;
      ++(is_sampled[s] ? stats.sampled : stats.fresh);
      if (plan.use_table) {
        const std::vector<float> mean = ConfigMean(rows[s], k, D);
        table->Push(graph_key, s, mean.data(), step);
      }
    }
    p.g = rows[s].data();
    parts.push_back(p);
    part_segment.push_back(s);
  }
  std::vector<float> G(k * D);
  std::vector<int32_t> argmax;
  CombineSegments(pb, k, sg.num_nodes, sg.num_config_nodes, parts, G.data(), &argmax);
  std::vector<float> scores(k), dscores(k);
  auto head_tape = model.NewTape();
  model.ForwardHead(G.data(), k, scores.data(), head_tape.get(), kernels);
  stats.loss = model::ComputeLoss(loss, scores.data(), runtimes, k, dscores.data());
  std::vector<float> dG(k * D);
  model.BackwardHead(*head_tape, k, dscores.data(), grad, dG.data(), kernels);
  if (options.head_only || nt == 0) return stats;
  // Each sampled segment's share of dG, then the chunks' backward passes as tasks, each into a
  // gradient and a shared part of its own.
  std::vector<std::vector<float>> dGs(S);
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t s = part_segment[i];
    if (!is_sampled[s]) continue;
    dGs[s].resize(k * D);
    SplitSegmentGradient(pb, k, sg.num_nodes, sg.num_config_nodes, parts, argmax,
                         static_cast<int32_t>(i), dG.data(), dGs[s].data());
  }
  const int64_t P = model.num_parameters();
  std::vector<AlignedFloats> chunk_grads(nt);
  std::vector<model::SharedGradient> chunk_dshared(nt);
  ForShards(several ? pool : nullptr, nt, 1, [&](int64_t t, int64_t) {
    const GstChunk& c = chunks[t];
    chunk_grads[t].assign(P, 0.0f);
    model.BackwardConfigsPooled(*sg.segments[c.segment], chunk_batches[t], *tapes[t],
                                dGs[c.segment].data() + c.begin * D, chunk_grads[t].data(),
                                &chunk_dshared[t]);
    tapes[t].reset();
  });
  // Per sampled segment, its chunks' shared parts summed in chunk order, then its shared
  // backward pass into a gradient of its own.
  std::vector<AlignedFloats> shared_grads(S);
  for (int64_t s = 0; s < S; ++s) {
    if (shared[s] == nullptr) continue;
    model::SharedGradient acc;
    model.ZeroSharedGradient(*sg.segments[s], &acc);
    for (int64_t t = 0; t < nt; ++t) {
      if (chunks[t].segment != s) continue;
      acc.AddRows(chunk_dshared[t], 0, acc.rows());
      acc.AddPooled(chunk_dshared[t]);
    }
    shared_grads[s].assign(P, 0.0f);
    model.BackwardShared(*sg.segments[s], *shared[s], &acc, shared_grads[s].data(), serial_kernels);
    shared[s].reset();
  }
  // grad += the parts in one fixed order (per sampled segment: its chunks, then its shared
  // part), so that the gradient does not depend on the pool either.
  std::vector<const float*> summands;
  for (int64_t s = 0; s < S; ++s) {
    if (shared_grads[s].empty()) continue;
    for (int64_t t = 0; t < nt; ++t) {
      if (chunks[t].segment == s) summands.push_back(chunk_grads[t].data());
    }
    summands.push_back(shared_grads[s].data());
  }
  ForShards(serial_kernels, P, int64_t{1} << 14, [&](int64_t b, int64_t e) {
    for (const float* part : summands) {
      for (int64_t x = b; x < e; ++x) grad[x] += part[x];
    }
  });
  return stats;
}

std::vector<GstChunk> PlanGstChunks(const CostModel& model, const SegmentedGraph& sg,
                                    const GstPlan& plan, int64_t k, int64_t chunk_rows) {
  std::vector<GstChunk> chunks;
  for (int64_t s = 0; s < sg.num_segments(); ++s) {
    if (plan.source[s] != GstPlan::Source::kFresh || !plan.sampled[s]) continue;
    // config_attention couples a batch's configurations: its segments stay whole (one chunk).
    const int64_t rows =
        model.supports_config_chunks() ? chunk_rows : std::numeric_limits<int64_t>::max();
    for (const auto& [begin, end] : ConfigChunks(k, model.config_rows(*sg.segments[s]), rows)) {
      chunks.push_back({s, begin, end});
    }
  }
  return chunks;
}

Status ValidateGstConfig(const TrainConfig& config, TaskKind task) {
  if (config.gst_segments_per_step() < 1) {
    return InvalidArgumentError("--gst-segments-per-step must be >= 1, got " +
                                std::to_string(config.gst_segments_per_step()));
  }
  if (!(config.gst_keep_probability() > 0 && config.gst_keep_probability() <= 1)) {
    return InvalidArgumentError("--gst-keep-probability must be in (0, 1], got " +
                                std::to_string(config.gst_keep_probability()));
  }
  if (config.gst_finetune_epochs() < 0 || config.gst_finetune_epochs() > config.epochs()) {
    return InvalidArgumentError("--gst-finetune-epochs must be in [0, --epochs], got " +
                                std::to_string(config.gst_finetune_epochs()));
  }
  if (config.gst() == TrainConfig::GST_OFF) return Status::Ok();
  if (task != TaskKind::kLayout) {
    return InvalidArgumentError("--gst is implemented for layout collections only");
  }
  if (config.model().segment_size() <= 0) {
    return InvalidArgumentError("--gst " +
                                std::string(config.gst() == TrainConfig::GST_ON ? "on" : "fresh") +
                                " needs --segment-size > 0");
  }
  if (config.model().config_node_head() > 0) {
    // GST pools each segment's node states into the head's input; the per-configurable-node
    // head reads every configurable node's state at once, which segments do not give.
    return InvalidArgumentError(
        "--gst pools the segments' node states into the graph's head, and --config-node-head " +
        std::to_string(config.model().config_node_head()) +
        " (the layout recipes' per-configurable-node head) is not segmented: train with "
        "--config-node-head 0 for --gst, or without --gst");
  }
  return Status::Ok();
}

void GstScore(const CostModel& model, const SegmentedGraph& sg, const ConfigBatch& batch,
              int64_t chunk, float* scores, ThreadPool* kernels) {
  const PoolBlocks pb = PoolBlocksOf(model.spec());
  const int64_t D = pb.width, k = batch.num_configs, S = sg.num_segments();
  const int64_t row = sg.num_config_nodes * kLayoutConfigFeatureCount;
  chunk = std::max<int64_t>(1, chunk);
  for (int64_t c0 = 0; c0 < k; c0 += chunk) {
    const int64_t kk = std::min(chunk, k - c0);
    ConfigBatch part;
    part.num_configs = kk;
    part.layout_feat.assign(batch.layout_feat.begin() + c0 * row,
                            batch.layout_feat.begin() + (c0 + kk) * row);
    std::vector<std::vector<float>> rows(S);
    std::vector<SegmentPart<float>> parts(S);
    for (int64_t s = 0; s < S; ++s) {
      rows[s].resize(kk * D);
      model.ForwardPooled(*sg.segments[s], SegmentBatch(sg, s, part), rows[s].data(), nullptr,
                          kernels);
      parts[s].g = rows[s].data();
      parts[s].rows = kk;
      parts[s].nodes = sg.seg_nodes[s];
      parts[s].config_nodes = sg.seg_config_nodes[s];
    }
    std::vector<float> G(kk * D);
    std::vector<int32_t> argmax;
    CombineSegments(pb, kk, sg.num_nodes, sg.num_config_nodes, parts, G.data(), &argmax);
    model.ForwardHead(G.data(), kk, scores + c0, nullptr, kernels);
  }
}

}  // namespace tpugraphs::train
