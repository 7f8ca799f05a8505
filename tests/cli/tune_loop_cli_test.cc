// End-to-end tests of the closed loop, `tpugraphs tune --measure-cmd CMD --rounds R --measure K`
// (docs/tune.md, "Closing the loop"), with `synth --score` as the measurer: the best measured
// configuration first, the trace, a killed or extended run that measures nothing twice, the bad
// measurers, and the loop without a model.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"

namespace tpugraphs {
namespace {

namespace fs = std::filesystem;
using testing::BinaryPath;
using testing::RunCli;
using testing::RunPython;
using testing::RunShell;
using testing::ShellQuote;
using testing::TempDir;

class TuneLoopCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    auto run = [](std::vector<std::string> args) {
      auto r = RunCli(args);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    };
    run({"-q", "synth", "--task", "layout", "--graphs", "4", "--nodes", "250", "--configs", "30",
         "--seed", "5", "--output", File("layout")});
    run({"-q", "synth", "--task", "tile", "--graphs", "4", "--configs", "20", "--seed", "6",
         "--output", File("tile")});
    run({"-q", "ingest", File("layout/pb/layout"), "-o", File("layout.tpug")});
    run({"-q", "ingest", File("tile/pb/tile"), "--collection", "tile:synth", "-o",
         File("tile.tpug")});
    // The layout model is an ensemble: the loop fine-tunes each member from its own.
    run({"-q", "train", "--dataset", File("layout.tpug"), "--train-split", "", "--valid-split", "",
         "--epochs", "2", "--hidden-dim", "8", "--ensemble-members", "2", "--output",
         File("layout.tpm")});
    run({"-q", "train", "--dataset", File("tile.tpug"), "--train-split", "", "--valid-split", "",
         "--epochs", "2", "--hidden-dim", "8", "--output", File("tile.tpm")});
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string File(const std::string& name) { return dir_->File(name); }
  static std::string Program(const std::string& task, int i) {
    std::vector<std::string> files;
    const std::string d = task == "layout" ? File("layout/pb/layout/synth/random/train")
                                           : File("tile/pb/tile/synth/train");
    for (const auto& e : fs::directory_iterator(d)) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    return files.at(static_cast<size_t>(i));
  }
  // synth --score as the measurer of `program`; each call appends its batch size to `calls`.
  static std::string Measurer(const std::string& program, const std::string& calls) {
    return ShellQuote(BinaryPath()) + " -q synth --score {} --from " + ShellQuote(program) +
           " | awk '{ print } NR > 1 { n++ } END { print n >> \"" + calls + "\" }'";
  }
  static std::vector<std::string> Loop(const std::string& program, const std::string& model,
                                       const std::string& measure_cmd, int rounds,
                                       const std::string& measurements, const std::string& out) {
    std::vector<std::string> args = {"-q",
                                     "tune",
                                     "--data",
                                     program,
                                     "--measure",
                                     "5",
                                     "--rounds",
                                     std::to_string(rounds),
                                     "--budget",
                                     "200",
                                     "--finetune-steps",
                                     "10",
                                     "--measure-cmd",
                                     measure_cmd,
                                     "-o",
                                     out};
    if (!model.empty()) args.insert(args.end(), {"--model", model});
    if (!measurements.empty()) args.insert(args.end(), {"--measurements", measurements});
    return args;
  }
  static int Lines(const std::string& path) {
    auto text = ReadFileToString(path);
    if (!text.ok()) return -1;
    return static_cast<int>(std::count(text->begin(), text->end(), '\n'));
  }
  static TempDir* dir_;
};
TempDir* TuneLoopCliTest::dir_ = nullptr;

// numpy + synth --score: the output holds every measured configuration once, best first, with
// score = runtime = what the measurer gives for it, and the default among them.
constexpr char kCheckLoopNpz[] = R"(
import sys, numpy as np
z = np.load(sys.argv[1])
key = "node_config_feat" if "node_config_feat" in z else "config_feat"
f, s, rt, rd = z[key], z["score"], z["runtime"], z["round"]
k = int(sys.argv[2])
assert f.shape[0] == k and s.shape == (k,) and rt.shape == (k,) and rd.shape == (k,), f.shape
assert rt.dtype == np.float64 and rd.dtype == np.int64
assert (s == rt).all() and all(rt[i] <= rt[i + 1] for i in range(k - 1)), rt
assert len({f[i].tobytes() for i in range(k)}) == k, "a configuration measured twice"
dflt = z["default_node_config_feat"] if key == "node_config_feat" else z["default_config_feat"]
hits = [i for i in range(k) if (f[i] == dflt).all()]
assert len(hits) == 1 and rt[hits[0]] == z["default_score"][0], hits
assert rt[0] <= z["default_score"][0]
assert sorted(set(rd.tolist())) == list(range(1, int(sys.argv[3]) + 1)), rd
scored = {}
for line in open(sys.argv[4]).read().split("\n")[1:]:
    if line:
        i, ns = line.split("\t")
        scored[int(i)] = float(ns)
assert all(scored[i] == rt[i] for i in range(k)), (scored, rt)
print("ok")
)";

