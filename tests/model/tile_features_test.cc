// Derived tile features (ModelSpec.tile_derived_features): the values by hand, the shapes and the
// working set against the synthetic cost model's own on generated kernels, and finite-difference
// gradients and the spec switch through the model.
#include "tpugraphs/model/tile_features.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/model_test_util.h"
#include "tpugraphs/ingest/hlo_graph.h"
#include "tpugraphs/ingest/node_features.h"
#include "tpugraphs/model/gnn.h"
#include "tpugraphs/synth/cost_model.h"
#include "tpugraphs/synth/program_generator.h"
#include "tpugraphs/synth/synth.h"

namespace tpugraphs::model {
namespace {

TileShapes Shapes(std::vector<float> out, std::vector<float> kernel) {
  TileShapes s;
  s.out_rank = static_cast<int>(out.size());
  for (int i = 0; i < s.out_rank; ++i) {
    s.out_dims[i] = out[i];
    s.out_m2m[i] = static_cast<float>(s.out_rank - 1 - i);
  }
  s.kernel_rank = static_cast<int>(kernel.size());
  for (int i = 0; i < s.kernel_rank; ++i) {
    s.kernel_dims[i] = kernel[i];
    s.kernel_m2m[i] = static_cast<float>(s.kernel_rank - 1 - i);
  }
  return s;
}

std::vector<float> Features(const TileShapes& s, std::vector<float> out_bounds,
                            std::vector<float> kernel_bounds) {
  std::vector<float> raw(kTileConfigFeatureCount, 0.0f);
  for (size_t i = 0; i < kernel_bounds.size(); ++i) raw[i] = kernel_bounds[i];
  for (size_t i = 0; i < out_bounds.size(); ++i) raw[8 + i] = out_bounds[i];
  std::vector<float> f(kTileDerivedFeatureCount);
  TileDerivedFeatures(s, raw.data(), f.data());
  return f;
}

TEST(TileFeaturesTest, ValuesByHand) {
  // Output [16, 300] (minor dim 300), f32, nothing streamed; weights [300, 64].
  TileShapes s = Shapes({16, 300}, {300, 64});
  // Tiles of [8, 100]: 2 x 3 = 6 tiles, each padded to [8, 128] = 1024 elements; 6144 covered of
  // 4800. Weights tiled [300, 64]: 1 step of [304, 128] padded (second minor 300 -> 304).
  std::vector<float> f = Features(s, {8, 100}, {300, 64});
  EXPECT_NEAR(f[0], std::log(6.0) / 8, 1e-6);
  EXPECT_NEAR(f[1], std::log(6144.0 / 4800), 1e-6);
  EXPECT_NEAR(f[2], std::log(1024.0) / 16, 1e-6);
  EXPECT_NEAR(f[3], 0.0, 1e-6);
  EXPECT_NEAR(f[4], std::log(304.0 * 128 / (300 * 64)), 1e-6);
  EXPECT_NEAR(f[5], std::log(304.0 * 128) / 16, 1e-6);
  EXPECT_NEAR(f[6], std::log(2 * (1024.0 * 4 + 304.0 * 128 * 4)) / 16, 1e-6);
  // Bounds larger than the dims are clamped; a list of the wrong length means whole dims.
  std::vector<float> whole = Features(s, {16, 300}, {300, 64});
  EXPECT_EQ(Features(s, {99, 999}, {300, 64}), whole);
  EXPECT_EQ(Features(s, {8}, {300, 64}), whole);
  EXPECT_NEAR(whole[0], 0.0, 1e-6);
  // No weights: the kernel terms are 0.
  std::vector<float> nok = Features(Shapes({16, 300}, {}), {8, 100}, {});
  EXPECT_EQ(nok[3], 0.0f);
  EXPECT_EQ(nok[4], 0.0f);
  EXPECT_EQ(nok[5], 0.0f);
  EXPECT_NEAR(nok[6], std::log(2 * 1024.0 * 4) / 16, 1e-6);
  // No output either (no node features): all 0.
  EXPECT_EQ(Features(TileShapes(), {8, 100}, {}), std::vector<float>(kTileDerivedFeatureCount, 0));
}

// The shapes come from the graph alone (last root, operands in edge order, element types from
// the one-hot); the synthetic cost model reads the module. Their working sets must agree for
// every configuration of generated kernels.
TEST(TileFeaturesTest, WorkingSetAgreesWithTheSyntheticCostModel) {
  int64_t configs = 0, with_kernel = 0, with_streamed = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const xla::HloModuleProto m = synth::GenerateTileKernel(seed, "k");
    Graph g;
    g.kind = TaskKind::kTile;
    ASSERT_TRUE(ingest::BuildProgramGraph(m, "k", &g).ok());
    auto a = synth::AnalyzeModule(m, "k");
    ASSERT_TRUE(a.ok());
    auto cm = synth::TileCostModel::Create(*a, "k");
    ASSERT_TRUE(cm.ok());
    synth::RunOptions options;
    options.configs = 12;
    options.graph_index = seed;
    auto runs = synth::SynthesizeTileRuns(m, options, "k");
    ASSERT_TRUE(runs.ok());
    const TileShapes s = TileKernelShapes(g);
    with_kernel += s.kernel_rank > 0;
    with_streamed += s.streamed_per_out > 0;
    for (const auto& run : runs->runs()) {
      if (!run.op_config().has_tile_size_config()) continue;
      const auto& cfg = run.op_config().tile_size_config();
      std::vector<float> raw(kTileConfigFeatureCount);
      ingest::FeaturizeTileConfig(cfg, raw.data());
      std::vector<float> f(kTileDerivedFeatureCount);
      TileDerivedFeatures(s, raw.data(), f.data());
      const double want = cm->WorkingSetBytes(cfg);
      ASSERT_NEAR(f[6], std::log(want) / 16, 1e-5) << "seed " << seed;
      ++configs;
    }
  }
  EXPECT_GT(configs, 300);
  EXPECT_GT(with_kernel, 5);
  EXPECT_GT(with_streamed, 5);
}

TEST(TileFeaturesTest, GradientsMatchFiniteDifferencesAndZeroRowsReproduceTheModelWithout) {
  for (bool early : {true, false}) {
    ModelSpec on = testutil::SmallSpec(6);
    on.set_tile_join(early ? ModelSpec::TILE_JOIN_EARLY : ModelSpec::TILE_JOIN_LATE);
    on.set_tile_derived_features(true);
    ModelSpec off = on;
    off.set_tile_derived_features(false);
    testutil::RandomCase rc = testutil::MakeRandomCase(TaskKind::kTile, 40, 0, 4, 21);
    internal::Gnn<double> gon(on, TaskKind::kTile), goff(off, TaskKind::kTile);
    const int F = kTileDerivedFeatureCount;
    ASSERT_EQ(gon.layout().total - goff.layout().total,
              early ? F * on.hidden_dim() : F * on.head_hidden_dim());
    // The derived columns are inputs like the kept raw ones: columns 24.. of the config matrix.
    testutil::RandomCase ron = rc;
    const int64_t kc = static_cast<int64_t>(rc.cfg_cols.size());
    ron.tile_cfg.clear();
    for (int64_t c = 0; c < rc.k; ++c) {
      for (int64_t j = 0; j < kc; ++j) ron.tile_cfg.push_back(rc.tile_cfg[c * kc + j]);
      for (int j = 0; j < F; ++j) ron.tile_cfg.push_back(0.1 * (j + 1) + 0.05 * c);
    }
    for (int j = 0; j < F; ++j) ron.cfg_cols.push_back(kTileConfigFeatureCount + j);
    const internal::GraphStructure gs = testutil::BuildStructure(on, ron, false);
    std::vector<double> params = testutil::RandomParams(gon.layout(), 5);
    const testutil::GradCheckReport r =
        testutil::CheckQuadraticLossGradient(gon, params, gs, ron.Inputs()).report;
    EXPECT_LT(r.max_rel, 1e-6) << (early ? "early: " : "late: ") << r.Describe([&](int64_t i) {
      return testutil::ParamName(gon.layout(), i);
    });
    // Zero weight rows for the derived columns give the model without them.
    const internal::ParamLayout& pl = gon.layout();
    const int64_t block = early ? pl.w_cfg : pl.w_head.front();
    const int64_t width = early ? on.hidden_dim() : on.head_hidden_dim();
    const int64_t first_row = early ? kTileConfigFeatureCount : pl.head_in - F;
    std::vector<double> pon = params;
    for (int64_t i = 0; i < F * width; ++i) pon[block + first_row * width + i] = 0.0;
    std::vector<double> poff;
    poff.insert(poff.end(), pon.begin(), pon.begin() + block + first_row * width);
    poff.insert(poff.end(), pon.begin() + block + (first_row + F) * width, pon.end());
    ASSERT_EQ(static_cast<int64_t>(poff.size()), goff.layout().total);
    std::vector<double> son(rc.k), soff(rc.k);
    gon.Forward(pon.data(), gs, ron.Inputs(), son.data(), nullptr);
    goff.Forward(poff.data(), testutil::BuildStructure(off, rc, false), rc.Inputs(), soff.data(),
                 nullptr);
    for (int64_t c = 0; c < rc.k; ++c) EXPECT_NEAR(son[c], soff[c], 1e-12) << c;
  }
}

}  // namespace
}  // namespace tpugraphs::model
