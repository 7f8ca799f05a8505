// Layout flow (ModelSpec.layout_flow_features): the flow read from a hand-built graph and from
// generated programs against the synthetic cost model's own layout regions and exit copies, the
// per-configuration features by hand, slicing for segments, the whole graph's flow surviving
// pruning, and finite-difference gradients of every parameter with the features on.
#include "tpugraphs/model/layout_flow.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/generated_program.h"
#include "model/model_test_util.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/ingest/opcodes.h"
#include "tpugraphs/model/cost_model.h"
#include "tpugraphs/model/gnn.h"
#include "tpugraphs/model/pruning.h"
#include "tpugraphs/synth/cost_model.h"

namespace tpugraphs::model {
namespace {

using internal::Gnn;

constexpr int kDims = 21, kMinorToMajor = 134;

struct HandNode {
  const char* opcode;
  std::vector<float> dims;  // rank <= 6; layout descending
  std::vector<int64_t> operands;
  bool root = false;
};

Graph HandGraph(const std::vector<HandNode>& nodes, std::vector<int64_t> config_ids) {
  Graph g;
  g.kind = TaskKind::kLayout;
  const int64_t n = static_cast<int64_t>(nodes.size());
  g.node_feat.assign(n * kNodeFeatureCount, 0.0f);
  for (int64_t v = 0; v < n; ++v) {
    const HandNode& h = nodes[v];
    g.node_opcode.push_back(ingest::OpcodeId(h.opcode));
    EXPECT_NE(g.node_opcode.back(), 0) << h.opcode;
    float* f = g.node_feat.data() + v * kNodeFeatureCount;
    f[0] = h.root ? 1.0f : 0.0f;
    const int rank = static_cast<int>(h.dims.size());
    for (int i = 0; i < 6; ++i) {
      f[kDims + i] = i < rank ? h.dims[i] : 0.0f;
      f[kMinorToMajor + i] = i < rank ? static_cast<float>(rank - 1 - i) : -1.0f;
    }
    for (int64_t p : h.operands) {
      g.edge_index.push_back(v);
      g.edge_index.push_back(p);
    }
  }
  g.node_config_ids = std::move(config_ids);
  return g;
}

// 0 parameter [4, 256]; 1 conv A (0, 0); 2 add (1, 0) and 3 tanh (2): A's followers;
// 4 conv B (3, 0): input from A through its followers, kernel fixed; 5 reduce (3): a fixed-layout
// reader of A's group; 6 dot C (0, 1): kernel straight from A; 7 reshape D (4), a root: reads B
// as its input (so B has no exit of its own) and is one; 8 multiply (1) of other dims: not a
// follower; 9 negate (8) follows nothing.
Graph FlowGraph() {
  return HandGraph({{"parameter", {4, 256}, {}},
                    {"convolution", {4, 256}, {0, 0}},
                    {"add", {4, 256}, {1, 0}},
                    {"tanh", {4, 256}, {2}},
                    {"convolution", {4, 256}, {3, 0}},
                    {"reduce", {4}, {3}},
                    {"dot", {4, 256}, {0, 1}},
                    {"reshape", {1024}, {4}, true},
                    {"multiply", {2, 256}, {1}},
                    {"negate", {2, 256}, {8}}},
                   {1, 4, 6, 7});
}

TEST(LayoutFlowTest, FlowByHand) {
  const LayoutFlow f = ConfigLayoutFlow(FlowGraph());
  ASSERT_EQ(f.size(), 4);
  // Sources [input, kernel] per configurable node A, B, C, D.
  EXPECT_EQ(f.source, (std::vector<int32_t>{-1, -1, 0, -1, -1, 0, 1, -1}));
  const float follower_a = static_cast<float>(std::log1p(2.0 * 4 * 256) / 16);
  EXPECT_EQ(f.follower_size, (std::vector<float>{follower_a, 0.0f, 0.0f, 0.0f}));
  // A: the reduce and the multiply read its group outside it; B: read only as D's input;
  // C: read by nothing (and not a root); D: a root.
  EXPECT_EQ(f.has_exit, (std::vector<float>{1.0f, 0.0f, 0.0f, 1.0f}));

  // Robustness: no features, a tile graph, out-of-range edges.
  Graph bare = FlowGraph();
  bare.node_feat.clear();
  const LayoutFlow fb = ConfigLayoutFlow(bare);
  EXPECT_EQ(fb.source, std::vector<int32_t>(8, -1));
  EXPECT_EQ(fb.has_exit, std::vector<float>(4, 0.0f));
  Graph tile = FlowGraph();
  tile.kind = TaskKind::kTile;
  EXPECT_EQ(ConfigLayoutFlow(tile).size(), 0);
  Graph bad = FlowGraph();
  bad.edge_index.push_back(4);
  bad.edge_index.push_back(99);
  EXPECT_EQ(ConfigLayoutFlow(bad).source, f.source);
  // Opcode ids beyond the table (a hostile dataset) follow nothing: the add and tanh no longer
  // carry A's layout, so B's input has no source and A has no followers.
  Graph unknown = FlowGraph();
  unknown.node_opcode[2] = 250;
  unknown.node_opcode[3] = 121;
  const LayoutFlow fu = ConfigLayoutFlow(unknown);
  EXPECT_EQ(fu.source[2], -1);
  EXPECT_EQ(fu.follower_size[0], 0.0f);
}

TEST(LayoutFlowTest, SliceMapsSourcesToTheSubset) {
  const LayoutFlow f = ConfigLayoutFlow(FlowGraph());
  // Keep B, C and D: B's input and C's kernel came from A (not kept) -> -1; D's from B -> 0.
  const LayoutFlow s = SliceLayoutFlow(f, {1, 2, 3});
  EXPECT_EQ(s.source, (std::vector<int32_t>{-1, -1, -1, -1, 0, -1}));
  EXPECT_EQ(s.has_exit, (std::vector<float>{0.0f, 0.0f, 1.0f}));
  EXPECT_EQ(SliceLayoutFlow(LayoutFlow(), {0}).size(), 0);
}

// The synthetic cost model works from the HLO module, in operand order; the flow only from the
// graph's opcodes, edges (sorted by producer, so operand order is lost) and node features. Where
// the cost model puts layout regions, whether a region pays exit copies, and which region a
// configurable node's input or kernel comes from must agree on generated programs, up to the
// operand order the graph does not keep.
TEST(LayoutFlowTest, AgreesWithTheSyntheticCostModelsRegions) {
  int64_t nodes = 0, same_followers = 0, followers = 0;
  int64_t tensors = 0, same_source = 0, sourced = 0, same_exit = 0, exits = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    testutil::GeneratedProgram p = testutil::MakeGeneratedProgram(1500, seed);
    ASSERT_FALSE(::testing::Test::HasFailure());
    Graph& g = p.graph;
    const synth::ModuleAnalysis& a = p.analysis;
    const std::vector<int64_t> configurable = synth::ConfigurableNodes(a);
    synth::LayoutCostModel cm(a, configurable);
    g.node_config_ids = configurable;
    const LayoutFlow f = ConfigLayoutFlow(g);
    const int64_t nc = static_cast<int64_t>(configurable.size());
    ASSERT_EQ(f.size(), nc);
    std::vector<int32_t> slot(g.num_nodes(), -1);
    for (int64_t j = 0; j < nc; ++j) slot[configurable[j]] = static_cast<int32_t>(j);
    std::vector<double> elements(nc, 0.0);
    for (int64_t v = 0; v < g.num_nodes(); ++v) {
      const int32_t r = cm.RegionOf(v);
      if (r < 0) continue;
      double e = 1;
      for (int64_t d : a.nodes[v].dims) e *= static_cast<double>(d);
      elements[r] += e;
      ++followers;
    }
    for (int64_t j = 0; j < nc; ++j) {
      ++nodes;
      same_followers += std::fabs(f.follower_size[j] - std::log1p(elements[j]) / 16) < 1e-6;
      same_exit += (f.has_exit[j] != 0.0f) == cm.HasExits(j);
      exits += cm.HasExits(j);
      // Operands in the graph's edge order (distinct producers, ascending), as the flow reads.
      std::vector<int32_t> ops = a.nodes[configurable[j]].operands;
      std::sort(ops.begin(), ops.end());
      ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
      for (int t = 0; t < 2; ++t) {
        int32_t want = -1;
        if (t < static_cast<int>(ops.size())) {
          want = slot[ops[t]] >= 0 ? slot[ops[t]] : cm.RegionOf(ops[t]);
        }
        ++tensors;
        same_source += f.source[2 * j + t] == want;
        sourced += want >= 0;
      }
    }
  }
  // The programs exercise every part ...
  EXPECT_GT(sourced, 20);
  EXPECT_GT(exits, 20);
  EXPECT_GT(followers, 100);
  // ... and the flow agrees with the cost model. Not exactly: the cost model joins a region
  // through an instruction's first operand only, which the graph cannot tell apart from the
  // others, so the flow joins through any operand with the instruction's array (as XLA's layout
  // assignment would make all of them agree). Measured: 686 of 739 nodes (0.928) with the same
  // followers, 0.980 of the tensors with the same source, 0.992 of the nodes with the same exit
  // flag; a flow that ignores the array (dims and layout) gives 0.923, 0.979 and 0.974.
  const double follower_rate = static_cast<double>(same_followers) / nodes;
  const double source_rate = static_cast<double>(same_source) / tensors;
  const double exit_rate = static_cast<double>(same_exit) / nodes;
  EXPECT_GE(follower_rate, 0.925) << same_followers << " of " << nodes;
  EXPECT_GE(source_rate, 0.975) << same_source << " of " << tensors;
  EXPECT_GE(exit_rate, 0.985) << same_exit << " of " << nodes;
}

// Tensor info rows by hand: [dims 6, minor_to_major 6] for output, input, kernel.
std::vector<float> InfoRow(std::vector<float> out, std::vector<float> in, std::vector<float> ker) {
  std::vector<float> row;
  for (auto* d : {&out, &in, &ker}) {
    const int rank = static_cast<int>(d->size());
    for (int i = 0; i < 6; ++i) row.push_back(i < rank ? (*d)[i] : 0.0f);
    for (int i = 0; i < 6; ++i) row.push_back(i < rank ? static_cast<float>(rank - 1 - i) : -1.0f);
  }
  return row;
}

TEST(LayoutFlowTest, FeaturesByHand) {
  // Node 0 produces [8, 300]; node 1 reads it as its input (source 0) and a fixed [64, 3] kernel.
  internal::GraphStructure gs;
  gs.tensor_info = InfoRow({8, 300}, {}, {});
  const std::vector<float> r1 = InfoRow({8, 64}, {8, 300}, {64, 3});
  gs.tensor_info.insert(gs.tensor_info.end(), r1.begin(), r1.end());
  gs.flow.source = {-1, -1, 0, -1};
  gs.flow.follower_size = {0.25f, 0.0f};
  gs.flow.has_exit = {1.0f, 0.0f};
  const double in_size = std::log1p(8.0 * 300) / 16, ker_size = std::log1p(64.0 * 3) / 16;
  auto features = [&](std::vector<int8_t> node0, std::vector<int8_t> node1, int64_t j) {
    std::vector<int8_t> vals(36, -1);
    std::copy(node0.begin(), node0.end(), vals.begin());
    std::copy(node1.begin(), node1.end(), vals.begin() + 18);
    std::vector<double> out(kLayoutFlowFeatureCount, -7.0);
    internal::LayoutFlowFeatures<double>(gs, j, vals.data(), out.data());
    return out;
  };
  // Everything default: no copies; the follower size is there regardless.
  EXPECT_EQ(features({}, {}, 0), (std::vector<double>{0, 0, 0, 0.25}));
  // Node 0 keeps its graph layout written out ({1, 0}); node 1 asks for it too: no copy.
  EXPECT_EQ(features({1, 0}, {-1, -1, -1, -1, -1, -1, 1, 0}, 1), (std::vector<double>{0, 0, 0, 0}));
  // Node 0 chooses {0, 1}: its output differs and it has fixed-layout readers -> copy back.
  EXPECT_EQ(features({0, 1}, {}, 0), (std::vector<double>{0, 0, std::log1p(8.0 * 300) / 16, 0.25}));
  // ... and node 1 asks for the graph's {1, 0} at its input: a copy at the input.
  EXPECT_EQ(features({0, 1}, {-1, -1, -1, -1, -1, -1, 1, 0}, 1),
            (std::vector<double>{in_size, 0, 0, 0}));
  // ... and node 1 asks for {0, 1}, what arrives: no copy.
  EXPECT_EQ(features({0, 1}, {-1, -1, -1, -1, -1, -1, 0, 1}, 1), (std::vector<double>{0, 0, 0, 0}));
  // Node 0 default (its graph layout arrives): {0, 1} at the input is a copy, {1, 0} is not.
  EXPECT_EQ(features({}, {-1, -1, -1, -1, -1, -1, 0, 1}, 1),
            (std::vector<double>{in_size, 0, 0, 0}));
  EXPECT_EQ(features({}, {-1, -1, -1, -1, -1, -1, 1, 0}, 1), (std::vector<double>{0, 0, 0, 0}));
  // The kernel has no source: compared with its graph layout. Node 1's output differs but it
  // has no fixed-layout readers: no copy back.
  EXPECT_EQ(features({}, {0, 1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1}, 1),
            (std::vector<double>{0, ker_size, 0, 0}));
  // A value naming no dimension (5 for a rank-2 tensor) is the compiler default: no copy.
  EXPECT_EQ(features({0, 1}, {-1, -1, -1, -1, -1, -1, 5, 0}, 1), (std::vector<double>{0, 0, 0, 0}));
}

ModelSpec FlowSpec() {
  ModelSpec s = testutil::SmallSpec(6);
  s.set_config_pooling(ModelSpec::CONFIG_POOLING_SUM);
  s.set_layout_tensor_features(true);
  s.set_layout_flow_features(true);
  s.set_config_loop_depth(true);
  s.set_config_node_head(3);
  return s;
}

TEST(LayoutFlowTest, SharedEqualsNaiveAndGradientsMatchFiniteDifferences) {
  ModelSpec spec = FlowSpec();
  ASSERT_FALSE(ModelSpec().layout_flow_features());  // off by default
  testutil::RandomCase rc = testutil::MakeRandomCase(TaskKind::kLayout, 60, 5, 4, 93);
  Rng rng(5);
  for (int8_t& v : rc.layout_cfg) v = static_cast<int8_t>(static_cast<int>(rng.UniformInt(4)) - 1);
  const int64_t nc = static_cast<int64_t>(rc.config_nodes.size());
  auto structure = [&](bool naive) {
    internal::GraphStructure gs = testutil::BuildStructure(spec, rc, naive);
    // Every tensor rank 3 with dims of 3, 8, 128 or 300 (so most values name a dimension).
    const float sizes[] = {3, 8, 128, 300};
    Rng r(11);
    gs.tensor_info.assign(nc * internal::kLayoutTensorInfoWidth, -1.0f);
    for (int64_t j = 0; j < nc * 3; ++j) {
      float* ti = gs.tensor_info.data() + j * 12;
      for (int i = 0; i < 6; ++i) ti[i] = i < 3 ? sizes[r.UniformInt(4)] : 0.0f;
      for (int i = 0; i < 3; ++i) ti[6 + i] = static_cast<float>(2 - i);
    }
    gs.flow.source.clear();
    for (int64_t j = 0; j < nc * 2; ++j) {
      gs.flow.source.push_back(static_cast<int32_t>(r.UniformInt(nc + 1)) - 1);
    }
    for (int64_t j = 0; j < nc; ++j) {
      gs.flow.follower_size.push_back(static_cast<float>(r.Uniform()));
      gs.flow.has_exit.push_back(j % 2 == 0 ? 1.0f : 0.0f);
    }
    return gs;
  };
  Gnn<double> gnn(spec, TaskKind::kLayout);
  const internal::ParamLayout& pl = gnn.layout();
  std::vector<double> params = testutil::RandomParams(pl, 19);
  for (double& p : params) p *= 0.5;  // keep the log-sum-exp terms moderate
  const internal::GraphStructure shared = structure(false), naive = structure(true);
  const testutil::QuadraticLossCheck c1 =
      testutil::CheckQuadraticLossGradient(gnn, params, shared, rc.Inputs());
  const testutil::QuadraticLossCheck c2 =
      testutil::CheckQuadraticLossGradient(gnn, params, naive, rc.Inputs());
  EXPECT_LT(testutil::MaxRelDiff(c1.scores, c2.scores), 1e-12);
  EXPECT_LT(testutil::MaxRelDiff(c1.grad, c2.grad), 1e-11);

  // The flow rows of input.w_config (before the loop-depth row) see non-zero inputs in this case,
  // receive gradient, and it is right.
  const int64_t H = spec.hidden_dim();
  const int64_t first = pl.w_cfg + (pl.cfg_in - kLayoutFlowFeatureCount - 1) * H;
  for (int f = 0; f < kLayoutFlowFeatureCount; ++f) {
    double norm = 0;
    for (int64_t d = 0; d < H; ++d) norm += std::fabs(c1.grad[first + f * H + d]);
    EXPECT_GT(norm, 0.0) << "flow feature " << f << " never non-zero";
  }
  const testutil::GradCheckReport& r = c1.report;
  EXPECT_LT(r.max_rel, 1e-6) << r.Describe([&](int64_t i) { return testutil::ParamName(pl, i); });
  EXPECT_LE(r.skipped, r.checked / 100 + 1);
}

// Pruning cuts follower chains and sources: Prepare hands the pruned graph the whole graph's
// flow, which differs from the pruned graph's own, and so do the scores.
TEST(LayoutFlowTest, WholeGraphFlowSurvivesPruning) {
  testutil::GeneratedProgram p = testutil::MakeGeneratedProgram(600, 3);
  ASSERT_FALSE(::testing::Test::HasFailure());
  Graph& g = p.graph;
  g.node_config_ids = synth::ConfigurableNodes(p.analysis);
  const int64_t nc = g.num_config_nodes(), k = 5;
  ASSERT_GT(nc, 2);
  Rng rng(4);
  g.node_config_feat.resize(k * nc * kLayoutConfigFeatureCount);
  for (int8_t& v : g.node_config_feat) v = static_cast<int8_t>(rng.UniformInt(3)) - 1;
  g.config_runtime.assign(k, 1.0);
  ModelSpec spec;
  spec.set_hidden_dim(8);
  spec.set_prune_hops(0);
  spec.set_layout_flow_features(true);
  spec.set_layout_tensor_features(true);
  auto created = CostModel::Create(spec, TaskKind::kLayout);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  CostModel& model = **created;
  model.transform().Accumulate(g);
  ASSERT_TRUE(model.transform().Finalize().ok());
  model.InitParameters(7);
  auto pruned = PruneToConfigNeighbourhood(g, 0, nullptr);
  ASSERT_TRUE(pruned.ok());
  const WholeGraphContext whole = model.ContextOf(g);
  const LayoutFlow own = ConfigLayoutFlow(*pruned);
  ASSERT_NE(own.follower_size, whole.flow.follower_size) << "pruning cut nothing";
  ConfigBatch batch;
  batch.num_configs = k;
  batch.layout_feat = g.node_config_feat;
  auto scores = [&](StatusOr<std::unique_ptr<PreparedGraph>> pg) {
    EXPECT_TRUE(pg.ok()) << pg.status().ToString();
    std::vector<float> s(k);
    model.Forward(**pg, batch, s.data(), nullptr);
    return s;
  };
  const std::vector<float> via_prepare = scores(model.Prepare(g));
  EXPECT_EQ(via_prepare, scores(model.PrepareExact(*pruned, &whole)));
  EXPECT_NE(via_prepare, scores(model.PrepareExact(*pruned)));
  WholeGraphContext short_context = whole;
  short_context.flow.has_exit.pop_back();
  EXPECT_FALSE(model.PrepareExact(*pruned, &short_context).ok());
}

}  // namespace
}  // namespace tpugraphs::model
