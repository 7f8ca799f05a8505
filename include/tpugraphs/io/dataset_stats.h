// Figures about a dataset for `tpugraphs stats` (docs/stats.md): per graph and per collection,
// graphs, nodes, edges, configurable nodes, configs, distinct configs, runtime range and an
// opcode histogram.
//
// Distinct configs are counted by a 64-bit hash of each config row (tile: the 24 float32
// features; layout: the nc x 18 int8 values), per graph; a collision would undercount by one
// with probability about k^2 / 2^65 for k configs. Layout configs are scanned block by block, so
// memory stays bounded by one ConfigBlock per thread. Runtimes are the raw config_runtime values
// (ns); spread = max / min - 1, undefined when min is 0 (e.g. hidden test labels).
//
// Thread-safety: ComputeDatasetStats may be called concurrently.
#ifndef TPUGRAPHS_IO_DATASET_STATS_H_
#define TPUGRAPHS_IO_DATASET_STATS_H_

#include <array>
#include <cstdint>
#include <optional>
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
};

struct CollectionStats {
  std::string collection;
  int64_t graphs = 0, nodes = 0, edges = 0, config_nodes = 0, configs = 0, distinct_configs = 0;
  std::optional<int64_t> runtime_min, runtime_max;  // over all graphs' configs
  // Mean, min and max of the graphs' defined spreads; unset when no graph has one.
  std::optional<double> mean_spread, min_spread, max_spread;
  int64_t graphs_with_spread = 0;
  std::array<int64_t, 256> opcode_counts{};
};

struct DatasetStats {
  std::string path;
  std::vector<GraphStats> graphs;            // dataset order
  std::vector<CollectionStats> collections;  // sorted by name
  CollectionStats total;                     // collection "total"
};

// 64-bit hash of a byte row (stable across runs and machines).
uint64_t HashBytes(const void* data, size_t size);

// Computes every figure; graphs are processed in parallel with `threads` workers (0 = all cores);
// the result does not depend on the thread count.
StatusOr<DatasetStats> ComputeDatasetStats(const DatasetReader& reader, int threads = 0);

// A readable table (per-collection; per-graph rows too when per_graph), or one JSON object.
std::string FormatStatsTable(const DatasetStats& stats, bool per_graph);
std::string FormatStatsJson(const DatasetStats& stats, bool per_graph);

}  // namespace tpugraphs::io

#endif  // TPUGRAPHS_IO_DATASET_STATS_H_
