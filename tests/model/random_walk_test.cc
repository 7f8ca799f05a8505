#include "tpugraphs/model/random_walk.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tpugraphs/common/rng.h"

namespace tpugraphs::model {
namespace {

// CSR of the undirected multigraph with the given edges (each listed once, taken both ways).
struct Csr {
  std::vector<int64_t> ptr, adj;
};
Csr Undirected(int64_t n, const std::vector<std::pair<int64_t, int64_t>>& edges) {
  std::vector<std::vector<int64_t>> nb(n);
  for (const auto& [a, b] : edges) {
    nb[a].push_back(b);
    nb[b].push_back(a);
  }
  Csr c;
  c.ptr.push_back(0);
  for (const auto& l : nb) {
    c.adj.insert(c.adj.end(), l.begin(), l.end());
    c.ptr.push_back(static_cast<int64_t>(c.adj.size()));
  }
  return c;
}

TEST(RandomWalkTest, ClosedFormsOnSmallGraphs) {
  // A chain 0 - 1 - 2 and an isolated node 3. From 0: after 2 steps back with 1/2 (0 -> 1 -> 0),
  // after 3 steps never (the chain is bipartite), after 4 steps 1/2 * 1/2 + 1/2 * 1/2 = 1/2.
  // From the middle: after 2 steps 1 (either end leads back). The isolated node stays put.
  const Csr c = Undirected(4, {{0, 1}, {1, 2}});
  const std::vector<float> p = RandomWalkReturnProbabilities(4, c.ptr, c.adj, {0, 1, 3}, 3);
  // Halves and quarters are exact in binary, so the values compare exactly.
  EXPECT_EQ(p, (std::vector<float>{0.5f, 0.0f, 0.5f, 1.0f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f}));
  // The centre of a star with 4 leaves comes back after 2 steps always; a leaf with 1/4.
  const Csr star = Undirected(5, {{0, 1}, {0, 2}, {0, 3}, {0, 4}});
  const std::vector<float> s = RandomWalkReturnProbabilities(5, star.ptr, star.adj, {0, 2}, 1);
  EXPECT_FLOAT_EQ(s[0], 1.0f);
  EXPECT_FLOAT_EQ(s[1], 0.25f);
  // A triangle: back after 3 steps with 2 * (1/2)^3 = 1/4; a repeated edge counts twice.
  const Csr tri = Undirected(3, {{0, 1}, {1, 2}, {2, 0}});
  EXPECT_FLOAT_EQ(RandomWalkReturnProbabilities(3, tri.ptr, tri.adj, {0}, 2)[1], 0.25f);
  const Csr twice = Undirected(3, {{0, 1}, {0, 1}, {0, 2}});
  // From 0: to 1 with 2/3, to 2 with 1/3; both lead straight back.
  EXPECT_FLOAT_EQ(RandomWalkReturnProbabilities(3, twice.ptr, twice.adj, {0}, 1)[0], 1.0f);
  // From 2: to 0, then back to 2 with 1/3.
  EXPECT_FLOAT_EQ(RandomWalkReturnProbabilities(3, twice.ptr, twice.adj, {2}, 1)[0], 1.0f / 3);
}

TEST(RandomWalkTest, SparsePropagationMatchesTheMatrixPower) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Rng rng(seed);
    const int64_t n = 12 + static_cast<int64_t>(rng.UniformInt(30));
    std::vector<std::pair<int64_t, int64_t>> edges;
    // A program-like DAG (each node reads 0-2 earlier ones), so some nodes stay isolated.
    for (int64_t u = 1; u < n; ++u) {
      const int64_t reads = static_cast<int64_t>(rng.UniformInt(3));
      for (int64_t r = 0; r < reads; ++r) {
        edges.push_back({u, static_cast<int64_t>(rng.UniformInt(static_cast<uint64_t>(u)))});
      }
    }
    const Csr c = Undirected(n, edges);
    const std::vector<int64_t> nodes = rng.SampleWithoutReplacement(n, 5);
    for (int steps : {1, 4, 9}) {
      const std::vector<float> sparse =
          RandomWalkReturnProbabilities(n, c.ptr, c.adj, nodes, steps);
      const std::vector<float> dense =
          RandomWalkReturnProbabilitiesDense(n, c.ptr, c.adj, nodes, steps);
      ASSERT_EQ(sparse.size(), dense.size());
      for (size_t i = 0; i < sparse.size(); ++i) {
        EXPECT_NEAR(sparse[i], dense[i], 1e-6)
            << "seed " << seed << " steps " << steps << " i " << i;
        EXPECT_GE(sparse[i], 0.0f);
        EXPECT_LE(sparse[i], 1.0f);
      }
    }
  }
}

TEST(RandomWalkTest, NoStepsOrNoNodesGiveNothing) {
  const Csr c = Undirected(3, {{0, 1}});
  EXPECT_TRUE(RandomWalkReturnProbabilities(3, c.ptr, c.adj, {0, 1}, 0).empty());
  EXPECT_TRUE(RandomWalkReturnProbabilities(3, c.ptr, c.adj, {}, 4).empty());
}

}  // namespace
}  // namespace tpugraphs::model
