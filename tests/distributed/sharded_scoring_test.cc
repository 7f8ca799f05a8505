// distributed::ShardedScorer on in-process groups: every rank scores its share, rank 0 replays the
// gathered scores, and the report and the predictions are those of one process.
#include "tpugraphs/distributed/sharded_scoring.h"

#include <gtest/gtest.h>

#include <thread>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/eval/evaluate.h"
#include "tpugraphs/eval/submission.h"
#include "tpugraphs/io/dataset.h"
#include "train/train_test_util.h"

namespace tpugraphs::distributed {
namespace {

using ::tpugraphs::testing::TempDir;

// Counts the graphs it scores (scores from the seeded random baseline).
class CountingScorer : public eval::ConfigScorer {
 public:
  CountingScorer() : inner_(eval::MakeBaselineScorer("random", 3).value()) {}
  std::string name() const override { return inner_->name(); }
  StatusOr<std::vector<double>> Score(const eval::ScoringInput& input,
                                      const std::vector<int64_t>& configs) override {
    ++calls;
    return inner_->Score(input, configs);
  }
  int calls = 0;

 private:
  std::unique_ptr<eval::ConfigScorer> inner_;
};

// Evaluation and prediction options without progress output.
eval::EvaluateOptions Quiet() {
  eval::EvaluateOptions options;
  options.progress = false;
  options.threads = 1;
  return options;
}
eval::PredictOptions QuietPredict() {
  eval::PredictOptions popts;
  popts.progress = false;
  return popts;
}
// What one process makes of `data` with `scorer`: the report (JSON, per graph) into *json and
// the predictions into csv.
void OneProcess(const std::string& data, eval::ConfigScorer& scorer, const std::string& csv,
                std::string* json) {
  auto reader = io::DatasetReader::Open(data);
  ASSERT_TRUE(reader.ok());
  auto want = eval::Evaluate(**reader, scorer, Quiet());
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  *json = eval::FormatReportJson(*want, true);
  AtomicFileWriter w;
  ASSERT_TRUE(w.Open(csv).ok());
  ASSERT_TRUE(eval::Predict(reader->get(), nullptr, scorer, QuietPredict(), &w).ok());
  ASSERT_TRUE(w.Commit().ok());
}

TEST(ShardedScoringTest, ReplayedReportAndPredictionsEqualOneProcesss) {
  TempDir dir;
  const std::string data = dir.File("d.tpug");
  ASSERT_TRUE(train::testing::WriteSyntheticDataset(data, TaskKind::kLayout, 5, 4).ok());
  const eval::EvaluateOptions options = Quiet();
  const eval::PredictOptions popts = QuietPredict();
  CountingScorer plain;
  std::string want_json;
  ASSERT_NO_FATAL_FAILURE(OneProcess(data, plain, dir.File("one.csv"), &want_json));

  const int size = 3;
  auto group = MakeLocalGroup(size);
  std::vector<int> calls(size, 0);
  std::string got_json;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      Communicator& c = *group[r];
      auto rd = io::DatasetReader::Open(data);
      ASSERT_TRUE(rd.ok());
      const std::vector<int> owner = PlanScoringOwners(**rd, io::GraphFilter{}, nullptr, size);
      CountingScorer inner;
      ShardedScorer sharded(&inner, owner, r, size);
      ASSERT_TRUE(eval::Evaluate(**rd, sharded, options).ok());
      auto replay = sharded.GatherScores(c, 0);
      ASSERT_TRUE(replay.ok());
      calls[r] = inner.calls;
      EXPECT_EQ(sharded.scored(), inner.calls);
      if (r != 0) {
        EXPECT_EQ(*replay, nullptr);
        // Predict's dry run on the same ranks, then rank 0 writes.
        ShardedScorer again(&inner, owner, r, size);
        ASSERT_TRUE(eval::Predict(rd->get(), nullptr, again, popts, nullptr).ok());
        ASSERT_TRUE(again.GatherScores(c, 0).ok());
        return;
      }
      auto report = eval::Evaluate(**rd, **replay, options);
      ASSERT_TRUE(report.ok()) << report.status().ToString();
      got_json = eval::FormatReportJson(*report, true);
      ShardedScorer again(&inner, owner, r, size);
      ASSERT_TRUE(eval::Predict(rd->get(), nullptr, again, popts, nullptr).ok());
      auto replay2 = again.GatherScores(c, 0);
      ASSERT_TRUE(replay2.ok());
      AtomicFileWriter out;
      ASSERT_TRUE(out.Open(dir.File("sharded.csv")).ok());
      ASSERT_TRUE(eval::Predict(rd->get(), nullptr, **replay2, popts, &out).ok());
      ASSERT_TRUE(out.Commit().ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(got_json, want_json);
  EXPECT_EQ(ReadFileToString(dir.File("sharded.csv")).value(),
            ReadFileToString(dir.File("one.csv")).value());
  // Every graph was scored by exactly one rank during the evaluation, and the work was shared.
  EXPECT_EQ(calls[0] + calls[1] + calls[2], plain.calls / 2);
  for (int r = 0; r < size; ++r) EXPECT_GT(calls[r], 0) << "rank " << r;
}

// Scores in two parts, each a seeded random draw per configuration, combined by the
// standardised mean over the whole call (as a model file's members are): a call cut into pieces
// and combined afterwards gives the scores of the whole call, and combining each piece alone
// would not.
class TwoPartScorer : public eval::ConfigScorer {
 public:
  TwoPartScorer()
      : a_(eval::MakeBaselineScorer("random", 3).value()),
        b_(eval::MakeBaselineScorer("random", 5).value()) {}
  std::string name() const override { return "two-part"; }
  StatusOr<std::vector<double>> Score(const eval::ScoringInput& input,
                                      const std::vector<int64_t>& configs) override {
    ++whole_calls;
    TPUG_ASSIGN_OR_RETURN(auto parts, Parts(input, configs));
    return CombineParts(parts);
  }
  int64_t num_parts() const override { return 2; }
  StatusOr<std::vector<std::vector<double>>> ScoreParts(
      const eval::ScoringInput& input, const std::vector<int64_t>& configs) override {
    configs_in_parts += static_cast<int64_t>(configs.size());
    return Parts(input, configs);
  }
  std::vector<double> CombineParts(const std::vector<std::vector<double>>& parts) const override {
    std::vector<double> out(parts[0].size(), 0.0);
    for (const auto& p : parts) {
      const std::vector<double> z =
          eval::EnsembleTransform(p, eval::EnsembleCombine::kStandardizedMean);
      for (size_t i = 0; i < out.size(); ++i) out[i] += z[i] / 2;
    }
    return out;
  }
  int whole_calls = 0;
  int64_t configs_in_parts = 0;

 private:
  StatusOr<std::vector<std::vector<double>>> Parts(const eval::ScoringInput& input,
                                                   const std::vector<int64_t>& configs) {
    std::vector<std::vector<double>> parts(2);
    TPUG_ASSIGN_OR_RETURN(parts[0], a_->Score(input, configs));
    TPUG_ASSIGN_OR_RETURN(parts[1], b_->Score(input, configs));
    return parts;
  }
  std::unique_ptr<eval::ConfigScorer> a_, b_;
};

// One graph of 1,000 configurations and two of 100 on three ranks: the large graph's pieces of
// 256 go round every rank, the small ones are scored whole by their owners, and the report and
// the predictions are those of one process.
TEST(ShardedScoringTest, OneLargeGraphIsSharedByEveryRank) {
  TempDir dir;
  const std::string data = dir.File("d.tpug");
  {
    auto w = io::DatasetWriter::Create(data);
    ASSERT_TRUE(w.ok());
    int seed = 7;
    for (int64_t configs : {1000, 100, 100}) {
      Graph g = train::testing::SyntheticGraph(TaskKind::kLayout, "g" + std::to_string(seed),
                                               "valid", 20, configs, seed);
      ++seed;
      ASSERT_TRUE((*w)->Add(g).ok());
    }
    ASSERT_TRUE((*w)->Finish().ok());
  }
  const eval::EvaluateOptions options = Quiet();
  const eval::PredictOptions popts = QuietPredict();
  TwoPartScorer plain;
  std::string want_json;
  ASSERT_NO_FATAL_FAILURE(OneProcess(data, plain, dir.File("one.csv"), &want_json));

  const int size = 3;
  auto group = MakeLocalGroup(size);
  std::vector<int64_t> pieces(size, 0), configs(size, 0), whole(size, 0);
  std::string got_json;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      Communicator& c = *group[r];
      auto rd = io::DatasetReader::Open(data);
      ASSERT_TRUE(rd.ok());
      const std::vector<int> owner = PlanScoringOwners(**rd, io::GraphFilter{}, nullptr, size);
      TwoPartScorer inner;
      ShardedScorer sharded(&inner, owner, r, size);
      ASSERT_TRUE(eval::Evaluate(**rd, sharded, options).ok());
      auto replay = sharded.GatherScores(c, 0);
      ASSERT_TRUE(replay.ok()) << replay.status().ToString();
      pieces[r] = sharded.pieces();
      configs[r] = inner.configs_in_parts;
      whole[r] = inner.whole_calls;
      ShardedScorer again(&inner, owner, r, size);
      ASSERT_TRUE(eval::Predict(rd->get(), nullptr, again, popts, nullptr).ok());
      auto replay2 = again.GatherScores(c, 0);
      ASSERT_TRUE(replay2.ok()) << replay2.status().ToString();
      if (r != 0) return;
      auto report = eval::Evaluate(**rd, **replay, options);
      ASSERT_TRUE(report.ok()) << report.status().ToString();
      got_json = eval::FormatReportJson(*report, true);
      AtomicFileWriter out;
      ASSERT_TRUE(out.Open(dir.File("sharded.csv")).ok());
      ASSERT_TRUE(eval::Predict(rd->get(), nullptr, **replay2, popts, &out).ok());
      ASSERT_TRUE(out.Commit().ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(got_json, want_json);
  EXPECT_EQ(ReadFileToString(dir.File("sharded.csv")).value(),
            ReadFileToString(dir.File("one.csv")).value());
  // The 1,000 configurations in 4 pieces (256, 256, 256, 232) over the three ranks; the two
  // small graphs whole, once each.
  EXPECT_EQ(pieces[0] + pieces[1] + pieces[2], 4 + 2);
  EXPECT_EQ(configs[0] + configs[1] + configs[2], 1000);
  EXPECT_EQ(whole[0] + whole[1] + whole[2], 2);
  for (int r = 0; r < size; ++r) EXPECT_GT(configs[r], 0) << "rank " << r;
}

TEST(ShardedScoringTest, PlanBalancesTheSelectedGraphsOnly) {
  TempDir dir;
  const std::string data = dir.File("d.tpug");
  ASSERT_TRUE(train::testing::WriteSyntheticDataset(data, TaskKind::kLayout, 6, 4).ok());
  auto reader = io::DatasetReader::Open(data);
  ASSERT_TRUE(reader.ok());
  io::GraphFilter valid_only;
  valid_only.splits = {"valid"};
  const std::vector<int> owner = PlanScoringOwners(**reader, valid_only, nullptr, 2);
  ASSERT_EQ(owner.size(), 10u);
  int valid_on_1 = 0;
  for (int64_t i = 0; i < (*reader)->num_graphs(); ++i) {
    if ((*reader)->info(i).split == "valid") {
      valid_on_1 += owner[i] == 1;
    } else {
      EXPECT_EQ(owner[i], 0) << "unselected graphs stay on rank 0";
    }
  }
  EXPECT_EQ(valid_on_1, 2);  // 4 similar graphs over 2 ranks
}

}  // namespace
}  // namespace tpugraphs::distributed
