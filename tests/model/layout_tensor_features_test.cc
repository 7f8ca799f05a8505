// Layout tensor features (ModelSpec.layout_tensor_features): the 18 derived values by hand, the
// tensor info taken from a node and its first two operands, the shared computation against the
// naive one with the features on, finite-difference gradients of every parameter (including the
// input.w_config rows the features feed), and the spec switch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/model_test_util.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/model/gnn.h"

namespace tpugraphs::model {
namespace {

using internal::Gnn;
using internal::GnnTape;

// One configurable node's tensor info [36]: output dims (3, 256, 100) with graph layout
// {2, 1, 0}; input of rank 6, every dim 7, no graph layout; kernel dims (128, 12) with graph
// layout {0, 1}.
std::vector<float> ExampleInfo() {
  std::vector<float> info(36, 0.0f);
  const float out_dims[6] = {3, 256, 100, 0, 0, 0}, out_m2m[6] = {2, 1, 0, -1, -1, -1};
  const float ker_dims[6] = {128, 12, 0, 0, 0, 0}, ker_m2m[6] = {0, 1, -1, -1, -1, -1};
  for (int i = 0; i < 6; ++i) {
    info[i] = out_dims[i], info[6 + i] = out_m2m[i];
    info[12 + i] = 7, info[18 + i] = -1;
    info[24 + i] = ker_dims[i], info[30 + i] = ker_m2m[i];
  }
  return info;
}

TEST(LayoutTensorFeaturesTest, ValuesByHand) {
  // Output: dims (3, 256, 100), graph layout {2, 1, 0}; config {0, 1, 2}: minor dim 3 (pads to
  // 128 lanes), second-minor 256 (a multiple of 8), differs from the graph layout (a re-layout
  // of 3 * 256 * 100 elements).
  // Input: config all -1 (compiler default): every term 0.
  // Kernel: dims (128, 12), graph layout {0, 1}; config {0, 1}: same as the graph layout.
  const std::vector<float> info = ExampleInfo();
  std::vector<int8_t> vals(18, -1);
  vals[0] = 0, vals[1] = 1, vals[2] = 2;
  vals[12] = 0, vals[13] = 1;
  double f[18];
  internal::LayoutTensorFeatures<double>(info.data(), vals.data(), f);
  EXPECT_DOUBLE_EQ(f[0], std::log1p(3.0) / 8);
  EXPECT_DOUBLE_EQ(f[1], std::log1p(256.0) / 8);
  EXPECT_DOUBLE_EQ(f[2], std::log(128.0 / 3.0) / std::log(128.0));
  EXPECT_DOUBLE_EQ(f[3], 0.0);
  EXPECT_DOUBLE_EQ(f[4], 1.0);
  EXPECT_DOUBLE_EQ(f[5], std::log1p(3.0 * 256 * 100) / 16);
  for (int i = 6; i < 12; ++i) EXPECT_DOUBLE_EQ(f[i], 0.0) << i;
  EXPECT_DOUBLE_EQ(f[12], std::log1p(128.0) / 8);
  EXPECT_DOUBLE_EQ(f[13], std::log1p(12.0) / 8);
  EXPECT_DOUBLE_EQ(f[14], 0.0);
  EXPECT_DOUBLE_EQ(f[15], std::log(16.0 / 12.0) / std::log(8.0));
  EXPECT_DOUBLE_EQ(f[16], 1.0);
  EXPECT_DOUBLE_EQ(f[17], 0.0);
  // A value naming a dimension of size 0 (beyond the rank) or out of range counts as unset.
  vals[0] = 4;
  vals[1] = 9;
  internal::LayoutTensorFeatures<double>(info.data(), vals.data(), f);
  for (int i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(f[i], 0.0) << i;
}

// Raw [n, 140] features with shapes and layouts at the release columns.
std::vector<float> RandomRawFeatures(int64_t n, uint64_t seed) {
  Rng rng(seed);
  const float sizes[] = {1, 3, 8, 64, 100, 128, 300};
  std::vector<float> raw(n * kNodeFeatureCount, 0.0f);
  for (int64_t v = 0; v < n; ++v) {
    float* f = raw.data() + v * kNodeFeatureCount;
    const int rank = 1 + static_cast<int>(rng.UniformInt(4));
    for (int i = 0; i < 6; ++i) {
      f[21 + i] = i < rank ? sizes[rng.UniformInt(7)] : 0.0f;
      f[134 + i] = i < rank ? static_cast<float>(rank - 1 - i) : -1.0f;
    }
  }
  return raw;
}

TEST(LayoutTensorFeaturesTest, InfoComesFromTheNodeAndItsFirstTwoOperands) {
  ModelSpec spec;
  // Node 3 consumes 1 then 0 then 2 (edge order = operand order); node 1 has no operands.
  const std::vector<uint8_t> ops = {1, 1, 1, 1};
  const std::vector<int64_t> edges = {3, 1, 3, 0, 3, 2};
  auto gs = internal::BuildGraphStructure(spec, TaskKind::kLayout, ops, edges, {3, 1}, {0}, {},
                                          false, "g")
                .value();
  std::vector<float> raw = RandomRawFeatures(4, 5);
  internal::FillLayoutTensorInfo(raw.data(), &gs);
  ASSERT_EQ(gs.tensor_info.size(), 2u * 36);
  auto check = [&](int64_t j, int t, int64_t node) {
    for (int i = 0; i < 6; ++i) {
      const float* ti = gs.tensor_info.data() + j * 36 + 12 * t;
      if (node < 0) {
        EXPECT_EQ(ti[i], 0.0f);
        EXPECT_EQ(ti[6 + i], -1.0f);
      } else {
        EXPECT_EQ(ti[i], raw[node * kNodeFeatureCount + 21 + i]);
        EXPECT_EQ(ti[6 + i], raw[node * kNodeFeatureCount + 134 + i]);
      }
    }
  };
  check(0, 0, 3), check(0, 1, 1), check(0, 2, 0);
  check(1, 0, 1), check(1, 1, -1), check(1, 2, -1);
}

// The official features pad a rank-2 tensor's minor_to_major {1, 0} with zeros, and 0 also names
// dimension 0: the graph's layout then reads as {1, 0, 0, 0, 0, 0}, and the configuration that
// sets that very layout as "differs from the graph". rank_aware (ModelSpec.layout_rank_aware)
// makes the slots beyond the rank "no dimension".
TEST(LayoutTensorFeaturesTest, SlotsBeyondTheRankAreNoDimensionWhenRankAware) {
  ModelSpec spec;
  auto gs =
      internal::BuildGraphStructure(spec, TaskKind::kLayout, {1}, {}, {0}, {0}, {}, false, "g")
          .value();
  std::vector<float> raw(kNodeFeatureCount, 0.0f);
  raw[21] = 64, raw[22] = 128;  // dims {64, 128}
  raw[134] = 1, raw[135] = 0;   // minor_to_major {1, 0}, then the official zero padding
  std::vector<int8_t> same = {1, 0, -1, -1, -1, -1}, other = {0, 1, -1, -1, -1, -1};
  same.resize(18, -1), other.resize(18, -1);
  double f[18];
  for (bool rank_aware : {false, true}) {
    internal::FillLayoutTensorInfo(raw.data(), &gs, rank_aware);
    const float* m2m = gs.tensor_info.data() + 6;
    EXPECT_EQ(m2m[0], 1.0f);
    EXPECT_EQ(m2m[1], 0.0f);
    for (int i = 2; i < 6; ++i) EXPECT_EQ(m2m[i], rank_aware ? -1.0f : 0.0f) << i;
    internal::LayoutTensorFeatures<double>(gs.tensor_info.data(), same.data(), f);
    // f[5]: the output's "differs from the graph's layout" term (log1p(elements) / 16 when set).
    if (rank_aware) {
      EXPECT_EQ(f[5], 0.0);
    } else {
      EXPECT_GT(f[5], 0.0);  // the ambiguity the option removes
    }
    internal::LayoutTensorFeatures<double>(gs.tensor_info.data(), other.data(), f);
    EXPECT_DOUBLE_EQ(f[5], std::log1p(64.0 * 128.0) / 16);
  }
}

ModelSpec TensorFeatureSpec() {
  ModelSpec s = testutil::SmallSpec(6);
  s.set_config_pooling(ModelSpec::CONFIG_POOLING_SUM);
  s.set_layout_tensor_features(true);
  return s;
}

internal::GraphStructure Structure(const ModelSpec& spec, const testutil::RandomCase& rc,
                                   bool naive) {
  internal::GraphStructure gs = testutil::BuildStructure(spec, rc, naive);
  const int64_t n = static_cast<int64_t>(rc.opcodes.size());
  std::vector<float> raw = RandomRawFeatures(n, 77);
  internal::FillLayoutTensorInfo(raw.data(), &gs);
  return gs;
}

// With the derived features the spec asks for: the shared computation equals the naive one,
// the last `derived_rows` rows of input.w_config (the features' weights) receive gradient, and
// every parameter's gradient matches central differences.
void CheckSharedAndFiniteDifferences(const ModelSpec& spec, uint64_t case_seed, uint64_t value_seed,
                                     int derived_rows) {
  testutil::RandomCase rc = testutil::MakeRandomCase(TaskKind::kLayout, 60, 4, 4, case_seed);
  // Config values that name real dimensions most of the time.
  Rng rng(value_seed);
  for (int8_t& v : rc.layout_cfg) v = static_cast<int8_t>(static_cast<int>(rng.UniformInt(5)) - 1);
  Gnn<double> gnn(spec, TaskKind::kLayout);
  const internal::ParamLayout& pl = gnn.layout();
  std::vector<double> params = testutil::RandomParams(pl, case_seed + 1);
  auto run = [&](const internal::GraphStructure& gs, std::vector<double>* s,
                 std::vector<double>* grad) {
    GnnTape<double> tape;
    s->assign(rc.k, 0.0);
    grad->assign(pl.total, 0.0);
    gnn.Forward(params.data(), gs, rc.Inputs(), s->data(), &tape);
    std::vector<double> ds(rc.k);
    for (int64_t c = 0; c < rc.k; ++c) ds[c] = 0.5 + 0.25 * c + (*s)[c];
    gnn.Backward(params.data(), gs, rc.Inputs(), tape, ds.data(), grad->data());
  };
  internal::GraphStructure shared = Structure(spec, rc, false), naive = Structure(spec, rc, true);
  std::vector<double> s1, g1, s2, g2;
  run(shared, &s1, &g1);
  run(naive, &s2, &g2);
  EXPECT_LT(testutil::MaxRelDiff(s1, s2), 1e-12);
  EXPECT_LT(testutil::MaxRelDiff(g1, g2), 1e-11);
  EXPECT_LT(shared.plan(2).rows(), 60) << "nothing was shared";
  const int64_t H = spec.hidden_dim();
  const int64_t first = pl.w_cfg + (pl.cfg_in - derived_rows) * H;
  double norm = 0;
  for (int64_t i = first; i < pl.w_cfg + pl.cfg_in * H; ++i) norm += std::fabs(g1[i]);
  EXPECT_GT(norm, 0.0);
  auto loss = [&]() {
    std::vector<double> s(rc.k);
    gnn.Forward(params.data(), shared, rc.Inputs(), s.data(), nullptr);
    double l = 0;
    for (int64_t c = 0; c < rc.k; ++c) l += (0.5 + 0.25 * c) * s[c] + 0.5 * s[c] * s[c];
    return l;
  };
  testutil::GradCheckReport r = testutil::CheckGradient(params, g1, loss);
  EXPECT_LT(r.max_rel, 1e-6) << r.Describe([&](int64_t i) { return testutil::ParamName(pl, i); });
  EXPECT_LE(r.skipped, r.checked / 100 + 1);
}

TEST(LayoutTensorFeaturesTest, SharedEqualsNaiveAndGradientsMatchFiniteDifferences) {
  ASSERT_FALSE(ModelSpec().layout_tensor_features());  // off by default
  CheckSharedAndFiniteDifferences(TensorFeatureSpec(), 91, 3, internal::kLayoutTensorFeatureCount);
}

TEST(LayoutTensorFeaturesTest, SwitchWidensWConfigAndZeroRowsReproduceTheModelWithout) {
  ModelSpec on = TensorFeatureSpec(), off = TensorFeatureSpec();
  off.set_layout_tensor_features(false);
  Gnn<double> gon(on, TaskKind::kLayout), goff(off, TaskKind::kLayout);
  ASSERT_EQ(gon.layout().cfg_in, goff.layout().cfg_in + internal::kLayoutTensorFeatureCount);
  ASSERT_EQ(gon.layout().total,
            goff.layout().total + internal::kLayoutTensorFeatureCount * on.hidden_dim());
  testutil::RandomCase rc = testutil::MakeRandomCase(TaskKind::kLayout, 30, 3, 3, 8);
  std::vector<double> poff = testutil::RandomParams(goff.layout(), 4);
  // Same parameters with 18 zero rows inserted after input.w_config's embedding rows.
  std::vector<double> pon;
  const int64_t H = on.hidden_dim();
  const int64_t cut = goff.layout().w_cfg + goff.layout().cfg_in * H;
  pon.insert(pon.end(), poff.begin(), poff.begin() + cut);
  pon.insert(pon.end(), internal::kLayoutTensorFeatureCount * H, 0.0);
  pon.insert(pon.end(), poff.begin() + cut, poff.end());
  ASSERT_EQ(static_cast<int64_t>(pon.size()), gon.layout().total);
  std::vector<double> son(rc.k), soff(rc.k);
  gon.Forward(pon.data(), Structure(on, rc, false), rc.Inputs(), son.data(), nullptr);
  goff.Forward(poff.data(), testutil::BuildStructure(off, rc, false), rc.Inputs(), soff.data(),
               nullptr);
  EXPECT_LT(testutil::MaxRelDiff(son, soff), 1e-13);
  // With non-zero derived rows the scores change (the features reach the output).
  for (int64_t i = cut; i < cut + internal::kLayoutTensorFeatureCount * H; ++i) pon[i] = 0.3;
  gon.Forward(pon.data(), Structure(on, rc, false), rc.Inputs(), son.data(), nullptr);
  EXPECT_GT(testutil::MaxRelDiff(son, soff), 1e-6);
}

// Layout size features (ModelSpec.layout_size_features): size and padding under the layout in
// effect, by hand.
TEST(LayoutSizeFeaturesTest, ValuesByHand) {
  std::vector<float> info = ExampleInfo();  // changed below: the kernel goes missing
  std::vector<int8_t> vals(18, -1);
  vals[0] = 0, vals[1] = 1, vals[2] = 2;  // output: 3 minor (pads to 128), then 256
  double f[9];
  internal::LayoutSizeFeatures<double>(info.data(), vals.data(), f);
  const double out_e = 3.0 * 256 * 100, out_p = 128.0 * 256 * 100;
  EXPECT_DOUBLE_EQ(f[0], std::log1p(out_e) / 16);
  EXPECT_DOUBLE_EQ(f[1], std::log(out_p / out_e) / std::log(1024.0));
  EXPECT_DOUBLE_EQ(f[2], std::log1p(out_p) / 16);
  // Input: default values and no graph layout: unpadded.
  const double in_e = std::pow(7.0, 6);
  EXPECT_DOUBLE_EQ(f[3], std::log1p(in_e) / 16);
  EXPECT_DOUBLE_EQ(f[4], 0.0);
  EXPECT_DOUBLE_EQ(f[5], std::log1p(in_e) / 16);
  // Kernel: default values, so the graph's layout {0, 1}: 128 minor, 12 second-minor -> 16.
  EXPECT_DOUBLE_EQ(f[6], std::log1p(1536.0) / 16);
  EXPECT_DOUBLE_EQ(f[7], std::log(2048.0 / 1536.0) / std::log(1024.0));
  EXPECT_DOUBLE_EQ(f[8], std::log1p(2048.0) / 16);
  // The kernel's layout set to {1, 0}: 12 minor -> 128, 128 second-minor stays.
  vals[12] = 1, vals[13] = 0;
  internal::LayoutSizeFeatures<double>(info.data(), vals.data(), f);
  EXPECT_DOUBLE_EQ(f[7], std::log(16384.0 / 1536.0) / std::log(1024.0));
  EXPECT_DOUBLE_EQ(f[8], std::log1p(16384.0) / 16);
  // The output's first value naming no dimension (beyond the rank): the graph's layout {2, 1}:
  // 100 minor -> 128, 256 second-minor stays.
  vals[0] = 4;
  internal::LayoutSizeFeatures<double>(info.data(), vals.data(), f);
  EXPECT_DOUBLE_EQ(f[1], std::log(128.0 / 100.0) / std::log(1024.0));
  // A missing tensor (rank 0) gives zeros.
  for (int i = 24; i < 30; ++i) info[i] = 0;
  internal::LayoutSizeFeatures<double>(info.data(), vals.data(), f);
  for (int i = 6; i < 9; ++i) EXPECT_DOUBLE_EQ(f[i], 0.0) << i;
}

TEST(LayoutSizeFeaturesTest, SharedEqualsNaiveAndGradientsMatchFiniteDifferences) {
  ASSERT_FALSE(ModelSpec().layout_size_features());  // off by default
  ModelSpec spec = TensorFeatureSpec();
  spec.set_layout_size_features(true);
  ASSERT_EQ(Gnn<double>(spec, TaskKind::kLayout).layout().cfg_in,
            18 * spec.layout_value_embedding_dim() + internal::kLayoutTensorFeatureCount +
                internal::kLayoutSizeFeatureCount);
  CheckSharedAndFiniteDifferences(spec, 93, 5, internal::kLayoutSizeFeatureCount);
}

// Dimension-split features (ModelSpec.layout_dim_split_features): the minor and second-minor
// dimensions under the layout in effect, split by the (8, 128) register tile, by hand.
TEST(LayoutDimSplitFeaturesTest, ValuesByHand) {
  std::vector<float> info = ExampleInfo();
  std::vector<int8_t> vals(18, -1);
  vals[0] = 1, vals[1] = 2, vals[2] = 0;  // output: 256 minor (2 registers), 100 second-minor
  double f[12];
  internal::LayoutDimSplitFeatures<double>(info.data(), vals.data(), f);
  EXPECT_DOUBLE_EQ(f[0], 0.0);                  // 256 mod 128
  EXPECT_DOUBLE_EQ(f[1], std::log1p(2.0) / 8);  // 256 div 128
  EXPECT_DOUBLE_EQ(f[2], 4.0 / 8);              // 100 mod 8
  EXPECT_DOUBLE_EQ(f[3], std::log1p(12.0) / 8);
  // Input: default values and no graph layout: no minor dimension, all 0.
  for (int i = 4; i < 8; ++i) EXPECT_DOUBLE_EQ(f[i], 0.0) << i;
  // Kernel: the graph's layout {0, 1}: 128 minor, 12 second-minor.
  EXPECT_DOUBLE_EQ(f[8], 0.0);
  EXPECT_DOUBLE_EQ(f[9], std::log1p(1.0) / 8);
  EXPECT_DOUBLE_EQ(f[10], 4.0 / 8);
  EXPECT_DOUBLE_EQ(f[11], std::log1p(1.0) / 8);
  // The kernel's layout set to {1, 0}: 12 minor, 128 second-minor.
  vals[12] = 1, vals[13] = 0;
  internal::LayoutDimSplitFeatures<double>(info.data(), vals.data(), f);
  EXPECT_DOUBLE_EQ(f[8], 12.0 / 128);
  EXPECT_DOUBLE_EQ(f[9], 0.0);
  EXPECT_DOUBLE_EQ(f[10], 0.0);
  EXPECT_DOUBLE_EQ(f[11], std::log1p(16.0) / 8);
  // The output's first value naming no dimension: the graph's layout {2, 1}: 100 minor, 256
  // second-minor.
  vals[0] = 4;
  internal::LayoutDimSplitFeatures<double>(info.data(), vals.data(), f);
  EXPECT_DOUBLE_EQ(f[0], 100.0 / 128);
  EXPECT_DOUBLE_EQ(f[1], 0.0);
  EXPECT_DOUBLE_EQ(f[2], 0.0);
  EXPECT_DOUBLE_EQ(f[3], std::log1p(32.0) / 8);
}

TEST(LayoutDimSplitFeaturesTest, SharedEqualsNaiveAndGradientsMatchFiniteDifferences) {
  ASSERT_FALSE(ModelSpec().layout_dim_split_features());  // off by default
  ModelSpec spec = TensorFeatureSpec();
  spec.set_layout_size_features(true);
  spec.set_layout_dim_split_features(true);
  ASSERT_EQ(Gnn<double>(spec, TaskKind::kLayout).layout().cfg_in,
            18 * spec.layout_value_embedding_dim() + internal::kLayoutTensorFeatureCount +
                internal::kLayoutSizeFeatureCount + internal::kLayoutDimSplitFeatureCount);
  CheckSharedAndFiniteDifferences(spec, 97, 7, internal::kLayoutDimSplitFeatureCount);
}

// Dimension tokens (ModelSpec.layout_dimension_tokens): the tokens of ExampleInfo by hand.
TEST(LayoutDimensionTokensTest, ValuesByHand) {
  const std::vector<float> info = ExampleInfo();
  std::vector<int8_t> vals(18, -1);
  vals[0] = 0, vals[1] = 1, vals[2] = 2;  // the output's layout set to {0, 1, 2}
  ASSERT_EQ(internal::LayoutDimensionTokenCount(info.data()), 3 + 6 + 2);
  constexpr int W = internal::kDimensionTokenWidth;
  std::vector<double> tok(18 * W, -7.0);
  int8_t tensor[18];
  ASSERT_EQ(internal::LayoutDimensionTokens<double>(info.data(), vals.data(), tok.data(), tensor),
            11);
  const double out_elements = std::log1p(3.0 * 256 * 100) / 16;
  // Output dimension 0 (size 3): slot 2 of the graph's {2, 1, 0}, slot 0 of the configuration's.
  const double d0[W] = {
      std::log1p(3.0) / 8, 3.0 / 128, 0, 3.0 / 8, 0, 0, 0, 3.0 / 6, 1, 0, 1.0 / 6, 1, 1,
      out_elements};
  // Output dimension 1 (size 256): slot 1 of both.
  const double d1[W] = {std::log1p(256.0) / 8,
                        0,
                        std::log1p(2.0) / 8,
                        0,
                        std::log1p(32.0) / 8,
                        0,
                        1,
                        2.0 / 6,
                        0,
                        1,
                        2.0 / 6,
                        1,
                        0,
                        out_elements};
  // Input dimension 3 (size 7; no graph layout, none set): no slot.
  const double i3[W] = {std::log1p(7.0) / 8,      7.0 / 128, 0, 7.0 / 8, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                        std::log1p(117649.0) / 16};
  // Kernel dimension 0 (size 128): slot 0 of the graph's {0, 1}, which stays in effect.
  const double k0[W] = {std::log1p(128.0) / 8,
                        0,
                        std::log1p(1.0) / 8,
                        0,
                        std::log1p(16.0) / 8,
                        1,
                        0,
                        1.0 / 6,
                        1,
                        0,
                        1.0 / 6,
                        0,
                        0,
                        std::log1p(1536.0) / 16};
  for (int f = 0; f < W; ++f) {
    EXPECT_DOUBLE_EQ(tok[0 * W + f], d0[f]) << "output dim 0, value " << f;
    EXPECT_DOUBLE_EQ(tok[1 * W + f], d1[f]) << "output dim 1, value " << f;
    EXPECT_DOUBLE_EQ(tok[6 * W + f], i3[f]) << "input dim 3, value " << f;
    EXPECT_DOUBLE_EQ(tok[9 * W + f], k0[f]) << "kernel dim 0, value " << f;
  }
  const int8_t want_tensor[11] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2};
  for (int q = 0; q < 11; ++q) EXPECT_EQ(tensor[q], want_tensor[q]) << q;
  // A configuration whose values name no permutation of the rank: a dimension it leaves out has
  // no slot in effect (0 for its slot values) but the layout still counts as set.
  vals[1] = 0, vals[2] = 0;
  internal::LayoutDimensionTokens<double>(info.data(), vals.data(), tok.data(), tensor);
  EXPECT_DOUBLE_EQ(tok[1 * W + 9], 0.0);
  EXPECT_DOUBLE_EQ(tok[1 * W + 10], 0.0);
  EXPECT_DOUBLE_EQ(tok[1 * W + 11], 1.0);
  EXPECT_DOUBLE_EQ(tok[1 * W + 12], 1.0);
}

// Renumbering a tensor's dimensions (its dims, the graph's layout and the configuration's values
// permuted alike) permutes its tokens and changes none: the encoder's sum is the same.
TEST(LayoutDimensionTokensTest, RenumberingTheDimensionsKeepsTheTokens) {
  Rng rng(41);
  constexpr int W = internal::kDimensionTokenWidth;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> info(36, 0.0f);
    std::vector<int8_t> vals(18, -1);
    for (int t = 0; t < 3; ++t) {
      const int rank = static_cast<int>(rng.UniformInt(7));
      std::vector<int> m2m(rank), cfg(rank);
      for (int i = 0; i < rank; ++i) m2m[i] = cfg[i] = i;
      for (int i = rank - 1; i > 0; --i) {
        std::swap(m2m[i], m2m[rng.UniformInt(i + 1)]);
        std::swap(cfg[i], cfg[rng.UniformInt(i + 1)]);
      }
      const bool graph_layout = rng.UniformInt(4) != 0, set = rng.UniformInt(2) != 0;
      for (int i = 0; i < 6; ++i) {
        info[12 * t + i] = i < rank ? static_cast<float>(1 + rng.UniformInt(300)) : 0.0f;
        info[12 * t + 6 + i] = i < rank && graph_layout ? static_cast<float>(m2m[i]) : -1.0f;
        if (set && i < rank) vals[6 * t + i] = static_cast<int8_t>(cfg[i]);
      }
    }
    // The permutation p of each tensor's dimensions: dimension i becomes p[i].
    std::vector<float> info2 = info;
    std::vector<int8_t> vals2 = vals;
    for (int t = 0; t < 3; ++t) {
      int rank = 0;
      while (rank < 6 && info[12 * t + rank] >= 1) ++rank;
      std::vector<int> p(rank);
      for (int i = 0; i < rank; ++i) p[i] = i;
      for (int i = rank - 1; i > 0; --i) std::swap(p[i], p[rng.UniformInt(i + 1)]);
      for (int i = 0; i < rank; ++i) {
        info2[12 * t + p[i]] = info[12 * t + i];
        const float g = info[12 * t + 6 + i];
        info2[12 * t + 6 + i] = g >= 0 ? static_cast<float>(p[static_cast<int>(g)]) : g;
        const int8_t v = vals[6 * t + i];
        vals2[6 * t + i] = v >= 0 ? static_cast<int8_t>(p[v]) : v;
      }
    }
    std::vector<double> a(18 * W), b(18 * W);
    int8_t ta[18], tb[18];
    const int na = internal::LayoutDimensionTokens<double>(info.data(), vals.data(), a.data(), ta);
    const int nb =
        internal::LayoutDimensionTokens<double>(info2.data(), vals2.data(), b.data(), tb);
    ASSERT_EQ(na, nb);
    auto rows = [&](const std::vector<double>& x, const int8_t* tensor, int n) {
      std::vector<std::vector<double>> r;
      for (int q = 0; q < n; ++q) {
        r.emplace_back(x.begin() + q * W, x.begin() + (q + 1) * W);
        r.back().push_back(tensor[q]);
      }
      std::sort(r.begin(), r.end());
      return r;
    };
    ASSERT_EQ(rows(a, ta, na), rows(b, tb, nb)) << "trial " << trial;
  }
}

TEST(LayoutDimensionTokensTest, SharedEqualsNaiveAndGradientsMatchFiniteDifferences) {
  ASSERT_EQ(ModelSpec().layout_dimension_tokens(), 0);  // off by default
  ModelSpec spec = TensorFeatureSpec();
  spec.set_layout_dimension_tokens(3);
  const internal::ParamLayout pl = Gnn<double>(spec, TaskKind::kLayout).layout();
  ASSERT_EQ(pl.cfg_in,
            18 * spec.layout_value_embedding_dim() + internal::kLayoutTensorFeatureCount + 3 * 3);
  ASSERT_EQ(pl.dim_tokens, 3);
  CheckSharedAndFiniteDifferences(spec, 101, 11, 3 * 3);
  // Through the config-node head too, which reads the same columns.
  spec.set_config_node_head(5);
  CheckSharedAndFiniteDifferences(spec, 103, 13, 3 * 3);
}

// The features looked up in tensor_logs (what the model computes with) against the functions
// above, to the bit, for float and double: random tensors with dims around the paddings'
// boundaries, missing and rank-deficient tensors, graph layouts set or not, and configuration
// values over every dimension, the default and out-of-range ones.
template <typename T>
void ExpectLookupsEqualTheFunctions(uint64_t seed) {
  Rng rng(seed);
  const float dims[] = {0, 1, 2, 3, 7, 8, 9, 12, 100, 127, 128, 129, 256, 1000, 4097};
  internal::GraphStructure gs;
  const int nodes = 200;
  for (int j = 0; j < nodes; ++j) gs.config_nodes.push_back(j);
  gs.tensor_info.assign(nodes * internal::kLayoutTensorInfoWidth, 0.0f);
  for (int j = 0; j < nodes; ++j) {
    for (int t = 0; t < 3; ++t) {
      float* d = gs.tensor_info.data() + j * internal::kLayoutTensorInfoWidth + 12 * t;
      const int rank = static_cast<int>(rng.UniformInt(7));
      for (int i = 0; i < 6; ++i) d[i] = i < rank ? dims[rng.UniformInt(15)] : 0.0f;
      if (rng.UniformInt(8) == 0) d[rng.UniformInt(6)] = dims[rng.UniformInt(15)];  // a gap
      const bool laid_out = rng.UniformInt(3) > 0;
      for (int i = 0; i < 6; ++i) {
        d[6 + i] = laid_out && i < rank ? static_cast<float>(rank - 1 - i) : -1.0f;
      }
    }
  }
  internal::FillLayoutTensorLogs(&gs);  // as FillLayoutTensorInfo does after the info
  ASSERT_EQ(gs.tensor_logs.size(), nodes * 3u * internal::kLayoutTensorLogWidth);
  int64_t compared = 0;
  for (int j = 0; j < nodes; ++j) {
    const float* info = gs.tensor_info.data() + j * internal::kLayoutTensorInfoWidth;
    const double* logs = gs.tensor_logs.data() + j * 3 * internal::kLayoutTensorLogWidth;
    for (int trial = 0; trial < 400; ++trial) {
      int8_t vals[18];
      for (int i = 0; i < 18; ++i) vals[i] = static_cast<int8_t>(rng.UniformInt(9)) - 1;  // -1..7
      if (trial % 4 == 0) {
        for (int i = 0; i < 18; ++i) vals[i] = static_cast<int8_t>(info[(i / 6) * 12 + 6 + i % 6]);
      }
      T want[18], got[18];
      internal::LayoutTensorFeatures<T>(info, vals, want);
      internal::LayoutTensorFeaturesLookup<T>(info, logs, vals, got);
      for (int i = 0; i < 18; ++i) ASSERT_EQ(got[i], want[i]) << j << " " << trial << " " << i;
      internal::LayoutSizeFeatures<T>(info, vals, want);
      internal::LayoutSizeFeaturesLookup<T>(info, logs, vals, got);
      for (int i = 0; i < 9; ++i) ASSERT_EQ(got[i], want[i]) << j << " " << trial << " " << i;
      compared += 27;
    }
  }
  EXPECT_EQ(compared, nodes * 400 * 27);
}

TEST(LayoutTensorFeaturesTest, LookupsEqualTheFunctionsToTheBit) {
  ExpectLookupsEqualTheFunctions<float>(5);
  ExpectLookupsEqualTheFunctions<double>(6);
}

}  // namespace
}  // namespace tpugraphs::model
