// The real layout dump (ModuleTuningData) ingests to exactly the arrays of ingest-spec 8.1.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "ingest/raw_test_util.h"
#include "testing/test_util.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/ingest/raw_dump.h"

namespace tpugraphs::ingest {
namespace {

using ::tpugraphs::testing::RealDataPath;

const Graph& LayoutGraph() {
  static const Graph* graph = [] {
    auto graphs = LoadRawDump(RealDataPath("raw/module_tuning_data_layout.pb"), {});
    EXPECT_TRUE(graphs.ok()) << graphs.status().ToString();
    EXPECT_EQ(graphs->size(), 1u);
    return new Graph(std::move((*graphs)[0]));
  }();
  return *graph;
}

std::vector<float> Row(const Graph& g, int64_t u) {
  return std::vector<float>(g.node_feat.begin() + u * kNodeFeatureCount,
                            g.node_feat.begin() + (u + 1) * kNodeFeatureCount);
}

std::vector<float> Sparse(const std::map<int, float>& nz) {
  std::vector<float> v(kNodeFeatureCount, 0.0f);
  for (auto [i, x] : nz) v[i] = x;
  return v;
}

TEST(RawLayout, DetectedAsModuleTuningData) {
  auto bytes = testing::ReadBytes(testing::LayoutDumpPath());
  auto kind = DetectRawDumpKind(bytes, "layout.pb");
  ASSERT_TRUE(kind.ok()) << kind.status().ToString();
  EXPECT_EQ(*kind, RawDumpKind::kModuleTuningData);
}

TEST(RawLayout, GraphShape) {
  const Graph& g = LayoutGraph();
  EXPECT_EQ(g.name, "module_tuning_data_layout");
  EXPECT_EQ(g.collection, "layout:xla:custom");
  EXPECT_TRUE(g.is_layout());
  EXPECT_EQ(g.num_nodes(), 3163);
  EXPECT_EQ(g.num_edges(), 5112);
  EXPECT_EQ(g.node_feat.size(), 3163u * 140);
  EXPECT_EQ(g.node_splits, (std::vector<int64_t>{0, 449, 453, 467, 471, 498, 502, 3163}));
  EXPECT_TRUE(ValidateGraph(g, "layout").ok());
}

TEST(RawLayout, ConfigurableNodesAreConvolutionsAndReshapes) {
  const Graph& g = LayoutGraph();
  ASSERT_EQ(g.num_config_nodes(), 62);
  int conv = 0, reshape = 0;
  for (int64_t u : g.node_config_ids) {
    conv += g.node_opcode[u] == 26;
    reshape += g.node_opcode[u] == 75;
  }
  EXPECT_EQ(conv, 53);
  EXPECT_EQ(reshape, 9);
  EXPECT_TRUE(std::is_sorted(g.node_config_ids.begin(), g.node_config_ids.end()));
  EXPECT_EQ(g.node_config_ids[0], 443);
  EXPECT_EQ(g.node_config_ids[1], 461);
  EXPECT_EQ(g.node_config_ids[2], 488);
  EXPECT_EQ(g.node_config_ids[3], 652);
  EXPECT_EQ(g.node_config_ids[4], 660);
  EXPECT_EQ(g.node_config_ids[61], 3143);
  // Every convolution and every reshape of the module is configurable.
  EXPECT_EQ(std::count(g.node_opcode.begin(), g.node_opcode.end(), 26), 53);
  EXPECT_EQ(std::count(g.node_opcode.begin(), g.node_opcode.end(), 75), 9);
}

TEST(RawLayout, Configs) {
  const Graph& g = LayoutGraph();
  ASSERT_EQ(g.num_configs, 112);
  ASSERT_EQ(g.config_runtime.size(), 112u);
  EXPECT_EQ(*std::min_element(g.config_runtime.begin(), g.config_runtime.end()), 910876401);
  EXPECT_EQ(*std::max_element(g.config_runtime.begin(), g.config_runtime.end()), 925642328);
  // Proto order of valid runs: run 0 is the default.
  EXPECT_EQ(g.config_runtime[0], 910903932);
  EXPECT_TRUE(g.config_runtime_normalizers.empty());
  EXPECT_TRUE(g.config_feat.empty());
  ASSERT_EQ(g.node_config_feat.size(), 112u * 62 * 18);
  std::set<int> values(g.node_config_feat.begin(), g.node_config_feat.end());
  EXPECT_EQ(values, (std::set<int>{-1, 0, 1, 2, 3, 4}));
  std::set<std::vector<int8_t>> distinct;
  for (int c = 0; c < 112; ++c) {
    distinct.emplace(g.node_config_feat.begin() + c * 62 * 18,
                     g.node_config_feat.begin() + (c + 1) * 62 * 18);
  }
  EXPECT_EQ(distinct.size(), 91u);
}

TEST(RawLayout, OpcodeHistogram) {
  const std::map<int, int> expected = {
      {2, 389}, {5, 67},  {12, 12},  {13, 383}, {19, 2},   {20, 71}, {22, 4},   {24, 53}, {25, 183},
      {26, 53}, {31, 6},  {32, 125}, {35, 7},   {36, 3},   {37, 2},  {45, 253}, {48, 22}, {52, 8},
      {53, 2},  {54, 10}, {57, 19},  {58, 4},   {59, 589}, {60, 3},  {63, 287}, {66, 2},  {70, 87},
      {72, 3},  {75, 9},  {81, 14},  {83, 193}, {84, 3},   {87, 4},  {88, 3},   {89, 6},  {92, 12},
      {93, 1},  {94, 65}, {95, 192}, {100, 9},  {102, 3}};
  std::map<int, int> hist;
  for (uint8_t op : LayoutGraph().node_opcode) ++hist[op];
  EXPECT_EQ(hist, expected);
}

TEST(RawLayout, NodeFeatureRows) {
  const Graph& g = LayoutGraph();
  const std::map<int, float> base = {{13, 1},  {28, 1},  {44, 1},  {52, 1},  {60, 1},
                                     {68, 1},  {76, 1},  {84, 1},  {112, 1}, {116, 1},
                                     {120, 1}, {124, 1}, {128, 1}, {132, 1}};
  EXPECT_EQ(Row(g, 0), Sparse(base));
  EXPECT_EQ(g.node_opcode[0], 63);
  auto row1 = base;
  row1[30] = 1;
  EXPECT_EQ(Row(g, 1), Sparse(row1));
  auto row2 = base;
  row2[0] = 1;
  EXPECT_EQ(Row(g, 2), Sparse(row2));
  EXPECT_EQ(g.node_opcode[2], 2);

  const std::vector<float> row660 = {
      0, 0,  0,  0,  0,  0, 0,   0,        0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0,  // 0-20
      2, 96, 96, 96, 32, 0, 322, 56623104, 0, 0,                                   // 21-30
      0, 0,  0,  0,  0,  0,                                                        // 31-36
      3, 3,  3,  0,  0,  0, 9,   27,                                               // window size
      1, 1,  1,  0,  0,  0, 3,   1,                                                // stride
      1, 1,  1,  0,  0,  0, 3,   1,                                                // padding low
      1, 1,  1,  0,  0,  0, 3,   1,                                                // padding high
      1, 1,  1,  0,  0,  0, 3,   1,                           // window dilation
      1, 1,  1,  0,  0,  0, 3,   1,                           // base dilation
      0, 0,  0,  0,  0,  0, 0,   3,                           // reversal
      0, 4,  1,  2,  3,  0, 3,   4,        0, 1, 2, 0, 0, 4,  // conv dims 93-106
      1, 1,                                                   // group counts
      0, 0,  0,  1,  0,  0, 0,   1,        0, 0, 0, 1,        // slice
      0, 0,  0,  1,                                           // dynamic slice
      0, 0,  0,  1,  0,  0, 0,   1,                           // padding config
      0,                                                      // is_stable
      4, 3,  2,  1,  0,  0};                                  // minor_to_major
  ASSERT_EQ(row660.size(), 140u);
  EXPECT_EQ(Row(g, 660), row660);
  EXPECT_EQ(g.node_opcode[660], 26);
}

TEST(RawLayout, FirstEdges) {
  const Graph& g = LayoutGraph();
  const std::vector<int64_t> expected = {2, 0, 2,  1, 5,  3,  5,  4,  8,  6,
                                         8, 7, 11, 9, 11, 10, 14, 12, 14, 13};
  EXPECT_EQ(std::vector<int64_t>(g.edge_index.begin(), g.edge_index.begin() + 20), expected);
}

TEST(RawLayout, EdgesSortedProducerBeforeConsumer) {
  const Graph& g = LayoutGraph();
  for (int64_t e = 0; e < g.num_edges(); ++e) {
    EXPECT_LT(g.edge_index[2 * e + 1], g.edge_index[2 * e]) << "edge " << e;
    if (e > 0) {
      const auto prev = std::make_pair(g.edge_index[2 * e - 2], g.edge_index[2 * e - 1]);
      const auto cur = std::make_pair(g.edge_index[2 * e], g.edge_index[2 * e + 1]);
      EXPECT_LT(prev, cur) << "edge " << e;
    }
  }
}

}  // namespace
}  // namespace tpugraphs::ingest
