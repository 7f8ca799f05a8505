#include "tpugraphs/eval/measurement_noise.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "tpugraphs/eval/metrics.h"

namespace tpugraphs::eval {
namespace {

struct Group {
  double sum = 0.0, first = 0.0, second = 0.0;
  int64_t count = 0;
};

// Expected share of tau of a pair whose true log runtimes differ by d (see the header).
double Agreement(double d, double noise) {
  if (noise > 0) return std::erf(std::fabs(d) / (2.0 * noise));
  return d != 0 ? 1.0 : 0.0;
}

// Mean of Agreement(t_i - t_j)^power over the pairs i < j of t.
double MeanPairAgreement(const std::vector<double>& t, double noise, int power) {
  const size_t n = t.size();
  if (n < 2) return NAN;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const double a = Agreement(t[i] - t[j], noise);
      sum += power == 2 ? a * a : a;
    }
  }
  return sum / (static_cast<double>(n) * static_cast<double>(n - 1) / 2.0);
}

// Posterior means of `values` under a Gaussian kernel of bandwidth bw over `prior`.
std::vector<double> Shrink(const std::vector<double>& values, const std::vector<double>& prior,
                           double bw) {
  if (!(bw > 0)) return values;
  std::vector<double> out(values.size());
  const double inv = 1.0 / bw;
  for (size_t i = 0; i < values.size(); ++i) {
    double wsum = 0.0, vsum = 0.0;
    for (double p : prior) {
      const double z = (values[i] - p) * inv;
      const double w = std::exp(-0.5 * z * z);
      wsum += w;
      vsum += w * p;
    }
    out[i] = wsum > 0 ? vsum / wsum : values[i];
  }
  return out;
}

}  // namespace

MeasurementNoise EstimateMeasurementNoise(std::span<const int64_t> runtimes,
                                          std::span<const uint64_t> config_keys) {
  MeasurementNoise out;
  const size_t n = std::min(runtimes.size(), config_keys.size());
  std::unordered_map<uint64_t, size_t> index;
  std::vector<Group> groups;
  std::vector<double> log_runtime(n);
  std::vector<size_t> group_of(n);
  bool positive = true;
  for (size_t k = 0; k < n; ++k) {
    if (runtimes[k] <= 0) positive = false;
    const double x = std::log(static_cast<double>(std::max<int64_t>(runtimes[k], 1)));
    auto [it, fresh] = index.emplace(config_keys[k], groups.size());
    if (fresh) groups.emplace_back();
    log_runtime[k] = x;
    group_of[k] = it->second;
    Group& g = groups[it->second];
    if (g.count == 0) g.first = x;
    if (g.count == 1) g.second = x;
    g.sum += x;
    ++g.count;
  }
  std::vector<size_t> repeated;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].count > 1) repeated.push_back(g);
  }
  out.repeated_configs = static_cast<int64_t>(repeated.size());
  if (repeated.empty() || !positive) return out;

  // Pooled within-configuration deviation of log runtime.
  std::vector<double> mean(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) mean[g] = groups[g].sum / groups[g].count;
  double ss = 0.0;
  int64_t dof = 0;
  for (size_t k = 0; k < n; ++k) {
    const double d = log_runtime[k] - mean[group_of[k]];
    ss += d * d;
  }
  for (size_t g : repeated) dof += groups[g].count - 1;
  const double noise = std::sqrt(ss / static_cast<double>(dof));
  out.noise = noise;

  if (repeated.size() >= 2) {
    std::vector<double> a, b;
    for (size_t g : repeated) {
      a.push_back(groups[g].first);
      b.push_back(groups[g].second);
    }
    const double tau = KendallTauB(a, b);
    if (std::isfinite(tau)) out.retest_kendall = tau;
  }

  // The distinct configurations' means, as an even sample of at most kMaxCeilingConfigs.
  const size_t stride =
      (groups.size() + kMaxCeilingConfigs - 1) / static_cast<size_t>(kMaxCeilingConfigs);
  std::vector<double> sample;
  for (size_t g = 0; g < groups.size(); g += std::max<size_t>(stride, 1)) sample.push_back(mean[g]);
  if (sample.size() < 2) return out;
  out.ceiling_upper = MeanPairAgreement(sample, noise, 1);

  if (static_cast<int64_t>(repeated.size()) < kMinRepeatsToCalibrate || !out.retest_kendall) {
    return out;
  }
  // The repeated configurations' means, an even sample of at most kMaxCeilingConfigs too.
  std::vector<double> repeated_means;
  const size_t repeated_stride =
      (repeated.size() + kMaxCeilingConfigs - 1) / static_cast<size_t>(kMaxCeilingConfigs);
  for (size_t r = 0; r < repeated.size(); r += std::max<size_t>(repeated_stride, 1)) {
    repeated_means.push_back(mean[repeated[r]]);
  }
  if (!(noise > 0)) {  // exact repeats: nothing to shrink
    out.ceiling = out.ceiling_upper;
    out.shrink = 0.0;
    return out;
  }
  double best_gap = INFINITY, best_a = 0.0;
  for (int step = 0; step <= 20; ++step) {
    const double a = 0.1 * step;
    const double predicted = MeanPairAgreement(Shrink(repeated_means, sample, a * noise), noise, 2);
    const double gap = std::fabs(predicted - *out.retest_kendall);
    if (gap < best_gap) {
      best_gap = gap;
      best_a = a;
    }
  }
  out.shrink = best_a;
  out.ceiling = MeanPairAgreement(Shrink(sample, sample, best_a * noise), noise, 1);
  return out;
}

}  // namespace tpugraphs::eval
