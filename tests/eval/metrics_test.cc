#include "tpugraphs/eval/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tpugraphs/common/rng.h"

namespace tpugraphs::eval {
namespace {

std::vector<double> RandomInts(Rng& rng, int64_t n, int64_t range) {
  std::vector<double> v(n);
  for (auto& x : v) x = static_cast<double>(rng.UniformInt(range));
  return v;
}

TEST(MetricsTest, PairCountsMatchBruteForceWithManyTies) {
  Rng rng(DeriveSeed(1, "pair-counts"));
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = static_cast<int64_t>(rng.UniformInt(120));  // includes 0 and 1
    const int64_t rx = 1 + rng.UniformInt(trial % 3 == 0 ? 3 : 40);
    const int64_t ry = 1 + rng.UniformInt(trial % 5 == 0 ? 2 : 40);
    const auto x = RandomInts(rng, n, rx);
    const auto y = RandomInts(rng, n, ry);
    const PairCounts fast = CountPairs(x, y);
    const PairCounts ref = reference::CountPairs(x, y);
    ASSERT_EQ(fast.total, ref.total) << "trial " << trial;
    ASSERT_EQ(fast.x_ties, ref.x_ties) << "trial " << trial;
    ASSERT_EQ(fast.y_ties, ref.y_ties) << "trial " << trial;
    ASSERT_EQ(fast.joint_ties, ref.joint_ties) << "trial " << trial;
    ASSERT_EQ(fast.discordant, ref.discordant) << "trial " << trial;

    const double t_fast = KendallTauB(x, y), t_ref = reference::KendallTauB(x, y);
    ASSERT_EQ(std::isnan(t_fast), std::isnan(t_ref)) << "trial " << trial;
    if (!std::isnan(t_ref)) {
      ASSERT_NEAR(t_fast, t_ref, 1e-14) << "trial " << trial;
    }

    const double o_fast = OrderedPairAccuracy(x, y), o_ref = reference::OrderedPairAccuracy(x, y);
    ASSERT_EQ(std::isnan(o_fast), std::isnan(o_ref)) << "trial " << trial;
    if (!std::isnan(o_ref)) {
      ASSERT_NEAR(o_fast, o_ref, 1e-14) << "trial " << trial;
    }

    for (int64_t k : {1, 5, 10, 100}) {
      // Runtimes must be positive for the top-K error: shift by one.
      std::vector<double> rt(y);
      for (auto& v : rt) v += 1.0;
      const double e_fast = TopKError(x, rt, k), e_ref = reference::TopKError(x, rt, k);
      ASSERT_EQ(std::isnan(e_fast), std::isnan(e_ref));
      if (!std::isnan(e_ref)) {
        ASSERT_EQ(e_fast, e_ref) << "trial " << trial << " k " << k;
      }
    }
  }
}

TEST(MetricsTest, LargeInputMatchesBruteForce) {
  // Long enough for several merge passes beyond the insertion-sorted runs.
  Rng rng(DeriveSeed(1, "large"));
  const int64_t n = 3000;
  std::vector<double> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::floor(rng.Uniform() * 500);
    y[i] = x[i] * 0.3 + std::floor(rng.Uniform() * 200);  // correlated, with ties
  }
  const PairCounts fast = CountPairs(x, y), ref = reference::CountPairs(x, y);
  EXPECT_EQ(fast.discordant, ref.discordant);
  EXPECT_EQ(fast.joint_ties, ref.joint_ties);
  EXPECT_NEAR(KendallTauB(x, y), reference::KendallTauB(x, y), 1e-14);
  EXPECT_GT(KendallTauB(x, y), 0.2);
}

