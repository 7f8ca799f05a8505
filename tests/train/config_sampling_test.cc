#include "tpugraphs/train/config_sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

namespace tpugraphs::train {
namespace {

TEST(SampleConfigsTest, DistinctMembersOfThePoolAndSeeded) {
  std::vector<int64_t> pool = {3, 7, 11, 19, 23, 42, 57, 60};
  std::vector<int64_t> a = SampleConfigs(pool, 5, 123);
  ASSERT_EQ(a.size(), 5u);
  std::set<int64_t> seen(a.begin(), a.end());
  EXPECT_EQ(seen.size(), 5u);
  for (int64_t x : a) EXPECT_NE(std::find(pool.begin(), pool.end(), x), pool.end());
  EXPECT_EQ(SampleConfigs(pool, 5, 123), a);
  EXPECT_NE(SampleConfigs(pool, 5, 124), a);
  // A pool no larger than k is returned whole.
  std::vector<int64_t> all = SampleConfigs(pool, 20, 1);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, pool);
}

TEST(SampleConfigsTest, RoughlyUniform) {
  std::vector<int64_t> pool(10);
  for (int i = 0; i < 10; ++i) pool[i] = i;
  std::vector<int> counts(10, 0);
  for (uint64_t s = 0; s < 2000; ++s) {
    for (int64_t x : SampleConfigs(pool, 3, s)) ++counts[x];
  }
  // Each index expected 600 times; 5 sigma of a binomial(2000, 0.3) is about 100.
  for (int c : counts) EXPECT_NEAR(c, 600, 100);
}

TEST(SplitByDistinctConfigTest, DuplicatesStayTogether) {
  // 10 configs, 6 distinct values: groups {0,3,9}, {1,4}, {2}, {5,6}, {7}, {8}.
  std::vector<uint64_t> h = {10, 20, 30, 10, 20, 40, 40, 50, 60, 10};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    ConfigSplit s = SplitByDistinctConfig(h, 0.3, seed);
    EXPECT_EQ(s.distinct_holdout, 2);  // round(0.3 * 6)
    EXPECT_EQ(s.distinct_train, 4);
    EXPECT_EQ(s.train.size() + s.holdout.size(), h.size());
    std::set<uint64_t> train_h, hold_h;
    for (int64_t i : s.train) train_h.insert(h[i]);
    for (int64_t i : s.holdout) hold_h.insert(h[i]);
    EXPECT_EQ(train_h.size(), 4u);
    EXPECT_EQ(hold_h.size(), 2u);
    for (uint64_t x : hold_h) EXPECT_EQ(train_h.count(x), 0u);
    EXPECT_TRUE(std::is_sorted(s.train.begin(), s.train.end()));
    EXPECT_TRUE(std::is_sorted(s.holdout.begin(), s.holdout.end()));
    EXPECT_EQ(SplitByDistinctConfig(h, 0.3, seed).holdout, s.holdout);
  }
  // At least one group on each side, even for extreme fractions.
  EXPECT_EQ(SplitByDistinctConfig(h, 0.0, 1).distinct_holdout, 1);
  EXPECT_EQ(SplitByDistinctConfig(h, 1.0, 1).distinct_train, 1);
}

TEST(FastestOfEachDistinctConfigTest, KeepsTheFastestMeasurementOfEachConfiguration) {
  // Configs 0..7; hashes group {0, 3, 6}, {1, 4}, {2}, {5, 7}.
  const std::vector<uint64_t> hashes = {10, 11, 12, 10, 11, 13, 10, 13};
  const std::vector<double> runtimes = {5.0, 2.0, 9.0, 4.0, 3.0, 1.0, 4.0, 1.0};
  // Whole pool: 3 (4.0 beats 5.0; 6 ties with 3 and comes later), 1, 2, 5 (tie with 7: first).
  EXPECT_EQ(FastestOfEachDistinctConfig({0, 1, 2, 3, 4, 5, 6, 7}, hashes, runtimes),
            (std::vector<int64_t>{1, 2, 3, 5}));
  // A pool without config 3: 6 is then the fastest of its group; pool order is kept.
  EXPECT_EQ(FastestOfEachDistinctConfig({7, 6, 0, 4}, hashes, runtimes),
            (std::vector<int64_t>{7, 6, 4}));
  EXPECT_TRUE(FastestOfEachDistinctConfig({}, hashes, runtimes).empty());
}

TEST(HashGraphConfigsTest, EqualRowsHashEqual) {
  Graph g;
  g.kind = TaskKind::kLayout;
  g.num_configs = 3;
  g.node_config_ids = {0, 1};
  g.node_config_feat.assign(3 * 2 * 18, 0);
  g.node_config_feat[2 * 36 + 5] = 1;  // config 2 differs from 0 and 1
  auto h = HashGraphConfigs(g);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ((*h)[0], (*h)[1]);
  EXPECT_NE((*h)[0], (*h)[2]);
  g.node_config_feat.clear();
  EXPECT_FALSE(HashGraphConfigs(g).ok());
}

TEST(ConfigChunksTest, AsManyAsTheWorkHasRowsOfSizesDifferingByOne) {
  using Chunks = std::vector<std::pair<int64_t, int64_t>>;
  // 7 configurations of 300 rows, 1,000 rows a chunk: ceil(2,100 / 1,000) = 3 chunks.
  EXPECT_EQ(ConfigChunks(7, 300, 1000), (Chunks{{0, 2}, {2, 4}, {4, 7}}));
  EXPECT_EQ(ConfigChunks(6, 500, 1000), (Chunks{{0, 2}, {2, 4}, {4, 6}}));  // exactly 3,000 rows
  // At most one chunk per configuration, at least one chunk.
  EXPECT_EQ(ConfigChunks(3, 5000, 1000), (Chunks{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(ConfigChunks(4, 1, 1000), (Chunks{{0, 4}}));
  EXPECT_EQ(ConfigChunks(4, 10, std::numeric_limits<int64_t>::max()), (Chunks{{0, 4}}));
  // No work rows or no rows per chunk count as one.
  EXPECT_EQ(ConfigChunks(2, 0, 0), (Chunks{{0, 1}, {1, 2}}));
  EXPECT_TRUE(ConfigChunks(0, 100, 1000).empty());
}

}  // namespace
}  // namespace tpugraphs::train
