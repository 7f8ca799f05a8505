#include "tpugraphs/eval/evaluate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "testing/test_util.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/eval/metrics.h"
#include "tpugraphs/eval/predictions.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs::eval {
namespace {

// A small graph that passes ValidateGraph; runtimes drawn in a small range (ties happen).
Graph MakeGraph(const std::string& collection, const std::string& name, int64_t configs,
                uint64_t seed, const std::string& split = "valid") {
  Rng rng(seed);
  Graph g;
  g.collection = collection;
  g.name = name;
  g.split = split;
  g.kind = TaskKindOfCollection(collection);
  const int64_t n = 5;
  g.node_opcode.assign(n, 1);
  g.node_feat.assign(n * kNodeFeatureCount, 0.5f);
  g.edge_index = {1, 0, 2, 1, 3, 2, 4, 3};
  g.num_configs = configs;
  for (int64_t c = 0; c < configs; ++c) {
    g.config_runtime.push_back(1000 + static_cast<int64_t>(rng.UniformInt(400)));
  }
  if (g.is_tile()) {
    g.config_feat.assign(configs * kTileConfigFeatureCount, 1.0f);
    for (int64_t c = 0; c < configs; ++c) {
      g.config_runtime_normalizers.push_back(1 + static_cast<int64_t>(rng.UniformInt(3)));
    }
  } else {
    g.node_config_ids = {1, 3};
    g.node_config_feat.resize(configs * 2 * kLayoutConfigFeatureCount);
    for (auto& v : g.node_config_feat) v = static_cast<int8_t>(rng.UniformInt(5)) - 1;
  }
  return g;
}

std::string WriteDataset(const std::string& path, const std::vector<Graph>& graphs) {
  auto writer = io::DatasetWriter::Create(path);
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  for (const auto& g : graphs) EXPECT_TRUE((*writer)->Add(g).ok());
  EXPECT_TRUE((*writer)->Finish().ok());
  return path;
}

// Predictions: a noisy copy of the normalized runtime, rounded so that scores tie too.
std::string NoisyPredictions(const std::vector<Graph>& graphs, uint64_t seed) {
  std::string text =
      std::string(kPredictionsVersionLine) + "\n" + std::string(kPredictionsHeader) + "\n";
  Rng rng(seed);
  for (const auto& g : graphs) {
    std::vector<double> s(g.num_configs);
    for (int64_t c = 0; c < g.num_configs; ++c) {
      s[c] = std::round(g.NormalizedRuntime(c) / 50 + rng.Normal() * 0.5);
    }
    AppendPredictionRows(g.collection, g.name, s, &text);
  }
  return text;
}

class EvaluateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    graphs_ = {MakeGraph("tile:xla", "t0", 40, 1), MakeGraph("tile:xla", "t1", 7, 2),
               MakeGraph("layout:xla:random", "g0", 1200, 3),
               MakeGraph("layout:xla:random", "g1", 300, 4),
               MakeGraph("layout:nlp:default", "n0", 200, 5, "train")};
    path_ = WriteDataset(tmp_.File("d.tpug"), graphs_);
    auto reader = io::DatasetReader::Open(path_);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    reader_ = std::move(*reader);
  }
  testing::TempDir tmp_;
  std::vector<Graph> graphs_;
  std::string path_;
  std::unique_ptr<io::DatasetReader> reader_;
};

