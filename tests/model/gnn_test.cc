// GNN kernels and the whole network in double precision: reference loops vs Eigen kernels,
// shared (config-independent) computation vs the naive per-config computation, and central
// finite-difference gradient checks of every parameter block and of the inputs.
#include "tpugraphs/model/gnn.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/model_test_util.h"

namespace tpugraphs::model {
namespace {

using internal::Gnn;
using internal::GnnTape;
using testutil::MakeRandomCase;
using testutil::RandomCase;

ModelSpec SmallSpec() { return testutil::SmallSpec(5); }

TEST(GnnKernelTest, GatherMatchesReferenceLoops) {
  for (auto agg : {ModelSpec::AGGREGATION_MEAN, ModelSpec::AGGREGATION_SUM}) {
    ModelSpec spec = SmallSpec();
    spec.set_aggregation(agg);
    RandomCase rc = MakeRandomCase(TaskKind::kTile, 30, 0, 3, 11);
    internal::GraphStructure gs = testutil::BuildStructure(spec, rc, true);
    Gnn<double> gnn(spec, TaskKind::kTile);
    const int H = spec.hidden_dim();
    const int64_t n = 30, k = 3, m = rc.edges.size() / 2;
    Rng rng(5);
    MatrixT<double> prev(k * n, H);
    for (int64_t i = 0; i < prev.size(); ++i) prev.data()[i] = rng.Normal();
    MatrixT<double> z;
    gnn.Gather(gs.full, k, prev, nullptr, z);
    ASSERT_EQ(z.rows(), k * n);
    // Reference: per config, per node, loop over the edge list.
    double worst = 0;
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t v = 0; v < n; ++v) {
        std::vector<double> op(H, 0), us(H, 0);
        int dop = 0, dus = 0;
        for (int64_t e = 0; e < m; ++e) {
          if (rc.edges[2 * e] == v) {
            ++dop;
            for (int d = 0; d < H; ++d) op[d] += prev(c * n + rc.edges[2 * e + 1], d);
          }
          if (rc.edges[2 * e + 1] == v) {
            ++dus;
            for (int d = 0; d < H; ++d) us[d] += prev(c * n + rc.edges[2 * e], d);
          }
        }
        for (int d = 0; d < H; ++d) {
          if (agg == ModelSpec::AGGREGATION_MEAN) {
            if (dop) op[d] /= dop;
            if (dus) us[d] /= dus;
          }
          worst = std::max(worst, std::fabs(z(c * n + v, d) - prev(c * n + v, d)));
          worst = std::max(worst, std::fabs(z(c * n + v, H + d) - op[d]));
          worst = std::max(worst, std::fabs(z(c * n + v, 2 * H + d) - us[d]));
        }
      }
    }
    EXPECT_LT(worst, 1e-12);
  }
}

TEST(GnnKernelTest, ScatterIsTheAdjointOfGatherWithBaseRefs) {
  // A plan with base refs: layout shared structure, layer 1 and 2.
  ModelSpec spec = SmallSpec();
  spec.set_num_layers(2);
  RandomCase rc = MakeRandomCase(TaskKind::kLayout, 60, 3, 2, 12);
  internal::GraphStructure gs = testutil::BuildStructure(spec, rc, false);
  Gnn<double> gnn(spec, TaskKind::kLayout);
  const int H = spec.hidden_dim();
  const int64_t k = 2, n = 60;
  Rng rng(6);
  for (int l = 1; l <= 2; ++l) {
    const internal::LayerPlan& p = gs.plan(l);
    ASSERT_LT(p.rows(), n) << "test graph too small: the plan covers every node";
    const int64_t rp = gs.plan(l - 1).rows();
    MatrixT<double> x(k * rp, H), base(n, H), y(k * p.rows(), 3 * H);
    for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = rng.Normal();
    for (int64_t i = 0; i < base.size(); ++i) base.data()[i] = rng.Normal();
    for (int64_t i = 0; i < y.size(); ++i) y.data()[i] = rng.Normal();
    MatrixT<double> z;
    gnn.Gather(p, k, x, &base, z);
    MatrixT<double> dx = MatrixT<double>::Zero(k * rp, H), dbase = MatrixT<double>::Zero(n, H);
    gnn.Scatter(p, k, y, dx, &dbase);
    const double lhs = (z.array() * y.array()).sum();
    const double rhs = (x.array() * dx.array()).sum() + (base.array() * dbase.array()).sum();
    EXPECT_NEAR(lhs, rhs, 1e-10 * std::max(1.0, std::fabs(lhs))) << "layer " << l;
  }
}

