#include "tpugraphs/eval/measurement_noise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tpugraphs/common/rng.h"

namespace tpugraphs::eval {
namespace {

TEST(MeasurementNoiseTest, ValuesByHand) {
  // Config 7 measured at 100 and 102, config 9 at 200 and 196, config 5 once at 400.
  const std::vector<int64_t> r = {100, 200, 400, 102, 196};
  const std::vector<uint64_t> key = {7, 9, 5, 7, 9};
  const MeasurementNoise m = EstimateMeasurementNoise(r, key);
  EXPECT_EQ(m.repeated_configs, 2);
  // Pooled over 2 degrees of freedom: each pair contributes (log a - log b)^2 / 2.
  const double d1 = std::log(102.0 / 100.0), d2 = std::log(200.0 / 196.0);
  const double noise = std::sqrt((d1 * d1 / 2 + d2 * d2 / 2) / 2);
  ASSERT_TRUE(m.noise.has_value());
  EXPECT_NEAR(*m.noise, noise, 1e-12);
  // Retest: first measurements (100, 200) against second (102, 196): same order, tau 1.
  ASSERT_TRUE(m.retest_kendall.has_value());
  EXPECT_DOUBLE_EQ(*m.retest_kendall, 1.0);
  // Ceiling over the three distinct configs' mean logs.
  const double t[3] = {(std::log(100.0) + std::log(102.0)) / 2,
                       (std::log(200.0) + std::log(196.0)) / 2, std::log(400.0)};
  const double want = (std::erf(std::fabs(t[0] - t[1]) / (2 * noise)) +
                       std::erf(std::fabs(t[0] - t[2]) / (2 * noise)) +
                       std::erf(std::fabs(t[1] - t[2]) / (2 * noise))) /
                      3;
  ASSERT_TRUE(m.ceiling_upper.has_value());
  EXPECT_NEAR(*m.ceiling_upper, want, 1e-12);
  // Two repeats are too few to calibrate the shrinkage.
  EXPECT_FALSE(m.ceiling.has_value());
}

TEST(MeasurementNoiseTest, UndefinedWithoutRepeatsOrRuntimes) {
  const std::vector<int64_t> r = {100, 200, 300};
  const MeasurementNoise none = EstimateMeasurementNoise(r, std::vector<uint64_t>{1, 2, 3});
  EXPECT_EQ(none.repeated_configs, 0);
  EXPECT_FALSE(none.noise.has_value());
  EXPECT_FALSE(none.ceiling_upper.has_value());
  // Hidden test runtimes (0): repeats are counted, nothing is estimated.
  const MeasurementNoise hidden =
      EstimateMeasurementNoise(std::vector<int64_t>{0, 0, 0}, std::vector<uint64_t>{1, 1, 2});
  EXPECT_EQ(hidden.repeated_configs, 1);
  EXPECT_FALSE(hidden.noise.has_value());
  // Exact repeats: zero noise, and every pair of distinct runtimes is kept in order.
  const MeasurementNoise exact = EstimateMeasurementNoise(std::vector<int64_t>{5, 5, 9, 9, 7},
                                                          std::vector<uint64_t>{1, 1, 2, 2, 3});
  ASSERT_TRUE(exact.noise.has_value());
  EXPECT_EQ(*exact.noise, 0.0);
  EXPECT_DOUBLE_EQ(*exact.ceiling_upper, 1.0);
}

// A graph drawn from known truths: the estimates must find the noise that made it, and the
// calibrated ceiling the Kendall the truths themselves would reach against one measurement.
TEST(MeasurementNoiseTest, RecoversTheNoiseAndCeilingOfASimulatedGraph) {
  Rng rng(17);
  const double sigma = 2e-4;  // relative deviation of one measurement
  const int64_t configs = 1200, repeats = 300;
  std::vector<double> truth(configs);
  // Most configurations within a few noise deviations of each other, a few far slower: the
  // shape of the release's U-Net file, where the noise decides most pairs.
  for (auto& t : truth) {
    t = std::log(1e9) +
        (rng.Uniform() < 0.9 ? 1.5 * sigma * rng.Normal() : 0.01 + 0.01 * rng.Uniform());
  }
  std::vector<int64_t> runtimes;
  std::vector<uint64_t> keys;
  auto measure = [&](int64_t c) {
    runtimes.push_back(std::llround(std::exp(truth[c] + sigma * rng.Normal())));
    keys.push_back(static_cast<uint64_t>(c) * 2654435761u + 1);
  };
  for (int64_t c = 0; c < configs; ++c) measure(c);
  for (int64_t c = 0; c < repeats; ++c) measure(c * 4);  // a second measurement of 300 configs
  const MeasurementNoise m = EstimateMeasurementNoise(runtimes, keys);
  EXPECT_EQ(m.repeated_configs, repeats);
  ASSERT_TRUE(m.noise.has_value());
  EXPECT_NEAR(*m.noise / sigma, 1.0, 0.1);
  // The Kendall the true runtimes reach against one measurement, over the estimator's sample
  // (every second config: 1,200 distinct is over kMaxCeilingConfigs).
  double sum = 0;
  int64_t pairs = 0;
  for (int64_t i = 0; i < configs; i += 2) {
    for (int64_t j = i + 2; j < configs; j += 2) {
      sum += std::erf(std::fabs(truth[i] - truth[j]) / (2 * sigma));
      ++pairs;
    }
  }
  const double ceiling = sum / static_cast<double>(pairs);
  ASSERT_TRUE(m.ceiling.has_value());
  ASSERT_TRUE(m.ceiling_upper.has_value());
  EXPECT_NEAR(*m.ceiling, ceiling, 0.05) << "upper " << *m.ceiling_upper;
  // The upper estimate is above the truth's ceiling, and the calibrated one closer to it.
  EXPECT_GT(*m.ceiling_upper, ceiling);
  EXPECT_LT(std::fabs(*m.ceiling - ceiling), std::fabs(*m.ceiling_upper - ceiling));
}

// More distinct and repeated configurations than kMaxCeilingConfigs: both enter as samples.
TEST(MeasurementNoiseTest, LargeGraphsAreSampled) {
  Rng rng(5);
  const double sigma = 1e-4;
  const int64_t configs = 30000, repeats = 6000;
  std::vector<double> truth(configs);
  for (auto& t : truth) t = std::log(1e8) + 3 * sigma * rng.Normal();
  std::vector<int64_t> runtimes;
  std::vector<uint64_t> keys;
  for (int64_t k = 0; k < configs + repeats; ++k) {
    const int64_t c = k < configs ? k : (k - configs) * 5;
    runtimes.push_back(std::llround(std::exp(truth[c] + sigma * rng.Normal())));
    keys.push_back(static_cast<uint64_t>(c));
  }
  const MeasurementNoise m = EstimateMeasurementNoise(runtimes, keys);
  EXPECT_EQ(m.repeated_configs, repeats);
  ASSERT_TRUE(m.noise.has_value());
  EXPECT_NEAR(*m.noise / sigma, 1.0, 0.05);
  ASSERT_TRUE(m.retest_kendall.has_value());
  ASSERT_TRUE(m.ceiling.has_value());
  ASSERT_TRUE(m.ceiling_upper.has_value());
  EXPECT_LE(*m.ceiling, *m.ceiling_upper + 1e-12);
  EXPECT_GT(*m.ceiling, *m.retest_kendall);
}

}  // namespace
}  // namespace tpugraphs::eval