TEST_F(TuneLoopCliTest, BestMeasuredFirstEveryMeasurementKeptAndATrace) {
  TempDir out;
  const std::string prog = Program("layout", 0);
  auto r = RunCli(Loop(prog, File("layout.tpm"), Measurer(prog, out.File("calls")), 3,
                       out.File("m.tsv"), out.File("best.npz")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The trace: a header and one row per round; 5 new measurements a round.
  std::istringstream rows(r.out);
  std::string line;
  std::getline(rows, line);
  EXPECT_EQ(line,
            "graph\tround\tmeasured\tnew\tbest_runtime\tdefault_runtime\tspeedup\tbatch_kendall\t"
            "seconds\toutput");
  double last_best = 1e300;
  for (int round = 1; round <= 3; ++round) {
    ASSERT_TRUE(std::getline(rows, line)) << r.out;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, '\t');) f.push_back(x);
    ASSERT_EQ(f.size(), 10u) << line;
    EXPECT_EQ(f[1], std::to_string(round));
    EXPECT_EQ(f[2], std::to_string(5 * round));
    EXPECT_EQ(f[3], "5");
    const double best = std::stod(f[4]);
    EXPECT_LE(best, last_best);  // best so far never gets worse
    last_best = best;
    EXPECT_NE(f[5], "nan");                    // the default is measured in round 1
    EXPECT_GE(std::stod(f[6]), 1.0);           // so the result is never worse than it
    EXPECT_GE(std::stod(f[7]), -1.0) << line;  // the model's Kendall on the new batch
    EXPECT_LE(std::stod(f[7]), 1.0) << line;
    EXPECT_EQ(f[9], out.File("best.npz"));
  }
  EXPECT_EQ(Lines(out.File("calls")), 3);  // one measurer call per round
  EXPECT_EQ(Lines(out.File("m.tsv")), 1 + 15);
  auto scored = RunCli({"-q", "synth", "--score", out.File("best.npz"), "--from", prog});
  ASSERT_EQ(scored.exit_code, 0) << scored.err;
  ASSERT_TRUE(WriteFileAtomically(out.File("scored.tsv"), scored.out).ok());
  auto py = RunPython(kCheckLoopNpz, {out.File("best.npz"), "15", "3", out.File("scored.tsv")});
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;

  // --json: one object with the rounds.
  auto j = RunCli([&] {
    auto a = Loop(prog, File("layout.tpm"), Measurer(prog, out.File("calls2")), 3,
                  out.File("m.tsv"), out.File("best2.npz"));
    a.push_back("--json");
    return a;
  }());
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_NE(j.out.find("\"rounds\":[{\"round\":1,\"batch\":5,\"new_measurements\":0"),
            std::string::npos)
      << j.out;
  EXPECT_NE(j.out.find("\"measured\":15"), std::string::npos) << j.out;
  EXPECT_FALSE(fs::exists(out.File("calls2")));  // all found in the file: nothing measured
}

