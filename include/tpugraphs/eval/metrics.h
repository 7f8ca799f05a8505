// Ranking metrics of TpuGraphs (docs/metrics.md): tile top-K error, Kendall's tau-b, ordered-pair
// accuracy (OPA) and top-K slowdown, for one graph at a time.
//
// Conventions shared by every function here:
//   - `scores[i]` is a model's score of config i: LOWER = predicted FASTER.
//   - `runtimes[i]` is the runtime the metrics use (Graph::NormalizedRuntime: runtime /
//     normalizer for tile, raw for layout). Lower = faster.
//   - Tie rule for the top-K picks: configs are ordered by (score, position) ascending, i.e. equal
//     scores are broken by the smaller position in the vectors (the config index when a whole
//     graph is evaluated, the position in the eval-index list when it is restricted). The
//     official code uses numpy's default (unstable) argsort, whose tie order is unspecified.
//   - Kendall tau-b and OPA are invariant to ties' order and count ties exactly (see below).
//
// The fast kernels are O(n log n); namespace `reference` holds O(n^2) / O(n log n)-free versions
// written straight from the definitions, used as oracles in tests.
//
// Thread-safety: all functions are pure; call them from any thread.
#ifndef TPUGRAPHS_EVAL_METRICS_H_
#define TPUGRAPHS_EVAL_METRICS_H_

#include <cstdint>
#include <span>
#include <vector>

namespace tpugraphs::eval {

// Pair counts behind Kendall's tau-b and OPA, over all unordered pairs {i, j}, i != j.
struct PairCounts {
  int64_t n = 0;
  int64_t total = 0;       // n (n - 1) / 2
  int64_t x_ties = 0;      // pairs with x_i == x_j (whatever y)
  int64_t y_ties = 0;      // pairs with y_i == y_j (whatever x)
  int64_t joint_ties = 0;  // pairs with x_i == x_j and y_i == y_j
  int64_t discordant = 0;  // pairs with (x_i - x_j)(y_i - y_j) < 0
  // Pairs with (x_i - x_j)(y_i - y_j) > 0.
  int64_t concordant() const { return total - x_ties - y_ties + joint_ties - discordant; }
};

// Knight's O(n log n) algorithm: sort by (x, y) (a radix sort of order-preserving integer keys,
// O(n)), count x ties and joint ties in runs, count discordant pairs as the inversions of y by a
// bottom-up merge sort (O(n log n)), then count y ties.
// REQUIRES: x.size() == y.size(); no NaN (callers validate scores and runtimes).
PairCounts CountPairs(std::span<const double> x, std::span<const double> y);

// Kendall's tau-b, as scipy.stats.kendalltau (default variant 'b'):
//   tau_b = (C - D) / sqrt((T - X) (T - Y))
// with T = total pairs, X = pairs tied in x, Y = pairs tied in y, C/D = concordant/discordant.
// Returns NaN when n < 2 or when every pair is tied in x or every pair is tied in y (scipy
// returns nan there too). The result is clipped to [-1, 1] like scipy's.
double KendallTauB(std::span<const double> x, std::span<const double> y);

// Ordered-pair accuracy (TF-Ranking OPAMetric; baselines.md section 3):
//   OPA = #{(i, j): y_i > y_j and s_i > s_j} / #{(i, j): y_i > y_j}
// i.e. the share of runtime-ordered pairs that the scores order the same way; pairs tied in the
// score count as wrong. Returns NaN when no pair has different runtimes.
double OrderedPairAccuracy(std::span<const double> scores, std::span<const double> runtimes);

// Positions of the k lowest scores, best first, ties by position (see the tie rule above).
// k is capped at scores.size(). O(n + k log k).
std::vector<int64_t> TopKByScore(std::span<const double> scores, int64_t k);

// All positions ordered by (score, position): the full ranking, best first. O(n log n).
std::vector<int64_t> RankByScore(std::span<const double> scores);

// Top-K error / slowdown (baselines.md 6.1/6.2):
//   min_{i in topK(scores)} runtimes[i] / min_i runtimes[i] - 1
// with K capped at the number of configs. 0 means the best config is among the K picks.
// Returns NaN for empty input or when the best runtime is not positive (e.g. hidden test
// runtimes, which are 0).
double TopKError(std::span<const double> scores, std::span<const double> runtimes, int64_t k);

namespace reference {

// O(n^2) pair loop over all i < j.
PairCounts CountPairs(std::span<const double> x, std::span<const double> y);
double KendallTauB(std::span<const double> x, std::span<const double> y);
// O(n^2) loop over ordered pairs, straight from the OPA definition.
double OrderedPairAccuracy(std::span<const double> scores, std::span<const double> runtimes);
// Full stable sort by score, then the min of the first k runtimes.
double TopKError(std::span<const double> scores, std::span<const double> runtimes, int64_t k);

}  // namespace reference

}  // namespace tpugraphs::eval

#endif  // TPUGRAPHS_EVAL_METRICS_H_