TEST(GnnKernelTest, ActivationDerivatives) {
  for (auto a : {ModelSpec::ACTIVATION_LEAKY_RELU, ModelSpec::ACTIVATION_GELU}) {
    ModelSpec spec = SmallSpec();
    spec.set_activation(a);
    Gnn<double> gnn(spec, TaskKind::kTile);
    for (double x : {-3.1, -0.7, -0.01, 0.02, 0.5, 2.9}) {
      const double h = 1e-6;
      const double fd = (gnn.Act(x + h) - gnn.Act(x - h)) / (2 * h);
      EXPECT_NEAR(gnn.ActGrad(x), fd, 1e-8) << "activation " << a << " at " << x;
    }
  }
  ModelSpec spec = SmallSpec();
  Gnn<double> gnn(spec, TaskKind::kTile);
  EXPECT_NEAR(gnn.Act(-2.0), -0.4, 1e-7);  // slope 0.2 is stored as float
  EXPECT_DOUBLE_EQ(gnn.Act(3.0), 3.0);
}

TEST(GnnStructureTest, AffectedSetsGrowByOneHopPerLayer) {
  // Chain 0 <- 1 <- 2 <- ... (node u consumes u - 1); configurable node 5.
  ModelSpec spec = SmallSpec();
  spec.set_num_layers(3);
  std::vector<uint8_t> ops(12, 1);
  std::vector<int64_t> edges;
  for (int64_t u = 1; u < 12; ++u) edges.insert(edges.end(), {u, u - 1});
  auto gs = internal::BuildGraphStructure(spec, TaskKind::kLayout, ops, edges, {5}, {0}, {}, false,
                                          "chain");
  ASSERT_TRUE(gs.ok()) << gs.status().ToString();
  for (int l = 0; l <= 3; ++l) {
    std::vector<int64_t> nodes = gs->plan(l).nodes;
    std::sort(nodes.begin(), nodes.end());
    std::vector<int64_t> want;
    for (int64_t v = 5 - l; v <= 5 + l; ++v) want.push_back(v);
    EXPECT_EQ(nodes, want) << "layer " << l;
  }
  EXPECT_EQ(gs->unaffected_last.size(), 12u - 7u);
}

TEST(GnnStructureTest, RejectsBadGraphs) {
  ModelSpec spec = SmallSpec();
  std::vector<uint8_t> ops(4, 1);
  auto bad_edge = internal::BuildGraphStructure(spec, TaskKind::kLayout, ops, {1, 7}, {0}, {0}, {},
                                                false, "g.npz");
  ASSERT_FALSE(bad_edge.ok());
  EXPECT_NE(bad_edge.status().ToString().find("g.npz"), std::string::npos);
  EXPECT_FALSE(internal::BuildGraphStructure(spec, TaskKind::kLayout, ops, {1, 0, 2}, {0}, {0}, {},
                                             false, "g")
                   .ok());
  EXPECT_FALSE(internal::BuildGraphStructure(spec, TaskKind::kLayout, ops, {1, 0}, {2, 2}, {0}, {},
                                             false, "g")
                   .ok());
  EXPECT_FALSE(
      internal::BuildGraphStructure(spec, TaskKind::kLayout, ops, {1, 0}, {-1}, {0}, {}, false, "g")
          .ok());
  EXPECT_FALSE(
      internal::BuildGraphStructure(spec, TaskKind::kTile, {}, {}, {}, {0}, {}, false, "g").ok());
}

