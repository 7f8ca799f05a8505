// Graph Segment Training (GST; Cao et al., NeurIPS 2023), adapted to the CostModel
// (docs/gst.md).
//
// A graph (after the optional k-hop pruning, model/pruning.h) is cut into segments of at most
// ModelSpec.segment_size nodes (model/segment.h); edges between segments are dropped, exactly as
// CostModel::Prepare does for inference, so training and evaluate/predict see the same graph.
// Each segment s yields a pooled representation G_s [k, D] (CostModel::ForwardPooled: the mean of
// its node states, their max, and the mean or sum over its configurable nodes). The graph's head
// input is recombined from the segments' (CombineSegments below) and fed to the head MLP:
//   mean block:   sum_s w_s (n_s / n) mean_s
//   max block:    max_s max_s                      (elementwise; dropped segments excluded)
//   config block: sum_s w_s (nc_s / nc) cfg_s  (config_pooling MEAN) or sum_s w_s cfg_s (SUM)
// With every segment computed fresh and w_s = 1 this is exactly the whole (cut) graph's G.
//
// Per training step and graph, `segments_per_step` segments are drawn uniformly without
// replacement and run with a tape (the only activations kept for backward). Every other segment
// contributes either
//   - its row of the historical embedding table (HistoryTable: per graph and segment, the mean
//     over the step's configurations of the segment's G_s, pushed whenever the segment was last
//     computed), kept with probability keep_probability and then weighted w_s = 1/p in the sum
//     blocks (stale embedding dropout; the estimate of the sums stays unbiased), or
//   - a fresh forward without a tape (when the table has no row for it yet, or with
//     fresh_context), which is exact and whose memory is freed segment by segment.
// Gradients reach the parameters only through the sampled segments (and the head).
//
// Thread-safety: SegmentedGraph is immutable after PrepareSegmented. HistoryTable is internally
// locked. GstStep may run concurrently for different graphs with separate tapes and grads.
#ifndef TPUGRAPHS_TRAIN_GST_H_
#define TPUGRAPHS_TRAIN_GST_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/model.pb.h"
#include "tpugraphs/model/cost_model.h"
#include "tpugraphs/train_config.pb.h"