TEST(MetricsTest, RadixPathHandlesNegativesZerosAndTies) {
  // n >= 1024 takes the radix-sort path: negative values, -0.0 vs +0.0 (equal), huge and tiny
  // magnitudes must keep their order.
  Rng rng(DeriveSeed(3, "radix"));
  for (int trial = 0; trial < 6; ++trial) {
    const int64_t n = 1024 + static_cast<int64_t>(rng.UniformInt(1500));
    std::vector<double> x(n), y(n);
    const double pool[] = {-1e300, -2.5, -1e-300, -0.0, 0.0, 1e-300, 3.0, 7.5, 1e300};
    for (int64_t i = 0; i < n; ++i) {
      x[i] = trial % 2 == 0 ? pool[rng.UniformInt(9)] : rng.Normal();
      y[i] = pool[rng.UniformInt(9)] * (trial < 3 ? 1.0 : static_cast<double>(rng.UniformInt(4)));
    }
    const PairCounts fast = CountPairs(x, y), ref = reference::CountPairs(x, y);
    ASSERT_EQ(fast.x_ties, ref.x_ties) << trial;
    ASSERT_EQ(fast.y_ties, ref.y_ties) << trial;
    ASSERT_EQ(fast.joint_ties, ref.joint_ties) << trial;
    ASSERT_EQ(fast.discordant, ref.discordant) << trial;
    ASSERT_NEAR(OrderedPairAccuracy(x, y), reference::OrderedPairAccuracy(x, y), 1e-14);
  }
}

TEST(MetricsTest, HandWorkedTauAndOpa) {
  // scores s = [1, 2, 2, 0], runtimes y = [10, 30, 20, 20].
  // Unordered pairs: {0,1} concordant, {0,2} concordant, {0,3} discordant (s 1>0, y 10<20),
  // {1,2} tied in s only, {1,3} concordant, {2,3} tied in y only.
  // C = 3, D = 1, T = 6, X = 1, Y = 1: tau_b = (3 - 1) / sqrt(5) / sqrt(5) = 0.4.
  // OPA ordered pairs with y_i > y_j: (1,0) ok, (1,2) s tie -> wrong, (1,3) ok, (2,0) ok,
  // (3,0) wrong (s 0 < 1): 3 / 5 = 0.6.
  const std::vector<double> s = {1, 2, 2, 0}, y = {10, 30, 20, 20};
  EXPECT_DOUBLE_EQ(KendallTauB(s, y), 0.4);
  EXPECT_DOUBLE_EQ(OrderedPairAccuracy(s, y), 0.6);
  EXPECT_DOUBLE_EQ(reference::OrderedPairAccuracy(s, y), 0.6);
  const PairCounts c = CountPairs(s, y);
  EXPECT_EQ(c.concordant(), 3);
  EXPECT_EQ(c.discordant, 1);

  // Perfect and reversed rankings without ties: tau +1 / -1, OPA 1 / 0.
  const std::vector<double> a = {1, 2, 3, 4}, b = {4, 3, 2, 1};
  EXPECT_DOUBLE_EQ(KendallTauB(a, a), 1.0);
  EXPECT_DOUBLE_EQ(KendallTauB(a, b), -1.0);
  EXPECT_DOUBLE_EQ(OrderedPairAccuracy(a, a), 1.0);
  EXPECT_DOUBLE_EQ(OrderedPairAccuracy(b, a), 0.0);
  // All scores tied: OPA 0 (ties count as wrong), tau undefined (NaN, as scipy).
  const std::vector<double> same = {7, 7, 7, 7};
  EXPECT_DOUBLE_EQ(OrderedPairAccuracy(same, a), 0.0);
  EXPECT_TRUE(std::isnan(KendallTauB(same, a)));
  EXPECT_TRUE(std::isnan(KendallTauB(a, same)));
  EXPECT_TRUE(std::isnan(OrderedPairAccuracy(a, same)));  // no ordered pair at all
  EXPECT_TRUE(std::isnan(KendallTauB(std::vector<double>{1}, std::vector<double>{2})));
}

