// The featurizer: one HLO instruction -> 140 node features, one TileSizeConfig -> 24 tile config
// features, one layout-config node -> 18 layout config features. Column order and names are in
// feature_names.h; the rules are ingest-spec sections 3, 5 and 6 (quirks included: int64
// wrap-around sums and products over whole lists, one int64 -> float32 rounding per value, empty
// products 1 for nodes and 0 for tile configs, element_size_in_bits always 0).
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_INGEST_NODE_FEATURES_H_
#define TPUGRAPHS_INGEST_NODE_FEATURES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpu_graphs/tuning.pb.h"
#include "tpugraphs/common/status.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::ingest {

// Writes kNodeFeatureCount floats to `out`. `is_root`: the instruction is the root of its
// computation.
void FeaturizeInstruction(const xla::HloInstructionProto& inst, bool is_root, float* out);

// Writes kTileConfigFeatureCount floats to `out`.
void FeaturizeTileConfig(const tpu_graphs::TileSizeConfig& config, float* out);

// The same kTileConfigFeatureCount floats from the three bounds lists of a TileSizeConfig held
// as plain vectors (a config decoded from the wire without protobuf objects).
void FeaturizeTileBounds(const std::vector<int64_t>& kernel_bounds,
                         const std::vector<int64_t>& output_bounds,
                         const std::vector<int64_t>& input_bounds, float* out);

// Writes kLayoutConfigFeatureCount values to `out` (-1 = unset). InvalidArgument (prefixed with
// `what`) if the node has more than 3 tensors or a value does not fit int8.
Status FeaturizeLayoutNode(const tpu_graphs::LayoutConfig::NodeLayoutConfig& node,
                           const std::string& what, int8_t* out);

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_NODE_FEATURES_H_
