// The featurizer on hand-made instructions (spec 3.1 rules and section 7 quirks), the feature
// name table, and docs/features.md being generated from it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>

#include "ingest/raw_test_util.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/ingest/feature_names.h"
#include "tpugraphs/ingest/node_features.h"
#include "tpugraphs/ingest/opcodes.h"

namespace tpugraphs::ingest {
namespace {

std::vector<float> Featurize(const xla::HloInstructionProto& inst, bool is_root = false) {
  std::vector<float> f(kNodeFeatureCount, -7.0f);
  FeaturizeInstruction(inst, is_root, f.data());
  return f;
}

int Column(const std::string& name) {
  const auto& names = NodeFeatureNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no feature " << name;
  return 0;
}

TEST(FeatureNames, CountsAndReleaseNames) {
  ASSERT_EQ(NodeFeatureNames().size(), 140u);
  ASSERT_EQ(TileConfigFeatureNames().size(), 24u);
  ASSERT_EQ(LayoutConfigFeatureNames().size(), 18u);
  const auto& n = NodeFeatureNames();
  // Spot checks against the release README's index list.
  EXPECT_EQ(n[0], "is_root");
  EXPECT_EQ(n[1], "element_size_in_bits");
  EXPECT_EQ(n[2], "shape_element_type_is_invalid_type");
  EXPECT_EQ(n[15], "shape_element_type_is_bf16");
  EXPECT_EQ(n[18], "shape_element_type_is_tuple");
  EXPECT_EQ(n[20], "shape_element_type_is_token");
  EXPECT_EQ(n[28], "shape_dimensions_product");
  EXPECT_EQ(n[29], "shape_tuple_shapes_size");
  EXPECT_EQ(n[36], "dimensions_5");
  EXPECT_EQ(n[92], "window_window_reversal_false_count");
  EXPECT_EQ(n[98], "convolution_dim_numbers_input_spatial_dims_3");
  EXPECT_EQ(n[106], "convolution_dim_numbers_output_feature_dim");
  EXPECT_EQ(n[112], "slice_dims_start_product");
  EXPECT_EQ(n[116], "slice_dims_stride_product");
  EXPECT_EQ(n[120], "slice_dims_limit_product");
  EXPECT_EQ(n[132], "padding_config_edge_padding_high_product");
  EXPECT_EQ(n[133], "is_stable");
  EXPECT_EQ(n[139], "layout_minor_to_major_5");
  EXPECT_EQ(TileConfigFeatureNames()[7], "kernel_bounds_product");
  EXPECT_EQ(TileConfigFeatureNames()[23], "input_bounds_product");
  EXPECT_EQ(LayoutConfigFeatureNames()[12], "kernel_layout_0");
  // Groups tile the columns without gaps.
  int next = 0;
  for (const auto& g : NodeFeatureGroups()) {
    EXPECT_EQ(g.first, next) << g.stem;
    next += g.width;
  }
  EXPECT_EQ(next, 140);
}

TEST(FeatureNames, DocsPageIsGeneratedFromTheTable) {
  const std::string path = tpugraphs::testing::SourcePath("docs/features.md");
  const std::string generated = FeaturesMarkdown();
  if (const char* update = std::getenv("TPUGRAPHS_UPDATE_DOCS"); update && *update == '1') {
    testing::WriteBytes(path, generated);
  }
  EXPECT_EQ(testing::ReadBytes(path), generated)
      << "docs/features.md is stale: run tools/dev/gen-features-doc.sh";
}

TEST(Opcodes, TableLookups) {
  EXPECT_EQ(OpcodeId("abs"), 1);
  EXPECT_EQ(OpcodeId("count-leading-zeros"), 19);
  EXPECT_EQ(OpcodeId("compare"), 20);
  EXPECT_EQ(OpcodeId("and"), 52);
  EXPECT_EQ(OpcodeId("convolution"), 26);
  EXPECT_EQ(OpcodeId("reshape"), 75);
  EXPECT_EQ(OpcodeId("trace"), 97);
  EXPECT_EQ(OpcodeId("tuple-select"), 101);
  EXPECT_EQ(OpcodeId("tan"), 120);
  EXPECT_EQ(OpcodeId("topk"), 0);
  EXPECT_EQ(OpcodeId("Add"), 0);
  EXPECT_EQ(OpcodeId(""), 0);
  for (int id = 1; id <= kMaxOpcodeId; ++id) EXPECT_EQ(OpcodeId(OpcodeName(id)), id);
}

TEST(Featurizer, PlainScalarHasEmptyProductsOfOne) {
  xla::HloInstructionProto inst;
  inst.mutable_shape()->set_element_type(xla::F32);
  const auto f = Featurize(inst);
  for (int i = 0; i < 140; ++i) {
    const bool one = i == 13 || i == 28 || i == 44 || i == 52 || i == 60 || i == 68 || i == 76 ||
                     i == 84 || i == 112 || i == 116 || i == 120 || i == 124 || i == 128 ||
                     i == 132;
    EXPECT_EQ(f[i], one ? 1.0f : 0.0f) << NodeFeatureNames()[i];
  }
}

TEST(Featurizer, ElementTypeSlots) {
  // enum value -> column (2 + slot); slot order 0..12, 16, 15, 18, 13, 14, 17.
  const std::vector<std::pair<int, int>> cases = {{0, 2},   {1, 3},   {12, 14}, {16, 15}, {15, 16},
                                                  {18, 17}, {13, 18}, {14, 19}, {17, 20}};
  for (auto [type, column] : cases) {
    xla::HloInstructionProto inst;
    inst.mutable_shape()->set_element_type(static_cast<xla::PrimitiveType>(type));
    const auto f = Featurize(inst);
    for (int c = 2; c <= 20; ++c) EXPECT_EQ(f[c], c == column ? 1.0f : 0.0f) << type;
  }
  for (int type : {19, 25, -1}) {  // newer XLA types: no slot
    xla::HloInstructionProto inst;
    inst.mutable_shape()->set_element_type(static_cast<xla::PrimitiveType>(type));
    const auto f = Featurize(inst);
    for (int c = 2; c <= 20; ++c) EXPECT_EQ(f[c], 0.0f) << type;
  }
}

TEST(Featurizer, WholeListAggregatesWithWrapAroundAndOneRounding) {
  xla::HloInstructionProto inst;
  auto* shape = inst.mutable_shape();
  for (int64_t d : {2, 3, 4, 5, 6, 7, 8}) shape->add_dimensions(d);  // 7 dims: 8 not shown
  shape->mutable_layout()->add_minor_to_major(1);
  const auto f = Featurize(inst, /*is_root=*/true);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], 0.0f);
  EXPECT_EQ(f[26], 7.0f);
  EXPECT_EQ(f[27], 35.0f);
  EXPECT_EQ(f[28], 40320.0f);
  EXPECT_EQ(f[134], 1.0f);

