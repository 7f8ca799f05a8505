// End-to-end tests of `tpugraphs tune` and `tpugraphs synth --score` through the built binary:
// valid configurations readable by numpy, determinism across -j, the synthetic ground truth
// against the costs synth recorded, the HLO text round trip and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/ingest/config_npz.h"
#include "tpugraphs/ingest/load_graphs.h"
#include "tpugraphs/tune_config.pb.h"

namespace tpugraphs {
namespace {

namespace fs = std::filesystem;
using testing::RealDataPath;
using testing::RunCli;
using testing::RunCliWithin;
using testing::RunPython;
using testing::TempDir;

// One synthetic layout program, one tile kernel, and tiny models of both tasks, made once.
class TuneCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    auto run = [](std::vector<std::string> args) {
      auto r = RunCli(args);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    };
    run({"-q", "synth", "--task", "layout", "--graphs", "1", "--nodes", "300", "--configs", "40",
         "--seed", "3", "--output", File("layout"), "--noise-free-costs", File("layout.tsv")});
    run({"-q", "synth", "--task", "tile", "--graphs", "3", "--configs", "25", "--seed", "4",
         "--output", File("tile"), "--noise-free-costs", File("tile.tsv")});
    run({"-q", "ingest", File("layout/pb/layout"), "-o", File("layout.tpug")});
    run({"-q", "ingest", File("tile/pb/tile"), "--collection", "tile:synth", "-o",
         File("tile.tpug")});
    // The layout model is an ensemble (its members' scores are standardised across batches).
    for (const char* task : {"layout", "tile"}) {
      const bool layout = std::string(task) == "layout";
      run({"-q", "train", "--dataset", File(std::string(task) + ".tpug"), "--train-split", "",
           "--valid-split", "", "--epochs", "1", "--hidden-dim", "8", "--ensemble-members",
           layout ? "2" : "1", "--output", File(std::string(task) + ".tpm")});
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string File(const std::string& name) { return dir_->File(name); }
  static std::string LayoutProgram() {
    return File("layout/pb/layout/synth/random/train/program_00000.pb");
  }
  static std::string TileKernel(int i) {
    for (const auto& e : fs::directory_iterator(File("tile/pb/tile/synth/train"))) {
      if (i-- == 0) return e.path().string();
    }
    return "";
  }
  static TempDir* dir_;
};
TempDir* TuneCliTest::dir_ = nullptr;

// numpy: every layout block of node_config_feat is all -1 or a permutation of 0..r-1 followed by
// -1, scores ascend, the shapes agree.
constexpr char kCheckLayoutNpz[] = R"(
import sys, numpy as np
z = np.load(sys.argv[1])
f, ids, s = z["node_config_feat"], z["node_config_ids"], z["score"]
k = int(sys.argv[2])
assert f.dtype == np.int8 and f.shape == (k, len(ids), 18), f.shape
assert s.shape == (k,) and s.dtype == np.float64
assert z["default_score"].shape == (1,) and z["default_node_config_feat"].shape == (len(ids), 18)
assert z["configs_scored"][0] >= k
for c in range(k):
    for n in range(len(ids)):
        for t in range(3):
            b = list(f[c, n, 6 * t:6 * t + 6])
            r = b.index(-1) if -1 in b else 6
            assert all(x == -1 for x in b[r:]), b
            assert sorted(b[:r]) == list(range(r)), b
if sys.argv[3] == "sorted":
    assert all(s[i] <= s[i + 1] for i in range(k - 1)), s
print("ok", k, len(ids))
)";

// Every TuneConfig field is a flag of the same name with its help text and proto default.
TEST_F(TuneCliTest, EveryTuneConfigFieldIsAFlag) {
  auto r = RunCli({"tune", "--help"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto* d = TuneConfig::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (f->name() == "threads") continue;  // the global -j/--threads
    std::string flag = "--";
    for (char c : f->name()) flag += c == '_' ? '-' : c;
    EXPECT_NE(r.out.find(flag + " "), std::string::npos) << flag << " missing from --help";
  }
  EXPECT_NE(r.out.find("{evolution|random} [default: evolution]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--budget VALUE"), std::string::npos);
  // Values are checked as train's are: a usage error (exit 2) naming the flag.
  auto bad = RunCli(
      {"tune", "--strategy", "greedy", "--oracle", "synthetic", "--from", "x.pb", "-o", "x.npz"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--strategy: expected one of evolution, random"), std::string::npos)
      << bad.err;
}

TEST_F(TuneCliTest, HelpExplainsEveryFlag) {
  auto r = RunCli({"tune", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"--data", "--model", "--oracle", "--from", "--collection", "--graph", "--budget", "--top",
        "--measure", "--seed", "--strategy", "--uncertainty", "--max-distance", "--trust-anchors",
        "--output", "--emit-hlo", "--json"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
  auto s = RunCli({"synth", "--help"});
  EXPECT_NE(s.out.find("--score"), std::string::npos);
}

TEST_F(TuneCliTest, LayoutTopConfigurationsAreValidAndNumpyReadable) {
  TempDir out;
  auto r = RunCli({"-q", "tune", "--data", File("layout.tpug"), "--model", File("layout.tpm"),
                   "--budget", "150", "--top", "7", "-o", out.File("t.npz"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"configs_scored\":150"), std::string::npos) << r.out;
  auto py = RunPython(kCheckLayoutNpz, {out.File("t.npz"), "7", "sorted"});
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
  // Several graphs (here: both collections of a dataset with one graph each) go to a directory.
  auto d = RunCli({"-q", "tune", "--data", File("tile.tpug"), "--model", File("tile.tpm"),
                   "--budget", "40", "--top", "3", "-o", out.File("tiles")});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(out.File("tiles"))) {
    if (e.is_regular_file()) ++files;
  }
  EXPECT_EQ(files, 3);
}

TEST_F(TuneCliTest, ReleaseNpzIsTunedDirectly) {
  // A real release file as --data (outside a release tree, so its collection is given). Its
  // measured configurations hold partial minor_to_major lists (e.g. {0, 2} for a rank-3 tensor):
  // each is a valid value of the searched space, so none of them may be refused as invalid, and
  // what is written is valid in the release's encoding.
  TempDir out;
  const std::string npz =
      testing::RealDataPath("npz/release/layout/xla/default/valid/unet_3d.4x4.bf16.npz");
  auto r = RunCli({"-q", "tune", "--data", npz, "--collection", "layout:xla:default", "--model",
                   File("layout.tpm"), "--budget", "300", "--top", "4", "-o", out.File("r.npz"),
                   "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"configs_scored\":300"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"invalid_dataset_configs\":0,"), std::string::npos) << r.out;
  // Each written block is one the file's configurations give that tensor.
  auto py = RunPython(R"(
import sys
import numpy as np
src, out = np.load(sys.argv[1]), np.load(sys.argv[2])
assert (out["node_config_ids"] == src["node_config_ids"]).all()
a, b = src["node_config_feat"].astype(np.int64), out["node_config_feat"].astype(np.int64)
assert b.shape[0] == 4 and b.shape[1:] == a.shape[1:], b.shape
for k in range(a.shape[1]):
    for t in range(3):
        seen = {tuple(r) for r in a[:, k, 6 * t:6 * t + 6]}
        for r in b[:, k, 6 * t:6 * t + 6]:
            assert tuple(r) in seen, (k, t, r)
assert (np.diff(out["score"]) >= 0).all()
)",
                      {npz, out.File("r.npz")});
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
  // Every configuration of this file has the same layouts (its runs differ only in runtime):
  // in the dataset's space there is nothing to choose, which is said, not searched.
  auto same = RunCli(
      {"-q", "tune", "--data",
       testing::RealDataPath("npz/release/layout/xla/random/train/openai_v0_rnn_optimized.npz"),
       "--collection", "layout:xla:random", "--model", File("layout.tpm"), "-o",
       out.File("s.npz")});
  EXPECT_EQ(same.exit_code, 1);
  EXPECT_NE(same.err.find("whose layout can change"), std::string::npos) << same.err;
  EXPECT_FALSE(fs::exists(out.File("s.npz")));
}

// A model trained on features with absent dimensions marked (ingest --mark-absent-dimensions):
// tune ingests a raw program for it the same way, and refuses a dataset of the official features
// with a message naming the option, writing nothing.
TEST_F(TuneCliTest, AMarkedModelIngestsRawInputsMarkedAndRefusesOfficialDatasets) {
  TempDir out;
  auto ingest = RunCli({"-q", "ingest", File("layout/pb/layout"), "--mark-absent-dimensions",
                        "-o", out.File("marked.tpug")});
  ASSERT_EQ(ingest.exit_code, 0) << ingest.err;
  auto train = RunCli({"-q", "train", "--dataset", out.File("marked.tpug"), "--train-split", "",
                       "--valid-split", "", "--epochs", "1", "--hidden-dim", "8", "--output",
                       out.File("marked.tpm")});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  auto raw = RunCli({"-q", "tune", "--data", LayoutProgram(), "--model", out.File("marked.tpm"),
                     "--budget", "100", "--top", "2", "-o", out.File("raw.npz")});
  EXPECT_EQ(raw.exit_code, 0) << raw.err;
  EXPECT_TRUE(fs::exists(out.File("raw.npz")));
  auto official = RunCli({"-q", "tune", "--data", File("layout.tpug"), "--model",
                          out.File("marked.tpm"), "--budget", "100", "-o", out.File("o.npz")});
  EXPECT_EQ(official.exit_code, 1);
  EXPECT_NE(official.err.find("--mark-absent-dimensions"), std::string::npos) << official.err;
  EXPECT_FALSE(fs::exists(out.File("o.npz")));
  auto predict = RunCli({"-q", "predict", "--model", out.File("marked.tpm"), "--data",
                         File("layout.tpug"), "-o", out.File("p.csv")});
  EXPECT_EQ(predict.exit_code, 1);
  EXPECT_NE(predict.err.find("the official node features"), std::string::npos) << predict.err;
  EXPECT_FALSE(fs::exists(out.File("p.csv")));
}

TEST_F(TuneCliTest, TileConfigurationsAreAllowedTileSizes) {
  TempDir out;
  const std::string kernel = TileKernel(0);
  auto r = RunCli({"-q", "tune", "--data", kernel, "--model", File("tile.tpm"), "--budget", "80",
                   "--top", "5", "-o", out.File("t.npz")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Every row: positive integer bounds, sum/product columns consistent, and the cost model
  // prices it (synth --score refuses what it cannot read back).
  auto py = RunPython(R"(
import sys, numpy as np
z = np.load(sys.argv[1])
f = z["config_feat"]
assert f.dtype == np.float32 and f.shape == (5, 24), f.shape
for row in f:
    for g in range(3):
        v = [x for x in row[8 * g:8 * g + 6] if x != 0]
        assert all(x >= 1 and x == int(x) for x in v), row
        assert row[8 * g + 6] == sum(v), row
        if v: assert row[8 * g + 7] == np.prod(v), row
print("ok")
)",
                      {out.File("t.npz")});
  EXPECT_EQ(py.exit_code, 0) << py.err;
  auto s = RunCli({"-q", "synth", "--score", out.File("t.npz"), "--from", kernel});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(std::count(s.out.begin(), s.out.end(), '\n'), 6) << s.out;
}

TEST_F(TuneCliTest, SameSeedByteIdenticalAcrossThreadCounts) {
  TempDir out;
  for (const char* j : {"1", "2"}) {
    auto r = RunCli({"-q", "-j", j, "tune", "--data", File("layout.tpug"), "--model",
                     File("layout.tpm"), "--budget", "200", "--top", "5", "--seed", "7", "-o",
                     out.File(std::string("t") + j + ".npz")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto m = RunCli({"-q", "-j", j, "tune", "--data", TileKernel(1), "--model", File("tile.tpm"),
                     "--budget", "60", "--measure", "4", "--seed", "7", "-o",
                     out.File(std::string("m") + j + ".npz")});
    ASSERT_EQ(m.exit_code, 0) << m.err;
    // Ranking by the ensemble's member disagreement too is just as deterministic.
    auto u = RunCli({"-q", "-j", j, "tune", "--data", File("layout.tpug"), "--model",
                     File("layout.tpm"), "--budget", "200", "--measure", "5", "--seed", "7",
                     "--uncertainty", "1.5", "-o", out.File(std::string("u") + j + ".npz")});
    ASSERT_EQ(u.exit_code, 0) << u.err;
  }
  EXPECT_EQ(ReadFileToString(out.File("t1.npz")).value(),
            ReadFileToString(out.File("t2.npz")).value());
  EXPECT_EQ(ReadFileToString(out.File("u1.npz")).value(),
            ReadFileToString(out.File("u2.npz")).value());
  auto bad = RunCli({"-q", "tune", "--data", File("layout.tpug"), "--model", File("layout.tpm"),
                     "--uncertainty", "-1", "-o", out.File("bad.npz")});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--uncertainty"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(out.File("bad.npz")));
  EXPECT_EQ(ReadFileToString(out.File("m1.npz")).value(),
            ReadFileToString(out.File("m2.npz")).value());
}

// The noise-free costs synth recorded for a column of (graph, config) rows of its TSV.
std::map<int64_t, int64_t> RecordedCosts(const std::string& tsv, const std::string& graph) {
  std::map<int64_t, int64_t> out;
  std::istringstream in(ReadFileToString(tsv).value());
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    for (std::string x; std::getline(ls, x, '\t');) f.push_back(x);
    if (f.size() == 6 && f[1] == graph) out[std::stoll(f[3])] = std::stoll(f[5]);
  }
  return out;
}

std::vector<int64_t> ScoredCosts(const std::string& out) {
  std::vector<int64_t> v;
  std::istringstream in(out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "config\tnoise_free_ns");
  while (std::getline(in, line)) v.push_back(std::stoll(line.substr(line.find('\t') + 1)));
  return v;
}

TEST_F(TuneCliTest, SynthScoreGivesTheCostsSynthRecorded) {
  TempDir out;
  // Layout: the program's own configurations, exported in the release encoding.
  auto e = RunCli({"-q", "export", File("layout.tpug"), "--output-dir", out.File("exp")});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  std::string npz;
  for (const auto& f : fs::recursive_directory_iterator(out.File("exp"))) {
    if (f.path().extension() == ".npz") npz = f.path().string();
  }
  ASSERT_FALSE(npz.empty());
  auto s = RunCli({"-q", "synth", "--score", npz, "--from", LayoutProgram()});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto recorded = RecordedCosts(File("layout.tsv"), "program_00000");
  const auto scored = ScoredCosts(s.out);
  ASSERT_EQ(scored.size(), recorded.size());
  ASSERT_EQ(scored.size(), 40u);
  for (size_t i = 0; i < scored.size(); ++i) EXPECT_EQ(scored[i], recorded.at(i)) << i;
  auto j = RunCli({"-q", "synth", "--score", npz, "--from", LayoutProgram(), "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_NE(j.out.find("\"noise_free_ns\":[" + std::to_string(recorded.at(0)) + ","),
            std::string::npos)
      << j.out;

  // Tile: synth recorded the noise-free cost within 1 ns (noise divided back out).
  const std::string kernel = TileKernel(0);
  auto ing =
      RunCli({"-q", "ingest", kernel, "--collection", "tile:synth", "-o", out.File("k.tpug")});
  ASSERT_EQ(ing.exit_code, 0) << ing.err;
  auto te = RunCli({"-q", "export", out.File("k.tpug"), "--output-dir", out.File("kexp")});
  ASSERT_EQ(te.exit_code, 0) << te.err;
  std::string knpz;
  for (const auto& f : fs::recursive_directory_iterator(out.File("kexp"))) {
    if (f.path().extension() == ".npz") knpz = f.path().string();
  }
  auto ts = RunCli({"-q", "synth", "--score", knpz, "--from", kernel});
  ASSERT_EQ(ts.exit_code, 0) << ts.err;
  const auto trec = RecordedCosts(File("tile.tsv"), fs::path(kernel).stem().string());
  const auto tsc = ScoredCosts(ts.out);
  ASSERT_EQ(tsc.size(), trec.size());
  ASSERT_GT(tsc.size(), 2u);
  for (size_t i = 0; i < tsc.size(); ++i) EXPECT_NEAR(tsc[i], trec.at(i), 1) << i;
}

TEST_F(TuneCliTest, OracleFindsBetterThanTheDatasetAndItsScoresAreTheGroundTruth) {
  TempDir out;
  auto r = RunCli({"-q", "tune", "--oracle", "synthetic", "--from", LayoutProgram(), "--budget",
                   "300", "--top", "3", "-o", out.File("o.npz"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto s = RunCli({"-q", "synth", "--score", out.File("o.npz"), "--from", LayoutProgram()});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto scored = ScoredCosts(s.out);
  ASSERT_EQ(scored.size(), 3u);
  const auto recorded = RecordedCosts(File("layout.tsv"), "program_00000");
  int64_t best_recorded = INT64_MAX;
  for (const auto& [c, ns] : recorded) best_recorded = std::min(best_recorded, ns);
  EXPECT_LT(scored[0], recorded.at(0));  // better than the default
  EXPECT_LE(scored[0], best_recorded);   // and than every configuration of the dataset
  // The scores written are the noise-free costs.
  auto py = RunPython(
      "import sys, numpy as np; z = np.load(sys.argv[1]); print(' '.join(str(round(x)) for x in "
      "z['score']))",
      {out.File("o.npz")});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  std::ostringstream want;
  for (size_t i = 0; i < scored.size(); ++i) want << (i ? " " : "") << scored[i];
  EXPECT_EQ(py.out, want.str() + "\n");
  EXPECT_NE(r.out.find("\"predicted_speedup\":"), std::string::npos);
  EXPECT_EQ(r.out.find("\"predicted_speedup\":null"), std::string::npos) << r.out;
}

TEST_F(TuneCliTest, MeasureSetHoldsTheDefault) {
  TempDir out;
  auto r = RunCli({"-q", "tune", "--data", File("layout.tpug"), "--model", File("layout.tpm"),
                   "--budget", "150", "--measure", "6", "-o", out.File("m.npz")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto py = RunPython(std::string(kCheckLayoutNpz) + R"(
d = z["default_node_config_feat"]
assert any((f[c] == d).all() for c in range(k)), "default missing"
assert len({f[c].tobytes() for c in range(k)}) == k, "duplicates"
)",
                      {out.File("m.npz"), "6", "sorted"});
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
}

// Python: header_shapes(text) -> ([parameter shapes], result shape) of the module header's
// entry_computation_layout (split at the commas at bracket depth 0); entry_shapes(text) ->
// ({parameter number: shape} of the entry's array parameters, the entry root's shape);
// check_header(text): the header states the shapes of the array parameters and root.
constexpr char kEntryLayoutPy[] = R"PY(
import re
def header_shapes(text):
    line = text.split("\n", 1)[0]
    key = "entry_computation_layout={("
    i = line.index(key) + len(key)
    shapes, cur, depth = [], "", 0
    while True:
        ch = line[i]
        i += 1
        if depth == 0 and ch in ",)":
            shapes.append(cur.strip())
            cur = ""
            if ch == ")":
                break
            continue
        depth += (ch in "([{") - (ch in ")]}")
        cur += ch
    assert line[i:i + 2] == "->", line[i:]
    i += 2
    cur, depth = "", 0
    while depth > 0 or line[i] != "}":
        depth += (line[i] in "([{") - (line[i] in ")]}")
        cur += line[i]
        i += 1
    return shapes, cur.strip()
def entry_shapes(text):
    entry = text[text.index("\nENTRY"):]
    entry = entry[:entry.index("\n}")]
    params = {int(m.group(2)): m.group(1) for m in re.finditer(
        r"\n\s*%?[\w.\-]+ = ([^\s(]\S*) parameter\((\d+)\)", entry)}
    root = re.search(r"\n\s*ROOT %?[\w.\-]+ = (\S+)", entry).group(1)
    return params, root
def check_header(text):
    (hp, hr), (ip, ir) = header_shapes(text), entry_shapes(text)
    for n, shape in ip.items():
        assert hp[n] == shape, (n, hp[n], shape)
    if not ir.startswith("("):
        assert hr == ir, (hr, ir)
    return hp, hr
)PY";

TEST_F(TuneCliTest, HloTextRoundTripGivesTheChosenLayoutAsConfigurationZero) {
  TempDir out;
  const std::string hlo = RealDataPath("hlo_text/openxla_cpu_benchmark_graphsage_tf.hlo");
  auto r = RunCli({"-q", "tune", "--data", hlo, "--model", File("layout.tpm"), "--budget", "120",
                   "--top", "2", "-o", out.File("t.npz"), "--emit-hlo", out.File("hlo")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string emitted;
  for (const auto& e : fs::directory_iterator(out.File("hlo"))) emitted = e.path().string();
  ASSERT_FALSE(emitted.empty());
  auto ing = RunCli({"-q", "ingest", emitted, "-o", out.File("back.tpug")});
  ASSERT_EQ(ing.exit_code, 0) << ing.err;
  auto ex = RunCli({"-q", "export", out.File("back.tpug"), "--output-dir", out.File("back")});
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  std::string back;
  for (const auto& e : fs::recursive_directory_iterator(out.File("back"))) {
    if (e.path().extension() == ".npz") back = e.path().string();
  }
  auto py = RunPython(std::string(kEntryLayoutPy) + R"(
import sys, numpy as np
t, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert (t["node_config_ids"] == b["node_config_ids"]).all()
assert (b["node_config_feat"][0] == t["node_config_feat"][0]).all()
# The search changed something: the chosen layout is not the one the dump states, and it scores
# better (a dump without measured configurations once gave an ensemble all-zero scores).
assert (t["node_config_feat"][0] != t["default_node_config_feat"]).any()
assert t["score"][0] < t["default_score"][0], (t["score"], t["default_score"])
# Only instruction shapes changed: same lines, same count.
c_text = open(sys.argv[4]).read()
a = open(sys.argv[3]).read().splitlines(); c = c_text.splitlines()
assert len(a) == len(c)
diff = [i for i in range(len(a)) if a[i] != c[i]]
assert diff and all(a[i].split("=")[0] == c[i].split("=")[0] or i == 0 for i in diff), diff
# The header's entry_computation_layout agrees with the parameters and the root.
check_header(c_text)
print(len(diff))
)",
                      {out.File("t.npz"), back, hlo, emitted});
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
}

// A batched dot of two entry parameters: the chosen layouts of the parameters and the root are
// written into the header's entry_computation_layout too, the tuple parameter's shape stays as
// it was, and the emitted module ingests back to the chosen configuration.
TEST_F(TuneCliTest, EmitHloUpdatesTheEntryComputationLayout) {
  TempDir out;
  const std::string hlo = out.File("bmm.hlo");
  ASSERT_TRUE(WriteFileAtomically(
                  hlo,
                  "HloModule bmm, entry_computation_layout={(f32[4,8,16]{2,1,0}, "
                  "f32[4,16,32]{2,1,0:T(8,128)}, (s32[], f32[2,2]{1,0}))->f32[4,8,32]{2,1,0}}\n\n"
                  "ENTRY main {\n"
                  "  a = f32[4,8,16]{2,1,0} parameter(0)\n"
                  "  b = f32[4,16,32]{2,1,0:T(8,128)} parameter(1)\n"
                  "  t = (s32[], f32[2,2]{1,0}) parameter(2)\n"
                  "  ROOT d = f32[4,8,32]{2,1,0} dot(a, b), lhs_batch_dims={0}, "
                  "lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
                  "}\n")
                  .ok());
  auto r = RunCli({"-q", "tune", "--data", hlo, "--model", File("layout.tpm"), "--budget", "100",
                   "-o", out.File("t.npz"), "--emit-hlo", out.File("hlo")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string emitted = out.File("hlo/bmm.hlo");
  ASSERT_TRUE(fs::exists(emitted));
  auto ing = RunCli({"-q", "ingest", emitted, "-o", out.File("back.tpug")});
  ASSERT_EQ(ing.exit_code, 0) << ing.err;
  auto ex = RunCli({"-q", "export", out.File("back.tpug"), "--output-dir", out.File("back")});
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  std::string back;
  for (const auto& e : fs::recursive_directory_iterator(out.File("back"))) {
    if (e.path().extension() == ".npz") back = e.path().string();
  }
  ASSERT_FALSE(back.empty());
  auto py = RunPython(std::string(kEntryLayoutPy) + R"PY(
import sys, numpy as np
t, b = np.load(sys.argv[1]), np.load(sys.argv[2])
before, after = open(sys.argv[3]).read(), open(sys.argv[4]).read()
# The emitted module's own layouts are the chosen configuration.
assert (t["node_config_ids"] == b["node_config_ids"]).all()
assert (b["node_config_feat"][0] == t["node_config_feat"][0]).all()
(hp0, hr0), (hp1, hr1) = check_header(before), check_header(after)
# The search moved a parameter's layout (the test model and the search are deterministic).
assert hp0[:2] != hp1[:2], (hp0, hp1)
# A parameter whose layout did not change is byte-identical; tiles are kept.
assert hp1[2] == hp0[2] == "(s32[], f32[2,2]{1,0})", hp1
assert hp1[1].endswith(":T(8,128)}"), hp1
p0, _ = entry_shapes(before)
p1, _ = entry_shapes(after)
for n in range(2):
    assert (hp1[n] == hp0[n]) == (p1[n] == p0[n]), (n, hp0, hp1)
print(hp0, hr0, "->", hp1, hr1)
)PY",
                      {out.File("t.npz"), back, hlo, emitted});
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
}

// The contents of `path`, or "<unreadable PATH>".
std::string ReadText(const std::string& path) {
  auto text = ReadFileToString(path);
  return text.ok() ? *text : "<unreadable " + path + ">";
}

// An HLO module of about `instructions` instructions in the older text style (operand shapes
// inline, '%' names), of the size of the large public benchmark modules: a chain of dots and
// adds over 8 rank-2 entry parameters, each used inline hundreds of times, whose
// entry_computation_layout carries XLA's "/*index=5*/" comment. Generated: no real module of
// this size is small enough to keep in the repository.
std::string LargeOldStyleModule(int instructions) {
  constexpr int kParams = 8;
  const std::string shape = "f32[64,64]{1,0}";
  std::string header = "HloModule large_chain, entry_computation_layout={(";
  std::string signature = "ENTRY %large_chain (";
  std::string body;
  for (int p = 0; p < kParams; ++p) {
    const std::string n = std::to_string(p);
    if (p > 0) header += ", ", signature += ", ";
    if (p == 5) header += "/*index=5*/";
    header += shape;
    signature += "p" + n + ": f32[64,64]";
    body += "  %p" + n + " = " + shape + " parameter(" + n + ")\n";
  }
  header += ")->" + shape + "}\n\n";
  signature += ") -> f32[64,64] {\n";
  std::string prev = "%p0";
  for (int i = 0, n = kParams; n + 3 <= instructions; ++i, n += 2) {
    const std::string d = "%dot." + std::to_string(i), a = "%add." + std::to_string(i);
    body += "  " + d + " = " + shape + " dot(" + shape + " " + prev + ", " + shape + " %p" +
            std::to_string(1 + i % 7) + "), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n";
    body += "  " + a + " = " + shape + " add(" + shape + " " + d + ", " + shape + " %p" +
            std::to_string((i + 3) % kParams) + ")\n";
    prev = a;
  }
  body += "  ROOT %out = " + shape + " copy(" + shape + " " + prev + ")\n}\n";
  return header + signature + body;
}

// Every operand shape written inline before a name ("f32[2,3]{1,0} %x", the older style) equals
// the shape that defines the name: the rewrite left no operand with a stale layout. Returns the
// number of inline operand shapes checked; a mismatch is a test failure naming it.
int CheckInlineOperandShapes(const std::string& text, const std::string& what) {
  std::map<std::string, std::string> defined;  // name -> its shape
  std::istringstream lines(text);
  std::vector<std::string> body;
  for (std::string line; std::getline(lines, line);) {
    body.push_back(line);
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos || line.rfind("HloModule", 0) == 0) continue;
    size_t b = line.find_first_not_of(' ');
    if (line.compare(b, 5, "ROOT ") == 0) b += 5;
    if (line[b] == '%') ++b;
    const size_t e = line.find(' ', eq + 3);
    defined[line.substr(b, eq - b)] = line.substr(eq + 3, e - eq - 3);
  }
  int checked = 0;
  for (const std::string& line : body) {
    for (size_t at = line.find(" %"); at != std::string::npos; at = line.find(" %", at + 1)) {
      const char before = at > 0 ? line[at - 1] : ' ';
      if (before != '}' && before != ']') continue;
      size_t s = line.rfind(' ', at - 1);
      s = s == std::string::npos ? 0 : s + 1;
      const size_t paren = line.rfind('(', at - 1);
      if (paren != std::string::npos && paren + 1 > s) s = paren + 1;
      const size_t comment = line.rfind("*/", at - 1);  // "/*index=5*/f32[10]{0} %x"
      if (comment != std::string::npos && comment + 2 > s) s = comment + 2;
      size_t e = at + 2;
      while (e < line.size() && (std::isalnum(static_cast<unsigned char>(line[e])) ||
                                 line[e] == '.' || line[e] == '_' || line[e] == '-')) {
        ++e;
      }
      const std::string name = line.substr(at + 2, e - at - 2);
      const auto it = defined.find(name);
      if (it == defined.end()) continue;  // a computation's name (to_apply=%f)
      EXPECT_EQ(line.substr(s, at - s), it->second)
          << what << ": operand %" << name << " in: " << line.substr(0, 300);
      ++checked;
    }
  }
  return checked;
}

// The layouts ingest finds in HLO text `hlo` (configuration 0 of its graph) and its configurable
// nodes; a failure names the file.
struct Compiled {
  std::vector<int64_t> config_ids;
  std::vector<int8_t> layout;  // [nc, 18]
};
Compiled CompiledLayouts(const std::string& hlo) {
  Compiled c;
  auto in = ingest::LoadGraphs(hlo, {});
  EXPECT_TRUE(in.ok()) << in.status().ToString();
  if (!in.ok()) return c;
  EXPECT_EQ(in->graphs.size(), 1u) << hlo;
  if (in->graphs.size() != 1) return c;
  const Graph& g = in->graphs[0];
  c.config_ids = g.node_config_ids;
  const size_t row = g.node_config_ids.size() * kLayoutConfigFeatureCount;
  EXPECT_GE(g.node_config_feat.size(), row) << hlo;
  c.layout.assign(g.node_config_feat.begin(),
                  g.node_config_feat.begin() + std::min(row, g.node_config_feat.size()));
  return c;
}

// The round trip on every real HLO text module the project has (both text styles; PyTorch/XLA,
// TensorFlow and JAX programs, tests/data/real/PROVENANCE.md) and on a generated module of
// 12,000 instructions. `tune --emit-hlo` and `tune --apply --emit-hlo` finish under a watchdog;
// ingesting an emitted module gives the same configurable nodes, and their layouts as compiled
// (configuration 0) are the configuration it was written for (row k of tune's .npz), value for
// value; inline operand shapes follow their definitions; and where the program has layouts to
// choose, one of the two written configurations differs from the compiled one, so that the
// rewrite is exercised on every such module.
TEST_F(TuneCliTest, EmitHloRoundTripsEveryRealModuleAndALargeOne) {
  TempDir work;
  std::vector<std::string> modules;
  for (const auto& e : fs::directory_iterator(RealDataPath("hlo_text"))) {
    modules.push_back(e.path().string());
  }
  std::sort(modules.begin(), modules.end());
  ASSERT_GE(modules.size(), 4u);
  const std::string large = work.File("large_chain.hlo");
  ASSERT_TRUE(WriteFileAtomically(large, LargeOldStyleModule(12000)).ok());
  modules.push_back(large);
  for (size_t m = 0; m < modules.size(); ++m) {
    const std::string& module = modules[m];
    SCOPED_TRACE(module);
    const std::string out = work.File("out" + std::to_string(m));
    auto r = RunCliWithin(300, {"-q", "tune", "--data", module, "--model", File("layout.tpm"),
                                "--budget", module == large ? "20" : "100", "--top", "2", "-o",
                                out + "/t.npz", "--emit-hlo", out + "/hlo"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Compiled compiled = CompiledLayouts(module);
    std::vector<std::string> emitted;
    for (const auto& e : fs::directory_iterator(out + "/hlo")) emitted.push_back(e.path().string());
    ASSERT_EQ(emitted.size(), 1u);
    auto chosen =
        ingest::ReadNpzConfigs(out + "/t.npz", TaskKind::kLayout, compiled.config_ids, module);
    ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
    const size_t row = compiled.layout.size();
    auto row_k = [&](int64_t k) {
      return std::vector<int8_t>(chosen->layout.begin() + k * row,
                                 chosen->layout.begin() + (k + 1) * row);
    };
    const Compiled back = CompiledLayouts(emitted[0]);
    EXPECT_EQ(back.config_ids, compiled.config_ids);
    EXPECT_EQ(back.layout, row_k(0));
    CheckInlineOperandShapes(ReadText(emitted[0]), emitted[0]);
    if (r.err.find("nothing to tune") != std::string::npos) {
      EXPECT_EQ(ReadText(emitted[0]), ReadText(module));
      EXPECT_EQ(chosen->count, 1);
      continue;
    }
    // Every configuration tune wrote, emitted by --apply: each round-trips too.
    auto applied = RunCliWithin(300, {"-q", "tune", "--data", module, "--apply", out + "/t.npz",
                                      "-o", out + "/applied.npz", "--emit-hlo", out + "/applied"});
    ASSERT_EQ(applied.exit_code, 0) << applied.err;
    ASSERT_EQ(chosen->count, 2);
    bool differs = false;
    for (int64_t k = 0; k < chosen->count; ++k) {
      std::string suffix(".");  // "<graph>.<k>.hlo"
      suffix += std::to_string(k);
      suffix += ".hlo";
      std::string file;
      for (const auto& e : fs::directory_iterator(out + "/applied")) {
        const std::string name = e.path().filename().string();
        if (name.size() > suffix.size() &&
            name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
          file = e.path().string();
        }
      }
      ASSERT_FALSE(file.empty()) << "no module emitted for configuration " << k;
      const Compiled again = CompiledLayouts(file);
      EXPECT_EQ(again.config_ids, compiled.config_ids);
      EXPECT_EQ(again.layout, row_k(k)) << file;
      CheckInlineOperandShapes(ReadText(file), file);
      differs = differs || row_k(k) != compiled.layout;
    }
    EXPECT_TRUE(differs) << "both configurations are the compiled layout: the rewrite is untested";
  }
}

// A program whose layouts offer nothing to choose (a dot of vectors: no tensor of rank 2 to 6;
// or no configurable node at all) is written back byte for byte, with a note, and exit 0; its
// .npz holds its own configuration.
TEST_F(TuneCliTest, NothingToTuneWritesTheProgramBackUnchanged) {
  TempDir out;
  const std::map<std::string, std::string> programs = {
      {"vectors.hlo",
       "HloModule vectors, entry_computation_layout={(f32[8]{0}, f32[8]{0})->f32[]}\n\n"
       "ENTRY %vectors (a: f32[8], b: f32[8]) -> f32[] {\n"
       "  %a = f32[8]{0} parameter(0)\n"
       "  %b = f32[8]{0} parameter(1)\n"
       "  ROOT %d = f32[] dot(f32[8]{0} %a, f32[8]{0} %b), lhs_contracting_dims={0}, "
       "rhs_contracting_dims={0}\n"
       "}\n"},
      {"adds.hlo",
       "HloModule adds\n\nENTRY main {\n  a = f32[4,4]{1,0} parameter(0)\n"
       "  ROOT s = f32[4,4]{1,0} add(a, a)\n}\n"}};
  for (const auto& [name, text] : programs) {
    SCOPED_TRACE(name);
    const std::string hlo = out.File(name);
    ASSERT_TRUE(WriteFileAtomically(hlo, text).ok());
    auto r = RunCliWithin(
        120, {"tune", "--data", hlo, "--model", File("layout.tpm"), "-o", out.File(name + ".npz"),
              "--emit-hlo", out.File(name + ".out"), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("nothing to tune"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("\"nothing_to_tune\":true"), std::string::npos) << r.out;
    const std::string stem = name.substr(0, name.find('.'));
    EXPECT_EQ(ReadText(out.File(name + ".out/" + stem + ".hlo")), text);
    EXPECT_TRUE(fs::exists(out.File(name + ".npz")));
  }
}

// `tune --data DIR` reads a dump directory as `ingest` does, and --graph picks the module.
TEST_F(TuneCliTest, DataMayBeADumpDirectory) {
  TempDir out;
  fs::create_directories(out.File("dump"));
  fs::copy_file(RealDataPath("hlo_text/pt_neuron_SyncTensorsGraph.21.hlo.txt"),
                out.File("dump/module_0001.SyncTensorsGraph.21.after_optimizations.txt"));
  fs::copy_file(RealDataPath("hlo_text/openxla_cpu_benchmark_graphsage_tf.hlo"),
                out.File("dump/graphsage.hlo"));
  auto r = RunCliWithin(120, {"-q", "tune", "--data", out.File("dump"), "--model",
                              File("layout.tpm"), "--graph", "SyncTensorsGraph.21", "--budget",
                              "50", "-o", out.File("t.npz"), "--emit-hlo", out.File("hlo")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out.File("t.npz")));
  EXPECT_TRUE(fs::exists(out.File("hlo/SyncTensorsGraph.21.hlo")));
  int files = 0;
  for (const auto& e : fs::directory_iterator(out.File("hlo"))) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  auto none =
      RunCliWithin(120, {"-q", "tune", "--data", out.File("dump"), "--model", File("layout.tpm"),
                         "--graph", "no_such_module", "-o", out.File("none.npz")});
  EXPECT_EQ(none.exit_code, 3);  // no graph matches the selection (docs/architecture.md)
  EXPECT_NE(none.err.find("no_such_module"), std::string::npos) << none.err;
  EXPECT_FALSE(fs::exists(out.File("none.npz")));
  // Of the XLA dump files, only those of --hlo-stage are read (graphsage.hlo is not one: read).
  auto other = RunCliWithin(
      120, {"-q", "tune", "--data", out.File("dump"), "--model", File("layout.tpm"), "--graph",
            "SyncTensorsGraph.21", "--hlo-stage", "before_optimizations", "-o", out.File("o.npz")});
  EXPECT_EQ(other.exit_code, 3) << other.err;
  EXPECT_FALSE(fs::exists(out.File("o.npz")));
  auto bad = RunCliWithin(120, {"-q", "tune", "--data", out.File("dump"), "--model",
                                File("layout.tpm"), "--hlo-stage", "a/b", "-o", out.File("b.npz")});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("is not a stage name"), std::string::npos) << bad.err;
}

// --emit-hlo on anything but HLO text says what to pass instead.
TEST_F(TuneCliTest, EmitHloNeedsHloTextAndSaysWhatToPass) {
  TempDir out;
  auto r =
      RunCliWithin(120, {"-q", "tune", "--data", File("layout.tpug"), "--model", File("layout.tpm"),
                         "-o", out.File("t"), "--emit-hlo", out.File("hlo")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("must be an HLO text dump"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Pass the module's HLO text"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(File("layout.tpug")), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out.File("hlo")));
  EXPECT_FALSE(fs::exists(out.File("t")));
}

TEST_F(TuneCliTest, BadInputIsAClearErrorAndLeavesNoOutput) {
  TempDir out;
  // A model of the other task.
  auto r = RunCli({"-q", "tune", "--data", File("layout.tpug"), "--model", File("tile.tpm"), "-o",
                   out.File("a.npz")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("a tile model cannot tune layout graph"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out.File("a.npz")));
  // No graph of the collection asked for: exit code 3 and the message every command gives.
  r = RunCli({"-q", "tune", "--data", File("layout.tpug"), "--collection", "layout:nlp:default",
              "--model", File("layout.tpm"), "-o", out.File("n.npz")});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find(File("layout.tpug") + ": no graph matches collection layout:nlp:default"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out.File("n.npz")));
  // A program with no configurable node is not an error: it has nothing to tune
  // (NothingToTuneWritesTheProgramBackUnchanged).
  ASSERT_TRUE(WriteFileAtomically(out.File("plain.hlo"),
                                  "HloModule plain\n\nENTRY main {\n"
                                  "  p = f32[4,8]{1,0} parameter(0)\n"
                                  "  ROOT a = f32[4,8]{1,0} add(p, p)\n}\n")
                  .ok());
  r = RunCli({"tune", "--data", out.File("plain.hlo"), "--model", File("layout.tpm"), "-o",
              out.File("b.npz")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("nothing to tune, it has no configurable node"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(out.File("b.npz")));
  // An unreadable program, as --from of the oracle and as synth --score's program.
  ASSERT_TRUE(WriteFileAtomically(out.File("junk.pb"), "not a program at all").ok());
  r = RunCli({"-q", "tune", "--oracle", "synthetic", "--from", out.File("junk.pb"), "-o",
              out.File("c.npz")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("junk.pb"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out.File("c.npz")));
  r = RunCli({"-q", "synth", "--score", out.File("c.npz"), "--from", out.File("junk.pb")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("junk.pb"), std::string::npos) << r.err;
  // A missing data file; a directory output stays absent.
  r = RunCli({"-q", "tune", "--data", out.File("missing.tpug"), "--model", File("layout.tpm"), "-o",
              out.File("dir")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("missing.tpug"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out.File("dir")));
  // The oracle's program must be the graph's.
  r = RunCli({"-q", "tune", "--oracle", "synthetic", "--from", TileKernel(0), "--data",
              LayoutProgram(), "-o", out.File("d.npz")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tile program"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out.File("d.npz")));
}

// BENCH_TUNE_RECIPE names a recipe of tools/configs; another name is refused before any work.
TEST(BenchTuneScriptTest, RefusesARecipeThatIsNotThere) {
  TempDir work;
  auto r = testing::RunShell(
      "BENCH_TUNE_SIZE=tiny BENCH_TUNE_RECIPE=no-such-recipe TPUGRAPHS=" +
      testing::ShellQuote(testing::BinaryPath()) + " bash " +
      testing::ShellQuote(testing::SourcePath("tools/bench-tune.sh")) + " " +
      testing::ShellQuote(work.File("w")) + " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("BENCH_TUNE_RECIPE: no "), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(work.File("w/collections.done")));
}

TEST(BenchTuneScriptTest, RunsAtTinySize) {
  TempDir work;
  auto r = testing::RunShell(
      "BENCH_TUNE_SIZE=tiny TPUGRAPHS=" + testing::ShellQuote(testing::BinaryPath()) + " bash " +
      testing::ShellQuote(testing::SourcePath("tools/bench-tune.sh")) + " " +
      testing::ShellQuote(work.File("w")) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("median top-1 gain / oracle gain"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("measure-10 worse than the default"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("configs_per_second"), std::string::npos) << r.out;
  // The closed loop and its baselines, the learning curve, the plot and the loop's round time.
  EXPECT_NE(r.out.find("the closed loop (3 rounds of 4) and its baselines"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("random, 120 measured"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("evolution on measurements, 3 gen."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("frozen model, best of 12"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("targets: median share after 1 round"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tile: the best of the first 4 measured"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("learning curve of"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("plot: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("worst round: "), std::string::npos) << r.out;
}

// tools/bench/bench-finetune.sh (docs/train.md, "Fine-tuning"): base, scratch, fine-tuned and
// full models on unseen programs of the new collection, at the tiny size.
TEST(BenchFinetuneScriptTest, RunsAtTinySize) {
  TempDir work;
  auto r = testing::RunShell(
      "SIZE=tiny TPUGRAPHS=" + testing::ShellQuote(testing::BinaryPath()) + " bash " +
      testing::ShellQuote(testing::SourcePath("tools/bench/bench-finetune.sh")) + " " +
      testing::ShellQuote(work.File("w")) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* row : {"| base |", "| scratch |", "| finetuned |", "| full |"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  }
}

}  // namespace
}  // namespace tpugraphs
