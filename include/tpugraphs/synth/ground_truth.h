// The synthetic cost model as ground truth for configurations given in the release encoding
// (docs/synth.md, "Scoring configurations"): `tpugraphs synth --score` and
// `tpugraphs tune --oracle synthetic` price configurations of a program that `synth` wrote with
// the same noise-free runtime synth recorded for its own runs (cost_model.h).
//
// A layout configuration is [nc, 18] int8 values (docs/features.md): for configurable node i and
// tensor t (output, input, kernel), the entries of block t up to the first -1 are that tensor's
// minor_to_major; an all -1 block is "compiler default". A tile configuration is the 24
// config_feat floats: kernel_bounds from columns 0-5, output_bounds from 8-13 (the entries before
// the first 0); the sum columns (6, 14) must agree, so bounds of more than 6 dimensions, which
// the encoding truncates, are refused.
//
// Thread-safety: immutable after Open; the cost methods may be called from several threads.
#ifndef TPUGRAPHS_SYNTH_GROUND_TRUTH_H_
#define TPUGRAPHS_SYNTH_GROUND_TRUTH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/synth/cost_model.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::synth {

class GroundTruth {
 public:
  // Reads a program: a ModuleTuningData (layout; its config_index_to_node, else the cost model's
  // configurable nodes), a TuningData holding exactly one kernel (tile), or a bare
  // HloModuleProto / HloProto (layout). Errors name the file.
  static StatusOr<std::unique_ptr<GroundTruth>> Open(const std::string& path);
  ~GroundTruth();

  TaskKind task() const { return task_; }
  const std::string& path() const { return path_; }
  const xla::HloModuleProto& module() const { return module_; }
  // Layout: node indices of the configurable nodes (config_index_to_node).
  const std::vector<int64_t>& configurable() const;
  // Layout: rank of tensor t of configurable node i, or -1 when the node has no tensor t.
  int64_t TensorRank(size_t i, int t) const;
  // Tile: the kernel's output dimensions and its kernel operand's (empty if none).
  const std::vector<int64_t>& tile_output_dims() const;
  const std::vector<int64_t>& tile_kernel_dims() const;

  // Noise-free runtime in ns of one layout configuration, values[nc * 18]. InvalidArgument
  // (prefixed with `what`) when a block sets a tensor the node does not have or is not a
  // permutation of the tensor's dimensions.
  StatusOr<double> LayoutCostNs(const int8_t* values, const std::string& what) const;
  // Noise-free runtime in ns of one tile configuration, feat[24].
  StatusOr<double> TileCostNs(const float* feat, const std::string& what) const;

 private:
  GroundTruth() = default;
  std::string path_;
  TaskKind task_ = TaskKind::kLayout;
  xla::HloModuleProto module_;
  std::unique_ptr<ModuleAnalysis> analysis_;
  std::unique_ptr<LayoutCostModel> layout_;
  std::unique_ptr<TileCostModel> tile_;
};

// Whether p lists each of 0..rank-1 exactly once (a full minor_to_major of a rank-`rank` array).
bool IsPermutation(const std::vector<int64_t>& p, int64_t rank);

// Decodes the tile bounds of a config_feat row (see above): kernel and output bounds.
Status DecodeTileFeatures(const float* feat, const std::string& what,
                          std::vector<int64_t>* kernel_bounds, std::vector<int64_t>* output_bounds);

}  // namespace tpugraphs::synth

#endif  // TPUGRAPHS_SYNTH_GROUND_TRUTH_H_