// A run killed by a failing measurer keeps what it measured; the same command continues, measures
// nothing twice, and ends with the same output as a run that was never interrupted. More rounds
// later continue from the file too.
TEST_F(TuneLoopCliTest, AKilledOrExtendedRunMeasuresNothingTwiceAndEndsTheSame) {
  TempDir out;
  const std::string prog = Program("layout", 1);
  auto whole = RunCli(Loop(prog, File("layout.tpm"), Measurer(prog, out.File("whole.calls")), 3,
                           out.File("whole.tsv"), out.File("whole.npz")));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;

  // The measurer dies on its second call (round 2).
  const std::string dying = "if [ -f " + ShellQuote(out.File("died")) + " ] || [ ! -f " +
                            ShellQuote(out.File("calls")) + " ]; then " +
                            Measurer(prog, out.File("calls")) + "; else touch " +
                            ShellQuote(out.File("died")) + "; kill -9 $$; fi";
  auto cut =
      RunCli(Loop(prog, File("layout.tpm"), dying, 3, out.File("m.tsv"), out.File("best.npz")));
  ASSERT_EQ(cut.exit_code, 1);
  EXPECT_NE(cut.err.find("was killed by signal 9"), std::string::npos) << cut.err;
  EXPECT_NE(cut.err.find("measure command `"), std::string::npos) << cut.err;
  EXPECT_FALSE(fs::exists(out.File("best.npz")));
  EXPECT_EQ(Lines(out.File("m.tsv")), 1 + 5);  // round 1 kept
  auto again = RunCli(Loop(prog, File("layout.tpm"), Measurer(prog, out.File("calls")), 3,
                           out.File("m.tsv"), out.File("best.npz")));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(Lines(out.File("calls")), 1 + 2);  // rounds 2 and 3 only
  EXPECT_EQ(Lines(out.File("m.tsv")), 1 + 15);
  EXPECT_EQ(*ReadFileToString(out.File("best.npz")), *ReadFileToString(out.File("whole.npz")));

  // Two rounds, then four: the first two come from the file.
  auto two = RunCli(Loop(prog, File("layout.tpm"), Measurer(prog, out.File("x.calls")), 2,
                         out.File("x.tsv"), out.File("x.npz")));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  auto four = RunCli(Loop(prog, File("layout.tpm"), Measurer(prog, out.File("x.calls")), 4,
                          out.File("x.tsv"), out.File("x.npz")));
  ASSERT_EQ(four.exit_code, 0) << four.err;
  EXPECT_EQ(Lines(out.File("x.calls")), 4);
  EXPECT_EQ(Lines(out.File("x.tsv")), 1 + 20);
  EXPECT_NE(four.out.find("\t3\t15\t5\t"), std::string::npos) << four.out;
}

