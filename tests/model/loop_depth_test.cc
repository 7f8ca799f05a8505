// WhileLoopDepths against a hand-built graph and against the synthetic cost model's own count of
// how often each computation runs (synth::AnalyzeModule), on generated programs with loops.
#include "tpugraphs/model/loop_depth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "model/generated_program.h"
#include "tpugraphs/synth/cost_model.h"

namespace tpugraphs::model {
namespace {

// Nodes with opcodes and roots; edges [consumer, producer].
Graph MakeGraph(const std::vector<uint8_t>& opcodes, const std::vector<int>& roots,
                const std::vector<int64_t>& edges) {
  Graph g;
  g.kind = TaskKind::kLayout;
  g.node_opcode = opcodes;
  g.node_feat.assign(opcodes.size() * kNodeFeatureCount, 0.0f);
  for (int r : roots) g.node_feat[r * kNodeFeatureCount] = 1.0f;
  g.edge_index = edges;
  return g;
}

TEST(LoopDepthTest, NestedLoopsByHand) {
  constexpr uint8_t kW = kWhileOpcodeId, kX = 1;
  // Inner body: 0 (param) <- 1 (root). Outer body: 2 (param) <- 3 (inner while, calls root 1)
  // <- 4 (root). Condition of the outer loop: 5 (root). Entry: 6 (init) <- 7 (outer while,
  // calls roots 4 and 5) <- 8 (entry root, not in any loop).
  Graph g = MakeGraph({kX, kX, kX, kW, kX, kX, kX, kW, kX}, {1, 4, 5, 8},
                      {1, 0, 3, 2, 3, 1, 4, 3, 7, 6, 7, 4, 7, 5, 8, 7});
  EXPECT_EQ(WhileLoopDepths(g), (std::vector<int32_t>{2, 2, 1, 1, 1, 1, 0, 0, 0}));
  g.node_config_ids = {1, 4, 8};
  EXPECT_EQ(ConfigNodeLoopDepths(g), (std::vector<int32_t>{2, 1, 0}));
  // A while whose operand is not a root (its init tuple) does not count that operand's side.
  Graph flat = MakeGraph({kX, kW}, {}, {1, 0});
  EXPECT_EQ(WhileLoopDepths(flat), (std::vector<int32_t>{0, 0}));
  // No node features: zeros, no crash; out-of-range edges are skipped.
  Graph bare = g;
  bare.node_feat.clear();
  EXPECT_EQ(WhileLoopDepths(bare), std::vector<int32_t>(9, 0));
  Graph bad = g;
  bad.edge_index.push_back(3);
  bad.edge_index.push_back(99);
  EXPECT_EQ(WhileLoopDepths(bad), WhileLoopDepths(g));
}

// The synthetic cost model runs a while body trip_count times per execution of its caller, so
// a computation inside k loops runs trip_count^k times.
TEST(LoopDepthTest, AgreesWithTheSyntheticCostModelsExecutionCounts) {
  const double trips = synth::TpuConstants{}.while_trip_count;
  int64_t looped_config_nodes = 0, checked = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const testutil::GeneratedProgram p = testutil::MakeGeneratedProgram(1500, seed);
    ASSERT_FALSE(::testing::Test::HasFailure());
    const Graph& g = p.graph;
    const synth::ModuleAnalysis& a = p.analysis;
    const std::vector<int32_t> depth = WhileLoopDepths(g);
    ASSERT_EQ(depth.size(), a.nodes.size());
    for (size_t v = 0; v < depth.size(); ++v) {
      const synth::ComputationInfo& c = a.computations[a.nodes[v].computation];
      if (c.executions <= 0) continue;  // fused or inlined computations: priced by the caller
      const double want = std::log(c.executions) / std::log(trips);
      ASSERT_NEAR(depth[v], want, 1e-9) << "seed " << seed << " node " << v << " in " << c.name;
      ++checked;
    }
    for (int64_t v : synth::ConfigurableNodes(a)) looped_config_nodes += depth[v] > 0;
  }
  EXPECT_GT(checked, 10000);
  EXPECT_GT(looped_config_nodes, 0) << "the programs must contain loops for the test to mean much";
}

}  // namespace
}  // namespace tpugraphs::model
