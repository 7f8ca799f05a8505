#include "tpugraphs/train/ridge_baseline.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <string>

#include "tpugraphs/common/rng.h"
#include "tpugraphs/eval/metrics.h"
#include "tpugraphs/train/config_sampling.h"

namespace tpugraphs::train {
namespace {}  // namespace

StatusOr<LayoutRidge> LayoutRidge::Fit(const int8_t* configs, int64_t k, int64_t nc,
                                       const double* targets, double lambda) {
  if (k < 1) return InvalidArgumentError("ridge baseline: no training rows");
  if (!(lambda > 0)) return InvalidArgumentError("ridge baseline: lambda must be > 0");
  for (int64_t i = 0; i < k; ++i) {
    if (!std::isfinite(targets[i])) {
      return InvalidArgumentError("ridge baseline: target " + std::to_string(i) + " is not finite");
    }
  }
  LayoutRidge r;
  r.nc_ = nc;
  const int64_t slots = nc * kLayoutConfigFeatureCount;
  r.columns_.resize(slots);
  int64_t d = 0;
  for (int64_t s = 0; s < slots; ++s) {
    // Distinct values of this slot, ascending, so column numbering is deterministic.
    std::vector<int8_t> values;
    for (int64_t i = 0; i < k; ++i) values.push_back(configs[i * slots + s]);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    if (values.size() < 2) continue;  // constant over the training rows: carries nothing
    for (int8_t v : values) r.columns_[s].push_back({v, d++});
  }
  if (d > kMaxRidgeColumns) {
    return ResourceExhaustedError("ridge baseline: " + std::to_string(d) +
                                  " one-hot columns exceed the limit of " +
                                  std::to_string(kMaxRidgeColumns) + " (a " + std::to_string(d) +
                                  " x " + std::to_string(d) + " system would not fit in memory)");
  }
  // Normal equations in the primal, accumulated over blocks of rows so that memory is
  // O(d^2 + block * d) whatever k is: with the column means mu and centred targets yc,
  // Xc^T Xc = X^T X - k mu mu^T and Xc^T yc = X^T yc (yc sums to zero).
  Eigen::VectorXd y = Eigen::Map<const Eigen::VectorXd>(targets, k);
  r.intercept_ = y.mean();
  y.array() -= r.intercept_;
  Eigen::MatrixXd xtx = Eigen::MatrixXd::Zero(d, d);
  Eigen::VectorXd xty = Eigen::VectorXd::Zero(d);
  Eigen::VectorXd sums = Eigen::VectorXd::Zero(d);
  constexpr int64_t kBlockRows = 512;
  Eigen::MatrixXd block(kBlockRows, d);
  for (int64_t first = 0; first < k; first += kBlockRows) {
    const int64_t rows = std::min(kBlockRows, k - first);
    block.topRows(rows).setZero();
    for (int64_t i = 0; i < rows; ++i) {
      const int8_t* row = configs + (first + i) * slots;
      for (int64_t s = 0; s < slots; ++s) {
        for (const auto& [v, c] : r.columns_[s]) {
          if (row[s] == v) block(i, c) = 1.0;
        }
      }
    }
    auto b = block.topRows(rows);
    xtx.selfadjointView<Eigen::Lower>().rankUpdate(b.transpose());
    xty.noalias() += b.transpose() * y.segment(first, rows);
    sums += b.colwise().sum().transpose();
  }
  const Eigen::VectorXd means = sums / static_cast<double>(k);
  r.column_means_.assign(means.data(), means.data() + d);
  Eigen::VectorXd w = Eigen::VectorXd::Zero(d);
  if (d > 0) {
    Eigen::MatrixXd a = xtx.selfadjointView<Eigen::Lower>();
    a.noalias() -= static_cast<double>(k) * means * means.transpose();
    a.diagonal().array() += lambda;
    w = a.ldlt().solve(xty);
  }
  r.weights_.assign(w.data(), w.data() + d);
  return r;
}

std::vector<double> LayoutRidge::Predict(const int8_t* configs, int64_t k) const {
  const int64_t slots = nc_ * kLayoutConfigFeatureCount;
  double base = intercept_;
  for (size_t c = 0; c < weights_.size(); ++c) base -= column_means_[c] * weights_[c];
  std::vector<double> out(k, base);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t s = 0; s < slots; ++s) {
      for (const auto& [v, c] : columns_[s]) {
        if (configs[i * slots + s] == v) out[i] += weights_[c];
      }
    }
  }
  return out;
}

StatusOr<RidgeBaselineResult> RunLayoutRidgeBaseline(const Graph& g,
                                                     const RidgeBaselineOptions& options) {
  if (!g.is_layout()) return InvalidArgumentError("ridge baseline: " + g.Id() + " is not layout");
  if (options.num_seeds < 1) return InvalidArgumentError("ridge baseline: num_seeds must be >= 1");
  TPUG_ASSIGN_OR_RETURN(std::vector<uint64_t> hashes, HashGraphConfigs(g));
  const int64_t nc = g.num_config_nodes();
  const int64_t row = nc * kLayoutConfigFeatureCount;
  auto gather = [&](const std::vector<int64_t>& idx, std::vector<int8_t>* values,
                    std::vector<double>* runtimes) {
    values->clear();
    runtimes->clear();
    for (int64_t i : idx) {
      values->insert(values->end(), g.node_config_feat.begin() + i * row,
                     g.node_config_feat.begin() + (i + 1) * row);
      runtimes->push_back(g.NormalizedRuntime(i));
    }
  };
  RidgeBaselineResult result;
  for (int s = 0; s < options.num_seeds; ++s) {
    ConfigSplit split = SplitByDistinctConfig(hashes, options.holdout_fraction,
                                              DeriveSeed(options.seed, "holdout", s));
    if (split.holdout.size() < 2 || split.train.empty()) {
      return FailedPreconditionError("ridge baseline: graph " + g.Id() +
                                     " has too few distinct configurations to split");
    }
    std::vector<int8_t> train_values, test_values;
    std::vector<double> train_rt, test_rt;
    gather(split.train, &train_values, &train_rt);
    gather(split.holdout, &test_values, &test_rt);
    for (double& t : train_rt) {
      if (!(t > 0))
        return InvalidArgumentError("ridge baseline: non-positive runtime in " + g.Id());
      t = std::log(t);
    }
    TPUG_ASSIGN_OR_RETURN(
        LayoutRidge ridge,
        LayoutRidge::Fit(train_values.data(), static_cast<int64_t>(split.train.size()), nc,
                         train_rt.data(), options.lambda));
    std::vector<double> pred =
        ridge.Predict(test_values.data(), static_cast<int64_t>(split.holdout.size()));
    result.kendall_tau.push_back(eval::KendallTauB(pred, test_rt));
  }
  double sum = 0.0;
  for (double t : result.kendall_tau) sum += t;
  result.mean = sum / result.kendall_tau.size();
  double ss = 0.0;
  for (double t : result.kendall_tau) ss += (t - result.mean) * (t - result.mean);
  result.stddev =
      result.kendall_tau.size() > 1 ? std::sqrt(ss / (result.kendall_tau.size() - 1)) : 0.0;
  return result;
}

}  // namespace tpugraphs::train
