#include "tpugraphs/train/config_sampling.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "tpugraphs/common/hash.h"
#include "tpugraphs/common/rng.h"

namespace tpugraphs::train {

std::vector<int64_t> SampleConfigs(const std::vector<int64_t>& pool, int64_t k, uint64_t seed) {
  Rng rng(seed);
  const int64_t n = static_cast<int64_t>(pool.size());
  std::vector<int64_t> picks = rng.SampleWithoutReplacement(n, std::min(k, n));
  for (int64_t& p : picks) p = pool[p];
  return picks;
}

std::vector<uint64_t> HashConfigRows(const void* values, int64_t count, int64_t row_bytes) {
  std::vector<uint64_t> out(count);
  const auto* bytes = static_cast<const unsigned char*>(values);
  for (int64_t i = 0; i < count; ++i) {
    out[i] = Fnv1a(bytes + i * row_bytes, static_cast<size_t>(row_bytes));
  }
  return out;
}

StatusOr<std::vector<uint64_t>> HashGraphConfigs(const Graph& g) {
  if (g.is_tile()) {
    return HashConfigRows(g.config_feat.data(), g.num_configs,
                          kTileConfigFeatureCount * static_cast<int64_t>(sizeof(float)));
  }
  const int64_t row = g.num_config_nodes() * kLayoutConfigFeatureCount;
  if (static_cast<int64_t>(g.node_config_feat.size()) != g.num_configs * row) {
    return FailedPreconditionError("graph " + g.Id() +
                                   ": layout config values are not loaded, cannot group configs");
  }
  return HashConfigRows(g.node_config_feat.data(), g.num_configs, row);
}

ConfigSplit SplitByDistinctConfig(const std::vector<uint64_t>& hashes, double holdout_fraction,
                                  uint64_t seed) {
  // Groups in order of first appearance, so the result depends only on the hashes and the seed.
  std::unordered_map<uint64_t, int64_t> group_of;
  std::vector<int64_t> group(hashes.size());
  int64_t num_groups = 0;
  for (size_t i = 0; i < hashes.size(); ++i) {
    auto [it, inserted] = group_of.emplace(hashes[i], num_groups);
    if (inserted) ++num_groups;
    group[i] = it->second;
  }
  int64_t num_holdout = static_cast<int64_t>(std::llround(holdout_fraction * num_groups));
  if (num_groups >= 2) num_holdout = std::clamp<int64_t>(num_holdout, 1, num_groups - 1);
  std::vector<char> held(num_groups, 0);
  Rng rng(seed);
  for (int64_t g : rng.SampleWithoutReplacement(num_groups, num_holdout)) held[g] = 1;
  ConfigSplit split;
  split.distinct_holdout = num_holdout;
  split.distinct_train = num_groups - num_holdout;
  for (size_t i = 0; i < hashes.size(); ++i) {
    (held[group[i]] ? split.holdout : split.train).push_back(static_cast<int64_t>(i));
  }
  return split;
}

std::vector<int64_t> FastestOfEachDistinctConfig(const std::vector<int64_t>& pool,
                                                 const std::vector<uint64_t>& hashes,
                                                 const std::vector<double>& runtimes) {
  std::unordered_map<uint64_t, int64_t> fastest;  // hash -> config
  fastest.reserve(pool.size());
  for (int64_t c : pool) {
    auto [it, inserted] = fastest.emplace(hashes[c], c);
    if (!inserted && runtimes[c] < runtimes[it->second]) it->second = c;
  }
  std::vector<int64_t> out;
  out.reserve(fastest.size());
  for (int64_t c : pool) {
    if (fastest.at(hashes[c]) == c) out.push_back(c);
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> ConfigChunks(int64_t k, int64_t per_config,
                                                      int64_t rows_per_chunk) {
  std::vector<std::pair<int64_t, int64_t>> chunks;
  if (k < 1) return chunks;
  const int64_t work = k * std::max<int64_t>(1, per_config);
  const int64_t rows = std::max<int64_t>(1, rows_per_chunk);
  const int64_t n = std::clamp<int64_t>((work - 1) / rows + 1, 1, k);  // the ceiling, overflow-free
  for (int64_t i = 0; i < n; ++i) chunks.emplace_back(i * k / n, (i + 1) * k / n);
  return chunks;
}

}  // namespace tpugraphs::train
