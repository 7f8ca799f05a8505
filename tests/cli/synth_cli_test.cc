// End-to-end tests of `tpugraphs synth` through the built binary.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs {
namespace {

namespace fs = std::filesystem;
using testing::RealDataPath;
using testing::RunCli;
using testing::TempDir;

TEST(SynthCliTest, HelpExplainsEveryFlag) {
  auto r = RunCli({"synth", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"--task", "--graphs", "--nodes", "--min-nodes", "--max-nodes", "--configs", "--seed",
        "--splits", "--output", "--from", "--search", "--noise", "--error-rate", "--source",
        "--score", "--release-shaped", "--cap-configs", "--cap-nodes"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
}

TEST(SynthCliTest, ReleaseShapedTreeAndItsTable) {
  TempDir dir;
  const std::string out = dir.File("tree");
  auto r = RunCli({"-q", "-j", "2", "synth", "--release-shaped", "0.001", "--seed", "3",
                   "--cap-configs", "10", "--cap-nodes", "100", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Header + one line per collection and split; S = 0.001: tile 6/1/1, layout 1 each.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 16) << r.out;
  EXPECT_NE(r.out.find("tile:xla\ttrain\t6\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layout:nlp:default\ttest\t1\n"), std::string::npos) << r.out;
  auto shape = ReadFileToString(out + "/shape.tsv");
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(std::count(shape->begin(), shape->end(), '\n'), 1 + 8 + 12) << *shape;
  EXPECT_TRUE(fs::exists(out + "/npz/layout/xla/random/valid/xla_valid_000.npz"));
  EXPECT_FALSE(fs::exists(out + "/.work"));
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--release-shaped", "-1"},
        std::vector<std::string>{"--release-shaped", "0.1", "--cap-nodes", "5"},
        std::vector<std::string>{"--release-shaped", "0.1", "--cap-configs", "1"}}) {
    std::vector<std::string> args = {"-q", "synth", "-o", dir.File("bad")};
    args.insert(args.end(), bad.begin(), bad.end());
    auto b = RunCli(args);
    EXPECT_EQ(b.exit_code, 2) << b.err;
    EXPECT_FALSE(fs::exists(dir.File("bad")));
  }
}

TEST(SynthCliTest, WritesSplitTreeThatIngestAndStatsRead) {
  TempDir dir;
  const std::string out = dir.File("synth");
  auto r = RunCli({"-q", "synth", "--task", "layout", "--graphs", "6", "--min-nodes", "100",
                   "--max-nodes", "400", "--configs", "30", "--splits", "0.5,0.25,0.25", "--output",
                   out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Table on stdout: header + one row per graph.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 7) << r.out;
  EXPECT_TRUE(fs::is_directory(out + "/pb/layout/synth/random/train"));
  EXPECT_TRUE(fs::is_directory(out + "/pb/layout/synth/random/valid"));
  EXPECT_TRUE(fs::is_directory(out + "/pb/layout/synth/random/test"));
  auto t = RunCli(
      {"-q", "synth", "--task", "tile", "--graphs", "5", "--configs", "20", "--output", out});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_TRUE(fs::is_directory(out + "/pb/tile/synth/train"));

  auto ing = RunCli({"-q", "ingest", out + "/pb/layout/synth/random/train", "--collection",
                     "layout:synth:random", "-o", dir.File("layout.tpug")});
  ASSERT_EQ(ing.exit_code, 0) << ing.err;
  auto tile = RunCli({"-q", "ingest", out + "/pb/tile", "--collection", "tile:synth", "-o",
                      dir.File("tile.tpug")});
  ASSERT_EQ(tile.exit_code, 0) << tile.err;
  auto stats = RunCli({"stats", dir.File("tile.tpug")});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_NE(stats.out.find("tile:synth"), std::string::npos) << stats.out;
}

TEST(SynthCliTest, SameSeedByteIdenticalAcrossThreadCounts) {
  TempDir dir;
  for (const char* j : {"1", "2"}) {
    auto r = RunCli({"-q", "-j", j, "synth", "--graphs", "2", "--nodes", "300", "--configs", "25",
                     "--seed", "9", "--output", dir.File(std::string("o") + j)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  for (const char* f : {"/pb/layout/synth/random/train/program_00000.pb",
                        "/pb/layout/synth/random/train/program_00001.pb"}) {
    EXPECT_EQ(ReadFileToString(dir.File("o1") + f).value(),
              ReadFileToString(dir.File("o2") + f).value())
        << f;
  }
}

TEST(SynthCliTest, FromRealModuleToSingleFile) {
  TempDir dir;
  auto r = RunCli({"-q", "synth", "--from", RealDataPath("raw/module_tuning_data_layout.pb"),
                   "--configs", "40", "--output", dir.File("unet.pb")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("module_tuning_data_layout"), std::string::npos);
  auto ing = RunCli({"-q", "ingest", dir.File("unet.pb"), "--collection", "layout:xla:random", "-o",
                     dir.File("unet.tpug")});
  EXPECT_EQ(ing.exit_code, 0) << ing.err;
}

TEST(SynthCliTest, BadInputExitCodesAndNoOutput) {
  TempDir dir;
  auto usage = RunCli({"synth", "--configs", "1", "--output", dir.File("x")});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_NE(usage.err.find("--configs"), std::string::npos) << usage.err;
  auto bad_splits = RunCli({"synth", "--splits", "0.5,x", "--output", dir.File("x")});
  EXPECT_EQ(bad_splits.exit_code, 2);
  ASSERT_TRUE(WriteFileAtomically(dir.File("junk.pb"), "not a proto \xff\xff").ok());
  auto junk = RunCli({"synth", "--from", dir.File("junk.pb"), "--output", dir.File("out.pb")});
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_NE(junk.err.find("junk.pb"), std::string::npos) << junk.err;
  auto missing = RunCli({"synth", "--from", dir.File("missing.pb"), "--output", dir.File("o.pb")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(dir.List(), std::vector<std::string>{"junk.pb"});
}

// Rows of a noise-free costs TSV: graph -> [(measured, noise_free)] in config order.
std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> ReadCosts(const std::string& path) {
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> out;
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << path;
  if (!text.ok()) return out;
  std::istringstream in(*text);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "# tpugraphs synth noise-free costs v1");
  std::getline(in, line);
  EXPECT_EQ(line, "collection\tgraph\tsplit\tconfig\tmeasured_ns\tnoise_free_ns");
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string collection, graph, split, config, measured, clean;
    std::getline(f, collection, '\t');
    std::getline(f, graph, '\t');
    std::getline(f, split, '\t');
    std::getline(f, config, '\t');
    std::getline(f, measured, '\t');
    std::getline(f, clean, '\t');
    EXPECT_EQ(std::stoll(config), static_cast<int64_t>(out[graph].size())) << line;
    out[graph].push_back({std::stoll(measured), std::stoll(clean)});
  }
  return out;
}

TEST(SynthCliTest, NoiseFreeCostsMatchTheIngestedRuntimesAndTheNoise) {
  TempDir tmp;
  for (const std::string task : {"layout", "tile"}) {
    const std::string tree = tmp.File(task), costs = tmp.File(task + ".tsv");
    auto r = RunCli({"-q",
                     "synth",
                     "--task",
                     task,
                     "--graphs",
                     "3",
                     "--min-nodes",
                     "200",
                     "--max-nodes",
                     "400",
                     "--configs",
                     "60",
                     "--noise",
                     "0.01",
                     "--error-rate",
                     "0.1",
                     "-o",
                     tree,
                     "--noise-free-costs",
                     costs});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("noise_free_kendall"), std::string::npos) << r.out;
    auto rows = ReadCosts(costs);
    ASSERT_EQ(rows.size(), 3u) << task;
    ASSERT_EQ(RunCli({"-q", "ingest", tree, "-o", tmp.File(task + ".tpug")}).exit_code, 0);
    auto reader = io::DatasetReader::Open(tmp.File(task + ".tpug"));
    ASSERT_TRUE(reader.ok());
    for (int64_t i = 0; i < (*reader)->num_graphs(); ++i) {
      auto g = (*reader)->ReadGraph(i);
      ASSERT_TRUE(g.ok());
      // Layout graphs are named after the file; tile graphs "<file stem>_<module name>".
      std::string key;
      for (const auto& [name, unused] : rows) {
        if (g->name == name || g->name.rfind(name + "_", 0) == 0) key = name;
      }
      ASSERT_FALSE(key.empty()) << g->name;
      const auto& list = rows[key];
      ASSERT_EQ(static_cast<int64_t>(list.size()), g->num_configs) << g->name;
      for (int64_t c = 0; c < g->num_configs; ++c) {
        // The measured column is the ingested runtime; noise is exp(sigma z), |z| <= 3.
        EXPECT_EQ(list[c].first, g->config_runtime[c]) << g->name << " " << c;
        const double ratio = static_cast<double>(list[c].first) / list[c].second;
        EXPECT_LE(std::abs(std::log(ratio)), 0.03 + 1e-6) << g->name << " " << c;
      }
    }
  }
  // Without noise the two columns agree (within the 1 ns rounding of the measured value).
  const std::string costs = tmp.File("quiet.tsv");
  ASSERT_EQ(RunCli({"-q", "synth", "--graphs", "2", "--min-nodes", "200", "--max-nodes", "300",
                    "--configs", "40", "--noise", "0", "-o", tmp.File("quiet"),
                    "--noise-free-costs", costs})
                .exit_code,
            0);
  for (const auto& [graph, list] : ReadCosts(costs)) {
    for (const auto& [measured, clean] : list) EXPECT_LE(std::llabs(measured - clean), 1) << graph;
  }
}

// --no-cross-node-terms false is the default, byte for byte; true keeps the programs and their
// configurations (the same number of runs per graph) and prices some of them differently; a
// value that is not a bool is refused before anything is written.
TEST(SynthCliTest, NoCrossNodeTermsChangesRuntimesOnly) {
  TempDir dir;
  const std::vector<std::string> base = {"-q",  "synth",     "--graphs", "2",      "--nodes",
                                         "400", "--configs", "40",       "--seed", "5"};
  auto run = [&](const std::string& name, const std::vector<std::string>& extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--noise-free-costs", dir.File(name + ".tsv"), "-o", dir.File(name)});
    return RunCli(args);
  };
  ASSERT_EQ(run("default", {}).exit_code, 0);
  ASSERT_EQ(run("off", {"--no-cross-node-terms", "false"}).exit_code, 0);
  ASSERT_EQ(run("local", {"--no-cross-node-terms", "true"}).exit_code, 0);
  const std::string f = "/pb/layout/synth/random/train/program_00000.pb";
  EXPECT_EQ(ReadFileToString(dir.File("default") + f).value(),
            ReadFileToString(dir.File("off") + f).value());
  EXPECT_NE(ReadFileToString(dir.File("default") + f).value(),
            ReadFileToString(dir.File("local") + f).value());
  const auto cross = ReadCosts(dir.File("default.tsv")), local = ReadCosts(dir.File("local.tsv"));
  ASSERT_EQ(cross.size(), local.size());
  int differ = 0;
  for (const auto& [graph, rows] : cross) {
    ASSERT_EQ(local.at(graph).size(), rows.size()) << graph;
    for (size_t i = 0; i < rows.size(); ++i) differ += rows[i].second != local.at(graph)[i].second;
  }
  EXPECT_GT(differ, 0);
  auto bad = RunCli({"synth", "--no-cross-node-terms", "maybe", "-o", dir.File("bad")});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--no-cross-node-terms"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(dir.File("bad")));
}

}  // namespace
}  // namespace tpugraphs
