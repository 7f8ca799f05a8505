// Segment partitioning (model/segment.h) and k-hop pruning (model/pruning.h).
#include "tpugraphs/model/segment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "tpugraphs/common/rng.h"
#include "tpugraphs/model/pruning.h"

namespace tpugraphs::model {
namespace {

std::vector<int64_t> Partition(int64_t n, const std::vector<int64_t>& splits, int64_t cap) {
  auto b = PartitionSegments(n, splits, cap, "test");
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? *b : std::vector<int64_t>{};
}

TEST(SegmentPartitionTest, SmallExamples) {
  EXPECT_EQ(Partition(10, {0, 3, 7, 10}, 5), (std::vector<int64_t>{0, 3, 7, 10}));
  EXPECT_EQ(Partition(10, {0, 3, 7, 10}, 7), (std::vector<int64_t>{0, 7, 10}));
  EXPECT_EQ(Partition(10, {0, 3, 7, 10}, 100), (std::vector<int64_t>{0, 10}));
  // The interval [0, 3) is longer than the cap: cut into two near-equal pieces.
  EXPECT_EQ(Partition(10, {3, 7}, 2), (std::vector<int64_t>{0, 1, 3, 5, 7, 8, 10}));
  // No node_splits: near-equal pieces.
  EXPECT_EQ(Partition(10, {}, 4), (std::vector<int64_t>{0, 3, 6, 10}));
  EXPECT_EQ(Partition(0, {}, 4), (std::vector<int64_t>{0}));
}

TEST(SegmentPartitionTest, RejectsBadArguments) {
  EXPECT_FALSE(PartitionSegments(10, {}, 0, "g").ok());
  auto s = PartitionSegments(10, {0, 5, 3, 10}, 4, "graph x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("graph x"), std::string::npos);
  EXPECT_FALSE(PartitionSegments(10, {0, 11}, 4, "g").ok());
}

TEST(SegmentPartitionTest, RandomPropertiesHold) {
  Rng rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng.UniformInt(400));
    const int64_t cap = 1 + static_cast<int64_t>(rng.UniformInt(60));
    std::vector<int64_t> splits;
    if (rng.UniformInt(4) != 0) {
      splits.push_back(0);
      for (int64_t v = 1; v < n; ++v) {
        if (rng.UniformInt(15) == 0) splits.push_back(v);
      }
      splits.push_back(n);
    }
    const std::vector<int64_t> b = Partition(n, splits, cap);
    ASSERT_GE(b.size(), 2u);
    ASSERT_EQ(b.front(), 0);
    ASSERT_EQ(b.back(), n);
    // Every node in exactly one segment; sizes within the cap.
    std::vector<int> count(n, 0);
    for (size_t s = 0; s + 1 < b.size(); ++s) {
      ASSERT_LT(b[s], b[s + 1]);
      ASSERT_LE(b[s + 1] - b[s], cap);
      for (int64_t v = b[s]; v < b[s + 1]; ++v) ++count[v];
    }
    for (int64_t v = 0; v < n; ++v) ASSERT_EQ(count[v], 1);
    const std::vector<int32_t> seg = SegmentOfNodes(b);
    for (size_t s = 0; s + 1 < b.size(); ++s) {
      for (int64_t v = b[s]; v < b[s + 1]; ++v) ASSERT_EQ(seg[v], static_cast<int32_t>(s));
    }
    if (splits.empty()) {
      // Near-equal pieces, as few as the cap allows.
      ASSERT_EQ(static_cast<int64_t>(b.size()) - 1, (n + cap - 1) / cap);
      continue;
    }
    // node_splits respected: a boundary is a split point unless it cuts an interval longer
    // than the cap; and a node_splits interval within the cap is never cut.
    std::set<int64_t> split_set(splits.begin(), splits.end());
    for (size_t i = 0; i + 1 < splits.size(); ++i) {
      const int64_t a = splits[i], e = splits[i + 1];
      if (e - a > cap) continue;
      for (int64_t x : b) ASSERT_FALSE(x > a && x < e) << "interval cut at " << x;
    }
    for (int64_t x : b) {
      if (split_set.count(x)) continue;
      auto hi = split_set.upper_bound(x);
      auto lo = std::prev(hi);
      ASSERT_GT(*hi - *lo, cap) << "boundary " << x << " inside a short interval";
    }
    // Greedy merging: two consecutive segments never fit into one when both end on splits.
    for (size_t s = 0; s + 2 < b.size(); ++s) {
      if (split_set.count(b[s]) && split_set.count(b[s + 1]) && split_set.count(b[s + 2])) {
        ASSERT_GT(b[s + 2] - b[s], cap);
      }
    }
  }
}

Graph LayoutGraph(int64_t n, uint64_t seed) {
  Rng rng(seed);
  Graph g;
  g.name = "g";
  g.kind = TaskKind::kLayout;
  g.collection = "layout:synth:random";
  for (int64_t v = 0; v < n; ++v) {
    g.node_opcode.push_back(static_cast<uint8_t>(rng.UniformInt(30)));
    for (int f = 0; f < kNodeFeatureCount; ++f) g.node_feat.push_back(float(v * 1000 + f));
  }
  for (int64_t u = 1; u < n; ++u) {
    const int64_t deg = 1 + static_cast<int64_t>(rng.UniformInt(2));
    for (int64_t d = 0; d < deg; ++d) {
      g.edge_index.push_back(u);
      g.edge_index.push_back(static_cast<int64_t>(rng.UniformInt(u)));
    }
  }
  g.node_splits = {0, n / 3, n / 2, n};
  g.node_config_ids = {n - 2, 1, n / 2};
  g.num_configs = 2;
  g.config_runtime = {5, 7};
  for (int i = 0; i < 2 * 3 * 18; ++i) g.node_config_feat.push_back(static_cast<int8_t>(i % 5));
  return g;
}

TEST(SegmentExtractTest, InducedSubgraphAndConfigSlots) {
  const Graph g = LayoutGraph(40, 3);
  std::vector<int64_t> slots;
  const Graph s = ExtractSegment(g, 10, 25, &slots);
  ASSERT_EQ(s.num_nodes(), 15);
  for (int64_t v = 0; v < 15; ++v) {
    EXPECT_EQ(s.node_opcode[v], g.node_opcode[v + 10]);
    EXPECT_EQ(s.node_feat[v * kNodeFeatureCount + 3],
              g.node_feat[(v + 10) * kNodeFeatureCount + 3]);
  }
  std::multiset<std::pair<int64_t, int64_t>> want, got;
  for (int64_t e = 0; e < g.num_edges(); ++e) {
    const int64_t u = g.edge_index[2 * e], v = g.edge_index[2 * e + 1];
    if (u >= 10 && u < 25 && v >= 10 && v < 25) want.insert({u - 10, v - 10});
  }
  for (int64_t e = 0; e < s.num_edges(); ++e)
    got.insert({s.edge_index[2 * e], s.edge_index[2 * e + 1]});
  EXPECT_EQ(got, want);
  // node_config_ids {38, 1, 20}: only 20 is inside, slot 2.
  EXPECT_EQ(s.node_config_ids, (std::vector<int64_t>{10}));
  EXPECT_EQ(slots, (std::vector<int64_t>{2}));
  EXPECT_EQ(s.node_splits, (std::vector<int64_t>{3, 10}));  // 13 and 20, shifted by 10
}

TEST(SegmentExtractTest, DropCutEdgesKeepsOnlyInnerEdges) {
  const Graph g = LayoutGraph(50, 4);
  const std::vector<int64_t> b = {0, 12, 30, 50};
  std::vector<int64_t> e = g.edge_index;
  const int64_t removed = DropCutEdges(b, &e);
  const std::vector<int32_t> seg = SegmentOfNodes(b);
  int64_t cut = 0;
  std::vector<int64_t> want;
  for (int64_t i = 0; i < g.num_edges(); ++i) {
    const int64_t u = g.edge_index[2 * i], v = g.edge_index[2 * i + 1];
    if (seg[u] != seg[v]) {
      ++cut;
    } else {
      want.push_back(u);
      want.push_back(v);
    }
  }
  EXPECT_GT(cut, 0);
  EXPECT_EQ(removed, cut);
  EXPECT_EQ(e, want);
}

// Brute-force undirected hop distances from the configurable nodes.
std::vector<int64_t> BruteDistances(const Graph& g) {
  const int64_t n = g.num_nodes();
  std::vector<int64_t> dist(n, -1);
  std::deque<int64_t> q;
  for (int64_t v : g.node_config_ids) dist[v] = 0, q.push_back(v);
  while (!q.empty()) {
    const int64_t v = q.front();
    q.pop_front();
    for (int64_t e = 0; e < g.num_edges(); ++e) {  // O(n m) on purpose
      for (int side = 0; side < 2; ++side) {
        if (g.edge_index[2 * e + side] != v) continue;
        const int64_t w = g.edge_index[2 * e + 1 - side];
        if (dist[w] < 0) dist[w] = dist[v] + 1, q.push_back(w);
      }
    }
  }
  return dist;
}

TEST(SegmentPruningTest, KeepsExactlyTheKHopNeighbourhood) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    Graph g = LayoutGraph(120, seed);
    // Sparser graph so that hops matter: keep one edge per node, to a nearby node.
    g.edge_index.clear();
    Rng rng(seed);
    for (int64_t u = 1; u < 120; ++u) {
      g.edge_index.push_back(u);
      g.edge_index.push_back(std::max<int64_t>(0, u - 1 - static_cast<int64_t>(rng.UniformInt(4))));
    }
    const std::vector<int64_t> dist = BruteDistances(g);
    for (int hops = 0; hops <= 4; ++hops) {
      std::vector<int64_t> kept;
      auto p = PruneToConfigNeighbourhood(g, hops, &kept);
      ASSERT_TRUE(p.ok()) << p.status().message();
      std::vector<int64_t> want;
      for (int64_t v = 0; v < g.num_nodes(); ++v) {
        if (dist[v] >= 0 && dist[v] <= hops) want.push_back(v);
      }
      ASSERT_EQ(kept, want) << "hops " << hops;
      ASSERT_EQ(p->num_nodes(), static_cast<int64_t>(kept.size()));
      std::map<int64_t, int64_t> new_id;
      for (size_t i = 0; i < kept.size(); ++i) new_id[kept[i]] = static_cast<int64_t>(i);
      for (size_t i = 0; i < kept.size(); ++i) {
        ASSERT_EQ(p->node_opcode[i], g.node_opcode[kept[i]]);
        ASSERT_EQ(p->node_feat[i * kNodeFeatureCount + 5],
                  g.node_feat[kept[i] * kNodeFeatureCount + 5]);
      }
      std::vector<int64_t> want_edges;
      for (int64_t e = 0; e < g.num_edges(); ++e) {
        const int64_t u = g.edge_index[2 * e], v = g.edge_index[2 * e + 1];
        if (new_id.count(u) && new_id.count(v)) {
          want_edges.push_back(new_id[u]);
          want_edges.push_back(new_id[v]);
        }
      }
      ASSERT_EQ(p->edge_index, want_edges);
      ASSERT_EQ(p->node_config_ids.size(), g.node_config_ids.size());
      for (size_t j = 0; j < g.node_config_ids.size(); ++j) {
        ASSERT_EQ(kept[p->node_config_ids[j]], g.node_config_ids[j]);
      }
      // node_splits: kept nodes below each boundary, strictly increasing after the first.
      std::vector<int64_t> want_splits;
      for (int64_t b : g.node_splits) {
        const int64_t c = std::lower_bound(kept.begin(), kept.end(), b) - kept.begin();
        if (want_splits.empty() || c > want_splits.back()) want_splits.push_back(c);
      }
      ASSERT_EQ(p->node_splits, want_splits);
      ASSERT_EQ(p->node_config_feat, g.node_config_feat);
      ASSERT_EQ(p->config_runtime, g.config_runtime);
      ASSERT_TRUE(ValidateGraph(*p, "pruned").ok()) << ValidateGraph(*p, "pruned").message();
    }
  }
}

TEST(SegmentPruningTest, TileGraphsAndErrors) {
  Graph t;
  t.name = "t";
  t.kind = TaskKind::kTile;
  t.node_opcode = {1, 2};
  t.node_feat.assign(2 * kNodeFeatureCount, 0.0f);
  t.edge_index = {1, 0};
  auto same = PruneToConfigNeighbourhood(t, 1, nullptr);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->num_nodes(), 2);
  EXPECT_FALSE(PruneToConfigNeighbourhood(t, -1, nullptr).ok());
  Graph g = LayoutGraph(10, 1);
  g.edge_index.push_back(3);
  g.edge_index.push_back(99);
  auto bad = PruneToConfigNeighbourhood(g, 1, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("outside"), std::string::npos);
}

}  // namespace
}  // namespace tpugraphs::model
