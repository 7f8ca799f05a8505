// `tpugraphs` under `mpirun` (docs/distributed.md): training on 2 and 3 ranks writes the model
// file of one process with the same global batch (also with GST and held-out configs, and when
// a run is resumed with another number of ranks); evaluate and predict print and write what one
// process does; a rank with a bad dataset or a rank killed with SIGKILL ends the job with a
// message naming the rank, in seconds, and leaves no model file.
//
// Skipped (GTEST_SKIP, with the reason) when the binary was built without MPI or mpirun is not
// on the PATH.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/distributed/communicator.h"
#include "tpugraphs/train/model_file.h"

namespace tpugraphs {
namespace {

using ::tpugraphs::testing::BinaryPath;
using ::tpugraphs::testing::CommandResult;
using ::tpugraphs::testing::RunCli;
using ::tpugraphs::testing::RunShell;
using ::tpugraphs::testing::ShellQuote;
using ::tpugraphs::testing::TempDir;
namespace fs = std::filesystem;

// Why MPI tests cannot run here, or "" when they can.
std::string SkipReason() {
  if (!distributed::MpiCompiledIn()) return "tpugraphs was built without MPI (TPUGRAPHS_MPI=OFF)";
  if (RunShell("command -v mpirun").exit_code != 0) return "mpirun is not on the PATH";
  return "";
}

#define SKIP_WITHOUT_MPI()                       \
  do {                                           \
    const std::string reason = SkipReason();     \
    if (!reason.empty()) GTEST_SKIP() << reason; \
  } while (false)

// OpenMPI's shared-memory transport copies through ptrace-style cross-memory attach by default,
// which containers often forbid; plain copies work everywhere. In sanitizer builds the MPI
// library's own allocations that live until exit are not ours to report: no leak check for
// processes that start MPI. Each job gets a session directory base of its own, removed when its
// shell ends: two mpiruns starting at once (ctest -j) race to create the shared default
// (/tmp/ompi.HOST.UID), and the loser's orte_init fails with "File exists" (seen in CI).
const char* const kMpiEnv =
    "ompi_tmp=$(mktemp -d \"${TMPDIR:-/tmp}/tpugraphs-mpi.XXXXXX\") && "
    "trap 'rm -rf \"$ompi_tmp\"' EXIT && "
    "OMPI_MCA_orte_tmpdir_base=\"$ompi_tmp\" "
    "OMPI_MCA_btl_vader_single_copy_mechanism=none "
    "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\"";

std::string Join(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) {
    out += ' ';
    out += ShellQuote(a);
  }
  return out;
}

// `tpugraphs args...` in directory `cwd` (created), as one process (np = 0) or under
// `mpirun -np N`; ended after 120 s at the latest. Outputs named relative to cwd make runs in
// different directories store the same paths in their model files.
CommandResult RunIn(const std::string& cwd, int np, const std::vector<std::string>& args) {
  fs::create_directories(cwd);
  const std::string launcher =
      np == 0 ? "" : "mpirun -np " + std::to_string(np) + " --oversubscribe --allow-run-as-root ";
  return RunShell("cd " + ShellQuote(cwd) + " && " + kMpiEnv + " timeout -s KILL 120 " + launcher +
                  ShellQuote(BinaryPath()) + Join(args));
}
CommandResult Mpirun(int np, const std::vector<std::string>& args) {
  return RunIn(fs::current_path().string(), np, args);
}

// A model file's bytes with the epochs' wall-clock times and the recorded thread count (-j)
// cleared, the only values that differ between two runs of the same command. Empty if the file
// does not decode.
std::string ModelBytes(const std::string& path) {
  auto f = train::ReadModelFile(path);
  if (!f.ok()) return std::string();
  for (EpochRecord& e : *f->mutable_summary()->mutable_history()) e.clear_wall_seconds();
  f->mutable_train_config()->clear_threads();
  return train::EncodeModelFile(*f, train::kFileKindModel);
}

std::string Bytes(const std::string& path) {
  auto b = ReadFileToString(path);
  return b.ok() ? *b : std::string();
}

class MpiCliTest : public ::testing::Test {
 protected:
  // A small synthetic layout collection (synth + ingest), shared by the tests.
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string raw = dir_->File("raw");
    CommandResult r =
        RunCli({"-q", "synth", "--graphs", "9", "--min-nodes", "60", "--max-nodes", "300",
                "--configs", "40", "--splits", "0.67,0.33,0", "--seed", "7", "-o", raw});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = RunCli({"-q", "ingest", raw, "-o", Data()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Data() { return dir_->File("data.tpug"); }
  // `train` with small-model flags; `changes` replace the values of flags or add flags.
  static std::vector<std::string> TrainFlags(
      const std::string& output,
      const std::vector<std::pair<std::string, std::string>>& changes = {}) {
    std::vector<std::pair<std::string, std::string>> flags = {{"--dataset", Data()},
                                                              {"--train-split", "train"},
                                                              {"--valid-split", "valid"},
                                                              {"--output", output},
                                                              {"--seed", "11"},
                                                              {"--epochs", "3"},
                                                              {"--hidden-dim", "8"},
                                                              {"--num-layers", "2"},
                                                              {"--head-hidden-dim", "8"},
                                                              {"--batch-graphs", "4"},
                                                              {"--configs-per-graph", "8"}};
    for (const auto& [flag, value] : changes) {
      bool found = false;
      for (auto& f : flags) {
        if (f.first == flag) {
          f.second = value;
          found = true;
        }
      }
      if (!found) flags.emplace_back(flag, value);
    }
    std::vector<std::string> out = {"train"};
    for (const auto& [flag, value] : flags) {
      out.push_back(flag);
      out.push_back(value);
    }
    return out;
  }
  static TempDir* dir_;
  TempDir tmp_;
};
TempDir* MpiCliTest::dir_ = nullptr;

TEST_F(MpiCliTest, TwoAndThreeRanksWriteTheModelOfOneProcess) {
  SKIP_WITHOUT_MPI();
  std::vector<std::string> one = {"-j", "2"};
  for (const auto& a : TrainFlags("m.tpm")) one.push_back(a);
  CommandResult r = RunIn(tmp_.File("one"), 0, one);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string want = ModelBytes(tmp_.File("one/m.tpm"));
  ASSERT_FALSE(want.empty());
  for (int np : {2, 3}) {
    const std::string dir = tmp_.File("np" + std::to_string(np));
    // -v (on 3 ranks) adds a barrier per step that measures the waiting (rank 0 decides).
    std::vector<std::string> args = {"-j", "1"};
    if (np == 3) args.push_back("-v");
    for (const auto& a : TrainFlags("m.tpm")) args.push_back(a);
    r = RunIn(dir, np, args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("training loop: 6 steps"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("waiting for the slowest rank") != std::string::npos, np == 3) << r.err;
    EXPECT_TRUE(ModelBytes(dir + "/m.tpm") == want) << np << " ranks wrote another model";
    // Rank 0 alone reports: one result block, one log line per epoch.
    EXPECT_EQ(r.out.find("model\tm.tpm\n"), 0u) << r.out;
    EXPECT_EQ(r.out.find("model\t"), r.out.rfind("model\t")) << r.out;
    EXPECT_NE(r.err.find("epoch=3 "), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("epoch=3 "), r.err.rfind("epoch=3 ")) << r.err;
  }
  // The model differs from one trained with another global batch (the comparison can fail).
  std::vector<std::string> other = {"-j", "1"};
  for (const auto& a : TrainFlags("m.tpm", {{"--batch-graphs", "3"}})) other.push_back(a);
  r = RunIn(tmp_.File("other"), 2, other);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto a = train::ReadModelFile(tmp_.File("other/m.tpm"));
  auto b = train::ReadModelFile(tmp_.File("one/m.tpm"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->parameters(), b->parameters());
}

// Validation shares each graph's chunks of configurations over the ranks (chunks of 7 here: 6
// per validation graph of 40): the validation metrics, and so the epochs kept and the model,
// are those of one process.
TEST_F(MpiCliTest, RanksShareOneValidationGraphsChunks) {
  SKIP_WITHOUT_MPI();
  const std::vector<std::pair<std::string, std::string>> chunks = {{"--eval-batch-configs", "7"}};
  std::vector<std::string> one = {"-j", "2"};
  for (const auto& a : TrainFlags("m.tpm", chunks)) one.push_back(a);
  CommandResult r = RunIn(tmp_.File("one"), 0, one);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string want = ModelBytes(tmp_.File("one/m.tpm"));
  ASSERT_FALSE(want.empty());
  auto f = train::ReadModelFile(tmp_.File("one/m.tpm"));
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->summary().history_size(), 3);
  for (const EpochRecord& e : f->summary().history()) {
    EXPECT_TRUE(std::isfinite(e.valid_metric())) << e.ShortDebugString();
  }
  for (int np : {2, 3}) {
    const std::string dir = tmp_.File("np" + std::to_string(np));
    std::vector<std::string> args = {"-j", "1"};
    for (const auto& a : TrainFlags("m.tpm", chunks)) args.push_back(a);
    r = RunIn(dir, np, args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(ModelBytes(dir + "/m.tpm") == want) << np << " ranks wrote another model";
  }
}

// The ranks share a step's tasks (graph, chunk of configurations), not its graphs: with one
// graph per step and several chunks, two ranks of one thread write the model of one process of
// one and of two threads. So do config_attention models, whose chunks meet in a join of every
// graph's attention (the rows of the other rank's chunks gathered first).
TEST_F(MpiCliTest, RanksShareOneGraphsChunks) {
  SKIP_WITHOUT_MPI();
  const std::string data = tmp_.File("big.tpug");
  ASSERT_EQ(testing::MakeReleaseShapedLayoutDataset(tmp_.path(), 2, data), "");
  const std::vector<std::string> attention = {"--config-attention", "4", "--config-node-head", "8"};
  for (const auto& extra : {std::vector<std::string>{}, attention}) {
    SCOPED_TRACE(extra.empty() ? "layout-large" : "config_attention");
    const std::string tag = extra.empty() ? "" : "-attention";
    auto args = [&](const std::string& j) {
      std::vector<std::string> a = {"-v",
                                    "-j",
                                    j,
                                    "train",
                                    "--config",
                                    testing::SourcePath("tools/configs/layout-large.textproto"),
                                    "--dataset",
                                    data,
                                    "--train-split",
                                    "train",
                                    "--valid-split",
                                    "",
                                    "--carve-valid-fraction",
                                    "0",
                                    "--min-config-passes",
                                    "0",
                                    "--batch-graphs",
                                    "1",
                                    "--epochs",
                                    "2",
                                    "--steps-per-epoch",
                                    "2",
                                    "--checkpoint-interval-seconds",
                                    "0",
                                    "--seed",
                                    "5",
                                    "--output",
                                    "m.tpm"};
      a.insert(a.end(), extra.begin(), extra.end());
      return a;
    };
    CommandResult r = RunIn(tmp_.File("one" + tag), 0, args("1"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string want = ModelBytes(tmp_.File("one" + tag + "/m.tpm"));
    ASSERT_FALSE(want.empty());
    r = RunIn(tmp_.File("two-threads" + tag), 0, args("2"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(ModelBytes(tmp_.File("two-threads" + tag + "/m.tpm")) == want);
    r = RunIn(tmp_.File("two-ranks" + tag), 2, args("1"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const size_t at = r.err.find("first step: ");
    ASSERT_NE(at, std::string::npos) << r.err;
    EXPECT_GT(std::atoi(r.err.c_str() + at + 12), 1) << r.err.substr(at, 120);
    EXPECT_NE(r.err.find("x 2 ranks"), std::string::npos) << r.err.substr(at, 120);
    EXPECT_TRUE(ModelBytes(tmp_.File("two-ranks" + tag + "/m.tpm")) == want)
        << "2 ranks wrote another model";
  }
}

TEST_F(MpiCliTest, AStepBudgetAndDeduplicatedPoolsGiveTheSameModelToo) {
  SKIP_WITHOUT_MPI();
  std::vector<std::string> args = {"-j", "1"};
  for (const auto& a :
       TrainFlags("m.tpm", {{"--steps-per-epoch", "5"}, {"--dedup-configs", "true"}})) {
    args.push_back(a);
  }
  CommandResult r = RunIn(tmp_.File("one"), 0, args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunIn(tmp_.File("two"), 2, args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string want = ModelBytes(tmp_.File("one/m.tpm"));
  ASSERT_FALSE(want.empty());
  EXPECT_TRUE(ModelBytes(tmp_.File("two/m.tpm")) == want);
  EXPECT_NE(r.err.find("training loop: 15 steps"), std::string::npos) << r.err;
}

TEST_F(MpiCliTest, GstWithHeldOutConfigsAndResumesOnOtherNumbersOfRanks) {
  SKIP_WITHOUT_MPI();
  auto flags = [&](int epochs) {
    std::vector<std::string> a = {"-j", "1"};
    for (const auto& f : TrainFlags("m.tpm", {{"--gst", "on"},
                                              {"--segment-size", "40"},
                                              {"--holdout-config-fraction", "0.25"},
                                              {"--valid-split", ""},
                                              {"--epochs", std::to_string(epochs)},
                                              {"--gst-finetune-epochs", "1"}})) {
      a.push_back(f);
    }
    return a;
  };
  CommandResult r = RunIn(tmp_.File("one"), 0, flags(4));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string want = ModelBytes(tmp_.File("one/m.tpm"));
  ASSERT_FALSE(want.empty());
  auto ckpt = train::ReadModelFile(tmp_.File("one/m.tpm.ckpt"));
  ASSERT_TRUE(ckpt.ok());
  EXPECT_FALSE(ckpt->checkpoint().gst_history().empty());

  r = RunIn(tmp_.File("two"), 2, flags(4));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(ModelBytes(tmp_.File("two/m.tpm")) == want) << "GST on 2 ranks";
  // The checkpoint, with every rank's history rows, is the one process's too.
  EXPECT_TRUE(ModelBytes(tmp_.File("two/m.tpm.ckpt")) == ModelBytes(tmp_.File("one/m.tpm.ckpt")));

  // 2 epochs, resumed to 3, resumed to 4: on one process, and on 3, 2 and 1 ranks.
  const std::vector<std::string> resume = {"-j",         "1",        "train", "--resume",
                                           "m.tpm.ckpt", "--output", "m.tpm", "--epochs"};
  auto chain = [&](const std::string& dir, const std::vector<int>& ranks) {
    CommandResult c = RunIn(dir, ranks[0], flags(2));
    ASSERT_EQ(c.exit_code, 0) << c.err;
    for (int k = 1; k < 3; ++k) {
      std::vector<std::string> args = resume;
      args.push_back(std::to_string(2 + k));
      c = RunIn(dir, ranks[k], args);
      ASSERT_EQ(c.exit_code, 0) << c.err;
    }
  };
  chain(tmp_.File("chain1"), {0, 0, 0});
  chain(tmp_.File("chain321"), {3, 2, 0});
  const std::string chained = ModelBytes(tmp_.File("chain1/m.tpm"));
  ASSERT_FALSE(chained.empty());
  EXPECT_TRUE(ModelBytes(tmp_.File("chain321/m.tpm")) == chained)
      << "resumed across 3, 2 and 1 ranks";
}

TEST_F(MpiCliTest, EvaluateAndPredictPrintAndWriteWhatOneProcessDoes) {
  SKIP_WITHOUT_MPI();
  CommandResult r = RunCli(TrainFlags(tmp_.File("m.tpm")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string model = tmp_.File("m.tpm");
  for (const std::vector<std::string>& eval :
       {std::vector<std::string>{"evaluate", "--data", Data(), "--model", model, "--per-graph"},
        std::vector<std::string>{"evaluate", "--data", Data(), "--model", model, "--model", model,
                                 "--split", "valid", "--json", "--per-graph"}}) {
    const CommandResult one = RunCli(eval);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    ASSERT_NE(one.out.find("layout:synth:random"), std::string::npos) << one.out;
    const CommandResult two = Mpirun(2, eval);
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_EQ(two.out, one.out);
  }
  for (const std::string format : {"kaggle", "scores"}) {
    const std::string a = tmp_.File("one." + format), b = tmp_.File("two." + format);
    const std::vector<std::string> base = {"predict", "--data",   Data(), "--model",
                                           model,     "--format", format, "-o"};
    // The kaggle run also writes the layout explanation (--explain).
    const bool explain = format == "kaggle";
    std::vector<std::string> args = base;
    args.push_back(a);
    if (explain) args.insert(args.end(), {"--explain", a + ".explain"});
    ASSERT_EQ(RunCli(args).exit_code, 0);
    args = base;
    args.push_back(b);
    if (explain) args.insert(args.end(), {"--explain", b + ".explain"});
    const CommandResult two = Mpirun(3, args);
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_FALSE(Bytes(a).empty());
    EXPECT_TRUE(Bytes(a) == Bytes(b)) << format;
    if (explain) {
      EXPECT_FALSE(Bytes(a + ".explain").empty());
      EXPECT_TRUE(Bytes(a + ".explain") == Bytes(b + ".explain"));
    }
  }
}

// One graph of 600 configurations and a 2-member ensemble: its pieces of 256 configurations go
// round the ranks, the members' scores are standardised over the whole
// graph on rank 0, and the outputs are those of one process.
TEST_F(MpiCliTest, RanksShareOneGraphsScoring) {
  SKIP_WITHOUT_MPI();
  const std::string raw = tmp_.File("big-raw"), big = tmp_.File("big.tpug");
  CommandResult r =
      RunCli({"-q", "synth", "--graphs", "1", "--min-nodes", "200", "--max-nodes", "200",
              "--configs", "600", "--splits", "0,1,0", "--seed", "9", "-o", raw});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(RunCli({"-q", "ingest", raw, "-o", big}).exit_code, 0);
  const std::string model = tmp_.File("m2.tpm");
  r = RunCli(TrainFlags(model, {{"--ensemble-members", "2"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> eval = {"evaluate", "--data", big,          "--model",
                                         model,      "--json", "--per-graph"};
  const CommandResult one = RunCli(eval);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  for (int np : {2, 3}) {
    std::vector<std::string> verbose = {"-v"};
    verbose.insert(verbose.end(), eval.begin(), eval.end());
    const CommandResult many = Mpirun(np, verbose);
    ASSERT_EQ(many.exit_code, 0) << many.err;
    EXPECT_EQ(many.out, one.out) << np << " ranks";
    // Rank 0 (the others log warnings only) scored its share of the graph's 3 pieces, the
    // other ranks the rest: 2 of them on 2 ranks (256 + 88 configurations), 1 on 3.
    const std::string line = "sharded scoring: rank 0 of " + std::to_string(np) +
                             " scored 1 graph(s), " + (np == 2 ? "2" : "1") + " piece(s)";
    EXPECT_NE(many.err.find(line), std::string::npos) << line << "\n" << many.err;
    const std::string configs = np == 2 ? "configs=344 " : "configs=256 ";
    EXPECT_NE(many.err.find(configs), std::string::npos) << configs << "\n" << many.err;
  }
  const std::string a = tmp_.File("big-one.scores"), b = tmp_.File("big-three.scores");
  ASSERT_EQ(
      RunCli({"predict", "--data", big, "--model", model, "--format", "scores", "-o", a}).exit_code,
      0);
  const CommandResult three =
      Mpirun(3, {"predict", "--data", big, "--model", model, "--format", "scores", "-o", b});
  ASSERT_EQ(three.exit_code, 0) << three.err;
  EXPECT_FALSE(Bytes(a).empty());
  EXPECT_TRUE(Bytes(a) == Bytes(b));
}

TEST_F(MpiCliTest, ARankWithABadDatasetEndsTheJobNamingTheRank) {
  SKIP_WITHOUT_MPI();
  // Rank 1 sees a damaged copy of the dataset (as on a node with a bad disk).
  const std::string bad = tmp_.File("bad.tpug");
  std::string bytes = Bytes(Data());
  ASSERT_GT(bytes.size(), 100u);
  for (size_t i = 0; i < bytes.size(); i += 7) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  std::ofstream(bad, std::ios::binary) << bytes;
  const std::string out = tmp_.File("m.tpm");
  std::vector<std::string> good_args = TrainFlags(out),
                           bad_args = TrainFlags(out, {{"--dataset", bad}});
  const std::string script = "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then exec " +
                             ShellQuote(BinaryPath()) + Join(bad_args) + "; else exec " +
                             ShellQuote(BinaryPath()) + Join(good_args) + "; fi";
  const CommandResult r =
      RunShell("cd " + ShellQuote(tmp_.path()) + " && " + kMpiEnv +
               " timeout -s KILL 60 mpirun -np 2 --oversubscribe --allow-run-as-root sh -c " +
               ShellQuote(script));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("rank 1: " + bad), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  // The message comes once, from rank 0.
  EXPECT_EQ(r.err.find("tpugraphs train: error"), r.err.rfind("tpugraphs train: error")) << r.err;

  // Under evaluate --model: the same.
  ASSERT_EQ(RunCli(TrainFlags(tmp_.File("good.tpm"))).exit_code, 0);
  auto per_rank = [&](const std::string& rank1, const std::string& others,
                      const std::string& rest) {
    const std::string script = "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then x=" + ShellQuote(rank1) +
                               "; else x=" + ShellQuote(others) + "; fi; exec " +
                               ShellQuote(BinaryPath()) + " " + rest;
    return RunShell(std::string(kMpiEnv) +
                    " timeout -s KILL 60 mpirun -np 2 --oversubscribe --allow-run-as-root sh -c " +
                    ShellQuote(script));
  };
  CommandResult e =
      per_rank(bad, Data(), "evaluate --data \"$x\" --model " + ShellQuote(tmp_.File("good.tpm")));
  EXPECT_EQ(e.exit_code, 1) << e.err;
  EXPECT_NE(e.err.find("rank 1: " + bad), std::string::npos) << e.err;
  EXPECT_TRUE(e.out.empty()) << e.out;
  // A baseline runs on rank 0 alone: rank 1's copy is never read.
  e = per_rank(bad, Data(), "evaluate --data \"$x\" --baseline random");
  EXPECT_EQ(e.exit_code, 0) << e.err;
  // An error before the ranks first meet (a missing --eval-indices file on rank 1 only) ends
  // the job through MPI_Abort, with exit code 1 and rank 1 named.
  const std::string indices = ::tpugraphs::testing::RealDataPath("eval_indices/xla_random.json");
  e = per_rank(tmp_.File("missing.json"), indices,
               "evaluate --data " + ShellQuote(Data()) + " --model " +
                   ShellQuote(tmp_.File("good.tpm")) + " --eval-indices \"$x\"");
  EXPECT_EQ(e.exit_code, 1) << e.err;
  EXPECT_NE(e.err.find("rank 1: tpugraphs evaluate: error: "), std::string::npos) << e.err;
  EXPECT_TRUE(e.out.empty()) << e.out;
}

TEST_F(MpiCliTest, AKilledRankEndsTheJobWithoutAModelFile) {
  SKIP_WITHOUT_MPI();
  const std::string out = tmp_.File("m.tpm");
  // Runs until killed.
  const std::vector<std::string> args =
      TrainFlags(out, {{"--epochs", "100000"}, {"--patience", "0"}});
  // Each rank records its pid; rank 1 is killed with SIGKILL once training runs.
  const std::string script = "echo $$ > pid.$OMPI_COMM_WORLD_RANK; exec " +
                             ShellQuote(BinaryPath()) + " -j 1" + Join(args);
  const std::string cmd =
      "cd " + ShellQuote(tmp_.path()) + " && (" + kMpiEnv +
      " timeout -s KILL 60 mpirun -np 2 --oversubscribe --allow-run-as-root sh -c " +
      ShellQuote(script) +
      " & job=$!; for i in $(seq 300); do [ -s pid.1 ] && break; sleep 0.1; done; sleep 1; "
      "kill -9 $(cat pid.1); start=$(date +%s%N); wait $job; rc=$?; "
      "echo \"rc=$rc ms=$(( ($(date +%s%N) - start) / 1000000 ))\")";
  const CommandResult r = RunShell(cmd);
  ASSERT_NE(r.out.find("rc="), std::string::npos) << r.out << r.err;
  const int rc = std::stoi(r.out.substr(r.out.find("rc=") + 3));
  const int ms = std::stoi(r.out.substr(r.out.find("ms=") + 3));
  // mpirun ends the job when a rank dies and exits with the dead rank's status (128 + 9); the
  // 60 s limit would have ended it with the same status, so the time tells them apart.
  EXPECT_NE(rc, 0) << r.err;
  EXPECT_LT(ms, 30000) << "the job did not end by itself: " << r.err;
  EXPECT_NE(r.err.find("rank 1 with PID"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

// The job above, run again with --auto-resume true (as tools/train-all-collections.sh does):
// it continues from the checkpoint the killed job left (rank 0's lock, released by the kernel,
// does not block it) and ends with the uninterrupted job's model file.
TEST_F(MpiCliTest, AJobWithAKilledRankResumesToTheUninterruptedModel) {
  SKIP_WITHOUT_MPI();
  // A checkpoint after every step; enough epochs for the kill to land inside the training.
  const std::vector<std::pair<std::string, std::string>> flags = {
      {"--epochs", "60"},
      {"--patience", "0"},
      {"--checkpoint-interval-seconds", "0.000001"},
      {"--auto-resume", "true"}};
  const CommandResult ref = RunIn(tmp_.File("ref"), 2, TrainFlags("m.tpm", flags));
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const std::string want = ModelBytes(tmp_.File("ref/m.tpm"));
  ASSERT_FALSE(want.empty());

  const std::string dir = tmp_.File("killed");
  fs::create_directories(dir);
  std::string train = ShellQuote(BinaryPath()) + " -j 1";
  for (const std::string& a : TrainFlags("m.tpm", flags)) train += " " + ShellQuote(a);
  // Rank 1 killed with SIGKILL once rank 0 has written a checkpoint.
  const std::string cmd =
      "cd " + ShellQuote(dir) + " && (" + kMpiEnv +
      " timeout -s KILL 60 mpirun -np 2 --oversubscribe --allow-run-as-root sh -c " +
      ShellQuote("echo $$ > pid.$OMPI_COMM_WORLD_RANK; exec " + train) +
      " & job=$!; for i in $(seq 3000); do [ -s pid.1 ] && [ -e m.tpm.ckpt ] && break; "
      "sleep 0.01; done; kill -9 $(cat pid.1); wait $job; echo rc=$?)";
  const CommandResult killed = RunShell(cmd);
  ASSERT_NE(killed.out.find("rc="), std::string::npos) << killed.out << killed.err;
  EXPECT_NE(std::stoi(killed.out.substr(killed.out.find("rc=") + 3)), 0) << killed.err;
  ASSERT_TRUE(fs::exists(dir + "/m.tpm.ckpt"));
  ASSERT_FALSE(fs::exists(dir + "/m.tpm")) << "the job ended before the kill: nothing was tested";

  const CommandResult again = RunIn(dir, 2, TrainFlags("m.tpm", flags));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("resuming the interrupted run"), std::string::npos) << again.err;
  EXPECT_TRUE(ModelBytes(dir + "/m.tpm") == want) << "the resumed job's model differs";
  EXPECT_FALSE(fs::exists(dir + "/m.tpm.lock"));
  EXPECT_FALSE(fs::exists(dir + "/m.tpm.ckpt.prev"));
}

}  // namespace
}  // namespace tpugraphs