TEST(MetricsTest, HandWorkedTopKErrorAndTieRule) {
  // scores   [0.5, 0.1, 0.1, 0.9, 0.3]
  // runtimes [2.0, 4.0, 3.0, 1.0, 1.5]; best runtime 1.0 (config 3).
  // Order by (score, position): 1, 2, 4, 0, 3 (configs 1 and 2 tie; 1 comes first).
  // K=1: {1} -> 4.0 / 1.0 - 1 = 3.0   (the other tie order would give 2.0)
  // K=2: {1,2} -> 3.0 -> 2.0; K=3: {1,2,4} -> 1.5 -> 0.5; K=5: all -> 0.
  const std::vector<double> s = {0.5, 0.1, 0.1, 0.9, 0.3}, y = {2.0, 4.0, 3.0, 1.0, 1.5};
  EXPECT_DOUBLE_EQ(TopKError(s, y, 1), 3.0);
  EXPECT_DOUBLE_EQ(TopKError(s, y, 2), 2.0);
  EXPECT_DOUBLE_EQ(TopKError(s, y, 3), 0.5);
  EXPECT_DOUBLE_EQ(TopKError(s, y, 4), 0.5);
  EXPECT_DOUBLE_EQ(TopKError(s, y, 5), 0.0);
  EXPECT_DOUBLE_EQ(TopKError(s, y, 10), 0.0);  // K capped at the number of configs
  EXPECT_EQ(TopKByScore(s, 3), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(TopKByScore(s, 99), (std::vector<int64_t>{1, 2, 4, 0, 3}));
  EXPECT_EQ(RankByScore(s), (std::vector<int64_t>{1, 2, 4, 0, 3}));
  // Kaggle tile score of this graph: 1 - err@5 = 1.
  EXPECT_DOUBLE_EQ(1.0 - TopKError(s, y, 5), 1.0);
  // Undefined cases.
  EXPECT_TRUE(std::isnan(TopKError({}, {}, 5)));
  const std::vector<double> zeros = {0, 0, 0};
  EXPECT_TRUE(std::isnan(TopKError(zeros, zeros, 1)));
}

TEST(MetricsTest, TauBEqualsScipyKendalltau) {
  testing::TempDir tmp;
  const std::string path = tmp.File("cases.txt");
  Rng rng(DeriveSeed(7, "scipy-cases"));
  std::vector<std::pair<std::vector<double>, std::vector<double>>> cases;
  const int64_t sizes[] = {2, 3, 10, 57, 500, 2000, 4001, 1000};
  for (int c = 0; c < 8; ++c) {
    const int64_t n = sizes[c];
    std::vector<double> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) {
      // Integer scores in a small range (many ties) and runtimes with repeats.
      x[i] = static_cast<double>(rng.UniformInt(c % 2 == 0 ? 5 : 50)) * 0.25;
      y[i] = c == 7 ? static_cast<double>(rng.UniformInt(3)) : 1000.0 + rng.UniformInt(60) + x[i];
    }
    cases.emplace_back(std::move(x), std::move(y));
  }
  {
    std::ofstream out(path);
    out.precision(17);
    for (const auto& [x, y] : cases) {
      for (double v : x) out << v << ' ';
      out << '\n';
      for (double v : y) out << v << ' ';
      out << '\n';
    }
  }
  const std::string code =
      "import sys\n"
      "from scipy.stats import kendalltau\n"
      "lines = open(sys.argv[1]).read().split('\\n')\n"
      "for i in range(0, len(lines) - 1, 2):\n"
      "    x = [float(v) for v in lines[i].split()]\n"
      "    y = [float(v) for v in lines[i + 1].split()]\n"
      "    print(repr(float(kendalltau(x, y).correlation)))\n";
  const auto r = testing::RunPython(code, {path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  for (size_t c = 0; c < cases.size(); ++c) {
    std::string line;
    ASSERT_TRUE(std::getline(lines, line)) << "missing scipy output for case " << c;
    const double expected = std::stod(line);
    const double got = KendallTauB(cases[c].first, cases[c].second);
    EXPECT_NEAR(got, expected, 1e-12) << "case " << c << " n=" << cases[c].first.size();
  }
}

TEST(MetricsTest, ScipyReturnsNanWhereWeDo) {
  const auto r = testing::RunPython(
      "from scipy.stats import kendalltau\n"
      "import math\n"
      "print(math.isnan(kendalltau([1, 1, 1], [1, 2, 3]).correlation),"
      " math.isnan(kendalltau([1, 2, 3], [5, 5, 5]).correlation))\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "True True\n");
  EXPECT_TRUE(std::isnan(KendallTauB(std::vector<double>{1, 1, 1}, std::vector<double>{1, 2, 3})));
  EXPECT_TRUE(std::isnan(KendallTauB(std::vector<double>{1, 2, 3}, std::vector<double>{5, 5, 5})));
}

}  // namespace
}  // namespace tpugraphs::eval
