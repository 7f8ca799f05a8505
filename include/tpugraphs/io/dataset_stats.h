// Figures about a dataset for `tpugraphs stats` (docs/stats.md): per graph and per collection,
// graphs, nodes, edges, configurable nodes, configs, distinct configs, runtime range and an
// opcode histogram.
//
// Distinct configs are counted by a 64-bit hash of each config row (tile: the 24 float32
// features; layout: the nc x 18 int8 values), per graph; a collision would undercount by one
// with probability about k^2 / 2^65 for k configs. Layout configs are scanned block by block, so
// memory stays bounded by one ConfigBlock per thread. Runtimes are the raw config_runtime values
// (ns); spread = max / min - 1, undefined when min is 0 (e.g. hidden test labels).
// Repeated configs are the distinct configs measured more than once; what their runtimes say
// about measurement noise (noise, retest Kendall, ceilings) is filled in by a GraphStatsHook
// (`tpugraphs stats` passes eval::EstimateMeasurementNoise's, docs/stats.md).
//
// Thread-safety: ComputeDatasetStats may be called concurrently.
#ifndef TPUGRAPHS_IO_DATASET_STATS_H_
#define TPUGRAPHS_IO_DATASET_STATS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/status.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs::io {

struct GraphStats {
  std::string name, collection, split;
  TaskKind kind = TaskKind::kTile;
  int64_t nodes = 0, edges = 0, config_nodes = 0, configs = 0, distinct_configs = 0;
  // Over config_runtime; unset when the graph has no configs.
  std::optional<int64_t> runtime_min, runtime_max;
  // max / min - 1; unset when undefined (no configs, or min == 0).
  std::optional<double> runtime_spread;
  std::array<int64_t, 256> opcode_counts{};  // nodes per opcode id
  int64_t repeated_configs = 0;              // distinct configs measured more than once
  // Measurement noise (relative), retest Kendall and noise ceilings: set by a GraphStatsHook.
  std::optional<double> noise, retest_kendall, noise_ceiling_upper, noise_ceiling;
};

struct CollectionStats {
  std::string collection;
  int64_t graphs = 0, nodes = 0, edges = 0, config_nodes = 0, configs = 0, distinct_configs = 0;
  std::optional<int64_t> runtime_min, runtime_max;  // over all graphs' configs
  // Mean, min and max of the graphs' defined spreads; unset when no graph has one.
  std::optional<double> mean_spread, min_spread, max_spread;
  int64_t graphs_with_spread = 0;
  std::array<int64_t, 256> opcode_counts{};
  int64_t repeated_configs = 0;
  // The median of the graphs' noise and noise_ceiling; unset when no graph has one.
  int64_t graphs_with_noise = 0;
  std::optional<double> median_noise, median_noise_ceiling;
};

struct DatasetStats {
  std::string path;
  std::vector<GraphStats> graphs;            // dataset order
  std::vector<CollectionStats> collections;  // sorted by name
  CollectionStats total;                     // collection "total"
};

// 64-bit hash of a byte row (stable across runs and machines).
uint64_t HashBytes(const void* data, size_t size);

// Called per graph with its runtimes and one key per config (equal keys = the same config) to
// fill in the figures io cannot compute itself.
using GraphStatsHook = std::function<void(std::span<const int64_t> runtimes,
                                          std::span<const uint64_t> config_keys, GraphStats*)>;

// Computes every figure; graphs are processed in parallel with `threads` workers (0 = all cores);
// the result does not depend on the thread count. `hook`, when set, runs on every graph that has
// configs, from the workers.
StatusOr<DatasetStats> ComputeDatasetStats(const DatasetReader& reader, int threads = 0,
                                           const GraphStatsHook& hook = nullptr);

// A readable table (per-collection; per-graph rows too when per_graph), or one JSON object.
std::string FormatStatsTable(const DatasetStats& stats, bool per_graph);
std::string FormatStatsJson(const DatasetStats& stats, bool per_graph);

}  // namespace tpugraphs::io

#endif  // TPUGRAPHS_IO_DATASET_STATS_H_
