#include "tpugraphs/model/losses.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace tpugraphs::model {
namespace {

// log(exp(a) + exp(b)) without overflow; -inf is the identity.
double LogAddExp(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::fabs(a - b)));
}

}  // namespace

double PairwiseHingeLoss(const double* scores, const double* runtimes, int64_t k, double margin,
                         double weight, double* dscores, LossSpec::HingePairWeighting weighting,
                         double noise) {
  // Mean over ordered pairs (i, j) with r_i > r_j of w_ij * max(0, margin - (s_i - s_j)), with
  // w_ij = 1, or g_ij over the mean of g over the pairs, g_ij = |log r_i - log r_j| (log_gap) or
  // erf(|log r_i - log r_j| / (2 noise)) (noise).
  const bool log_gap = weighting == LossSpec::HINGE_PAIR_WEIGHTING_LOG_GAP;
  const bool by_noise = weighting == LossSpec::HINGE_PAIR_WEIGHTING_NOISE && noise > 0;
  const bool gapped = log_gap || by_noise;
  auto gap_weight = [&](double gap) { return by_noise ? std::erf(gap / (2.0 * noise)) : gap; };
  int64_t pairs = 0;
  double gap_sum = 0.0;
  std::vector<double> logr(gapped ? k : 0);
  for (int64_t i = 0; i < static_cast<int64_t>(logr.size()); ++i) {
    logr[i] = std::log(std::max(runtimes[i], 1e-30));
  }
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      if (!(runtimes[i] > runtimes[j])) continue;
      ++pairs;
      if (gapped) gap_sum += gap_weight(logr[i] - logr[j]);
    }
  }
  if (pairs == 0) return 0.0;
  // Runtimes that differ only below the log's resolution: every pair weighs the same.
  const bool weighted = gapped && gap_sum > 0;
  const double inv = 1.0 / static_cast<double>(pairs);
  const double inv_gap = weighted ? static_cast<double>(pairs) / gap_sum : 0.0;
  double loss = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      if (!(runtimes[i] > runtimes[j])) continue;
      const double v = margin - (scores[i] - scores[j]);
      if (v > 0) {
        const double w = weighted ? gap_weight(logr[i] - logr[j]) * inv_gap : 1.0;
        loss += w * v;
        if (dscores != nullptr) {
          dscores[i] -= weight * w * inv;
          dscores[j] += weight * w * inv;
        }
      }
    }
  }
  return loss * inv;
}

double ListMleLoss(const double* scores, const double* runtimes, int64_t k, double temperature,
                   double weight, double* dscores) {
  if (k == 0) return 0.0;
  // Slowest first; ties by ascending index.
  std::vector<int64_t> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return runtimes[a] > runtimes[b]; });
  std::vector<double> z(k), lse(k);
  for (int64_t i = 0; i < k; ++i) z[i] = scores[order[i]] / temperature;
  // lse[i] = log sum_{m >= i} exp(z[m]), accumulated from the end (stable for long lists).
  double acc = -INFINITY;
  for (int64_t i = k - 1; i >= 0; --i) lse[i] = acc = LogAddExp(acc, z[i]);
  double loss = 0.0;
  for (int64_t i = 0; i < k; ++i) loss += lse[i] - z[i];
  const double inv_k = 1.0 / static_cast<double>(k);
  if (dscores != nullptr) {
    // d/dz_j = sum_{i <= j} exp(z_j - lse_i) - 1 = exp(z_j + c_j) - 1,
    // c_j = log sum_{i <= j} exp(-lse_i) (running log-sum-exp from the front).
    double c = -INFINITY;
    for (int64_t j = 0; j < k; ++j) {
      c = LogAddExp(c, -lse[j]);
      const double dz = std::exp(z[j] + c) - 1.0;
      dscores[order[j]] += weight * inv_k * dz / temperature;
    }
  }
  return loss * inv_k;
}

