// End-to-end tests of `tpugraphs report`: a model trained by the CLI, its report, the
// predictions variant, and the exit codes of bad invocations.
#include <gtest/gtest.h>

#include "../train/train_test_util.h"
#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"

namespace tpugraphs {
namespace {

using ::tpugraphs::testing::CommandResult;
using ::tpugraphs::testing::RunCli;
using ::tpugraphs::testing::TempDir;

class ReportCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    data_ = dir_->File("data.tpug");
    ASSERT_TRUE(train::testing::WriteSyntheticDataset(data_, TaskKind::kLayout, 5, 3).ok());
    model_ = dir_->File("m.tpm");
    CommandResult r = RunCli({"-q",
                              "train",
                              "--dataset",
                              data_,
                              "--output",
                              model_,
                              "--epochs",
                              "3",
                              "--hidden-dim",
                              "8",
                              "--num-layers",
                              "2",
                              "--opcode-embedding-dim",
                              "4",
                              "--head-hidden-dim",
                              "8",
                              "--batch-graphs",
                              "3",
                              "--configs-per-graph",
                              "8"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static TempDir* dir_;
  static std::string data_, model_;
};
TempDir* ReportCliTest::dir_ = nullptr;
std::string ReportCliTest::data_, ReportCliTest::model_;

TEST_F(ReportCliTest, WritesTheReportAndPrintsItsPath) {
  TempDir out;
  const std::string html = out.File("r.html");
  CommandResult r = RunCli({"-q", "report", "--model", model_, "--data", data_, "--split", "valid",
                            "--title", "run <1>", "-o", html});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, html + "\n");
  auto text = ReadFileToString(html);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(text->find("<title>run &lt;1&gt;</title>"), std::string::npos);
  EXPECT_NE(text->find("data-chart=\"loss\""), std::string::npos);
  EXPECT_NE(text->find("data-chart=\"per-graph-1\""), std::string::npos);
  // The collection means are those `evaluate` prints for the same model and split.
  CommandResult ev =
      RunCli({"-q", "evaluate", "--data", data_, "--split", "valid", "--model", model_, "--json"});
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  const size_t at = ev.out.find("\"kendall_tau\":");
  ASSERT_NE(at, std::string::npos) << ev.out;
  const double tau = std::stod(ev.out.substr(at + 14));
  char expected[64];
  std::snprintf(expected, sizeof(expected), "<td>%.4g</td>", tau);
  EXPECT_NE(text->find(expected), std::string::npos) << expected;
}

TEST_F(ReportCliTest, EvaluatesAPredictionsFile) {
  TempDir out;
  const std::string preds = out.File("p.tsv");
  CommandResult p = RunCli({"-q", "predict", "--data", data_, "--split", "valid", "--model", model_,
                            "--format", "scores", "-o", preds});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const std::string html = out.File("r.html");
  CommandResult r = RunCli({"-q", "report", "--model", model_, "--predictions", preds, "--data",
                            data_, "--split", "valid", "-o", html});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto text = ReadFileToString(html);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("Ranking: " + preds), std::string::npos);
}

TEST_F(ReportCliTest, BadInvocationsFailWithoutOutput) {
  TempDir out;
  const std::string html = out.File("r.html");
  // Usage errors: exit 2.
  EXPECT_EQ(RunCli({"report", "-o", html}).exit_code, 2);
  EXPECT_EQ(RunCli({"report", "--model", model_}).exit_code, 2);
  CommandResult r = RunCli({"report", "--model", model_, "--predictions", "p.tsv", "-o", html});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // Bad input: exit 1, the message names the file, nothing written.
  r = RunCli({"report", "--model", dir_->File("nope.tpm"), "-o", html});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("nope.tpm"), std::string::npos) << r.err;
  r = RunCli({"report", "--model", model_, "--data", model_, "-o", html});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("m.tpm"), std::string::npos) << r.err;
  r = RunCli({"report", "--model", model_, "-o", out.File("no/such/dir/r.html")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(out.List().empty());
}

TEST_F(ReportCliTest, PlotsTuneTracesWithOrWithoutAModel) {
  TempDir out;
  const std::string trace = out.File("trace.tsv");
  ASSERT_TRUE(WriteFileAtomically(
                  trace,
                  "graph\tround\tmeasured\tnew\tbest_runtime\tdefault_runtime\tspeedup\t"
                  "batch_kendall\tseconds\toutput\n"
                  "layout:synth:random:prog0\t1\t4\t4\t9\t12\t1.333\tnan\t0.5\tt/prog0.tsv\n"
                  "layout:synth:random:prog0\t2\t8\t4\t8\t12\t1.5\t0.6\t1\tt/prog0.tsv\n")
                  .ok());
  const std::string html = out.File("r.html");
  CommandResult r = RunCli({"-q", "report", "--tune-trace", trace, "-o", html});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, html + "\n");
  auto text = ReadFileToString(html);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("Tuning loops"), std::string::npos);
  EXPECT_NE(text->find("data-chart=\"tune-best-0\""), std::string::npos);
  EXPECT_EQ(text->find("data-chart=\"loss\""), std::string::npos);
  r = RunCli({"-q", "report", "--model", model_, "--tune-trace", trace, "--tune-trace", trace, "-o",
              html});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  text = ReadFileToString(html);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("data-chart=\"loss\""), std::string::npos);
  EXPECT_NE(text->find("data-chart=\"tune-kendall-1\""), std::string::npos);
}

TEST_F(ReportCliTest, BadTuneTracesFailWithoutOutput) {
  TempDir out;
  const std::string html = out.File("r.html");
  const std::string trace = out.File("trace.tsv");
  ASSERT_TRUE(WriteFileAtomically(trace,
                                  "graph\tround\tmeasured\tnew\tbest_runtime\tdefault_runtime\t"
                                  "speedup\tbatch_kendall\tseconds\toutput\n"
                                  "g\t1\t4\t4\t9\t12\tfast\tnan\t0.5\tout\n")
                  .ok());
  CommandResult r = RunCli({"report", "--tune-trace", trace, "-o", html});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(trace + ":2:"), std::string::npos) << r.err;
  r = RunCli({"report", "--tune-trace", out.File("missing.tsv"), "-o", html});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("missing.tsv"), std::string::npos) << r.err;
  // Neither --model nor --tune-trace: a usage error naming both.
  r = RunCli({"report", "-o", html});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--tune-trace"), std::string::npos) << r.err;
  EXPECT_TRUE(out.List() == std::vector<std::string>{"trace.tsv"});
}

}  // namespace
}  // namespace tpugraphs
