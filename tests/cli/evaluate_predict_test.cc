// End-to-end tests of `tpugraphs evaluate` and `tpugraphs predict`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/eval/evaluate.h"
#include "tpugraphs/eval/metrics.h"
#include "tpugraphs/eval/predictions.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs {
namespace {

using testing::RunCli;
using testing::TempDir;

Graph MakeGraph(const std::string& collection, const std::string& name, int64_t configs,
                uint64_t seed) {
  Rng rng(seed);
  Graph g;
  g.collection = collection;
  g.name = name;
  g.split = "valid";
  g.kind = TaskKindOfCollection(collection);
  g.node_opcode.assign(4, 2);
  g.node_feat.assign(4 * kNodeFeatureCount, 1.0f);
  g.edge_index = {1, 0, 2, 1, 3, 2};
  g.num_configs = configs;
  for (int64_t c = 0; c < configs; ++c) g.config_runtime.push_back(500 + rng.UniformInt(300));
  if (g.is_tile()) {
    g.config_feat.assign(configs * kTileConfigFeatureCount, 0.0f);
    for (int64_t c = 0; c < configs; ++c) g.config_runtime_normalizers.push_back(1 + c % 2);
  } else {
    g.node_config_ids = {2};
    g.node_config_feat.assign(configs * kLayoutConfigFeatureCount, 0);
  }
  return g;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}
std::string ReadText(const std::string& path) {
  auto r = ReadFileToString(path);
  return r.ok() ? *r : std::string();
}

class EvaluatePredictCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    graphs_ = {MakeGraph("tile:xla", "ta", 30, 1), MakeGraph("tile:xla", "tb", 6, 2),
               MakeGraph("layout:xla:random", "la", 400, 3),
               MakeGraph("layout:nlp:default", "lb", 250, 4)};
    data_ = tmp_.File("valid.tpug");
    auto writer = io::DatasetWriter::Create(data_);
    ASSERT_TRUE(writer.ok());
    for (const auto& g : graphs_) ASSERT_TRUE((*writer)->Add(g).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
    // Predictions: runtime plus noise, rounded (ties in scores).
    preds_text_ = std::string(eval::kPredictionsVersionLine) + "\n" +
                  std::string(eval::kPredictionsHeader) + "\n";
    Rng rng(77);
    for (const auto& g : graphs_) {
      std::vector<double> s(g.num_configs);
      for (int64_t c = 0; c < g.num_configs; ++c) {
        s[c] = std::round(g.NormalizedRuntime(c) / 20 + rng.Normal() * 2);
      }
      eval::AppendPredictionRows(g.collection, g.name, s, &preds_text_);
    }
    preds_ = tmp_.File("preds.tsv");
    WriteText(preds_, preds_text_);
  }

  TempDir tmp_;
  std::vector<Graph> graphs_;
  std::string data_, preds_, preds_text_;
};