// The variants every whole-network test runs over.
struct Variant {
  const char* name;
  TaskKind task;
  std::function<void(ModelSpec&)> edit;
};

std::vector<Variant> Variants() {
  return {
      {"layout_default", TaskKind::kLayout, [](ModelSpec&) {}},
      {"layout_sum_gelu_nonorm_l3", TaskKind::kLayout,
       [](ModelSpec& s) {
         s.set_aggregation(ModelSpec::AGGREGATION_SUM);
         s.set_activation(ModelSpec::ACTIVATION_GELU);
         s.set_layer_norm(false);
         s.set_config_pooling(ModelSpec::CONFIG_POOLING_SUM);
         s.set_num_layers(3);
       }},
      {"layout_noresidual_maxonly_l1", TaskKind::kLayout,
       [](ModelSpec& s) {
         s.set_residual(false);
         s.set_pool_mean(false);
         s.set_num_layers(1);
         s.set_head_layers(2);
       }},
      {"layout_node_head", TaskKind::kLayout, [](ModelSpec& s) { s.set_config_node_head(5); }},
      {"layout_loop_depth_node_head", TaskKind::kLayout,
       [](ModelSpec& s) {
         s.set_config_loop_depth(true);
         s.set_config_node_head(3);
       }},
      {"layout_loop_depth_random_walk_node_head", TaskKind::kLayout,
       [](ModelSpec& s) {
         s.set_config_loop_depth(true);
         s.set_config_random_walk(3);
         s.set_config_node_head(3);
       }},
      {"layout_random_walk_l0", TaskKind::kLayout,
       [](ModelSpec& s) {
         s.set_config_random_walk(2);
         s.set_config_node_head(2);
         s.set_num_layers(0);
       }},
      {"layout_node_head_logsumexp", TaskKind::kLayout,
       [](ModelSpec& s) {
         s.set_config_node_head(4);
         s.set_config_node_head_pooling(ModelSpec::NODE_HEAD_POOLING_LOGSUMEXP);
       }},
      {"layout_node_head_attention", TaskKind::kLayout,
       [](ModelSpec& s) {
         s.set_config_node_head(4);
         s.set_config_node_head_pooling(ModelSpec::NODE_HEAD_POOLING_LOGSUMEXP);
         s.set_config_attention(3);
       }},
      {"layout_node_head_linear_attention", TaskKind::kLayout,
       [](ModelSpec& s) {
         s.set_config_node_head(3);
         s.set_config_node_head_pooling(ModelSpec::NODE_HEAD_POOLING_LOGSUMEXP);
         s.set_config_node_head_linear(true);
         s.set_config_attention(2);
       }},
      {"layout_node_head_linear_l0", TaskKind::kLayout,
       [](ModelSpec& s) {
         s.set_config_node_head(4);
         s.set_config_node_head_linear(true);
         s.set_num_layers(0);
       }},
      {"layout_node_head_gelu_mean_l0", TaskKind::kLayout,
       [](ModelSpec& s) {
         s.set_config_node_head(3);
         s.set_activation(ModelSpec::ACTIVATION_GELU);
         s.set_config_pooling(ModelSpec::CONFIG_POOLING_MEAN);
         s.set_num_layers(0);
       }},
      {"layout_l0_meanonly", TaskKind::kLayout,
       [](ModelSpec& s) {
         s.set_num_layers(0);
         s.set_pool_max(false);
       }},
      {"tile_late", TaskKind::kTile, [](ModelSpec&) {}},
      {"tile_early_gelu", TaskKind::kTile,
       [](ModelSpec& s) {
         s.set_tile_join(ModelSpec::TILE_JOIN_EARLY);
         s.set_activation(ModelSpec::ACTIVATION_GELU);
       }},
      {"tile_late_l3_sum_nohead", TaskKind::kTile,
       [](ModelSpec& s) {
         s.set_num_layers(3);
         s.set_aggregation(ModelSpec::AGGREGATION_SUM);
         s.set_head_layers(0);
       }},
  };
}

