#include "tpugraphs/synth/ground_truth.h"

#include <google/protobuf/stubs/logging.h>

#include <cmath>

#include "tpugraphs/synth/synth.h"

namespace tpugraphs::synth {
namespace {

constexpr int kDims = 6;  // entries per tensor block and per tile bounds group

// The bounds of one 8-column group (6 values, sum, product) of a config_feat row.
Status DecodeGroup(const float* g, const std::string& what, const char* name,
                   std::vector<int64_t>* out) {
  out->clear();
  double sum = 0;
  for (int i = 0; i < kDims && g[i] != 0.0f; ++i) {
    if (!std::isfinite(g[i]) || g[i] < 1 || g[i] != std::floor(g[i])) {
      return InvalidArgumentError(what + ": " + name + " bound " + std::to_string(g[i]) +
                                  " is not a positive integer");
    }
    out->push_back(static_cast<int64_t>(g[i]));
    sum += g[i];
  }
  if (std::fabs(sum - g[kDims]) > 0.5) {
    return InvalidArgumentError(
        what + ": " + name + " bounds have more than 6 dimensions (their sum column " +
        std::to_string(g[kDims]) +
        " differs from the listed values'); the encoding cannot carry them");
  }
  return Status::Ok();
}

}  // namespace

bool IsPermutation(const std::vector<int64_t>& p, int64_t rank) {
  if (static_cast<int64_t>(p.size()) != rank) return false;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t d : p) {
    if (d < 0 || d >= rank || seen[static_cast<size_t>(d)]) return false;
    seen[static_cast<size_t>(d)] = true;
  }
  return true;
}

GroundTruth::~GroundTruth() = default;

Status DecodeTileFeatures(const float* feat, const std::string& what,
                          std::vector<int64_t>* kernel_bounds,
                          std::vector<int64_t>* output_bounds) {
  TPUG_RETURN_IF_ERROR(DecodeGroup(feat, what, "kernel", kernel_bounds));
  return DecodeGroup(feat + 8, what, "output", output_bounds);
}

StatusOr<std::unique_ptr<GroundTruth>> GroundTruth::Open(const std::string& path) {
  std::vector<xla::HloModuleProto> modules;
  std::vector<int64_t> config_nodes;
  bool is_tuning_data = false;
  {
    // ReadModules tries each message type in turn; a miss is not worth protobuf's log lines.
    google::protobuf::LogSilencer silence;
    TPUG_RETURN_IF_ERROR(ReadModules(path, &modules, &config_nodes, &is_tuning_data));
  }
  if (modules.size() != 1) {
    return InvalidArgumentError(path + ": holds " + std::to_string(modules.size()) +
                                " tile kernels; give a file with one kernel (synth writes one "
                                "per file into an output directory)");
  }
  std::unique_ptr<GroundTruth> gt(new GroundTruth());
  gt->path_ = path;
  gt->module_ = std::move(modules[0]);
  gt->task_ = is_tuning_data ? TaskKind::kTile : TaskKind::kLayout;
  TPUG_ASSIGN_OR_RETURN(ModuleAnalysis a, AnalyzeModule(gt->module_, path));
  gt->analysis_ = std::make_unique<ModuleAnalysis>(std::move(a));
  if (gt->task_ == TaskKind::kTile) {
    TPUG_ASSIGN_OR_RETURN(TileCostModel t, TileCostModel::Create(*gt->analysis_, path));
    gt->tile_ = std::make_unique<TileCostModel>(std::move(t));
    return gt;
  }
  // The configurable nodes as synth chose them (WriteLayoutTuningData's config_index_to_node).
  std::vector<int64_t> configurable = ConfigurableNodes(*gt->analysis_);
  if (!config_nodes.empty()) {
    for (int64_t v : config_nodes) {
      const auto n = static_cast<int64_t>(gt->analysis_->nodes.size());
      if (v < 0 || v >= n || gt->analysis_->nodes[v].operands.empty() ||
          !(gt->analysis_->nodes[v].cls == OpClass::kConvolution ||
            gt->analysis_->nodes[v].cls == OpClass::kDot ||
            gt->analysis_->nodes[v].cls == OpClass::kReshape)) {
        return InvalidArgumentError(path + ": config_index_to_node entry " + std::to_string(v) +
                                    " is not a convolution, dot or reshape with operands");
      }
    }
    configurable = config_nodes;
  }
  if (configurable.empty()) {
    return InvalidArgumentError(path +
                                ": the program has no configurable node (convolution, "
                                "dot, reshape): there are no layouts to price");
  }
  gt->layout_ = std::make_unique<LayoutCostModel>(*gt->analysis_, std::move(configurable));
  return gt;
}

const std::vector<int64_t>& GroundTruth::configurable() const {
  static const std::vector<int64_t> kEmpty;
  return layout_ ? layout_->configurable() : kEmpty;
}

int64_t GroundTruth::TensorRank(size_t i, int t) const {
  if (!layout_ || i >= layout_->configurable().size() || t < 0 || t >= layout_->NumTensors(i)) {
    return -1;
  }
  return layout_->TensorRank(i, t);
}

const std::vector<int64_t>& GroundTruth::tile_output_dims() const {
  static const std::vector<int64_t> kEmpty;
  return tile_ ? tile_->output_dims() : kEmpty;
}

const std::vector<int64_t>& GroundTruth::tile_kernel_dims() const {
  static const std::vector<int64_t> kEmpty;
  return tile_ ? tile_->kernel_dims() : kEmpty;
}

StatusOr<double> GroundTruth::LayoutCostNs(const int8_t* values, const std::string& what) const {
  if (!layout_) return FailedPreconditionError(path_ + " is a tile program, not a layout program");
  const size_t nc = layout_->configurable().size();
  std::vector<NodeLayout> config(nc);
  for (size_t i = 0; i < nc; ++i) {
    const int nt = layout_->NumTensors(i);
    config[i].resize(static_cast<size_t>(nt));
    for (int t = 0; t < 3; ++t) {
      const int8_t* block = values + i * kLayoutConfigFeatureCount + t * kDims;
      std::vector<int64_t> m2m;
      for (int d = 0; d < kDims && block[d] != -1; ++d) m2m.push_back(block[d]);
      if (m2m.empty()) continue;
      const std::string where =
          what + ": configurable node " + std::to_string(i) + " tensor " + std::to_string(t);
      if (t >= nt) {
        return InvalidArgumentError(where + " sets a layout but the node has only " +
                                    std::to_string(nt) + " tensors");
      }
      if (!IsPermutation(m2m, layout_->TensorRank(i, t))) {
        return InvalidArgumentError(where + ": layout is not a permutation of the " +
                                    std::to_string(layout_->TensorRank(i, t)) + " dimensions");
      }
      config[i][static_cast<size_t>(t)] = std::move(m2m);
    }
  }
  return layout_->RuntimeNs(config);
}

StatusOr<double> GroundTruth::TileCostNs(const float* feat, const std::string& what) const {
  if (!tile_) return FailedPreconditionError(path_ + " is a layout program, not a tile kernel");
  std::vector<int64_t> kernel, output;
  TPUG_RETURN_IF_ERROR(DecodeTileFeatures(feat, what, &kernel, &output));
  tpu_graphs::TileSizeConfig c;
  for (int64_t v : kernel) c.add_kernel_bounds(v);
  for (int64_t v : output) c.add_output_bounds(v);
  return tile_->RuntimeNs(c);
}

}  // namespace tpugraphs::synth