// Every command that selects graphs selects them the same way and, when nothing matches, says
// so in the same words with exit code 3 (io/graph_filter.h); scripts branch on the code.
TEST_F(EvaluatePredictCliTest, EveryCommandSaysTheSameWhenNoGraphMatches) {
  const std::string expected = data_ + ": no graph matches collection layout:xla:default";
  const std::vector<std::vector<std::string>> commands = {
      {"evaluate", "--data", data_, "--baseline", "random", "--collection", "layout:xla:default"},
      {"predict", "--data", data_, "--baseline", "random", "--collection", "layout:xla:default",
       "-o", tmp_.File("none.csv")},
      {"export", data_, "--collection", "layout:xla:default", "--output-dir", tmp_.File("none")},
      // A collection that is absent fails even beside one that matches.
      {"evaluate", "--data", data_, "--baseline", "random", "--collection", "tile:xla",
       "--collection", "layout:xla:default"},
  };
  for (const auto& args : commands) {
    auto r = RunCli(args);
    EXPECT_EQ(r.exit_code, 3) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("collections: layout:nlp:default, layout:xla:random, tile:xla"),
              std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(tmp_.File("none.csv")));
  EXPECT_FALSE(std::filesystem::exists(tmp_.File("none")));
  // A split with no graph: the same message names the split.
  auto r = RunCli({"evaluate", "--data", data_, "--baseline", "random", "--split", "test"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find(data_ + ": no graph matches split test"), std::string::npos) << r.err;
}

TEST_F(EvaluatePredictCliTest, JsonMatchesLibraryAndTablePrints) {
  auto r = RunCli({"evaluate", "--data", data_, "--predictions", preds_, "--json", "--per-graph"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The library on the same inputs.
  auto reader = io::DatasetReader::Open(data_);
  ASSERT_TRUE(reader.ok());
  auto p = eval::Predictions::Read(preds_);
  ASSERT_TRUE(p.ok());
  eval::PredictionsScorer scorer(std::move(*p));
  eval::EvaluateOptions options;
  options.progress = false;
  auto report = eval::Evaluate(**reader, scorer, options);
  ASSERT_TRUE(report.ok());
  // Parse the CLI's JSON with Python's json module.
  WriteText(tmp_.File("out.json"), r.out);
  auto py = testing::RunPython(
      "import json, sys\n"
      "d = json.load(open(sys.argv[1]))\n"
      "print(repr(d['kaggle']['score']))\n"
      "for g in d['graphs']: print(g['graph'], repr(g['kendall_tau']), repr(g['opa']))\n",
      {tmp_.File("out.json")});
  ASSERT_EQ(py.exit_code, 0) << py.err << r.out;
  std::istringstream lines(py.out);
  double kaggle = 0;
  lines >> kaggle;
  EXPECT_NEAR(kaggle, report->kaggle, 1e-15);
  for (const auto& g : report->graphs) {
    std::string name;
    double tau = 0, opa = 0;
    lines >> name >> tau >> opa;
    EXPECT_EQ(name, g.name);
    EXPECT_NEAR(tau, g.kendall_tau, 1e-15);
    EXPECT_NEAR(opa, g.opa, 1e-15);
  }
  // Human table: both kinds of tables and the Kaggle line.
  auto t = RunCli({"evaluate", "--data", data_, "--predictions", preds_, "--per-graph"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("tile collection"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("layout collection"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("kaggle score:"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("only 3 of the 5 Kaggle collections present"), std::string::npos);
  // stdin gives the same output.
  auto s = testing::RunShell(testing::ShellQuote(testing::BinaryPath()) + " -q evaluate --data " +
                             testing::ShellQuote(data_) + " --predictions - --per-graph < " +
                             testing::ShellQuote(preds_));
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.out.substr(0, s.out.find("scorer:")), t.out.substr(0, t.out.find("scorer:")));
}

TEST_F(EvaluatePredictCliTest, EvalIndicesFromAFile) {
  WriteText(tmp_.File("xla_random.json"), "{\"la\": [0, 1, 2, 2, 399, 10, 11, 12, 13]}");
  auto r =
      RunCli({"evaluate", "--data", data_, "--predictions", preds_, "--json", "--per-graph",
              "--eval-indices", tmp_.File("xla_random.json"), "--collection", "layout:xla:random"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"evaluated\": 9, \"restricted\": true"), std::string::npos) << r.out;
}

TEST_F(EvaluatePredictCliTest, ScoresFileRoundTripsThroughEvaluate) {
  auto w = RunCli({"predict", "--data", data_, "--baseline", "random", "--seed", "3", "--format",
                   "scores", "--output", tmp_.File("random.tsv")});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  auto a = RunCli({"evaluate", "--data", data_, "--baseline", "random", "--seed", "3", "--json"});
  auto b =
      RunCli({"evaluate", "--data", data_, "--predictions", tmp_.File("random.tsv"), "--json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  // Identical metrics; only the scorer line differs.
  EXPECT_EQ(a.out.substr(a.out.find("\"kaggle\"")), b.out.substr(b.out.find("\"kaggle\"")));
  auto c = RunCli({"evaluate", "--data", data_, "--baseline", "random", "--seed", "4", "--json"});
  EXPECT_NE(a.out, c.out);  // the seed matters
}

TEST_F(EvaluatePredictCliTest, KaggleRowsFromDataset) {
  auto w = RunCli(
      {"predict", "--data", data_, "--predictions", preds_, "--output", tmp_.File("sub.csv")});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const std::string csv = ReadText(tmp_.File("sub.csv"));
  auto p = eval::Predictions::Read(preds_);
  ASSERT_TRUE(p.ok());
  std::string expected = "ID,TopConfigs\n";
  for (const auto& g : graphs_) {
    std::vector<int64_t> all(g.num_configs);
    for (int64_t c = 0; c < g.num_configs; ++c) all[c] = c;
    auto s = p->ScoresFor(g.collection, g.name, g.num_configs, all);
    ASSERT_TRUE(s.ok());
    // Stable sort by score: the documented tie rule (lower config index first).
    std::stable_sort(all.begin(), all.end(),
                     [&](int64_t a, int64_t b) { return (*s)[a] < (*s)[b]; });
    if (g.is_tile()) all.resize(10, 0);  // tb has 6 configs: padded with zeros
    std::string row = g.Id() + ",";
    for (size_t i = 0; i < all.size(); ++i) {
      if (i > 0) row.push_back(';');
      row += std::to_string(all[i]);
    }
    expected += row + "\n";
  }
  EXPECT_EQ(csv, expected);
}

// Builds a predictions file covering exactly the sample submission's IDs: its layout rows list
// 1000 configs (a full permutation of 0..999); its tile rows list only 5, so tile graphs get a
// config count of our choosing (3..40; counts below 10 exercise the padding).
std::string PredictionsForSample(const std::string& sample, std::vector<std::string>* ids) {
  std::string text = std::string(eval::kPredictionsVersionLine) + "\n" +
                     std::string(eval::kPredictionsHeader) + "\n";
  std::istringstream in(sample);
  std::string line;
  std::getline(in, line);
  Rng rng(5);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::string id = line.substr(0, line.find(','));
    ids->push_back(id);
    const std::string top = line.substr(line.find(',') + 1);
    const size_t last = id.rfind(':');
    const std::string collection = id.substr(0, last), name = id.substr(last + 1);
    int64_t n = 3 + static_cast<int64_t>(rng.UniformInt(38));
    if (collection != "tile:xla") n = std::count(top.begin(), top.end(), ';') + 1;
    std::vector<double> s(n);
    for (auto& v : s) v = rng.Uniform();
    eval::AppendPredictionRows(collection, name, s, &text);
  }
  return text;
}

// The Kaggle sample submission may not be redistributed, so the test writes a file of the same
// shape: 844 tile:xla IDs with 5 configs, 8 + 8 layout:xla and 17 + 17 layout:nlp IDs with 1000
// (0..999 in order, as the real file lists them). TPUGRAPHS_KAGGLE_SAMPLE_SUBMISSION names the
// real file to run the same test on it.
std::string SampleSubmissionLike(const std::string& dir) {
  if (const char* real = std::getenv("TPUGRAPHS_KAGGLE_SAMPLE_SUBMISSION")) return real;
  std::string text = "ID,TopConfigs\n";
  Rng rng(11);
  auto hex_id = [&] {
    static const char kHex[] = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < 32; ++i) s.push_back(kHex[rng.UniformInt(16)]);
    return s;
  };
  for (int i = 0; i < 844; ++i) text += "tile:xla:" + hex_id() + ",0;1;2;3;4\n";
  std::string thousand;
  for (int c = 0; c < 1000; ++c) {
    if (c > 0) thousand.push_back(';');
    thousand.append(std::to_string(c));
  }
  const std::pair<const char*, int> layout[] = {{"layout:xla:default", 8},
                                                {"layout:xla:random", 8},
                                                {"layout:nlp:default", 17},
                                                {"layout:nlp:random", 17}};
  for (const auto& [collection, count] : layout) {
    for (int i = 0; i < count; ++i) {
      text.append(collection).append(":program_").append(std::to_string(i));
      text.append(",").append(thousand).append("\n");
    }
  }
  const std::string path = dir + "/sample_submission.csv";
  WriteText(path, text);
  return path;
}

TEST(PredictSampleSubmissionTest, SubmissionPassesTheIdCheckAndMerges) {
  TempDir tmp;
  const std::string sample = SampleSubmissionLike(tmp.path());
  std::vector<std::string> ids;
  const std::string preds = PredictionsForSample(ReadText(sample), &ids);
  ASSERT_EQ(ids.size(), 894u);
  WriteText(tmp.File("p.tsv"), preds);
  auto r = RunCli({"predict", "--predictions", tmp.File("p.tsv"), "--output", tmp.File("sub.csv"),
                   "--check-ids", sample});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string sub = ReadText(tmp.File("sub.csv"));
  std::istringstream in(sub);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "ID,TopConfigs");
  int64_t rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    const std::string top = line.substr(line.find(',') + 1);
    std::vector<int64_t> v;
    std::stringstream ts(top);
    std::string tok;
    while (std::getline(ts, tok, ';')) v.push_back(std::stoll(tok));
    if (line.rfind("tile:", 0) == 0) {
      EXPECT_EQ(v.size(), 10u) << line;
    } else {
      ASSERT_EQ(v.size(), 1000u) << line.substr(0, 80);
      std::sort(v.begin(), v.end());
      for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(v[i], i);  // a permutation
    }
  }
  EXPECT_EQ(rows, 894);

  // Per-collection files merged back into one pass the same check and hold the same rows.
  std::vector<std::string> parts;
  for (const char* c : {"tile:xla", "layout:xla:random", "layout:xla:default", "layout:nlp:random",
                        "layout:nlp:default"}) {
    std::string out = tmp.File(std::string(c).substr(std::string(c).find(':') + 1) + ".csv");
    std::replace(out.begin() + tmp.path().size(), out.end(), ':', '_');
    auto pr =
        RunCli({"predict", "--predictions", tmp.File("p.tsv"), "--collection", c, "--output", out});
    ASSERT_EQ(pr.exit_code, 0) << pr.err;
    parts.push_back(out);
  }
  std::vector<std::string> args = {"predict", "--merge"};
  args.insert(args.end(), parts.begin(), parts.end());
  args.insert(args.end(), {"--output", tmp.File("merged.csv"), "--check-ids", sample});
  auto m = RunCli(args);
  ASSERT_EQ(m.exit_code, 0) << m.err;
  auto sorted_lines = [](const std::string& text) {
    std::vector<std::string> v;
    std::istringstream s(text);
    std::string l;
    while (std::getline(s, l)) v.push_back(l);
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(sorted_lines(ReadText(tmp.File("merged.csv"))), sorted_lines(sub));

  // A duplicate ID across merge inputs is an error; nothing is written.
  auto d =
      RunCli({"predict", "--merge", parts[0], parts[1], parts[0], "--output", tmp.File("dup.csv")});
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_NE(d.err.find("duplicate ID tile:xla:"), std::string::npos) << d.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.File("dup.csv")));

  // Missing collections (xla:default 8, nlp:* 17 + 17 graphs): the check lists the missing IDs,
  // exits 1 and writes nothing.
  auto x = RunCli({"predict", "--merge", parts[0], parts[1], "--output", tmp.File("part.csv"),
                   "--check-ids", sample});
  EXPECT_EQ(x.exit_code, 1);
  EXPECT_NE(x.err.find("42 missing, 0 extra"), std::string::npos) << x.err;
  EXPECT_NE(x.err.find("layout:nlp:default:"), std::string::npos) << x.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.File("part.csv")));

  // An extra graph in the predictions: listed as extra.
  WriteText(tmp.File("extra.tsv"), preds + "tile:xla\tnot_in_sample\t0\t1\n");
  auto e = RunCli({"predict", "--predictions", tmp.File("extra.tsv"), "--output", tmp.File("e.csv"),
                   "--check-ids", sample});
  EXPECT_EQ(e.exit_code, 1);
  EXPECT_NE(e.err.find("0 missing, 1 extra"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("tile:xla:not_in_sample"), std::string::npos) << e.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.File("e.csv")));
}

