#include "tpugraphs/model/losses.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/model_test_util.h"
#include "tpugraphs/common/rng.h"

namespace tpugraphs::model {
namespace {

struct List {
  std::vector<double> s, r;
};

List RandomList(int64_t k, uint64_t seed, bool ties) {
  Rng rng(seed);
  List l;
  for (int64_t i = 0; i < k; ++i) {
    l.s.push_back(rng.Normal());
    l.r.push_back(ties ? static_cast<double>(rng.UniformInt(4)) + 1 : rng.Uniform() * 10 + 0.1);
  }
  return l;
}

using LossFn = std::function<double(const double*, double*)>;

void CheckLossGradient(const char* name, List l, const LossFn& f) {
  std::vector<double> g(l.s.size(), 0.0);
  f(l.s.data(), g.data());
  testutil::GradCheckReport r = testutil::CheckGradient(
      l.s, g, [&]() { return f(l.s.data(), nullptr); }, 1e-5);
  EXPECT_LT(r.max_rel, 1e-7) << name << ": "
                             << r.Describe([](int64_t i) { return "score " + std::to_string(i); });
  EXPECT_GT(r.checked, 0) << name;
}

TEST(LossesTest, FiniteDifferenceGradients) {
  for (bool ties : {false, true}) {
    List l = RandomList(9, ties ? 3 : 4, ties);
    CheckLossGradient("hinge", l, [&](const double* s, double* d) {
      return PairwiseHingeLoss(s, l.r.data(), 9, 0.3, 1.0, d);
    });
    CheckLossGradient("hinge_log_gap", l, [&](const double* s, double* d) {
      return PairwiseHingeLoss(s, l.r.data(), 9, 0.3, 0.7, d,
                               LossSpec::HINGE_PAIR_WEIGHTING_LOG_GAP) *
             0.7;
    });
    CheckLossGradient("hinge_noise", l, [&](const double* s, double* d) {
      return PairwiseHingeLoss(s, l.r.data(), 9, 0.3, 0.7, d, LossSpec::HINGE_PAIR_WEIGHTING_NOISE,
                               0.2) *
             0.7;
    });
    CheckLossGradient("listmle", l, [&](const double* s, double* d) {
      return ListMleLoss(s, l.r.data(), 9, 0.7, 1.0, d);
    });
    CheckLossGradient("mse_log", l, [&](const double* s, double* d) {
      return MseLoss(s, l.r.data(), 9, LossSpec::MSE_TARGET_CENTERED_LOG, 1.0, 1.0, d);
    });
    CheckLossGradient("mse_scaled", l, [&](const double* s, double* d) {
      return MseLoss(s, l.r.data(), 9, LossSpec::MSE_TARGET_SCALED, 0.1, 1.0, d);
    });
  }
}

TEST(LossesTest, HingeValuesByHand) {
  // r = [3, 1, 2]; pairs (i slower than j): (0,1), (0,2), (2,1). margin 1.
  const double r[3] = {3, 1, 2};
  const double s[3] = {2.0, 0.0, 1.5};
  // 1-(2-0)=-1 -> 0; 1-(2-1.5)=0.5; 1-(1.5-0)=-0.5 -> 0. Mean over 3 pairs = 1/6.
  std::vector<double> d(3, 0.0);
  EXPECT_NEAR(PairwiseHingeLoss(s, r, 3, 1.0, 1.0, d.data()), 0.5 / 3, 1e-15);
  EXPECT_NEAR(d[0], -1.0 / 3, 1e-15);
  EXPECT_NEAR(d[2], 1.0 / 3, 1e-15);
  EXPECT_EQ(d[1], 0.0);
  // Equal runtimes make no pairs: a list of ties has zero loss.
  const double tied[3] = {2, 2, 2};
  EXPECT_EQ(PairwiseHingeLoss(s, tied, 3, 1.0, 1.0, nullptr), 0.0);
}

constexpr LossSpec::HingePairWeighting kLogGap = LossSpec::HINGE_PAIR_WEIGHTING_LOG_GAP;
constexpr LossSpec::HingePairWeighting kNoise = LossSpec::HINGE_PAIR_WEIGHTING_NOISE;

TEST(LossesTest, HingeLogGapWeightsByHand) {
  // r = [e^3, e^0, e^1]: log gaps of the pairs (0,1) 3, (0,2) 2, (2,1) 1; mean 2, so the weights
  // are 1.5, 1 and 0.5. Scores all 0, margin 1: every pair is violated by 1.
  const double r[3] = {std::exp(3.0), 1.0, std::exp(1.0)};
  const double s[3] = {0.0, 0.0, 0.0};
  std::vector<double> d(3, 0.0);
  EXPECT_NEAR(PairwiseHingeLoss(s, r, 3, 1.0, 1.0, d.data(), kLogGap), (1.5 + 1 + 0.5) / 3, 1e-12);
  EXPECT_NEAR(d[0], -(1.5 + 1.0) / 3, 1e-12);  // slower side of (0,1) and (0,2)
  EXPECT_NEAR(d[1], (1.5 + 0.5) / 3, 1e-12);   // faster side of (0,1) and (2,1)
  EXPECT_NEAR(d[2], (1.0 - 0.5) / 3, 1e-12);   // faster in (0,2), slower in (2,1)
  // A pair apart by a tenth of the others' gap carries a tenth of their weight: with scores
  // that satisfy every pair but (1,2), the loss is that pair's small weighted violation.
  const double r2[3] = {std::exp(2.0), std::exp(0.1), 1.0};  // gaps 1.9, 2.0, 0.1; mean 4/3
  const double s2[3] = {5.0, 0.0, 0.0};
  EXPECT_NEAR(PairwiseHingeLoss(s2, r2, 3, 1.0, 1.0, nullptr, kLogGap), (0.1 / (4.0 / 3)) * 1.0 / 3,
              1e-12);
  EXPECT_NEAR(PairwiseHingeLoss(s2, r2, 3, 1.0, 1.0, nullptr), 1.0 / 3, 1e-12);
}

TEST(LossesTest, HingeNoiseWeightsByHand) {
  // Noise of relative deviation 0.01 on each runtime. r = [1.1, 1, 1.0001]: log gaps of the
  // pairs (0,1) log 1.1, (0,2) log(1.1 / 1.0001), (2,1) log 1.0001. Weight g = erf(gap / 0.02):
  // pairs apart by 10 % are sure (g = 1 to 1e-10), the pair apart by 0.01 % is not (g = 0.0056).
  const double r[3] = {1.1, 1.0, 1.0001};
  const double s[3] = {0.0, 0.0, 0.0};
  const double g01 = std::erf(std::log(1.1) / 0.02), g02 = std::erf(std::log(1.1 / 1.0001) / 0.02);
  const double g21 = std::erf(std::log(1.0001) / 0.02);
  EXPECT_NEAR(g01, 1.0, 1e-10);
  EXPECT_NEAR(g21, 0.005642, 1e-6);
  const double mean = (g01 + g02 + g21) / 3;
  std::vector<double> d(3, 0.0);
  // Every pair violated by the margin 1: the loss is the mean weight over the mean, 1.
  EXPECT_NEAR(PairwiseHingeLoss(s, r, 3, 1.0, 1.0, d.data(), kNoise, 0.01), 1.0, 1e-12);
  EXPECT_NEAR(d[0], -(g01 + g02) / mean / 3, 1e-12);
  EXPECT_NEAR(d[1], (g01 + g21) / mean / 3, 1e-12);
  EXPECT_NEAR(d[2], (g02 - g21) / mean / 3, 1e-12);
  // Scores that get (0,1) and (0,2) right and (2,1) wrong: only the unsure pair is left, at
  // its small weight, where the uniform hinge counts it in full.
  const double s2[3] = {5.0, 0.0, 0.0};
  EXPECT_NEAR(PairwiseHingeLoss(s2, r, 3, 1.0, 1.0, nullptr, kNoise, 0.01), g21 / mean / 3, 1e-12);
  EXPECT_NEAR(PairwiseHingeLoss(s2, r, 3, 1.0, 1.0, nullptr), 1.0 / 3, 1e-12);
  // Without a noise level the weighting is the uniform one.
  EXPECT_NEAR(PairwiseHingeLoss(s2, r, 3, 1.0, 1.0, nullptr, kNoise, 0.0), 1.0 / 3, 1e-12);
}

TEST(LossesTest, NoiseWeightingNeedsANoiseLevel) {
  LossSpec spec;
  spec.set_hinge_pair_weighting(LossSpec::HINGE_PAIR_WEIGHTING_NOISE);
  Status st = ValidateLossSpec(spec);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("hinge_noise"), std::string::npos) << st.message();
  spec.set_hinge_noise(1.6e-5);
  EXPECT_TRUE(ValidateLossSpec(spec).ok());
  spec.set_hinge_noise(-1);
  EXPECT_FALSE(ValidateLossSpec(spec).ok());
}

TEST(LossesTest, ListMleByHandAndOrientation) {
  // Two items, r = [1, 2]: slowest first is item 1. L = (lse(s1, s0) - s1 + 0) / 2.
  const double r[2] = {1, 2};
  const double s[2] = {0.3, -0.2};
  const double want = (std::log(std::exp(-0.2) + std::exp(0.3)) - (-0.2)) / 2;
  EXPECT_NEAR(ListMleLoss(s, r, 2, 1.0, 1.0, nullptr), want, 1e-15);
  // Scores that increase with runtime give a lower loss than the reverse.
  const double good[2] = {-1, 1}, bad[2] = {1, -1};
  EXPECT_LT(ListMleLoss(good, r, 2, 1.0, 1.0, nullptr), ListMleLoss(bad, r, 2, 1.0, 1.0, nullptr));
}

TEST(LossesTest, ListMleIsStableForLongListsAndLargeScores) {
  const int64_t k = 20000;
  std::vector<double> s(k), r(k), d(k, 0.0);
  for (int64_t i = 0; i < k; ++i) {
    r[i] = static_cast<double>(i);
    s[i] = 800.0 * std::sin(0.37 * i);  // exp() of these overflows without log-sum-exp
  }
  const double l = ListMleLoss(s.data(), r.data(), k, 1.0, 1.0, d.data());
  EXPECT_TRUE(std::isfinite(l));
  double sum = 0;
  for (double v : d) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
  }
  // Gradients of a softmax-based loss sum to zero over the list (shift invariance).
  EXPECT_NEAR(sum, 0.0, 1e-9);
}

