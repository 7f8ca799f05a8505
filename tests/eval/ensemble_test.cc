// Ensembles of scorers: the per-member transforms and their mean, worked by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/eval/scorer.h"

namespace tpugraphs::eval {
namespace {

// Returns fixed scores, whatever it is asked (the configs requested are 0..n-1 in the tests).
class FixedScorer : public ConfigScorer {
 public:
  explicit FixedScorer(std::vector<double> s, bool wants = false)
      : s_(std::move(s)), wants_(wants) {}
  std::string name() const override { return "fixed"; }
  bool wants_layout_configs() const override { return wants_; }
  StatusOr<std::vector<double>> Score(const ScoringInput&,
                                      const std::vector<int64_t>& idx) override {
    std::vector<double> out;
    for (int64_t i : idx) out.push_back(s_[i]);
    return out;
  }

 private:
  std::vector<double> s_;
  bool wants_;
};

std::vector<double> ScoreEnsemble(EnsembleCombine how) {
  std::vector<std::unique_ptr<ConfigScorer>> members;
  members.push_back(std::make_unique<FixedScorer>(std::vector<double>{1, 2, 3, 4}));
  members.push_back(std::make_unique<FixedScorer>(std::vector<double>{10, 10, 0, 20}, true));
  EnsembleScorer e(std::move(members), how);
  EXPECT_TRUE(e.wants_layout_configs());
  EXPECT_EQ(e.name(), how == EnsembleCombine::kMeanRank ? "ensemble:rank(fixed,fixed)"
                                                        : "ensemble:zscore(fixed,fixed)");
  Graph g;
  ScoringInput in{g};
  auto s = e.Score(in, {0, 1, 2, 3});
  EXPECT_TRUE(s.ok());
  return s.ok() ? *s : std::vector<double>{};
}

TEST(EnsembleTest, StandardizedMeanByHand) {
  // A: mean 2.5, population sd sqrt(1.25); B: mean 10, sd sqrt(50).
  const double za = 1.0 / std::sqrt(1.25), zb = 10.0 / std::sqrt(50.0);
  const std::vector<double> want = {(-1.5 * za + 0) / 2, (-0.5 * za + 0) / 2, (0.5 * za - zb) / 2,
                                    (1.5 * za + zb) / 2};
  auto got = ScoreEnsemble(EnsembleCombine::kStandardizedMean);
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
}

TEST(EnsembleTest, MeanRankByHandWithTies) {
  // A ranks 1..4 (/4); B: 0 is rank 1, the two 10s share ranks 2 and 3 (2.5), 20 is rank 4.
  const std::vector<double> want = {(0.25 + 0.625) / 2, (0.5 + 0.625) / 2, (0.75 + 0.25) / 2,
                                    (1.0 + 1.0) / 2};
  auto got = ScoreEnsemble(EnsembleCombine::kMeanRank);
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << i;
}

TEST(EnsembleTest, ConstantScoresStandardiseToZeroAndNamesParse) {
  EXPECT_EQ(EnsembleTransform({3, 3, 3}, EnsembleCombine::kStandardizedMean),
            (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(EnsembleTransform({3, 3, 3}, EnsembleCombine::kMeanRank),
            (std::vector<double>{2.0 / 3, 2.0 / 3, 2.0 / 3}));
  EXPECT_TRUE(ParseEnsembleCombine("zscore").ok());
  EXPECT_TRUE(ParseEnsembleCombine("rank").ok());
  auto bad = ParseEnsembleCombine("median");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("zscore, rank"), std::string::npos);
}

}  // namespace
}  // namespace tpugraphs::eval