namespace tpugraphs::train {

// A graph cut into prepared segments.
struct SegmentedGraph {
  std::string name;
  int64_t num_nodes = 0;         // after pruning
  int64_t num_config_nodes = 0;  // nc of the whole graph
  std::vector<int64_t> bounds;   // [S + 1] segment boundaries (model/segment.h)
  std::vector<std::unique_ptr<model::PreparedGraph>> segments;  // [S]
  std::vector<std::vector<int64_t>> config_slots;               // [S] indices into node_config_ids
  std::vector<int64_t> seg_nodes, seg_config_nodes;             // [S] n_s, nc_s
  int64_t num_segments() const { return static_cast<int64_t>(segments.size()); }
};

// Prunes g as the spec asks (prune_hops), partitions it with spec.segment_size (0: a single
// segment) and prepares every segment. g may come without layout config values. Layout only.
StatusOr<SegmentedGraph> PrepareSegmented(const model::CostModel& model, const Graph& g);

// The configurable-node values of segment s: [k, nc_s, 18] sliced from full [k, nc, 18].
model::ConfigBatch SegmentBatch(const SegmentedGraph& sg, int64_t s,
                                const model::ConfigBatch& full);

// Which columns of the head input G are which block (from the spec).
struct PoolBlocks {
  int64_t width = 0;  // D
  int64_t hidden = 0;
  int64_t mean = -1, max = -1, config = -1;  // column offsets (-1 = block absent)
  bool config_mean = true;                   // config block is a mean (else a sum)
};
PoolBlocks PoolBlocksOf(const ModelSpec& spec);

// One segment's part in a combination: rows [rows, D] (rows = k for a fresh segment, 1 for a
// table row shared by all configs), weight w_s, and its node counts.
template <typename T>
struct SegmentPart {
  const T* g = nullptr;
  int64_t rows = 0;
  double weight = 1.0;
  int64_t nodes = 0, config_nodes = 0;
};

// G[k, D] from the parts (formula in the file comment). argmax[k * hidden] receives the index
// of the part holding each max (the first one on ties). n, nc: the whole graph's counts.
template <typename T>
void CombineSegments(const PoolBlocks& pb, int64_t k, int64_t n, int64_t nc,
                     const std::vector<SegmentPart<T>>& parts, T* G, std::vector<int32_t>* argmax);

// The adjoint for part i: dG_i[k, D] = d G / d (part i's rows) applied to dG (rows = k only).
template <typename T>
void SplitSegmentGradient(const PoolBlocks& pb, int64_t k, int64_t n, int64_t nc,
                          const std::vector<SegmentPart<T>>& parts,
                          const std::vector<int32_t>& argmax, int32_t i, const T* dG, T* dGi);

// The historical embedding table: one row of D floats per (graph, segment), with the step at
// which it was pushed.
class HistoryTable {
 public:
  explicit HistoryTable(int64_t width) : width_(width) {}
  int64_t width() const { return width_; }
  // Stores (or replaces) the row of (graph, segment), stamped with `step`.
  void Push(int64_t graph, int64_t segment, const float* row, int64_t step);
  // Copies the row to `row` and sets *age = now - step of its push; false if never pushed.
  bool Pull(int64_t graph, int64_t segment, int64_t now, float* row, int64_t* age) const;
  int64_t entries() const;
  int64_t bytes() const;  // payload bytes
  void Clear();
  // Calls fn(graph, segment, row, step) for every row in (graph, segment) order (checkpoints).
  template <typename Fn>
  void ForEach(Fn fn) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, e] : rows_) fn(key.first, key.second, e.row.data(), e.step);
  }

 private:
  struct Entry {
    std::vector<float> row;
    int64_t step = 0;
  };
  int64_t width_;
  mutable std::mutex mu_;
  std::map<std::pair<int64_t, int64_t>, Entry> rows_;
};

// Stale embedding dropout: keep[i] ~ Bernoulli(keep_probability), i < count, from `seed`.
std::vector<uint8_t> StaleDropoutMask(int64_t count, double keep_probability, uint64_t seed);

// Rows of work (CostModel::config_rows) per chunk task of a GST step: four times the chunked
// training step's 1,536 (train/chunked_step.cc). Each task zeroes and sums a gradient of every
// parameter, and a default-model segment of 2,000 nodes has 1,700-9,300 rows per
// configuration: with 1,536 rows (16 tasks of one configuration each) a -j 1 step took
// 4.92-6.45 s of CPU for 200 steps against 4.83-6.49 s for one task per segment, with 6,144
// (5-16 tasks) 4.78-6.32 s (three alternating rounds, 2-vCPU EPYC).
inline constexpr int64_t kGstChunkRows = 6144;

struct GstOptions {
  int64_t segments_per_step = 1;  // segments back-propagated per graph and step
  double keep_probability = 0.5;  // stale embedding dropout: P(a table row is used)
  bool fresh_context = false;     // non-sampled segments always computed fresh (no table)
  bool head_only = false;         // fine-tuning: every segment fresh, gradients of the head only
  // Rows of work (CostModel::config_rows) per task of a sampled segment's configurations: the
  // chunks, and so the gradient's bits, follow the data, never the threads.
  int64_t chunk_rows = kGstChunkRows;
};

struct GstStepStats {
  double loss = 0;
  int64_t sampled = 0, fresh = 0, stale = 0, dropped = 0;
  int64_t staleness_sum = 0;  // sum of the ages (steps) of the table rows used
};