  // Products that overflow int64 wrap (two's complement) and are rounded to float once.
  xla::HloInstructionProto big;
  for (int i = 0; i < 3; ++i) big.mutable_shape()->add_dimensions(int64_t{1} << 30);
  big.mutable_shape()->add_dimensions(3);
  const auto g = Featurize(big);
  const uint64_t wrapped = (uint64_t{1} << 62) * 4 * 3;  // 2^90*3 mod 2^64 = 0
  EXPECT_EQ(g[28], static_cast<float>(static_cast<int64_t>(wrapped)));
  EXPECT_EQ(g[28], 0.0f);
  xla::HloInstructionProto odd;
  odd.mutable_shape()->add_dimensions(std::numeric_limits<int64_t>::max());
  odd.mutable_shape()->add_dimensions(3);
  const auto h = Featurize(odd);
  // max*3 wraps to max - 2 (= 2^63 - 3); float rounds it to 2^63. The sum max + 3 wraps to
  // min + 2, which rounds to -2^63.
  EXPECT_EQ(h[28], static_cast<float>(std::numeric_limits<int64_t>::max() - 2));
  EXPECT_EQ(h[27], -9223372036854775808.0f);
  // 2^24 + 1 is not a float: a single int64 -> float32 conversion rounds it to even.
  xla::HloInstructionProto r;
  r.mutable_shape()->add_dimensions((int64_t{1} << 24) + 1);
  EXPECT_EQ(Featurize(r)[21], 16777216.0f);
}