TEST(GnnTest, MatchesIndependentReferenceForward) {
  for (const Variant& var : Variants()) {
    ModelSpec spec = SmallSpec();
    var.edit(spec);
    RandomCase rc = MakeRandomCase(var.task, 25, 4, 3, 21);
    Gnn<double> gnn(spec, var.task);
    std::vector<double> params = testutil::RandomParams(gnn.layout(), 31);
    std::vector<double> want = testutil::ReferenceForward(spec, rc, params);
    for (bool naive : {false, true}) {
      internal::GraphStructure gs = testutil::BuildStructure(spec, rc, naive);
      std::vector<double> got(rc.k);
      gnn.Forward(params.data(), gs, rc.Inputs(), got.data(), nullptr);
      EXPECT_LT(testutil::MaxRelDiff(got, want), 1e-12)
          << var.name << (naive ? " naive" : " shared");
    }
  }
}

template <typename T>
void RunBoth(const ModelSpec& spec, const RandomCase& rc, const std::vector<double>& params64,
             bool naive, std::vector<double>& scores, std::vector<double>& grad) {
  Gnn<T> gnn(spec, rc.task);
  internal::GraphStructure gs = testutil::BuildStructure(spec, rc, naive);
  std::vector<T> params(params64.begin(), params64.end());
  std::vector<T> feat(rc.node_feat.begin(), rc.node_feat.end());
  std::vector<T> tcfg(rc.tile_cfg.begin(), rc.tile_cfg.end());
  internal::GnnInputs<T> in;
  in.node_feat = feat.data();
  in.k = rc.k;
  in.tile_cfg = tcfg.data();
  in.layout_cfg = rc.layout_cfg.data();
  GnnTape<T> tape;
  std::vector<T> s(rc.k), ds(rc.k), g(params.size(), T(0));
  gnn.Forward(params.data(), gs, in, s.data(), &tape);
  for (int64_t c = 0; c < rc.k; ++c) ds[c] = T(0.3 + 0.1 * c) * (c % 2 ? -1 : 1);
  gnn.Backward(params.data(), gs, in, tape, ds.data(), g.data());
  scores.assign(s.begin(), s.end());
  grad.assign(g.begin(), g.end());
}

TEST(GnnTest, SharedComputationEqualsNaivePerConfigComputation) {
  for (const Variant& var : Variants()) {
    for (int layers : {1, 2, 3}) {
      ModelSpec spec = SmallSpec();
      var.edit(spec);
      if (spec.num_layers() != 0) spec.set_num_layers(layers);
      spec.set_hidden_dim(8);
      // Large enough that the L-hop neighbourhoods of the configurable nodes do not cover it.
      RandomCase rc = MakeRandomCase(var.task, 200, 3, 5, 40 + layers);
      Gnn<double> gnn(spec, var.task);
      std::vector<double> params = testutil::RandomParams(gnn.layout(), 50 + layers);
      std::vector<double> s_shared, g_shared, s_naive, g_naive;
      RunBoth<double>(spec, rc, params, false, s_shared, g_shared);
      RunBoth<double>(spec, rc, params, true, s_naive, g_naive);
      const std::string what = std::string(var.name) + " L=" + std::to_string(spec.num_layers());
      EXPECT_LT(testutil::MaxRelDiff(s_shared, s_naive), 1e-12) << what << " scores (double)";
      EXPECT_LT(testutil::MaxRelDiff(g_shared, g_naive), 1e-11) << what << " gradient (double)";
      RunBoth<float>(spec, rc, params, false, s_shared, g_shared);
      RunBoth<float>(spec, rc, params, true, s_naive, g_naive);
      EXPECT_LT(testutil::MaxRelDiff(s_shared, s_naive), 1e-5) << what << " scores (float)";
      EXPECT_LT(testutil::MaxRelDiff(g_shared, g_naive), 1e-4) << what << " gradient (float)";
      if (var.task == TaskKind::kLayout) {
        internal::GraphStructure gs = testutil::BuildStructure(spec, rc, false);
        EXPECT_LT(gs.plan(spec.num_layers()).rows(), 200) << what << ": nothing was shared";
      }
    }
  }
}

