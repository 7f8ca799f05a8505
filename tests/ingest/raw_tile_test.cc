// The real tile dump (TuningData, 15 kernels) ingests to the values of ingest-spec 8.2.
#include <gtest/gtest.h>

#include <map>

#include "ingest/raw_test_util.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/ingest/raw_dump.h"

namespace tpugraphs::ingest {
namespace {

const std::vector<Graph>& TileGraphs() {
  static const std::vector<Graph>* graphs = [] {
    auto loaded = LoadRawDump(testing::TileDumpPath(), {});
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    return new std::vector<Graph>(loaded.ok() ? std::move(*loaded) : std::vector<Graph>{});
  }();
  return *graphs;
}

const Graph* Find(const std::string& kernel) {
  for (const Graph& g : TileGraphs()) {
    if (g.name == "op_tuning_data_" + kernel) return &g;
  }
  return nullptr;
}

TEST(RawTile, DetectedAsTuningData) {
  auto kind = DetectRawDumpKind(testing::ReadBytes(testing::TileDumpPath()), "tile.pb");
  ASSERT_TRUE(kind.ok()) << kind.status().ToString();
  EXPECT_EQ(*kind, RawDumpKind::kTuningData);
}

struct KernelRow {
  const char* name;
  int64_t nodes, edges, configs, normalizer;
};

TEST(RawTile, FifteenKernelsOfTheSpecTable) {
  const std::vector<KernelRow> table = {
      {"fusion.232", 20, 19, 61, 57188}, {"fusion.191", 31, 32, 579, 151565},
      {"fusion.261", 52, 51, 16, 94192}, {"fusion.209", 56, 58, 16, 46351},
      {"fusion.205", 30, 30, 16, 45021}, {"fusion.245", 21, 20, 23, 13665},
      {"copy.24", 2, 1, 10, 3967},       {"copy.25", 2, 1, 11, 7310},
      {"fusion.181", 7, 6, 5, 1447},     {"fusion.207", 44, 49, 3, 1635},
      {"fusion.206", 13, 12, 3, 1244},   {"fusion.250", 10, 9, 2, 598},
      {"reshape.37", 2, 1, 3, 270591},   {"reshape.39", 2, 1, 2, 5664},
      {"reshape.38", 2, 1, 2, 4358}};
  ASSERT_EQ(TileGraphs().size(), 15u);
  for (size_t i = 0; i < table.size(); ++i) {
    const KernelRow& row = table[i];
    SCOPED_TRACE(row.name);
    const Graph& g = TileGraphs()[i];  // file order is kept
    EXPECT_EQ(g.name, std::string("op_tuning_data_") + row.name);
    EXPECT_EQ(g.collection, "tile:xla");
    EXPECT_TRUE(g.is_tile());
    EXPECT_EQ(g.num_nodes(), row.nodes);
    EXPECT_EQ(g.num_edges(), row.edges);
    EXPECT_EQ(g.num_configs, row.configs);
    EXPECT_EQ(g.config_runtime.size(), static_cast<size_t>(row.configs));
    EXPECT_EQ(g.config_feat.size(), static_cast<size_t>(row.configs) * 24);
    EXPECT_EQ(g.config_runtime_normalizers,
              std::vector<int64_t>(static_cast<size_t>(row.configs), row.normalizer));
    EXPECT_TRUE(g.node_splits.empty());
    EXPECT_TRUE(g.node_config_ids.empty());
    EXPECT_TRUE(ValidateGraph(g, row.name).ok()) << ValidateGraph(g, row.name).ToString();
  }
}

TEST(RawTile, Fusion181ValueForValue) {
  const Graph* g = Find("fusion.181");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->node_opcode, (std::vector<uint8_t>{24, 24, 77, 24, 13, 20, 41}));
  EXPECT_EQ(g->edge_index, (std::vector<int64_t>{2, 0, 2, 1, 4, 3, 5, 2, 5, 4, 6, 5}));
  std::vector<float> row0(24, 0.0f);
  row0[8] = 2;
  row0[9] = 32;
  row0[14] = 34;
  row0[15] = 64;
  EXPECT_EQ(std::vector<float>(g->config_feat.begin(), g->config_feat.begin() + 24), row0);
  EXPECT_EQ(g->config_runtime, (std::vector<int64_t>{1447, 12302, 6991, 3178, 2384}));
  EXPECT_EQ(g->config_runtime_normalizers, std::vector<int64_t>(5, 1447));
}

TEST(RawTile, EmptyBoundsGiveZeroRows) {
  const Graph* g = Find("reshape.37");
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->num_configs, 3);
  EXPECT_EQ(g->config_feat, std::vector<float>(3 * 24, 0.0f));
}