TEST(LossesTest, ComputeLossIsTheWeightedSum) {
  List l = RandomList(7, 9, false);
  LossSpec spec;
  spec.set_pairwise_hinge_weight(0.5);
  spec.set_hinge_margin(0.2);
  spec.set_listmle_weight(2.0);
  spec.set_listmle_temperature(3.0);
  spec.set_mse_weight(0.25);
  std::vector<float> sf(l.s.begin(), l.s.end()), df(7);
  std::vector<double> sd(sf.begin(), sf.end()), dd(7, 0.0);
  const double got = ComputeLoss(spec, sf.data(), l.r.data(), 7, df.data());
  double want =
      0.5 * PairwiseHingeLoss(sd.data(), l.r.data(), 7, spec.hinge_margin(), 0.5, dd.data());
  want += 2.0 * ListMleLoss(sd.data(), l.r.data(), 7, 3.0, 2.0, dd.data());
  want += 0.25 * MseLoss(sd.data(), l.r.data(), 7, LossSpec::MSE_TARGET_CENTERED_LOG, 1.0, 0.25,
                         dd.data());
  EXPECT_NEAR(got, want, 1e-12);
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(df[i], dd[i], 1e-6);
  EXPECT_EQ(ComputeLoss(spec, sf.data(), l.r.data(), 0, df.data()), 0.0);
}

TEST(LossesTest, ValidateLossSpec) {
  LossSpec ok;
  EXPECT_TRUE(ValidateLossSpec(ok).ok());
  LossSpec neg;
  neg.set_listmle_weight(-1);
  EXPECT_FALSE(ValidateLossSpec(neg).ok());
  LossSpec zero;
  zero.set_pairwise_hinge_weight(0);
  EXPECT_FALSE(ValidateLossSpec(zero).ok());
  LossSpec temp;
  temp.set_listmle_temperature(0);
  EXPECT_NE(ValidateLossSpec(temp).ToString().find("listmle_temperature"), std::string::npos);
}

}  // namespace
}  // namespace tpugraphs::model
