// End to end: a layout model trained on `tpugraphs synth` data ranks the layouts of the real HLO
// text modules (configuration 0 as compiled, plus --layout-candidates alternatives), and the
// commands that cannot use such graphs refuse them clearly.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "../train/train_test_util.h"
#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs {
namespace {

namespace fs = std::filesystem;
using ::tpugraphs::testing::CommandResult;
using ::tpugraphs::testing::RealDataPath;
using ::tpugraphs::testing::RunCli;
using ::tpugraphs::testing::TempDir;

std::vector<std::string> SmallModelFlags() {
  return {"--hidden-dim",      "8", "--num-layers",   "2", "--opcode-embedding-dim", "4",
          "--head-hidden-dim", "8", "--batch-graphs", "3", "--configs-per-graph",    "8"};
}

std::vector<std::vector<std::string>> DataRows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("collection\t", 0) == 0) continue;
    std::vector<std::string> fields;
    std::istringstream f(line);
    std::string field;
    while (std::getline(f, field, '\t')) fields.push_back(field);
    rows.push_back(std::move(fields));
  }
  return rows;
}

class HloLayoutPredictTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    // A tiny layout model trained on synthetic programs.
    CommandResult r = RunCli({"-q", "synth", "--task", "layout", "--graphs", "4", "--min-nodes",
                              "100", "--max-nodes", "300", "--configs", "30", "--splits",
                              "0.75,0.25,0", "--seed", "3", "-o", dir_->File("synth")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = RunCli({"-q", "ingest", dir_->File("synth"), "-o", dir_->File("synth.tpug")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> args = {"-q",       "train", "--dataset", dir_->File("synth.tpug"),
                                     "--output", Model(), "--epochs",  "2"};
    for (const auto& a : SmallModelFlags()) args.push_back(a);
    r = RunCli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The two real text modules with 10 alternatives each (the older one has only 7).
    r = RunCli({"-q", "ingest", RealDataPath("hlo_text/openxla_cpu_benchmark_graphsage_tf.hlo"),
                RealDataPath("hlo_text/pt_neuron_SyncTensorsGraph.21.hlo.txt"),
                "--layout-candidates", "10", "--seed", "5", "-o", Mine()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Model() { return dir_->File("layout.tpm"); }
  static std::string Mine() { return dir_->File("mine.tpug"); }
  static TempDir* dir_;
};
TempDir* HloLayoutPredictTest::dir_ = nullptr;

TEST_F(HloLayoutPredictTest, PredictRanksEveryCandidateAndExplainsItsLayouts) {
  auto reader = io::DatasetReader::Open(Mine());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::map<std::string, Graph> graphs;
  for (int64_t i = 0; i < (*reader)->num_graphs(); ++i) {
    auto g = (*reader)->ReadGraph(i, true);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    graphs[g->name] = std::move(*g);
  }
  ASSERT_EQ(graphs.size(), 2u);
  ASSERT_EQ(graphs.at("SyncTensorsGraph.21").num_configs, 8);  // 1 + the 7 that exist
  const std::string big =
      "cluster_0__XlaCompiledKernel_true__XlaHasReferenceVars_false__XlaNumConstantArgs_2__"
      "XlaNumResourceArgs_0_.5";
  ASSERT_EQ(graphs.at(big).num_configs, 11);

  const std::string scores = dir_->File("scores.tsv"), explain = dir_->File("explain.tsv");
  CommandResult r = RunCli({"predict", "--data", Mine(), "--model", Model(), "--format", "scores",
                            "-o", scores, "--explain", explain});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto score_text = ReadFileToString(scores);
  auto explain_text = ReadFileToString(explain);
  ASSERT_TRUE(score_text.ok() && explain_text.ok());

  // One score per configuration, configuration 0 (as compiled) included.
  std::map<std::pair<std::string, int64_t>, std::string> score_of;
  for (const auto& row : DataRows(*score_text)) {
    ASSERT_EQ(row.size(), 4u);
    score_of[{row[1], std::stoll(row[2])}] = row[3];
  }
  EXPECT_EQ(score_of.size(), 19u);
  for (const auto& [name, g] : graphs) {
    for (int64_t c = 0; c < g.num_configs; ++c) EXPECT_EQ(score_of.count({name, c}), 1u) << name;
  }

  // The explanation: configurations ranked by their scores, with the layouts of the dataset;
  // all nodes of configuration 0 and of every configuration with --explain-all, else only the
  // nodes where a configuration differs from configuration 0.
  auto check_explain = [&](const std::string& text, bool all) {
    EXPECT_EQ(text.rfind("# tpugraphs layout explanation v1\n", 0), 0u);
    std::map<std::string, std::vector<std::pair<int64_t, double>>> ranked;  // graph -> (c, s)
    std::map<std::pair<std::string, int64_t>, int64_t> rows_per_config;
    for (const auto& row : DataRows(text)) {
      ASSERT_EQ(row.size(), 11u);
      const Graph& g = graphs.at(row[1]);
      const int64_t rank = std::stoll(row[2]), config = std::stoll(row[3]);
      EXPECT_EQ(row[4], score_of.at({row[1], config}));
      if (rows_per_config[{row[1], config}]++ == 0) {
        EXPECT_EQ(rank, static_cast<int64_t>(ranked[row[1]].size()));
        ranked[row[1]].push_back({config, std::stod(row[4])});
      }
      // The node's layouts, as the dataset holds them.
      const int64_t node = std::stoll(row[5]);
      const auto it = std::find(g.node_config_ids.begin(), g.node_config_ids.end(), node);
      ASSERT_NE(it, g.node_config_ids.end());
      const size_t k = static_cast<size_t>(it - g.node_config_ids.begin());
      EXPECT_EQ(row[6], g.config_node_names[k]);
      const int8_t* v = g.node_config_feat.data() +
                        (config * g.num_config_nodes() + static_cast<int64_t>(k)) * 18;
      for (int t = 0; t < 3; ++t) {
        std::string expect = "*";
        if (v[6 * t] >= 0) {
          expect = "{";
          for (int i = 0; i < 6 && v[6 * t + i] >= 0; ++i) {
            if (i > 0) expect.push_back(',');
            expect.append(std::to_string(v[6 * t + i]));
          }
          expect += "}";
        }
        EXPECT_EQ(row[8 + t], expect) << row[1] << " config " << config << " " << row[6];
      }
      const bool same_as_0 = std::equal(v, v + 18, g.node_config_feat.data() + k * 18);
      EXPECT_EQ(row[7], same_as_0 ? "0" : "1");
      if (config == 0) {
        EXPECT_EQ(row[7], "0");
      }
    }
    for (const auto& [name, g] : graphs) {
      ASSERT_EQ(ranked[name].size(), static_cast<size_t>(g.num_configs)) << name;
      for (size_t i = 1; i < ranked[name].size(); ++i) {
        EXPECT_LE(ranked[name][i - 1].second, ranked[name][i].second) << name;
      }
      const int64_t nc = g.num_config_nodes();
      for (int64_t c = 0; c < g.num_configs; ++c) {
        int64_t differing = 0;
        for (int64_t k = 0; k < nc; ++k) {
          differing += !std::equal(g.node_config_feat.begin() + (c * nc + k) * 18,
                                   g.node_config_feat.begin() + (c * nc + k + 1) * 18,
                                   g.node_config_feat.begin() + k * 18);
        }
        ASSERT_GE(differing, c == 0 ? 0 : 1);
        EXPECT_EQ((rows_per_config[{name, c}]), all || c == 0 ? nc : differing)
            << name << " config " << c;
      }
    }
  };
  check_explain(*explain_text, false);
  r = RunCli({"predict", "--data", Mine(), "--model", Model(), "--format", "scores", "-o",
              dir_->File("scores2.tsv"), "--explain", explain, "--explain-all"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto scores2 = ReadFileToString(dir_->File("scores2.tsv"));
  ASSERT_TRUE(scores2.ok());
  EXPECT_EQ(*scores2, *score_text);
  auto explain_all_text = ReadFileToString(explain);
  ASSERT_TRUE(explain_all_text.ok());
  check_explain(*explain_all_text, true);
  EXPECT_GT(explain_all_text->size(), explain_text->size());
  std::map<std::string, std::vector<int64_t>> ranking;  // graph -> configs best first
  for (const auto& row : DataRows(*explain_text)) {
    auto& v = ranking[row[1]];
    if (v.empty() || v.back() != std::stoll(row[3])) v.push_back(std::stoll(row[3]));
  }

  // The old-style module's dot: its 8 configurations are the 8 layouts of three rank-2 tensors.
  std::set<std::string> dot_layouts;
  for (const auto& row : DataRows(*explain_all_text)) {
    if (row[6] == "dot.17") dot_layouts.insert(row[8] + row[9] + row[10]);
  }
  EXPECT_EQ(dot_layouts.size(), 8u);

  // The Kaggle form ranks them too: a full permutation per graph.
  r = RunCli({"predict", "--data", Mine(), "--model", Model(), "-o", dir_->File("sub.csv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto csv = ReadFileToString(dir_->File("sub.csv"));
  ASSERT_TRUE(csv.ok());
  std::string expected_row = "layout:xla:custom:SyncTensorsGraph.21,";
  for (size_t i = 0; i < 8; ++i) {
    if (i > 0) expected_row.push_back(';');
    expected_row.append(std::to_string(ranking["SyncTensorsGraph.21"][i]));
  }
  EXPECT_NE(csv->find(expected_row + "\n"), std::string::npos) << *csv;
}

TEST_F(HloLayoutPredictTest, EvaluateAndTrainRefuseGraphsWithoutRuntimes) {
  CommandResult r = RunCli({"evaluate", "--data", Mine(), "--model", Model()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("has no measured runtimes"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("graph layout:xla:custom:cluster_0__XlaCompiledKernel"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("predict"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("kendall"), std::string::npos) << r.out;

  const std::string as_train = dir_->File("as_train.tpug"), model = dir_->File("never.tpm");
  r = RunCli({"-q", "ingest", RealDataPath("hlo_text"), "--split", "train", "--layout-candidates",
              "3", "-o", as_train});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCli({"train", "--dataset", as_train, "--output", model, "--epochs", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("training graph layout:xla:custom:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("has no measured runtimes"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(model));
}

TEST_F(HloLayoutPredictTest, TileModelsAreRefusedNamingTheGraph) {
  const std::string tile_data = dir_->File("tile_train.tpug"), tile_model = dir_->File("tile.tpm");
  ASSERT_TRUE(train::testing::WriteSyntheticDataset(tile_data, TaskKind::kTile, 4, 2).ok());
  std::vector<std::string> args = {"-q",       "train",    "--dataset", tile_data,
                                   "--output", tile_model, "--epochs",  "1"};
  for (const auto& a : SmallModelFlags()) args.push_back(a);
  CommandResult r = RunCli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // A layout graph from HLO text with a tile model.
  const std::string out = dir_->File("tile_on_layout.csv");
  r = RunCli({"predict", "--data", Mine(), "--model", tile_model, "-o", out, "--explain",
              dir_->File("tile_on_layout.tsv")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("a tile model cannot score layout graph layout:xla:custom:"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(dir_->File("tile_on_layout.tsv")));

  // The text module ingested as a tile graph: it has no tile configurations.
  const std::string as_tile = dir_->File("as_tile.tpug");
  r = RunCli({"-q", "ingest", RealDataPath("hlo_text/pt_neuron_SyncTensorsGraph.21.hlo.txt"),
              "--collection", "tile:xla", "--layout-candidates", "5", "-o", as_tile});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCli({"predict", "--data", as_tile, "--model", tile_model, "-o", out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("graph tile:xla:SyncTensorsGraph.21 has no configs to rank: tile "
                       "configurations are the tile sizes of one fused kernel"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(HloLayoutPredictTest, ExplainUsageErrors) {
  CommandResult r = RunCli({"predict", "--data", Mine(), "--baseline", "index", "-o",
                            dir_->File("same.tsv"), "--explain", dir_->File("same.tsv")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--explain and --output name the same file"), std::string::npos) << r.err;
  r = RunCli({"predict", "--data", Mine(), "--baseline", "index", "-o", dir_->File("y.csv"),
              "--explain-all"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--explain-all needs --explain FILE"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_->File("y.csv")));
  const std::string preds = dir_->File("p.tsv");
  r = RunCli(
      {"predict", "--data", Mine(), "--baseline", "index", "--format", "scores", "-o", preds});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCli({"predict", "--predictions", preds, "-o", dir_->File("x.csv"), "--explain",
              dir_->File("x.tsv")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--explain needs --data"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_->File("x.csv")));
}

}  // namespace
}  // namespace tpugraphs
