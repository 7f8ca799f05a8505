// Which configurations of a graph the trainer looks at: per-step sampling (uniform without
// replacement from a pool), and the split of a graph's configurations into a training part and a
// held-out part by DISTINCT configuration, so that a configuration measured twice never ends up
// on both sides (the real layout dump repeats some configurations).
//
// Every random decision takes an explicit seed (derived with DeriveSeed from the run's master
// seed), so results do not depend on the thread count or on the order graphs are visited.
//
// Thread-safety: free functions; reentrant.
#ifndef TPUGRAPHS_TRAIN_CONFIG_SAMPLING_H_
#define TPUGRAPHS_TRAIN_CONFIG_SAMPLING_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"

namespace tpugraphs::train {

// k configuration indices drawn uniformly without replacement from `pool` (all of them, in a
// random order, if the pool holds k or fewer).
std::vector<int64_t> SampleConfigs(const std::vector<int64_t>& pool, int64_t k, uint64_t seed);

// 64-bit FNV-1a hash of each configuration's values: the tile config_feat row (24 floats) or the
// layout node_config_feat slice (nc * 18 bytes). Equal configurations hash equally; distinct ones
// collide with probability ~2^-64 per pair, which grouping accepts.
// `values` points at `count` rows of `row_bytes` bytes each.
std::vector<uint64_t> HashConfigRows(const void* values, int64_t count, int64_t row_bytes);

// Hashes of all configurations of a graph that carries its config values (tile, or layout with
// node_config_feat loaded). FailedPrecondition for a layout graph without loaded values.
StatusOr<std::vector<uint64_t>> HashGraphConfigs(const Graph& g);

struct ConfigSplit {
  std::vector<int64_t> train;    // config indices, ascending
  std::vector<int64_t> holdout;  // config indices, ascending
  int64_t distinct_train = 0;    // number of distinct configurations on each side
  int64_t distinct_holdout = 0;
};

// Groups configurations by hash and assigns round(holdout_fraction * groups) whole groups, chosen
// uniformly with `seed`, to the held-out side (at least one group each side when there are two or
// more groups). Every configuration of a group lands on the same side.
ConfigSplit SplitByDistinctConfig(const std::vector<uint64_t>& hashes, double holdout_fraction,
                                  uint64_t seed);

// The configurations of `pool` keeping one per distinct hash: the one with the lowest runtime
// (the earliest in `pool` among equal runtimes), in pool order. `hashes` and `runtimes` are
// indexed by configuration.
std::vector<int64_t> FastestOfEachDistinctConfig(const std::vector<int64_t>& pool,
                                                 const std::vector<uint64_t>& hashes,
                                                 const std::vector<double>& runtimes);

// A graph's k configurations cut into chunks of work for tasks: as many chunks as the k
// configurations' rows of work (per_config each, at least 1) make rows_per_chunk, at least one and
// at most k, of sizes that differ by one at most; [begin, end) in order, empty for k < 1. The
// chunks follow the data alone, never the threads (the chunked training step, Graph Segment
// Training's chunk tasks).
std::vector<std::pair<int64_t, int64_t>> ConfigChunks(int64_t k, int64_t per_config,
                                                      int64_t rows_per_chunk);

}  // namespace tpugraphs::train

#endif  // TPUGRAPHS_TRAIN_CONFIG_SAMPLING_H_