TEST_F(EvaluateTest, MatchesReferenceMetricsPerGraphAndMeans) {
  auto preds = Predictions::Parse(NoisyPredictions(graphs_, 9), "p.tsv");
  ASSERT_TRUE(preds.ok()) << preds.status().ToString();
  PredictionsScorer scorer(std::move(*preds));
  EvaluateOptions options;
  options.progress = false;
  auto report = Evaluate(*reader_, scorer, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->graphs.size(), graphs_.size());
  for (size_t i = 0; i < graphs_.size(); ++i) {
    const Graph& g = graphs_[i];
    const GraphMetrics& m = report->graphs[i];
    EXPECT_EQ(m.name, g.name);
    std::vector<double> y(g.num_configs);
    for (int64_t c = 0; c < g.num_configs; ++c) y[c] = g.NormalizedRuntime(c);
    auto s = scorer.predictions().ScoresFor(g.collection, g.name, g.num_configs, [&] {
      std::vector<int64_t> all(g.num_configs);
      std::iota(all.begin(), all.end(), 0);
      return all;
    }());
    ASSERT_TRUE(s.ok());
    EXPECT_NEAR(m.kendall_tau, reference::KendallTauB(*s, y), 1e-12) << g.name;
    EXPECT_NEAR(m.opa, reference::OrderedPairAccuracy(*s, y), 1e-12) << g.name;
    const auto& ks = TopKs(g.kind);
    ASSERT_EQ(m.top_k.size(), ks.size());
    for (size_t k = 0; k < ks.size(); ++k) {
      EXPECT_DOUBLE_EQ(m.top_k[k], reference::TopKError(*s, y, ks[k])) << g.name << " k" << ks[k];
    }
    EXPECT_DOUBLE_EQ(
        m.kaggle, g.is_tile() ? 1 - reference::TopKError(*s, y, 5) : reference::KendallTauB(*s, y));
    if (g.num_configs > 10) {
      EXPECT_GT(m.kendall_tau, 0.3) << g.name;  // noisy but informative predictions
    }
  }
  // Collection means and the Kaggle mean over the 3 official collections present.
  ASSERT_EQ(report->collections.size(), 3u);
  const auto& g = report->graphs;
  const double tile = (g[0].kaggle + g[1].kaggle) / 2;
  const double xla_random = (g[2].kendall_tau + g[3].kendall_tau) / 2;
  const double nlp_default = g[4].kendall_tau;
  EXPECT_EQ(report->collections[0].collection, "layout:nlp:default");
  EXPECT_DOUBLE_EQ(report->collections[2].kaggle, tile);
  EXPECT_DOUBLE_EQ(report->collections[1].kaggle, xla_random);
  EXPECT_DOUBLE_EQ(report->collections[1].opa, (g[2].opa + g[3].opa) / 2);
  EXPECT_NEAR(report->kaggle, (tile + xla_random + nlp_default) / 3, 1e-15);
  EXPECT_EQ(report->kaggle_collections,
            (std::vector<std::string>{"tile:xla", "layout:xla:random", "layout:nlp:default"}));
  EXPECT_FALSE(report->kaggle_complete);
  EXPECT_TRUE(report->kaggle_official);
  const std::string table = FormatReportTable(*report, true);
  EXPECT_NE(table.find("only 3 of the 5 Kaggle collections present"), std::string::npos) << table;
  EXPECT_NE(table.find("  g1"), std::string::npos);
}

TEST(EvaluateHandWorkedTest, TileUsesNormalizedRuntimes) {
  // runtimes [100, 60, 90, 80], normalizers [10, 5, 10, 10] -> normalized [10, 12, 9, 8].
  // scores [1, 2, 3, 4]: top-1 = config 0 -> 10 / 8 - 1 = 0.25; top-5 (capped, all) -> 0.
  // (Raw runtimes would make config 1 the best and give 100 / 60 - 1 instead.)
  Graph g = MakeGraph("tile:xla", "h", 4, 1);
  g.config_runtime = {100, 60, 90, 80};
  g.config_runtime_normalizers = {10, 5, 10, 10};
  std::vector<double> y;
  for (int64_t c = 0; c < 4; ++c) y.push_back(g.NormalizedRuntime(c));
  const GraphMetrics m = ComputeGraphMetrics(TaskKind::kTile, {1, 2, 3, 4}, y);
  EXPECT_DOUBLE_EQ(m.top_k[0], 0.25);
  EXPECT_DOUBLE_EQ(m.top_k[1], 0.0);
  EXPECT_DOUBLE_EQ(m.top_k[2], 0.0);
  EXPECT_DOUBLE_EQ(m.kaggle, 1.0);
  // Pairs (s, y): concordant {0,1} (1<2, 10<12); discordant {0,2},{0,3},{1,2},{1,3},{2,3}.
  // tau = (1 - 5) / 6 = -2/3; OPA = 1/6.
  EXPECT_NEAR(m.kendall_tau, -2.0 / 3.0, 1e-15);
  EXPECT_NEAR(m.opa, 1.0 / 6.0, 1e-15);
}

