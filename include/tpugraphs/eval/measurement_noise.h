// How much of a graph's ranking its own measurements allow (docs/stats.md, "Measurement noise").
//
// A dataset that measured some configurations more than once (the release's layout files do:
// the U-Net file holds 1,965 runtimes of 1,469 distinct configurations) tells how far one
// measurement of a runtime is from another. From that:
//   - noise: the pooled standard deviation of log runtime within the repeated configurations,
//     sqrt(sum_g sum_k (log r_gk - mean_g)^2 / sum_g (n_g - 1)): the relative deviation of one
//     measurement (1e-5 = 0.001 %);
//   - retest_kendall: Kendall's tau-b between the first and the second measurement of the
//     repeated configurations, what a remeasurement ranks the first measurements at;
//   - ceiling_upper: the Kendall a model that knew each configuration's true runtime would
//     reach against one measurement, taking each distinct configuration's mean log runtime as
//     its truth. Under Gaussian noise of deviation `noise` on each measurement, a pair whose true
//     log runtimes differ by d keeps its order with probability Phi(d / (sqrt(2) noise)), so its
//     expected share of tau is erf(|d| / (2 noise)); ceiling_upper is the mean of that over the
//     pairs of distinct configurations. The means still carry noise, which spreads them wider
//     than the truth, so this is an upper estimate;
//   - ceiling: the same with the truths shrunk towards their neighbours (an empirical-Bayes
//     posterior mean under a Gaussian kernel of bandwidth a * noise, the configurations' means
//     as the prior), a chosen on a grid so that the retest Kendall the shrunk truths predict
//     for the repeated configurations (the mean of erf(|d| / (2 noise))^2 over their pairs:
//     both measurements of a pair keep the true order, or both lose it) matches the observed
//     retest_kendall. Needs at least kMinRepeatsToCalibrate repeated configurations.
// Distinct configurations beyond kMaxCeilingConfigs enter the ceilings as an even sample (every
// ceil(n / kMaxCeilingConfigs)-th by first appearance), and so do repeated ones beyond it the
// calibration, so a graph costs O(n log n + kMaxCeilingConfigs^2) whatever its size.
//
// Thread-safety: a pure function.
#ifndef TPUGRAPHS_EVAL_MEASUREMENT_NOISE_H_
#define TPUGRAPHS_EVAL_MEASUREMENT_NOISE_H_

#include <cstdint>
#include <optional>
#include <span>

namespace tpugraphs::eval {

inline constexpr int64_t kMinRepeatsToCalibrate = 10;
inline constexpr int64_t kMaxCeilingConfigs = 1000;

struct MeasurementNoise {
  int64_t repeated_configs = 0;          // distinct configurations measured more than once
  std::optional<double> noise;           // unset without repeats or with a runtime <= 0
  std::optional<double> retest_kendall;  // unset with fewer than 2 repeats or all tied
  std::optional<double> ceiling_upper;   // unset without a noise or with < 2 configurations
  std::optional<double> ceiling;         // unset unless calibrated (see above)
  std::optional<double> shrink;          // the chosen bandwidth factor a
};

// runtimes[k] and config_keys[k] (equal keys = the same configuration) of one graph's configs.
// REQUIRES: runtimes.size() == config_keys.size().
MeasurementNoise EstimateMeasurementNoise(std::span<const int64_t> runtimes,
                                          std::span<const uint64_t> config_keys);

}  // namespace tpugraphs::eval

#endif  // TPUGRAPHS_EVAL_MEASUREMENT_NOISE_H_
