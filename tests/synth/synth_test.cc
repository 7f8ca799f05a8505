#include "tpugraphs/synth/synth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/ingest/raw_dump.h"

namespace tpugraphs::synth {
namespace {

namespace fs = std::filesystem;
using tpugraphs::testing::RealDataPath;
using tpugraphs::testing::TempDir;

std::vector<std::string> FilesUnder(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

SynthConfig Config(const std::string& task, const std::string& out) {
  SynthConfig c = DefaultSynthConfig();
  c.set_task(task);
  c.set_output(out);
  c.set_graphs(task == "tile" ? 8 : 3);
  c.set_min_nodes(150);
  c.set_max_nodes(900);
  c.set_configs(40);
  c.set_seed(5);
  c.set_error_rate(0.05);
  EXPECT_TRUE(ValidateSynthConfig(&c).ok());
  return c;
}

std::vector<SynthGraphSummary> RunSynthFor(const SynthConfig& c, int threads) {
  ThreadPool pool(threads);
  auto r = RunSynth(c, &pool);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r.value() : std::vector<SynthGraphSummary>{};
}

tpu_graphs::ModuleTuningData ReadLayout(const std::string& path) {
  tpu_graphs::ModuleTuningData d;
  EXPECT_TRUE(d.ParseFromString(ReadFileToString(path).value())) << path;
  return d;
}

TEST(SynthConfigTest, ValidationNamesTheFlag) {
  SynthConfig c = DefaultSynthConfig();
  c.set_output("/tmp/x");
  EXPECT_TRUE(ValidateSynthConfig(&c).ok());
  EXPECT_EQ(c.noise_sigma(), 0.005);  // layout default resolved
  auto expect_bad = [](SynthConfig c, const std::string& flag) {
    Status s = ValidateSynthConfig(&c);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(flag), std::string::npos) << s.message();
  };
  SynthConfig bad = c;
  bad.set_configs(1);
  expect_bad(bad, "--configs");
  bad = c;
  bad.set_task("both");
  expect_bad(bad, "--task");
  bad = c;
  bad.set_min_nodes(5000);
  bad.set_max_nodes(100);
  expect_bad(bad, "--min-nodes");
  bad = c;
  bad.add_splits(0.5);
  bad.add_splits(0.5);
  bad.add_splits(0.5);
  expect_bad(bad, "--splits");
  bad = c;
  bad.set_output("");
  expect_bad(bad, "--output");
  bad = c;
  bad.set_source("Bad-Name");
  expect_bad(bad, "--source");
}

TEST(SynthTest, LayoutFilesAreValidModuleTuningData) {
  TempDir dir;
  SynthConfig c = Config("layout", dir.path());
  c.add_splits(0.34);
  c.add_splits(0.33);
  c.add_splits(0.33);
  auto summaries = RunSynthFor(c, 2);
  ASSERT_EQ(summaries.size(), 3u);
  std::set<std::string> splits;
  for (const auto& s : summaries) {
    SCOPED_TRACE(s.path);
    splits.insert(s.split);
    EXPECT_NE(s.path.find("/pb/layout/synth/random/" + s.split + "/"), std::string::npos);
    tpu_graphs::ModuleTuningData d = ReadLayout(s.path);
    ASSERT_TRUE(d.has_module());
    // config_index_to_node: convolution/dot/reshape nodes in featurizer order, ascending.
    std::vector<std::string> opcodes;
    for (const auto& comp : d.module().computations()) {
      for (const auto& inst : comp.instructions()) opcodes.push_back(inst.opcode());
    }
    EXPECT_EQ(static_cast<int64_t>(opcodes.size()), s.nodes);
    ASSERT_GT(d.config_index_to_node_size(), 0);
    for (int i = 0; i < d.config_index_to_node_size(); ++i) {
      const uint64_t v = d.config_index_to_node(i);
      ASSERT_LT(v, opcodes.size());
      EXPECT_TRUE(opcodes[v] == "convolution" || opcodes[v] == "dot" || opcodes[v] == "reshape")
          << opcodes[v];
      if (i > 0) {
        EXPECT_GT(v, d.config_index_to_node(i - 1));
      }
    }
    int defaults = 0, errors = 0, valid = 0;
    for (const auto& run : d.runs()) {
      ASSERT_TRUE(run.has_module_config());
      const auto& nodes = run.module_config().layout_config().nodes();
      ASSERT_EQ(nodes.size(), d.config_index_to_node_size());
      for (int i = 0; i < nodes.size(); ++i) {
        const std::string& op = opcodes[d.config_index_to_node(i)];
        EXPECT_EQ(nodes[i].tensors_size(), op == "reshape" ? 2 : 3);
        for (const auto& t : nodes[i].tensors()) {
          std::set<int> perm(t.dims().begin(), t.dims().end());
          EXPECT_EQ(static_cast<int>(perm.size()), t.dims_size());
          for (int v : t.dims()) EXPECT_TRUE(v >= 0 && v < t.dims_size());
        }
      }
      if (run.error()) {
        ++errors;
        EXPECT_TRUE(run.has_profile());
        EXPECT_EQ(run.profile().compute_time_ns(), 0);
        EXPECT_FALSE(run.is_default());
        continue;
      }
      ++valid;
      defaults += run.is_default();
      EXPECT_GT(run.profile().compute_time_ns(), 1);
    }
    EXPECT_EQ(defaults, 1);
    EXPECT_TRUE(d.runs(0).is_default());
    EXPECT_EQ(valid, 40);
    EXPECT_EQ(errors, 2);  // floor(0.05 * 40)
    // Configurations genuinely differ.
    EXPECT_GT(s.worst_ns, s.best_ns);
    EXPECT_GT(static_cast<double>(s.worst_ns) / s.best_ns, 1.005);
  }
  EXPECT_EQ(splits, (std::set<std::string>{"train", "valid", "test"}));
}

TEST(SynthTest, SameSeedGivesIdenticalBytesWhateverTheThreadCount) {
  for (const std::string task : {"layout", "tile"}) {
    SCOPED_TRACE(task);
    TempDir a, b, d;
    RunSynthFor(Config(task, a.path()), 1);
    RunSynthFor(Config(task, b.path()), 3);
    SynthConfig other = Config(task, d.path());
    other.set_seed(6);
    RunSynthFor(other, 2);
    const auto fa = FilesUnder(a.path()), fb = FilesUnder(b.path()), fd = FilesUnder(d.path());
    ASSERT_EQ(fa.size(), fb.size());
    ASSERT_FALSE(fa.empty());
    for (size_t i = 0; i < fa.size(); ++i) {
      EXPECT_EQ(fa[i].substr(a.path().size()), fb[i].substr(b.path().size()));
      EXPECT_EQ(ReadFileToString(fa[i]).value(), ReadFileToString(fb[i]).value()) << fa[i];
    }
    ASSERT_FALSE(fd.empty());
    EXPECT_NE(ReadFileToString(fa[0]).value(), ReadFileToString(fd[0]).value());
  }
}

TEST(SynthTest, LayoutOutputStreamedEqualsProtobufSerialisation) {
  // The streamed writer must produce exactly what protobuf would serialise for the message.
  TempDir dir;
  SynthConfig c = Config("layout", dir.path());
  c.set_graphs(1);
  auto s = RunSynthFor(c, 2);
  ASSERT_EQ(s.size(), 1u);
  const std::string bytes = ReadFileToString(s[0].path).value();
  tpu_graphs::ModuleTuningData d;
  ASSERT_TRUE(d.ParseFromString(bytes));
  EXPECT_EQ(d.SerializeAsString(), bytes);
}

TEST(SynthTest, TileFilesAreValidTuningData) {
  TempDir dir;
  auto summaries = RunSynthFor(Config("tile", dir.path()), 2);
  ASSERT_EQ(summaries.size(), 8u);
  double max_spread = 0;
  for (const auto& s : summaries) {
    SCOPED_TRACE(s.path);
    EXPECT_NE(s.path.find("/pb/tile/synth/train/"), std::string::npos);
    tpu_graphs::TuningData t;
    ASSERT_TRUE(t.ParseFromString(ReadFileToString(s.path).value()));
    ASSERT_EQ(t.modules_size(), 1);
    const auto& m = t.modules(0);
    EXPECT_GT(m.runs_size(), 1);
    int defaults = 0, valid = 0;
    for (const auto& run : m.runs()) {
      ASSERT_TRUE(run.op_config().has_tile_size_config());  // also on error runs
      if (run.error()) continue;
      ++valid;
      defaults += run.is_default();
      EXPECT_GT(run.profile().compute_time_ns(), 1);
      EXPECT_GT(run.op_config().tile_size_config().output_bounds_size(), 0);
    }
    EXPECT_EQ(defaults, 1);
    EXPECT_GE(valid, 2);
    max_spread = std::max(max_spread, static_cast<double>(s.worst_ns) / s.best_ns);
  }
  EXPECT_GT(max_spread, 2.0);  // tile kernels differ by several x
}

TEST(SynthTest, FromRealUnetKeepsTheGraphAndItsConfigurableNodes) {
  TempDir dir;
  SynthConfig c = DefaultSynthConfig();
  c.set_from(RealDataPath("raw/module_tuning_data_layout.pb"));
  c.set_output(dir.File("unet.pb"));
  c.set_configs(60);
  ASSERT_TRUE(ValidateSynthConfig(&c).ok());
  auto s = RunSynthFor(c, 2);
  ASSERT_EQ(s.size(), 1u);
  tpu_graphs::ModuleTuningData original = ReadLayout(c.from());
  tpu_graphs::ModuleTuningData d = ReadLayout(dir.File("unet.pb"));
  EXPECT_EQ(d.module().SerializeAsString(), original.module().SerializeAsString());
  EXPECT_EQ(d.config_index_to_node_size(), 62);
  for (int i = 0; i < 62; ++i)
    EXPECT_EQ(d.config_index_to_node(i), original.config_index_to_node(i));
  EXPECT_EQ(s[0].configs, 60);
  // The modelled runtime of the real U-Net is of the order of its measured 0.91 s.
  EXPECT_GT(s[0].default_ns, 1e8);
  EXPECT_LT(s[0].default_ns, 1e10);
  const double spread = static_cast<double>(s[0].worst_ns) / s[0].best_ns - 1;
  EXPECT_GT(spread, 0.005);
  EXPECT_LT(spread, 0.5);
}

TEST(SynthTest, FromRealTileDumpMakesNewTileRuns) {
  TempDir dir;
  SynthConfig c = DefaultSynthConfig();
  c.set_from(RealDataPath("raw/op_tuning_data.pb"));
  c.set_output(dir.path());
  c.set_configs(20);
  ASSERT_TRUE(ValidateSynthConfig(&c).ok());
  auto s = RunSynthFor(c, 2);
  ASSERT_EQ(s.size(), 15u);
  for (const auto& g : s) EXPECT_GE(g.configs, 2) << g.name;
}

TEST(SynthTest, BadFromFileFailsAndWritesNothing) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.File("junk.pb"), "\x0a\xff\xff\xff garbage").ok());
  SynthConfig c = DefaultSynthConfig();
  c.set_from(dir.File("junk.pb"));
  c.set_output(dir.File("out.pb"));
  ASSERT_TRUE(ValidateSynthConfig(&c).ok());
  ThreadPool pool(1);
  auto r = RunSynth(c, &pool);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("junk.pb"), std::string::npos);
  EXPECT_EQ(dir.List(), std::vector<std::string>{"junk.pb"});
}

