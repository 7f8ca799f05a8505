// tools/reference/torch_twin.py against our model on a small synthetic layout graph: the scores and
// every parameter gradient of a batch (float64 and float32), and two training steps in lockstep
// with the trainer's own held-out Kendall tau (docs/twin.md). Skipped when Python lacks torch.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "testing/test_util.h"

namespace tpugraphs {
namespace {

using ::tpugraphs::testing::CommandResult;
using ::tpugraphs::testing::RunCli;
using ::tpugraphs::testing::RunPython;
using ::tpugraphs::testing::RunShell;
using ::tpugraphs::testing::ShellQuote;
using ::tpugraphs::testing::SourcePath;
using ::tpugraphs::testing::TempDir;

class TorchTwinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CommandResult r = RunPython("import torch");
    if (r.exit_code != 0) {
      GTEST_SKIP() << "Python module torch is missing (Debian: python3-torch): " << r.err;
    }
    CommandResult s = RunCli({"-q", "synth", "--task", "layout", "--graphs", "1", "--nodes", "150",
                              "--configs", "40", "--seed", "3", "-o", dir_.File("synth")});
    ASSERT_EQ(s.exit_code, 0) << s.err;
    CommandResult i = RunCli({"-q", "ingest", dir_.File("synth"), "-o", Data()});
    ASSERT_EQ(i.exit_code, 0) << i.err;
  }

  std::string Data() const { return dir_.File("s.tpug"); }

  // Trains 2 steps with `flags`, dumps a batch of 12 configs with the trainer's curve.
  std::string TrainAndDump(const std::string& name, const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"-q",
                                     "train",
                                     "--dataset",
                                     Data(),
                                     "--train-split",
                                     "",
                                     "--valid-split",
                                     "",
                                     "--holdout-config-fraction",
                                     "0.3",
                                     "--epochs",
                                     "2",
                                     "--configs-per-graph",
                                     "8",
                                     "--hidden-dim",
                                     "16",
                                     "--output",
                                     dir_.File(name + ".tpm")};
    args.insert(args.end(), flags.begin(), flags.end());
    CommandResult t = RunCli(args);
    EXPECT_EQ(t.exit_code, 0) << t.err;
    const std::string npz = dir_.File(name + ".npz");
    CommandResult d = RunShell(
        ShellQuote(TPUGRAPHS_DUMP_BATCH) + " --model " + ShellQuote(dir_.File(name + ".tpm")) +
        " --dataset " + ShellQuote(Data()) + " --num-configs 12 --curve -o " + ShellQuote(npz));
    EXPECT_EQ(d.exit_code, 0) << d.err;
    return npz;
  }

  CommandResult Twin(const std::string& npz, const std::string& extra) {
    return RunShell(ShellQuote(TPUGRAPHS_PYTHON) + " " +
                    ShellQuote(SourcePath("tools/reference/torch_twin.py")) + " " +
                    ShellQuote(npz) + " --check " + extra);
  }

  TempDir dir_;
};

TEST_F(TorchTwinTest, DefaultArchitectureAgreesAndTrainsInLockstep) {
  const std::string npz = TrainAndDump("a", {});
  CommandResult r = Twin(npz, "--train-steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("-> AGREE"), std::string::npos) << r.out;
  // Both steps: the twin's held-out tau equals the trainer's (same batches, same optimizer).
  for (const char* step : {"\n    1 ", "\n    2 "}) {
    const size_t at = r.out.find(step);
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    std::vector<std::string> cols;
    for (size_t p = 0, q; p < line.size(); p = q) {
      p = line.find_first_not_of(' ', p);
      if (p == std::string::npos) break;
      q = line.find(' ', p);
      if (q == std::string::npos) q = line.size();
      cols.push_back(line.substr(p, q - p));
    }
    ASSERT_EQ(cols.size(), 6u) << line;
    EXPECT_NEAR(std::stod(cols[4]), std::stod(cols[5]), 2e-3) << line;
  }
}

TEST_F(TorchTwinTest, EveryOptionalPartAgrees) {
  const std::string npz = TrainAndDump(
      "b", {"--activation", "gelu", "--aggregation", "sum", "--config-pooling", "mean",
            "--pool-max", "false", "--head-layers", "2", "--layout-tensor-features", "true",
            "--config-node-head", "4", "--prune-hops", "1", "--listmle-weight", "0.5"});
  CommandResult r = Twin(npz, "");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("pruning to 1 hops recomputed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nodes agree, edges agree, configurable nodes agree"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("node_head.w1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> AGREE"), std::string::npos) << r.out;
}

TEST_F(TorchTwinTest, LogSumExpNodeHeadAgrees) {
  const std::string npz =
      TrainAndDump("d", {"--config-node-head", "4", "--config-node-head-pooling", "logsumexp",
                         "--layout-tensor-features", "true", "--prune-hops", "2"});
  CommandResult r = Twin(npz, "");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("node_head.w2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> AGREE"), std::string::npos) << r.out;
}

// The twin has neither loop depth nor layout flow features: the dump tool refuses such models,
// naming the option (this needs no torch, so it runs outside the fixture).
TEST(DumpBatchTest, RefusesLoopDepthAndLayoutFlowModels) {
  TempDir dir;
  ASSERT_EQ(RunCli({"-q", "synth", "--task", "layout", "--graphs", "1", "--nodes", "150",
                    "--configs", "20", "--seed", "3", "-o", dir.File("synth")})
                .exit_code,
            0);
  ASSERT_EQ(RunCli({"-q", "ingest", dir.File("synth"), "-o", dir.File("s.tpug")}).exit_code, 0);
  for (const std::string option : {"config_loop_depth", "layout_flow_features"}) {
    std::string flag = "--" + option;
    std::replace(flag.begin(), flag.end(), '_', '-');
    CommandResult t = RunCli({"-q", "train", "--dataset", dir.File("s.tpug"), "--train-split", "",
                              "--valid-split", "", "--epochs", "1", "--hidden-dim", "8", flag,
                              "true", "--output", dir.File("m.tpm")});
    ASSERT_EQ(t.exit_code, 0) << t.err;
    CommandResult d =
        RunShell(ShellQuote(TPUGRAPHS_DUMP_BATCH) + " --model " + ShellQuote(dir.File("m.tpm")) +
                 " --dataset " + ShellQuote(dir.File("s.tpug")) + " --num-configs 4 -o " +
                 ShellQuote(dir.File("b.npz")));
    EXPECT_EQ(d.exit_code, 1) << d.out << d.err;
    EXPECT_NE(d.err.find(option + " is not supported by the twin"), std::string::npos) << d.err;
  }
}

TEST_F(TorchTwinTest, DetectsAWrongGradient) {
  const std::string npz = TrainAndDump("c", {});
  // One entry of one block of our double gradient off by 1e-6 relative.
  const char* code = R"(
import json, sys, numpy as np
d = dict(np.load(sys.argv[1]))
meta = json.loads(bytes(d['meta_json']).decode())
b = [b for b in meta['blocks'] if b['name'] == 'layer2.w'][0]
g = d['grad64']
i = b['offset'] + int(np.argmax(np.abs(g[b['offset']:b['offset'] + b['rows'] * b['cols']])))
g[i] *= 1 + 1e-6
np.savez(sys.argv[2], **d)
)";
  CommandResult p = RunPython(code, {npz, dir_.File("bad.npz")});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  CommandResult r = Twin(dir_.File("bad.npz"), "");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> DISAGREE"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tpugraphs
