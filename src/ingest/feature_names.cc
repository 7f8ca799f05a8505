#include "tpugraphs/ingest/feature_names.h"

#include <array>
#include <sstream>

#include "tpugraphs/common/graph.h"

namespace tpugraphs::ingest {
namespace {

using E = FeatureEncoding;

// Slot order of the element-type one-hot (ingest-spec 3.2): enum values 0..12, then 16, 15, 18,
// 13, 14, 17.
constexpr std::array<std::string_view, 19> kElementTypeSuffixes = {
    "invalid_type", "pred", "s8",  "s16",  "s32", "s64",  "u8",    "u16",         "u32",  "u64",
    "f16",          "f32",  "f64", "bf16", "c64", "c128", "tuple", "opaque_type", "token"};

std::vector<FeatureGroup> MakeNodeGroups() {
  return {
      {0, 1, "is_root", E::kScalar, "instruction id == its computation's root_id",
       "One root per computation (fused, reducer and loop bodies included)."},
      {1, 1, "element_size_in_bits", E::kScalar, "(none)",
       "Always 0: the release writes a literal 0 and never reads LayoutProto field 7."},
      {2, 19, "shape_element_type_is", E::kOneHot, "shape.element_type (2)",
       "Slot order by enum value: 0-12, 16, 15, 18, 13, 14, 17. Values >= 19 set no slot."},
      {21, 8, "shape_dimensions", E::kSeq, "shape.dimensions (3)",
       "Scalars and tuples have an empty list: product 1."},
      {29, 1, "shape_tuple_shapes_size", E::kScalar, "shape.tuple_shapes (4)",
       "Top-level count only."},
      {30, 1, "parameter_number", E::kScalar, "parameter_number (9)", "0 for non-parameters."},
      {31, 6, "dimensions", E::kSeqNoAgg, "dimensions (14)",
       "Reshape, reduce, broadcast, transpose, ... dimensions."},
      {37, 8, "window_size", E::kSeq, "window.dimensions[].size (15.1)",
       "No window: zeros and product 1."},
      {45, 8, "window_stride", E::kSeq, "window.dimensions[].stride", ""},
      {53, 8, "window_padding_low", E::kSeq, "window.dimensions[].padding_low", ""},
      {61, 8, "window_padding_high", E::kSeq, "window.dimensions[].padding_high", ""},
      {69, 8, "window_window_dilation", E::kSeq, "window.dimensions[].window_dilation", ""},
      {77, 8, "window_base_dilation", E::kSeq, "window.dimensions[].base_dilation", ""},
      {85, 8, "window_window_reversal", E::kBools, "window.dimensions[].window_reversal",
       "Counts cover every window dimension."},
      {93, 1, "convolution_dim_numbers_input_batch_dim", E::kScalar,
       "convolution_dimension_numbers.input_batch_dimension (16.7)", ""},
      {94, 1, "convolution_dim_numbers_input_feature_dim", E::kScalar,
       "convolution_dimension_numbers.input_feature_dimension (16.8)", ""},
      {95, 4, "convolution_dim_numbers_input_spatial_dims", E::kSeqNoAgg,
       "convolution_dimension_numbers.input_spatial_dimensions (16.11)", ""},
      {99, 1, "convolution_dim_numbers_kernel_input_feature_dim", E::kScalar,
       "convolution_dimension_numbers.kernel_input_feature_dimension (16.3)", ""},
      {100, 1, "convolution_dim_numbers_kernel_output_feature_dim", E::kScalar,
       "convolution_dimension_numbers.kernel_output_feature_dimension (16.4)", ""},
      {101, 4, "convolution_dim_numbers_kernel_spatial_dims", E::kSeqNoAgg,
       "convolution_dimension_numbers.kernel_spatial_dimensions (16.6)", ""},
      {105, 1, "convolution_dim_numbers_output_batch_dim", E::kScalar,
       "convolution_dimension_numbers.output_batch_dimension (16.9)", ""},
      {106, 1, "convolution_dim_numbers_output_feature_dim", E::kScalar,
       "convolution_dimension_numbers.output_feature_dimension (16.10)", ""},
      {107, 1, "feature_group_count", E::kScalar, "feature_group_count (50)",
       "As stored: 0 when the field is absent."},
      {108, 1, "batch_group_count", E::kScalar, "batch_group_count (58)", "As stored."},
      {109, 4, "slice_dims_start", E::kSeq, "slice_dimensions[].start (17.1)", ""},
      {113, 4, "slice_dims_stride", E::kSeq, "slice_dimensions[].stride (17.3)", ""},
      {117, 4, "slice_dims_limit", E::kSeq, "slice_dimensions[].limit (17.2)", ""},
      {121, 4, "dynamic_slice_sizes", E::kSeq, "dynamic_slice_sizes (20)", ""},
      {125, 4, "padding_config_edge_padding_low", E::kSeq,
       "padding_config.dimensions[].edge_padding_low (21.1.1)", ""},
      {129, 4, "padding_config_edge_padding_high", E::kSeq,
       "padding_config.dimensions[].edge_padding_high (21.1.2)", ""},
      {133, 1, "is_stable", E::kScalar, "is_stable (60)", "Sort stability flag."},
      {134, 6, "layout_minor_to_major", E::kSeqNoAgg, "shape.layout.minor_to_major (3.5.1)",
       "Zeros for tuples (no layout)."},
  };
}

std::vector<FeatureGroup> MakeTileGroups() {
  constexpr std::string_view kEmpty = "An empty list gives 8 zeros (product 0).";
  return {
      {0, 8, "kernel_bounds", E::kSeq, "tile_size_config.kernel_bounds (1)", kEmpty},
      {8, 8, "output_bounds", E::kSeq, "tile_size_config.output_bounds (2)", kEmpty},
      {16, 8, "input_bounds", E::kSeq, "tile_size_config.input_bounds (3)", kEmpty},
  };
}

std::vector<FeatureGroup> MakeLayoutGroups() {
  constexpr std::string_view kPad = "Missing tensors and dimensions beyond the list are -1.";
  return {
      {0, 6, "output_layout", E::kSeqNoAgg, "layout_config.nodes[k].tensors[0].dims", kPad},
      {6, 6, "input_layout", E::kSeqNoAgg, "layout_config.nodes[k].tensors[1].dims", kPad},
      {12, 6, "kernel_layout", E::kSeqNoAgg, "layout_config.nodes[k].tensors[2].dims", kPad},
  };
}

std::vector<std::string> Expand(const std::vector<FeatureGroup>& groups) {
  std::vector<std::string> names;
  for (const FeatureGroup& g : groups) {
    const std::string stem(g.stem);
    switch (g.encoding) {
      case E::kScalar:
        names.push_back(stem);
        break;
      case E::kOneHot:
        for (int i = 0; i < g.width; ++i) {
          names.push_back(stem + "_" + std::string(kElementTypeSuffixes[i]));
        }
        break;
      case E::kSeqNoAgg:
        for (int i = 0; i < g.width; ++i) names.push_back(stem + "_" + std::to_string(i));
        break;
      case E::kSeq:
        for (int i = 0; i < g.width - 2; ++i) names.push_back(stem + "_" + std::to_string(i));
        names.push_back(stem + "_sum");
        names.push_back(stem + "_product");
        break;
      case E::kBools:
        for (int i = 0; i < g.width - 2; ++i) names.push_back(stem + "_" + std::to_string(i));
        names.push_back(stem + "_true_count");
        names.push_back(stem + "_false_count");
        break;
    }
  }
  return names;
}

std::string_view EncodingText(E e) {
  switch (e) {
    case E::kScalar:
      return "value";
    case E::kOneHot:
      return "one-hot";
    case E::kSeq:
      return "first values, sum, product";
    case E::kSeqNoAgg:
      return "first values";
    case E::kBools:
      return "first flags, true count, false count";
  }
  return "";
}

void AppendTable(std::ostringstream& out, const std::vector<FeatureGroup>& groups,
                 const std::vector<std::string>& names) {
  out << "| index | name | read from | encoding | notes |\n|---|---|---|---|---|\n";
  for (const FeatureGroup& g : groups) {
    for (int i = 0; i < g.width; ++i) {
      const int col = g.first + i;
      out << "| " << col << " | `" << names[col] << "` | ";
      if (i == 0) {
        out << g.source << " | " << EncodingText(g.encoding) << " | " << g.notes << " |\n";
      } else {
        out << " | | |\n";
      }
    }
  }
}

}  // namespace

const std::vector<FeatureGroup>& NodeFeatureGroups() {
  static const auto* groups = new std::vector<FeatureGroup>(MakeNodeGroups());
  return *groups;
}
const std::vector<FeatureGroup>& TileConfigFeatureGroups() {
  static const auto* groups = new std::vector<FeatureGroup>(MakeTileGroups());
  return *groups;
}
const std::vector<FeatureGroup>& LayoutConfigFeatureGroups() {
  static const auto* groups = new std::vector<FeatureGroup>(MakeLayoutGroups());
  return *groups;
}

const std::vector<std::string>& NodeFeatureNames() {
  static const auto* names = new std::vector<std::string>(Expand(NodeFeatureGroups()));
  return *names;
}
const std::vector<std::string>& TileConfigFeatureNames() {
  static const auto* names = new std::vector<std::string>(Expand(TileConfigFeatureGroups()));
  return *names;
}
const std::vector<std::string>& LayoutConfigFeatureNames() {
  static const auto* names = new std::vector<std::string>(Expand(LayoutConfigFeatureGroups()));
  return *names;
}

std::string FeaturesMarkdown() {
  std::ostringstream out;
  out << "# Features\n\n"
         "<!-- Generated from src/ingest/feature_names.cc by tools/dev/gen-features-doc.sh. "
         "Do not edit by hand. -->\n\n"
         "`tpugraphs ingest` computes, from a raw XLA dump, the same feature columns as the "
         "TpuGraphs release: "
      << kNodeFeatureCount << " node features (`node_feat`), " << kTileConfigFeatureCount
      << " tile config features (`config_feat`) and " << kLayoutConfigFeatureCount
      << " layout config features per configurable node (`node_config_feat`). The rules, "
         "quirks included, are summarised below; docs/raw-dumps.md describes the input files.\n\n"
         "Arithmetic: sums and products run over the whole proto list (also when only the "
         "first values get a column) in 64-bit two's-complement integers, and each result is "
         "converted to float32 once. The product of an empty list is 1 for node features and 0 "
         "for tile config features. Field numbers of the proto fields read are given in "
         "parentheses.\n\n"
         "Encodings: *first values* are the first L list entries, zero padded (layout config: "
         "padded with -1); *sum*/*product* aggregate the whole list; *one-hot* sets the slot of "
         "the element type.\n\n"
         "## Node features (node_feat, "
      << kNodeFeatureCount << " columns)\n\n";
  AppendTable(out, NodeFeatureGroups(), NodeFeatureNames());
  out << "\n## Tile config features (config_feat, " << kTileConfigFeatureCount
      << " columns)\n\nRead from each valid run's `op_config.tile_size_config`; "
         "`iteration_bounds` is ignored.\n\n";
  AppendTable(out, TileConfigFeatureGroups(), TileConfigFeatureNames());
  out << "\n## Layout config features (node_config_feat, " << kLayoutConfigFeatureCount
      << " columns per configurable node)\n\nRead from each valid run's "
         "`module_config.layout_config.nodes[k]` for the k-th entry of `node_config_ids`. A "
         "value is a dimension index in minor-to-major order; -1 means \"the compiler "
         "chooses\". At most 3 tensors (output, input, kernel) and 6 dimensions per tensor.\n\n";
  AppendTable(out, LayoutConfigFeatureGroups(), LayoutConfigFeatureNames());
  return out.str();
}

}  // namespace tpugraphs::ingest