TEST_F(EvaluatePredictCliTest, BadInputsFailWithClearErrors) {
  struct Case {
    std::string name, text, needle;
  };
  const std::string head = preds_text_;
  std::string missing = preds_text_;
  {
    const size_t pos = missing.find("layout:xla:random\tla\t17\t");
    missing.erase(pos, missing.find('\n', pos) - pos + 1);
  }
  std::string nan = preds_text_;
  {
    const size_t pos = nan.find("tile:xla\ttb\t2\t");
    const size_t val = nan.rfind('\t', nan.find('\n', pos)) + 1;
    nan.replace(val, nan.find('\n', pos) - val, "nan");
  }
  // Line of the NaN row: count newlines before it (1-based).
  const size_t nan_line = std::count(nan.begin(), nan.begin() + nan.find("\tnan"), '\n') + 1;
  const std::vector<Case> cases = {
      {"unknown", head + "tile:xla\tghost\t0\t1.5\n", "unknown graph tile:xla:ghost"},
      {"missing", missing, "graph layout:xla:random:la (first row on line"},
      {"nan", nan, ":" + std::to_string(nan_line) + ": score \"nan\" is not finite"},
      {"inf", head + "tile:xla\tta\t0\t-inf\n", "is not finite"},
      {"dup", head + "tile:xla\tta\t3\t1\n", "duplicate entry for graph tile:xla:ta config 3"},
      {"range", head + "tile:xla\tta\t30\t1\n", "config index 30 out of range"},
      {"fields", head + "tile:xla\tta\t1\n", "expected 4 tab-separated fields"},
      {"version", "# tpugraphs predictions v9\n", "unsupported predictions format version"},
      {"header", std::string(eval::kPredictionsVersionLine) + "\nid,score\n",
       "expected the header line"},
  };
  for (const auto& c : cases) {
    const std::string path = tmp_.File(c.name + ".tsv");
    WriteText(path, c.text);
    auto r = RunCli({"evaluate", "--data", data_, "--predictions", path});
    EXPECT_EQ(r.exit_code, 1) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(path), std::string::npos) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.name << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.name;
    // predict rejects the same file and leaves no output behind.
    auto p = RunCli({"predict", "--data", data_, "--predictions", path, "--output",
                     tmp_.File(c.name + ".csv")});
    EXPECT_EQ(p.exit_code, 1) << c.name << ": " << p.err;
    EXPECT_FALSE(std::filesystem::exists(tmp_.File(c.name + ".csv"))) << c.name;
  }
  // Malformed eval-index JSON: file, line and column.
  WriteText(tmp_.File("xla_random.json"), "{\"la\": [0, 1,\n 2,, 3]}");
  auto j = RunCli({"evaluate", "--data", data_, "--predictions", preds_, "--eval-indices",
                   tmp_.File("xla_random.json")});
  EXPECT_EQ(j.exit_code, 1);
  EXPECT_NE(j.err.find(tmp_.File("xla_random.json") + ":2:4: malformed eval-index JSON"),
            std::string::npos)
      << j.err;
  // Missing dataset, unknown collection (no graph matches: exit 3), unknown baseline, no scorer
  // (usage: exit 2).
  auto nd = RunCli({"evaluate", "--data", tmp_.File("nope.tpug"), "--baseline", "random"});
  EXPECT_EQ(nd.exit_code, 1);
  EXPECT_NE(nd.err.find("nope.tpug"), std::string::npos) << nd.err;
  auto nc = RunCli(
      {"evaluate", "--data", data_, "--baseline", "random", "--collection", "layout:xla:default"});
  EXPECT_EQ(nc.exit_code, 3);
  EXPECT_NE(nc.err.find("no graph matches collection layout:xla:default"), std::string::npos)
      << nc.err;
  auto nb = RunCli({"evaluate", "--data", data_, "--baseline", "best"});
  EXPECT_EQ(nb.exit_code, 1);
  EXPECT_NE(nb.err.find("unknown baseline \"best\""), std::string::npos) << nb.err;
  auto none = RunCli({"evaluate", "--data", data_});
  EXPECT_EQ(none.exit_code, 2) << none.err;
  // Hostile submission files for --merge / --check-ids.
  WriteText(tmp_.File("bad.csv"), "ID,TopConfigs\ntile:xla:a,1;2;x\n");
  auto bm = RunCli({"predict", "--merge", tmp_.File("bad.csv"), "--output", tmp_.File("m.csv")});
  EXPECT_EQ(bm.exit_code, 1);
  EXPECT_NE(bm.err.find(tmp_.File("bad.csv") + ":2: TopConfigs of tile:xla:a"), std::string::npos)
      << bm.err;
}

}  // namespace
}  // namespace tpugraphs