// Whole network, every parameter and the inputs, central differences in double.
TEST(GnnTest, FiniteDifferenceGradientsOfEveryParameterAndInput) {
  for (const Variant& var : Variants()) {
    ModelSpec spec = SmallSpec();
    var.edit(spec);
    RandomCase rc = MakeRandomCase(var.task, 18, 3, 3, 61);
    Gnn<double> gnn(spec, var.task);
    const internal::ParamLayout& pl = gnn.layout();
    std::vector<double> params = testutil::RandomParams(pl, 71);
    internal::GraphStructure gs = testutil::BuildStructure(spec, rc, false);
    std::vector<double> w(rc.k);
    for (int64_t c = 0; c < rc.k; ++c) w[c] = 0.5 + 0.25 * c;
    // Loss = sum_c w_c s_c + 0.5 s_c^2, so dL/ds_c = w_c + s_c.
    auto loss = [&]() {
      std::vector<double> s(rc.k);
      gnn.Forward(params.data(), gs, rc.Inputs(), s.data(), nullptr);
      double l = 0;
      for (int64_t c = 0; c < rc.k; ++c) l += w[c] * s[c] + 0.5 * s[c] * s[c];
      return l;
    };
    GnnTape<double> tape;
    std::vector<double> s(rc.k), ds(rc.k), grad(pl.total, 0.0);
    std::vector<double> dfeat(rc.node_feat.size(), 0.0), dcfg(rc.tile_cfg.size(), 0.0);
    gnn.Forward(params.data(), gs, rc.Inputs(), s.data(), &tape);
    for (int64_t c = 0; c < rc.k; ++c) ds[c] = w[c] + s[c];
    gnn.Backward(params.data(), gs, rc.Inputs(), tape, ds.data(), grad.data(), dfeat.data(),
                 dcfg.data());

    // Every parameter block must have received a non-zero gradient somewhere (a block that is
    // silently disconnected would pass a finite-difference check with zeros).
    for (const auto& b : pl.blocks) {
      double norm = 0;
      for (int64_t i = 0; i < b.rows * b.cols; ++i) norm += std::fabs(grad[b.offset + i]);
      EXPECT_GT(norm, 0.0) << var.name << ": block " << b.name << " got no gradient";
    }
    testutil::GradCheckReport r = testutil::CheckGradient(params, grad, loss);
    EXPECT_LT(r.max_rel, 1e-6) << var.name << " parameters: "
                               << r.Describe([&](int64_t i) { return testutil::ParamName(pl, i); });
    EXPECT_LE(r.skipped, r.checked / 100 + 1) << var.name;
    // Inputs: node features; tile config features.
    RandomCase& mrc = rc;
    testutil::GradCheckReport rf = testutil::CheckGradient(mrc.node_feat, dfeat, loss);
    EXPECT_LT(rf.max_rel, 1e-6) << var.name << " node features: "
                                << rf.Describe([](int64_t i) { return std::to_string(i); });
    if (var.task == TaskKind::kTile) {
      testutil::GradCheckReport rcfg = testutil::CheckGradient(mrc.tile_cfg, dcfg, loss);
      EXPECT_LT(rcfg.max_rel, 1e-6) << var.name << " tile config features: "
                                    << rcfg.Describe([](int64_t i) { return std::to_string(i); });
    }
  }
}

}  // namespace
}  // namespace tpugraphs::model
