// The reference baseline for layout ranking: ridge regression of log runtime on one-hot encoded
// layout config values (design.md "Quality bars": about 0.36 Kendall tau on held-out
// configurations of the real layout dump). It sees only the configuration, not the graph, so it
// is a floor a graph model must beat clearly.
//
// Encoding: every (configurable node, slot) pair of the [nc, 18] config values is one categorical
// variable; each value it takes in the training rows becomes one 0/1 column. Values not seen in
// training encode as all zeros. Columns and targets are centred (an unpenalised intercept) and
// the penalty is lambda * ||w||^2. The d x d normal equations of the primal are accumulated over
// blocks of rows (memory O(d^2), linear in the rows) and solved in double precision; d is at most
// kMaxRidgeColumns.
//
// Thread-safety: a fitted LayoutRidge is immutable; Predict may be called concurrently.
#ifndef TPUGRAPHS_TRAIN_RIDGE_BASELINE_H_
#define TPUGRAPHS_TRAIN_RIDGE_BASELINE_H_

#include <cstdint>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"

namespace tpugraphs::train {

// Largest number of one-hot columns Fit accepts (an 8192 x 8192 double system is 512 MiB).
inline constexpr int64_t kMaxRidgeColumns = 8192;

class LayoutRidge {
 public:
  // configs: [k, nc, 18] int8 values of the training rows; targets: [k] (e.g. log runtime).
  // InvalidArgument if k < 1, lambda <= 0 or a target is not finite; ResourceExhausted (saying
  // how many columns) if the one-hot encoding has more than kMaxRidgeColumns columns.
  static StatusOr<LayoutRidge> Fit(const int8_t* configs, int64_t k, int64_t nc,
                                   const double* targets, double lambda);
  // Predicted targets of k rows of [nc, 18] values.
  std::vector<double> Predict(const int8_t* configs, int64_t k) const;
  int64_t num_columns() const { return static_cast<int64_t>(weights_.size()); }

 private:
  int64_t nc_ = 0;
  // For each of nc * 18 slots, the (value, column) pairs seen in training.
  std::vector<std::vector<std::pair<int8_t, int64_t>>> columns_;
  std::vector<double> column_means_;
  std::vector<double> weights_;
  double intercept_ = 0.0;
};

struct RidgeBaselineOptions {
  double holdout_fraction = 0.3;  // share of DISTINCT configurations held out
  int num_seeds = 5;
  uint64_t seed = 0;  // split s uses DeriveSeed(seed, "holdout", s)
  double lambda = 1.0;
};

struct RidgeBaselineResult {
  std::vector<double> kendall_tau;  // per seed, on the held-out rows (tau-b vs runtime)
  double mean = 0.0;
  double stddev = 0.0;  // sample standard deviation over seeds
};

// Splits the configs of one layout graph (values loaded) by distinct configuration, fits on the
// training side (target: log runtime) and scores Kendall tau-b on the held-out side, per seed.
StatusOr<RidgeBaselineResult> RunLayoutRidgeBaseline(const Graph& g,
                                                     const RidgeBaselineOptions& options);

}  // namespace tpugraphs::train

#endif  // TPUGRAPHS_TRAIN_RIDGE_BASELINE_H_