TEST(RawTile, Fusion191DropsItsTwoErrorRuns) {
  const Graph* g = Find("fusion.191");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->num_configs, 579);
  for (int64_t r : g->config_runtime) EXPECT_GT(r, 1);
}

TEST(RawTile, OpcodeHistogram) {
  const std::map<int, int> expected = {
      {2, 8},  {11, 4},  {13, 38}, {20, 7},  {24, 30}, {25, 7},  {26, 4}, {27, 2}, {32, 3},
      {37, 4}, {41, 18}, {48, 6},  {52, 2},  {54, 1},  {57, 2},  {59, 9}, {60, 1}, {63, 109},
      {70, 8}, {75, 3},  {77, 1},  {83, 10}, {87, 3},  {95, 10}, {100, 4}};
  std::map<int, int> hist;
  int total = 0;
  for (const Graph& g : TileGraphs()) {
    for (uint8_t op : g.node_opcode) ++hist[op];
    total += static_cast<int>(g.num_nodes());
  }
  EXPECT_EQ(hist, expected);
  EXPECT_EQ(total, 294);
}

TEST(RawTile, NamePrefixOptionAndCollection) {
  RawDumpOptions options;
  options.name = "resnet";
  options.collection = "tile:xla";
  options.split = "train";
  auto graphs = LoadRawDump(testing::TileDumpPath(), options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
  EXPECT_EQ((*graphs)[0].name, "resnet_fusion.232");
  EXPECT_EQ((*graphs)[0].split, "train");
}

TEST(RawTile, LayoutCollectionIsRejected) {
  RawDumpOptions options;
  options.collection = "layout:xla:default";
  auto graphs = LoadRawDump(testing::TileDumpPath(), options);
  ASSERT_FALSE(graphs.ok());
  EXPECT_NE(graphs.status().message().find("op_tuning_data.pb: a tile dump"), std::string::npos)
      << graphs.status().message();
}

TEST(RawTile, NormalizerIsKeyedByModuleName) {
  // Two kernels with the same module name: both get the normalizer of the one loaded last, and
  // the names stay unique.
  auto tuning = testing::ParseTileDump();
  auto* copy = tuning.add_modules();
  *copy = tuning.modules(8);  // fusion.181, default 1447
  for (auto& run : *copy->mutable_runs()) {
    if (run.is_default()) run.mutable_profile()->set_compute_time_ns(2000);
  }
  tpugraphs::testing::TempDir dir;
  testing::WriteBytes(dir.File("dup.pb"), tuning.SerializeAsString());
  auto graphs = LoadRawDump(dir.File("dup.pb"), {});
  ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
  ASSERT_EQ(graphs->size(), 16u);
  EXPECT_EQ((*graphs)[8].name, "dup_fusion.181");
  EXPECT_EQ((*graphs)[15].name, "dup_fusion.181_2");
  EXPECT_EQ((*graphs)[8].config_runtime_normalizers, std::vector<int64_t>(5, 2000));
  EXPECT_EQ((*graphs)[15].config_runtime_normalizers, std::vector<int64_t>(5, 2000));
}

TEST(RawTile, KernelFilters) {
  auto tuning = testing::ParseTileDump();
  // Kernel 0: one run only -> skipped. Kernel 1: a run without tile_size_config -> skipped.
  tuning.mutable_modules(0)->mutable_runs()->DeleteSubrange(1, 60);
  tuning.mutable_modules(1)->mutable_runs(3)->mutable_op_config()->clear_tile_size_config();
  tpugraphs::testing::TempDir dir;
  testing::WriteBytes(dir.File("f.pb"), tuning.SerializeAsString());
  auto graphs = LoadRawDump(dir.File("f.pb"), {});
  ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
  ASSERT_EQ(graphs->size(), 13u);
  EXPECT_EQ((*graphs)[0].name, "f_fusion.261");
}

TEST(RawTile, SingleKernelModuleTuningData) {
  auto tuning = testing::ParseTileDump();
  tpugraphs::testing::TempDir dir;
  testing::WriteBytes(dir.File("k.pb"), tuning.modules(8).SerializeAsString());
  auto graphs = LoadRawDump(dir.File("k.pb"), {});
  ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
  ASSERT_EQ(graphs->size(), 1u);
  EXPECT_EQ((*graphs)[0].name, "k");
  EXPECT_EQ((*graphs)[0].config_runtime, (std::vector<int64_t>{1447, 12302, 6991, 3178, 2384}));
}

}  // namespace
}  // namespace tpugraphs::ingest