double MseLoss(const double* scores, const double* runtimes, int64_t k, LossSpec::MseTarget target,
               double scale, double weight, double* dscores) {
  if (k == 0) return 0.0;
  std::vector<double> t(k);
  if (target == LossSpec::MSE_TARGET_CENTERED_LOG) {
    double mean = 0.0;
    for (int64_t i = 0; i < k; ++i) {
      t[i] = std::log(std::max(runtimes[i], 1e-30));
      mean += t[i];
    }
    mean /= static_cast<double>(k);
    for (double& v : t) v -= mean;
  } else {
    for (int64_t i = 0; i < k; ++i) t[i] = runtimes[i] * scale;
  }
  const double inv_k = 1.0 / static_cast<double>(k);
  double loss = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    const double d = scores[i] - t[i];
    loss += d * d;
    if (dscores != nullptr) dscores[i] += weight * 2.0 * d * inv_k;
  }
  return loss * inv_k;
}

double ComputeLoss(const LossSpec& spec, const float* scores, const double* runtimes, int64_t k,
                   float* dscores) {
  if (k <= 0) return 0.0;
  std::vector<double> s(scores, scores + k);
  std::vector<double> ds(dscores != nullptr ? k : 0, 0.0);
  double* dp = dscores != nullptr ? ds.data() : nullptr;
  double loss = 0.0;
  if (spec.pairwise_hinge_weight() != 0) {
    loss +=
        spec.pairwise_hinge_weight() *
        PairwiseHingeLoss(s.data(), runtimes, k, spec.hinge_margin(), spec.pairwise_hinge_weight(),
                          dp, spec.hinge_pair_weighting(), spec.hinge_noise());
  }
  if (spec.listmle_weight() != 0) {
    loss += spec.listmle_weight() * ListMleLoss(s.data(), runtimes, k, spec.listmle_temperature(),
                                                spec.listmle_weight(), dp);
  }
  if (spec.mse_weight() != 0) {
    loss += spec.mse_weight() * MseLoss(s.data(), runtimes, k, spec.mse_target(), spec.mse_scale(),
                                        spec.mse_weight(), dp);
  }
  if (dscores != nullptr) {
    for (int64_t i = 0; i < k; ++i) dscores[i] = static_cast<float>(ds[i]);
  }
  return loss;
}

Status ValidateLossSpec(const LossSpec& spec) {
  auto bad = [](const std::string& field, const std::string& why) {
    return InvalidArgumentError("loss spec: " + field + " " + why);
  };
  const double w[3] = {spec.pairwise_hinge_weight(), spec.listmle_weight(), spec.mse_weight()};
  const char* names[3] = {"pairwise_hinge_weight", "listmle_weight", "mse_weight"};
  for (int i = 0; i < 3; ++i) {
    if (!std::isfinite(w[i]) || w[i] < 0) return bad(names[i], "must be finite and >= 0");
  }
  if (w[0] + w[1] + w[2] <= 0) return bad("weights", "are all zero: no loss to train on");
  if (!std::isfinite(spec.hinge_margin()) || spec.hinge_margin() < 0) {
    return bad("hinge_margin", "must be finite and >= 0");
  }
  if (!std::isfinite(spec.hinge_noise()) || spec.hinge_noise() < 0) {
    return bad("hinge_noise", "must be finite and >= 0");
  }
  if (spec.hinge_pair_weighting() == LossSpec::HINGE_PAIR_WEIGHTING_NOISE &&
      !(spec.hinge_noise() > 0)) {
    return bad("hinge_noise",
               "must be > 0 with hinge_pair_weighting noise (the relative standard deviation of "
               "one runtime measurement; `tpugraphs stats` estimates it)");
  }
  if (!std::isfinite(spec.listmle_temperature()) || !(spec.listmle_temperature() > 0)) {
    return bad("listmle_temperature", "must be finite and > 0");
  }
  if (!std::isfinite(spec.mse_scale()) || !(spec.mse_scale() > 0)) {
    return bad("mse_scale", "must be finite and > 0");
  }
  return Status::Ok();
}

}  // namespace tpugraphs::model