// One GST step on one graph: samples segments (stream `seed`), forms the scores of `batch`,
// the loss against runtimes[k] and ADDS the gradient to grad[num_parameters()]. `step` stamps
// pushed rows and ages pulled ones; `graph_key` identifies the graph in the table (may be null
// with fresh_context or head_only). sampled_override (optional) fixes the sampled segments.
// Each sampled segment runs in chunk tasks (PlanGstChunks): its configuration-independent pass
// once, then (segment, chunk of configurations) tasks forward and backward, each into a
// gradient of its own, summed in one fixed order, so that the result is the same to the bit
// with any pool or none.
// pool (optional): the chunk tasks, and several fresh segments' forward passes, run as tasks on
// it, and the passes that run one at a time (a segment's shared pass, a single fresh segment)
// share their rows on it. It must not be running another ParallelFor.
// kernels (optional): the pool the model's row-parallel kernels use for the head's passes, and
// for the rest when there is no `pool`; another pool than `pool`.
StatusOr<GstStepStats> GstStep(const model::CostModel& model, const SegmentedGraph& sg,
                               int64_t graph_key, const model::ConfigBatch& batch,
                               const double* runtimes, const LossSpec& loss,
                               const GstOptions& options, int64_t step, uint64_t seed,
                               HistoryTable* table, float* grad,
                               const std::vector<int64_t>* sampled_override = nullptr,
                               ThreadPool* pool = nullptr, ThreadPool* kernels = nullptr);

// The two halves of GstStep, for callers that choose how to run a step by what it computes.
// PlanGstStep draws the sampled segments and the dropout, and pulls the table rows that stand in
// for the others; RunGstStep computes the fresh segments, pushes their rows and adds the
// gradient, as GstStep does.
struct GstPlan {
  enum class Source : uint8_t { kFresh, kStale, kDropped };
  std::vector<uint8_t> sampled;                // [S] 1: run with a tape
  std::vector<Source> source;                  // [S]
  std::vector<std::vector<float>> stale_rows;  // [S] the pulled row of a stale segment
  std::vector<int64_t> ages;                   // [S] a pulled row's age in steps
  bool use_table = false;
  int64_t CountOf(Source which) const {
    return static_cast<int64_t>(std::count(source.begin(), source.end(), which));
  }
};
StatusOr<GstPlan> PlanGstStep(const SegmentedGraph& sg, int64_t graph_key,
                              const GstOptions& options, int64_t step, uint64_t seed,
                              const HistoryTable* table,
                              const std::vector<int64_t>* sampled_override = nullptr);
StatusOr<GstStepStats> RunGstStep(const model::CostModel& model, const SegmentedGraph& sg,
                                  int64_t graph_key, GstPlan plan, const model::ConfigBatch& batch,
                                  const double* runtimes, const LossSpec& loss,
                                  const GstOptions& options, int64_t step, HistoryTable* table,
                                  float* grad, ThreadPool* pool = nullptr,
                                  ThreadPool* kernels = nullptr);

// A task of a GST step: configurations [begin, end) of sampled segment `segment`.
struct GstChunk {
  int64_t segment = 0, begin = 0, end = 0;
};
// The chunk tasks of a step: for each sampled segment in order, as many chunks as its
// configurations' work (k x config_rows) has chunk_rows, of sizes that differ by one at most
// (one chunk for config_attention models).
std::vector<GstChunk> PlanGstChunks(const model::CostModel& model, const SegmentedGraph& sg,
                                    const GstPlan& plan, int64_t k, int64_t chunk_rows);

// Checks the GST options of a TrainConfig (messages name the flags); OK when gst is off.
Status ValidateGstConfig(const TrainConfig& config, TaskKind task);

// Scores of `batch` with every segment computed fresh, without tapes, `chunk` configs at a time
// (equal to CostModel::Forward on CostModel::Prepare(g) up to float rounding); the model's
// kernels on `kernels` (optional).
void GstScore(const model::CostModel& model, const SegmentedGraph& sg,
              const model::ConfigBatch& batch, int64_t chunk, float* scores,
              ThreadPool* kernels = nullptr);

}  // namespace tpugraphs::train

#endif  // TPUGRAPHS_TRAIN_GST_H_