TEST_F(TuneLoopCliTest, ABadMeasurerIsAClearErrorAndTheMeasurementsSoFarStay) {
  TempDir out;
  const std::string prog = Program("layout", 2);
  // Round 1 measured properly, then a bad measurer for round 2.
  auto one = RunCli(Loop(prog, File("layout.tpm"), Measurer(prog, out.File("calls")), 1,
                         out.File("m.tsv"), out.File("one.npz")));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::string kept = *ReadFileToString(out.File("m.tsv"));
  struct Case {
    std::string cmd, expect;
  } cases[] = {
      {": {}; exit 7", "failed (exit status 7)"},
      {": {}; printf '0\\t1\\n1\\t1\\n'", "printed no runtime for 3 of the batch's 5"},
      {": {}; for i in 0 1 2 3 4 5; do printf '%d\\t1\\n' $i; done", "line 6 '5\t1': index 5"},
      {": {}; for i in 0 1 2 3 4 0; do printf '%d\\t1\\n' $i; done", "already given on line 1"},
      {": {}; for i in 0 1 2 3; do printf '%d\\t1\\n' $i; done; printf '4\\t-2\\n'",
       "line 5 '4\t-2': the runtime is not positive"},
      {": {}; for i in 0 1 2 3; do printf '%d\\t1\\n' $i; done; printf '4\\tnan\\n'",
       "the runtime is not a finite number"},
      {": {}; for i in 0 1 2 3; do printf '%d\\t1\\n' $i; done; printf '4\\tinf\\n'",
       "the runtime is not a finite number"},
  };
  for (const Case& c : cases) {
    auto r =
        RunCli(Loop(prog, File("layout.tpm"), c.cmd, 2, out.File("m.tsv"), out.File("bad.npz")));
    EXPECT_EQ(r.exit_code, 1) << c.cmd;
    EXPECT_NE(r.err.find("measure command `" + c.cmd + "`"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.cmd << "\n" << r.err;
    EXPECT_FALSE(fs::exists(out.File("bad.npz")));
    EXPECT_EQ(*ReadFileToString(out.File("m.tsv")), kept) << c.cmd;
  }
  // A corrupt measurements file names its line; usage errors exit 2.
  ASSERT_TRUE(WriteFileAtomically(out.File("corrupt.tsv"),
                                  "# tpugraphs tune measurements 1\nx:y\t1\t-1\tnan\tL:0\n")
                  .ok());
  auto c = RunCli(
      Loop(prog, File("layout.tpm"), "true", 1, out.File("corrupt.tsv"), out.File("bad.npz")));
  EXPECT_EQ(c.exit_code, 1);
  EXPECT_NE(c.err.find("corrupt.tsv:2: runtime '-1'"), std::string::npos) << c.err;
  auto no_k = RunCli({"-q", "tune", "--data", prog, "--model", File("layout.tpm"), "--measure-cmd",
                      "true", "-o", out.File("u.npz")});
  EXPECT_EQ(no_k.exit_code, 2);
  EXPECT_NE(no_k.err.find("--measure-cmd needs --measure K"), std::string::npos) << no_k.err;
  auto no_cmd = RunCli({"-q", "tune", "--data", prog, "--model", File("layout.tpm"),
                        "--measurements", out.File("m.tsv"), "-o", out.File("u.npz")});
  EXPECT_EQ(no_cmd.exit_code, 2);
  auto oracle = RunCli({"-q", "tune", "--data", prog, "--oracle", "synthetic", "--from", prog,
                        "--measure", "3", "--measure-cmd", "true", "-o", out.File("u.npz")});
  EXPECT_EQ(oracle.exit_code, 2);
  EXPECT_NE(oracle.err.find("--measure-cmd and --oracle exclude each other"), std::string::npos);
}

// One loop per measurements file: a second `tune` on a file another process holds is refused at
// once, naming that process, with nothing written; once the holder is killed its lock does not
// block, and the run that takes it over removes it at its end.
TEST_F(TuneLoopCliTest, ASecondLoopOnTheSameMeasurementsIsRefused) {
  TempDir out;
  const std::string prog = Program("layout", 2);
  const std::string m = out.File("m.tsv");
  // The holder: flock(1) on m.tsv.lock around a process that writes its pid there, as tune does.
  auto held = RunShell("cd " + ShellQuote(out.path()) +
                       " && (flock m.tsv.lock sh -c 'echo $$ > m.tsv.lock; exec sleep 60' "
                       ">/dev/null 2>&1 &); for i in $(seq 1000); do [ -s m.tsv.lock ] && "
                       "break; sleep 0.01; done; cat m.tsv.lock");
  ASSERT_EQ(held.exit_code, 0) << held.err;
  std::string pid = held.out;
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  ASSERT_FALSE(pid.empty());
  auto refused = RunCli(
      Loop(prog, File("layout.tpm"), Measurer(prog, out.File("calls")), 1, m, out.File("b.npz")));
  RunShell("kill -9 " + pid);
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_NE(refused.err.find("--measurements " + m + " is being written by another process (pid " +
                             pid + ","),
            std::string::npos)
      << refused.err;
  EXPECT_FALSE(fs::exists(m));
  EXPECT_FALSE(fs::exists(out.File("b.npz")));
  EXPECT_FALSE(fs::exists(out.File("calls"))) << "the refused run measured";
  // The holder gone (its lock released by the kernel, the file left): the next run goes on.
  ASSERT_EQ(RunShell("for i in $(seq 1000); do flock -n " + ShellQuote(m + ".lock") +
                     " true && exit 0; sleep 0.01; done; exit 1")
                .exit_code,
            0);
  auto ok = RunCli(
      Loop(prog, File("layout.tpm"), Measurer(prog, out.File("calls")), 1, m, out.File("b.npz")));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(Lines(m), 6);  // the header and the round's 5
  EXPECT_FALSE(fs::exists(m + ".lock"));
}

// Without a model: an evolutionary search on measurements alone, K a generation.
TEST_F(TuneLoopCliTest, WithoutAModelItEvolvesOnMeasurementsAlone) {
  TempDir out;
  const std::string prog = Program("layout", 3);
  auto r = RunCli(Loop(prog, "", Measurer(prog, out.File("calls")), 3, "", out.File("e.npz")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Lines(out.File("calls")), 3);
  auto scored = RunCli({"-q", "synth", "--score", out.File("e.npz"), "--from", prog});
  ASSERT_EQ(scored.exit_code, 0) << scored.err;
  ASSERT_TRUE(WriteFileAtomically(out.File("scored.tsv"), scored.out).ok());
  auto py = RunPython(kCheckLoopNpz, {out.File("e.npz"), "15", "3", out.File("scored.tsv")});
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
  EXPECT_NE(r.out.find("\tnan\t"), std::string::npos) << r.out;  // no model: no Kendall
}

// A tile kernel: the model (a single one) fine-tuned on tile measurements.
TEST_F(TuneLoopCliTest, TileKernelsLoopToo) {
  TempDir out;
  const std::string kernel = Program("tile", 0);
  auto r = RunCli(Loop(kernel, File("tile.tpm"), Measurer(kernel, out.File("calls")), 2,
                       out.File("m.tsv"), out.File("t.npz")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto scored = RunCli({"-q", "synth", "--score", out.File("t.npz"), "--from", kernel});
  ASSERT_EQ(scored.exit_code, 0) << scored.err;
  ASSERT_TRUE(WriteFileAtomically(out.File("scored.tsv"), scored.out).ok());
  auto py = RunPython(kCheckLoopNpz, {out.File("t.npz"), "10", "2", out.File("scored.tsv")});
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
}

// The template measurer for real hardware (tools/examples/measure-hlo.sh) closes the loop on an
// HLO text program: each batch applied with `tune --apply --emit-hlo`, every module run by
// RUN_HLO and timed. Here RUN_HLO is a stand-in whose "runtime" is the module's size.
TEST_F(TuneLoopCliTest, TheHloMeasurerTemplateClosesTheLoopOnAnHloProgram) {
  TempDir out;
  const std::string hlo = testing::RealDataPath("hlo_text/openxla_cpu_benchmark_graphsage_tf.hlo");
  const std::string script = testing::SourcePath("tools/examples/measure-hlo.sh");
  const std::string env = "TPUGRAPHS=" + ShellQuote(BinaryPath()) + " ";
  auto r = RunCli({"-q",
                   "tune",
                   "--data",
                   hlo,
                   "--model",
                   File("layout.tpm"),
                   "--measure",
                   "3",
                   "--rounds",
                   "2",
                   "--budget",
                   "60",
                   "--finetune-steps",
                   "5",
                   "--measure-cmd",
                   env + "RUN_HLO='wc -c' TIME_FROM=output REPEATS=1 bash " + ShellQuote(script) +
                       " " + ShellQuote(hlo) + " {}",
                   "--measurements",
                   out.File("m.tsv"),
                   "-o",
                   out.File("best.npz"),
                   "--emit-hlo",
                   out.File("best")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Lines(out.File("m.tsv")), 1 + 6);
  int emitted = 0;
  for (const auto& e : fs::directory_iterator(out.File("best"))) {
    emitted += e.path().extension() == ".hlo";
  }
  EXPECT_EQ(emitted, 1);
  // Each recorded runtime is the size of the module its configuration gives.
  auto applied = RunCli({"-q", "tune", "--data", hlo, "--apply", out.File("best.npz"), "--emit-hlo",
                         out.File("applied"), "-o", out.File("applied.npz")});
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  auto py = RunPython(R"(
import sys, os, numpy as np
z = np.load(sys.argv[1])
for i, t in enumerate(z["runtime"]):
    f = [n for n in os.listdir(sys.argv[2]) if n.endswith("." + str(i) + ".hlo")]
    assert len(f) == 1, f
    assert os.path.getsize(os.path.join(sys.argv[2], f[0])) == t, (i, t)
print("ok")
)",
                      {out.File("best.npz"), out.File("applied")});
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;

  // Timed by the shell's clock: positive runtimes the loop accepts.
  ASSERT_TRUE(WriteFileAtomically(out.File("runner.sh"), "#!/bin/sh\nsleep 0.01\n").ok());
  fs::permissions(out.File("runner.sh"), fs::perms::owner_all);
  auto wall =
      RunShell(env + "RUN_HLO=" + ShellQuote(out.File("runner.sh")) + " REPEATS=2 bash " +
               ShellQuote(script) + " " + ShellQuote(hlo) + " " + ShellQuote(out.File("best.npz")));
  ASSERT_EQ(wall.exit_code, 0) << wall.err;
  std::istringstream lines(wall.out);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "index\truntime");
  int rows = 0;
  while (std::getline(lines, line)) {
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    EXPECT_EQ(line.substr(0, tab), std::to_string(rows));
    EXPECT_GT(std::stod(line.substr(tab + 1)), 0.005) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 6);
  auto unset = RunShell("bash " + ShellQuote(script) + " " + ShellQuote(hlo) + " x.npz");
  EXPECT_EQ(unset.exit_code, 2);
  EXPECT_NE(unset.err.find("set RUN_HLO"), std::string::npos) << unset.err;
}

// --apply: the configurations of an .npz, checked against the graph; a foreign one is an error.
TEST_F(TuneLoopCliTest, ApplyChecksAndWritesTheConfigurationsOfAnNpz) {
  TempDir out;
  const std::string prog = Program("layout", 0), other = Program("layout", 1);
  auto t = RunCli({"-q", "tune", "--data", prog, "--model", File("layout.tpm"), "--budget", "50",
                   "--top", "4", "-o", out.File("t.npz")});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  auto a = RunCli({"-q", "tune", "--data", prog, "--apply", out.File("t.npz"), "-o",
                   out.File("a.npz"), "--json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.out.find("\"applied\":4"), std::string::npos) << a.out;
  auto py = RunPython(R"(
import sys, numpy as np
t, a = np.load(sys.argv[1]), np.load(sys.argv[2])
assert (t["node_config_feat"] == a["node_config_feat"]).all()
print("ok")
)",
                      {out.File("t.npz"), out.File("a.npz")});
  EXPECT_EQ(py.exit_code, 0) << py.err;
  auto bad = RunCli(
      {"-q", "tune", "--data", other, "--apply", out.File("t.npz"), "-o", out.File("b.npz")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("t.npz"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(out.File("b.npz")));
}

}  // namespace
}  // namespace tpugraphs