TEST_F(EvaluateTest, EvalIndicesRestrictAndKeepRepeats) {
  EvalIndices idx;
  std::vector<int64_t> list;
  for (int64_t i = 0; i < 1000; ++i) list.push_back((i * 7919) % 1150);  // repeats some
  list[5] = list[6] = 3;                                                 // explicit repeat
  ASSERT_TRUE(idx.Add("layout:xla:random", "mem.json", {{"g0", list}}).ok());
  auto scorer = MakeBaselineScorer("random", 5);
  ASSERT_TRUE(scorer.ok());
  EvaluateOptions options;
  options.progress = false;
  options.eval_indices = &idx;
  auto report = Evaluate(*reader_, **scorer, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  // g1 (not listed in the covered collection) is skipped; tile and nlp are not covered.
  std::vector<std::string> names;
  for (const auto& m : report->graphs) names.push_back(m.name);
  EXPECT_EQ(names, (std::vector<std::string>{"t0", "t1", "g0", "n0"}));
  const GraphMetrics& g0 = report->graphs[2];
  EXPECT_TRUE(g0.restricted);
  EXPECT_EQ(g0.num_evaluated, 1000);
  EXPECT_EQ(g0.num_configs, 1200);
  // Same numbers as gathering the vectors ourselves, repeats included.
  Rng rng(DeriveSeed(5, "baseline-random:layout:xla:random:g0"));
  std::vector<double> all(1200);
  for (double& v : all) v = rng.Uniform();
  std::vector<double> s, y;
  for (int64_t c : list) {
    s.push_back(all[c]);
    y.push_back(graphs_[2].NormalizedRuntime(c));
  }
  EXPECT_NEAR(g0.kendall_tau, reference::KendallTauB(s, y), 1e-12);
  EXPECT_NEAR(g0.opa, reference::OrderedPairAccuracy(s, y), 1e-12);
  EXPECT_DOUBLE_EQ(g0.top_k[1], reference::TopKError(s, y, 10));

  // An index beyond the graph's configs is an error naming the index file.
  EvalIndices bad;
  ASSERT_TRUE(bad.Add("layout:xla:random", "bad.json", {{"g1", {0, 299, 300}}}).ok());
  options.eval_indices = &bad;
  auto r = Evaluate(*reader_, **scorer, options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad.json: eval index 300 of graph g1 is out of range"),
            std::string::npos)
      << r.status().message();
}

TEST_F(EvaluateTest, RandomBaselineIsDeterministicAndNearZeroTau) {
  auto a = MakeBaselineScorer("random", 11), b = MakeBaselineScorer("random", 11);
  EvaluateOptions options;
  options.progress = false;
  options.filter.collections = {"layout:xla:random"};
  auto ra = Evaluate(*reader_, **a, options);
  options.threads = 1;
  auto rb = Evaluate(*reader_, **b, options);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(FormatReportJson(*ra, true), FormatReportJson(*rb, true));
  EXPECT_LT(std::abs(ra->graphs[0].kendall_tau), 0.1);  // 1200 configs: sd about 0.02
  EXPECT_EQ(ra->graphs.size(), 2u);
  EXPECT_EQ(ra->kaggle_collections, std::vector<std::string>{"layout:xla:random"});
}

TEST_F(EvaluateTest, IndexBaselineScoresByConfigIndex) {
  auto scorer = MakeBaselineScorer("index", 0);
  ASSERT_TRUE(scorer.ok());
  EvaluateOptions options;
  options.progress = false;
  options.filter.collections = {"tile:xla"};
  auto r = Evaluate(*reader_, **scorer, options);
  ASSERT_TRUE(r.ok());
  const Graph& g = graphs_[0];
  std::vector<double> s(g.num_configs), y(g.num_configs);
  for (int64_t c = 0; c < g.num_configs; ++c) {
    s[c] = static_cast<double>(c);
    y[c] = g.NormalizedRuntime(c);
  }
  EXPECT_DOUBLE_EQ(r->graphs[0].top_k[0], y[0] / *std::min_element(y.begin(), y.end()) - 1);
  EXPECT_NEAR(r->graphs[0].kendall_tau, reference::KendallTauB(s, y), 1e-12);
  EXPECT_FALSE(MakeBaselineScorer("nope", 0).ok());
}

TEST_F(EvaluateTest, PredictionErrorsNameFileAndLine) {
  EvaluateOptions options;
  options.progress = false;
  auto run = [&](const std::string& text) -> Status {
    auto p = Predictions::Parse(text, "p.tsv");
    if (!p.ok()) return p.status();
    PredictionsScorer scorer(std::move(*p));
    return Evaluate(*reader_, scorer, options).status();
  };
  const std::string full = NoisyPredictions(graphs_, 1);
  EXPECT_TRUE(run(full).ok());
  // Unknown graph.
  Status s = run(full + "tile:xla\tghost\t0\t1\n");
  EXPECT_NE(s.message().find("p.tsv:"), std::string::npos);
  EXPECT_NE(s.message().find("unknown graph tile:xla:ghost"), std::string::npos) << s.message();
  // Missing config: drop the row of t1 config 3.
  std::string missing = full;
  const size_t pos = missing.find("tile:xla\tt1\t3\t");
  missing.erase(pos, missing.find('\n', pos) - pos + 1);
  s = run(missing);
  EXPECT_NE(s.message().find("graph tile:xla:t1 (first row on line"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("has no score for config 3 (1 of 7 requested configs missing)"),
            std::string::npos)
      << s.message();
  // Index out of range.
  s = run(full + "tile:xla\tt1\t7\t1\n");
  EXPECT_NE(s.message().find("config index 7 out of range: graph tile:xla:t1 has 7 configs"),
            std::string::npos)
      << s.message();
  // Restricting to a collection: rows of the other (dataset) graphs are ignored.
  options.filter.collections = {"tile:xla"};
  EXPECT_TRUE(run(full).ok());
}

TEST(EvaluateHiddenRuntimesTest, TestSplitWithZeroRuntimesIsAnError) {
  testing::TempDir tmp;
  Graph g = MakeGraph("tile:xla", "secret", 5, 1, "test");
  g.config_runtime.assign(5, 0);
  WriteDataset(tmp.File("t.tpug"), {g});
  auto reader = io::DatasetReader::Open(tmp.File("t.tpug"));
  ASSERT_TRUE(reader.ok());
  auto scorer = MakeBaselineScorer("random", 1);
  EvaluateOptions options;
  options.progress = false;
  auto r = Evaluate(**reader, **scorer, options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("has no measured runtimes"), std::string::npos);
}

}  // namespace
}  // namespace tpugraphs::eval