// The generated dumps go through the real raw-dump featurizer.
TEST(SynthIngestTest, LayoutOutputIngestsAndLooksLikeTheRelease) {
  TempDir dir;
  auto summaries = RunSynthFor(Config("layout", dir.path()), 2);
  for (const auto& s : summaries) {
    SCOPED_TRACE(s.path);
    ingest::RawDumpOptions o;
    o.collection = "layout:synth:random";
    o.split = "train";
    auto graphs = ingest::LoadRawDump(s.path, o);
    ASSERT_TRUE(graphs.ok()) << graphs.status().message();
    ASSERT_EQ(graphs->size(), 1u);
    const Graph& g = graphs->front();
    EXPECT_TRUE(ValidateGraph(g, s.path).ok());
    EXPECT_EQ(g.num_nodes(), s.nodes);
    EXPECT_EQ(g.num_configs, 40);  // error runs dropped
    EXPECT_EQ(g.num_config_nodes(), s.configurable);
    // node_splits mark the while bodies and conditions.
    EXPECT_GE(g.node_splits.size(), 2u);
    // Config feature values are -1 (default) or dims indices < 6, as in the release.
    ASSERT_TRUE(g.has_layout_configs());
    std::map<int, int> values;
    for (int8_t v : g.node_config_feat) values[v]++;
    EXPECT_GE(values.begin()->first, -1);
    EXPECT_LE(values.rbegin()->first, 5);
    EXPECT_GT(values[-1], 0);
    EXPECT_GT(values[0], 0);
    // Node features: the layout slots 134-139 hold permutations; each row has one type bit.
    const int64_t n = g.num_nodes();
    for (int64_t u = 0; u < n; ++u) {
      float types = 0;
      for (int k = 2; k <= 20; ++k) types += g.node_feat[u * 140 + k];
      EXPECT_EQ(types, 1.0f) << u;
    }
    // Edges point from consumers to earlier producers.
    for (int64_t e = 0; e < g.num_edges(); ++e)
      EXPECT_LT(g.edge_index[2 * e + 1], g.edge_index[2 * e]);
    const auto [mn, mx] = std::minmax_element(g.config_runtime.begin(), g.config_runtime.end());
    EXPECT_EQ(*mn, s.best_ns);
    EXPECT_EQ(*mx, s.worst_ns);
  }
}

TEST(SynthIngestTest, TileOutputIngests) {
  TempDir dir;
  auto summaries = RunSynthFor(Config("tile", dir.path()), 2);
  for (const auto& s : summaries) {
    SCOPED_TRACE(s.path);
    ingest::RawDumpOptions o;
    o.collection = "tile:synth";
    auto graphs = ingest::LoadRawDump(s.path, o);
    ASSERT_TRUE(graphs.ok()) << graphs.status().message();
    ASSERT_EQ(graphs->size(), 1u);
    const Graph& g = graphs->front();
    EXPECT_TRUE(ValidateGraph(g, s.path).ok());
    EXPECT_EQ(g.num_configs, s.configs);
    ASSERT_EQ(g.config_runtime_normalizers.size(), static_cast<size_t>(g.num_configs));
    EXPECT_EQ(g.config_runtime_normalizers[0], s.default_ns);
    // Output bounds are set: their sum (column 14) is positive for every config.
    for (int64_t c = 0; c < g.num_configs; ++c) EXPECT_GT(g.config_feat[c * 24 + 14], 0) << c;
  }
}

}  // namespace
}  // namespace tpugraphs::synth