TEST(Featurizer, WindowReversalCountsAndTuple) {
  xla::HloInstructionProto inst;
  for (bool rev : {true, false, true, false, false, false, false, true}) {
    inst.mutable_window()->add_dimensions()->set_window_reversal(rev);
  }
  inst.mutable_shape()->set_element_type(xla::TUPLE);
  inst.mutable_shape()->add_tuple_shapes();
  inst.mutable_shape()->add_tuple_shapes();
  const auto f = Featurize(inst);
  EXPECT_EQ(std::vector<float>(f.begin() + 85, f.begin() + 93),
            (std::vector<float>{1, 0, 1, 0, 0, 0, 3, 5}));
  EXPECT_EQ(f[Column("shape_tuple_shapes_size")], 2.0f);
  EXPECT_EQ(f[Column("shape_element_type_is_tuple")], 1.0f);
  EXPECT_EQ(f[28], 1.0f);  // tuples have no dimensions: product 1
  EXPECT_EQ(f[44], 0.0f);  // 8 window sizes of 0: product 0
}

TEST(Featurizer, SliceDynamicSlicePadding) {
  xla::HloInstructionProto inst;
  for (int i = 0; i < 3; ++i) {
    auto* s = inst.add_slice_dimensions();
    s->set_start(i + 1);
    s->set_limit(10 * (i + 1));
    s->set_stride(2);
  }
  inst.add_dynamic_slice_sizes(4);
  auto* p = inst.mutable_padding_config()->add_dimensions();
  p->set_edge_padding_low(-1);
  p->set_edge_padding_high(5);
  p->set_interior_padding(9);  // not a feature
  inst.set_feature_group_count(2);
  inst.set_is_stable(true);
  const auto f = Featurize(inst);
  EXPECT_EQ(std::vector<float>(f.begin() + 109, f.begin() + 134),
            (std::vector<float>{1, 2, 6, 6,  2, 2,  6,  8, 10, 20, 60, 6000, 4,
                                0, 4, 4, -1, 0, -1, -1, 5, 0,  5,  5,  1}));
  EXPECT_EQ(f[107], 2.0f);
  EXPECT_EQ(f[108], 0.0f);  // absent batch_group_count is 0 (read as stored)
}

TEST(Featurizer, TileConfigEmptyListsGiveZeroProducts) {
  tpu_graphs::TileSizeConfig c;
  for (int64_t b : {1, 2, 3, 4, 5, 6, 7}) c.add_kernel_bounds(b);
  c.add_iteration_bounds(99);
  std::vector<float> f(24, -7.0f);
  FeaturizeTileConfig(c, f.data());
  EXPECT_EQ(f, (std::vector<float>{1, 2, 3, 4, 5, 6, 28, 5040, 0, 0, 0, 0,
                                   0, 0, 0, 0, 0, 0, 0,  0,    0, 0, 0, 0}));
}

TEST(Featurizer, LayoutNodePaddingAndTruncation) {
  tpu_graphs::LayoutConfig::NodeLayoutConfig node;
  auto* t0 = node.add_tensors();
  for (int d : {0, 1, 2, 3, 4, 5, 6}) t0->add_dims(d);  // 7 dims: the 7th is dropped
  node.add_tensors();                                   // empty: compiler's choice
  node.add_tensors()->add_dims(1);
  int8_t out[18];
  ASSERT_TRUE(FeaturizeLayoutNode(node, "x", out).ok());
  EXPECT_EQ(std::vector<int8_t>(out, out + 18),
            (std::vector<int8_t>{0, 1, 2, 3, 4, 5, -1, -1, -1, -1, -1, -1, 1, -1, -1, -1, -1, -1}));
  node.add_tensors();
  EXPECT_FALSE(FeaturizeLayoutNode(node, "x", out).ok());
}

}  // namespace
}  // namespace tpugraphs::ingest
