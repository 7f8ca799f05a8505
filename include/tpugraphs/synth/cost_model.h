// The analytic TPU cost model that gives synthetic configurations their runtimes.
//
// docs/synthetic-cost-model.md states every formula and constant; the names below follow it.
// A module is analysed once (ModuleAnalysis: nodes in the featurizer's order, shapes, operands,
// users, how often each computation runs); then
//  * LayoutCostModel prices a layout configuration: the configuration-independent part of the
//    program is summed once, and each configuration only re-prices its configurable nodes
//    (convolution/dot/reshape), the layout-following nodes downstream of them ("regions"),
//    input/kernel copies and the copies back to the layout outside users expect; a
//    configuration costs O(configurable nodes + region nodes) to evaluate;
//  * TileCostModel prices a tile-size configuration of a kernel (TileSizeConfig bounds).
// Runtimes are deterministic; measurement noise is a separate, seeded multiplicative factor.
//
// Thread-safety: the models are immutable after construction; their const methods may be called
// from several threads at once.
#ifndef TPUGRAPHS_SYNTH_COST_MODEL_H_
#define TPUGRAPHS_SYNTH_COST_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpu_graphs/tuning.pb.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/ingest/opcodes.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::synth {

// Machine constants of the modelled TPU core (docs/synthetic-cost-model.md, "Constants").
struct TpuConstants {
  double mxu_flops_per_ns = 100e3;  // 100 TFLOP/s dense bf16 matrix unit
  double vpu_flops_per_ns = 4e3;    // 4 TFLOP/s vector unit (elementwise, reductions)
  double hbm_bytes_per_ns = 800.0;  // 800 GB/s HBM bandwidth
  double op_overhead_ns = 250.0;    // fixed cost of every executed (non-free) instruction
  double copy_overhead_ns = 400.0;  // fixed cost of an inserted layout copy
  int64_t sublane_tile = 8;         // second-most-minor dimension padded to a multiple of 8
  int64_t lane_tile = 128;          // most-minor dimension padded to a multiple of 128
  double while_trip_count = 8.0;    // assumed iterations of every while loop
  // Layout: whether a configurable node's input and kernel see the layout another configurable
  // node (or its region) chose for them. false prices every producer in its proto layout, so that
  // each configurable node's cost depends on its own configuration alone (synth
  // --no-cross-node-terms; docs/synthetic-cost-model.md).
  bool cross_node_terms = true;
  // Tile kernels.
  double fast_memory_bytes = 8.0 * 1024 * 1024;  // on-chip scratch for one kernel (8 MiB)
  double per_tile_overhead_ns = 120.0;           // pipeline step cost of one tile
  double kernel_launch_ns = 600.0;               // fixed cost of launching a kernel
  double spill_factor = 3.0;  // overflowing tiles move (1 + spill_factor) x the bytes
  double max_tiles = 256;     // the search never proposes more tile steps than this
};

// How the cost model treats an instruction: the classes of the opcode table (ingest/opcodes.h).
using ingest::OpClass;

struct NodeInfo {
  std::string opcode;
  OpClass cls = OpClass::kFree;
  int32_t computation = 0;  // index into ModuleAnalysis::computations
  int32_t element_bytes = 4;
  std::vector<int64_t> dims;      // array dims (empty for scalars; first tuple element for tuples)
  std::vector<int64_t> m2m;       // the layout in the proto (descending if absent or invalid)
  std::vector<int32_t> operands;  // node indices, in operand order (duplicates kept)
  std::vector<int32_t> called;    // computation indices
  std::vector<int32_t> users;     // node indices of the instructions that read this node
  double vector_flops = 0;        // per execution
  double matrix_flops = 0;        // per execution (convolution, dot)
};

struct ComputationInfo {
  std::string name;
  int32_t first_node = 0, num_nodes = 0;
  int32_t root = 0;       // node index of the root instruction
  double executions = 0;  // times it runs per program execution (0: inlined in a caller)
  bool fused = false;     // called by a fusion (priced inside the fusion)
};

struct ModuleAnalysis {
  std::vector<NodeInfo> nodes;  // featurizer order (computations, then instructions)
  std::vector<ComputationInfo> computations;
  int32_t entry = 0;  // index of the entry computation (the last one)
};

// Analyses a module. Fails (naming `what`) on structural errors: duplicate instruction ids,
// operands or callees that do not exist or come later, roots that are not in their computation.
StatusOr<ModuleAnalysis> AnalyzeModule(const xla::HloModuleProto& module, const std::string& what);

// The nodes the layout configurations set: convolutions, dots and reshapes that run in a
// non-fused computation, in node order (the featurizer's config_index_to_node).
std::vector<int64_t> ConfigurableNodes(const ModuleAnalysis& a);

// Padded size in bytes of an array with `dims` stored with layout `m2m`: the most minor dim is
// rounded up to a multiple of lane_tile, the second most minor to a multiple of sublane_tile.
double PaddedBytes(const std::vector<int64_t>& dims, const std::vector<int64_t>& m2m,
                   int32_t element_bytes, const TpuConstants& k);

// A layout choice for one tensor of a configurable node: a minor-to-major permutation of the
// tensor's rank, or empty for "compiler default".
using TensorLayout = std::vector<int64_t>;
// Per configurable node: [output, input, kernel] (only as many as the node has tensors).
using NodeLayout = std::vector<TensorLayout>;

class LayoutCostModel {
 public:
  // REQUIRES: every entry of `configurable` indexes a convolution, dot or reshape of `a`.
  LayoutCostModel(const ModuleAnalysis& a, std::vector<int64_t> configurable, TpuConstants k = {});

  const std::vector<int64_t>& configurable() const { return configurable_; }
  // Number of tensors the configuration gives node `i` of configurable(): 3 for convolutions
  // and dots (output, input, kernel), 2 for reshapes (output, input).
  int NumTensors(size_t i) const;
  // Rank of tensor t (0 output, 1 input, 2 kernel) of configurable node i.
  int64_t TensorRank(size_t i, int t) const;
  // The layout "compiler default" stands for: the node's own proto layout for the output, the
  // producer's (resolved) output layout for input and kernel.
  const std::vector<int64_t>& DefaultOutputLayout(size_t i) const;

  // Runtime in ns (no noise) of the whole program under `config` (one NodeLayout per
  // configurable node; an empty vector means all defaults). Invalid permutations count as
  // default.
  double RuntimeNs(const std::vector<NodeLayout>& config) const;
  // The configuration-independent part of RuntimeNs.
  double FixedNs() const { return fixed_ns_; }

  // The layout region node v belongs to (the index in configurable() of the node whose output
  // layout it follows), or -1; configurable nodes themselves give -1.
  int32_t RegionOf(int64_t v) const { return owner_[v]; }
  // Whether region i has exit copies (a region tensor read in its proto layout outside it).
  bool HasExits(size_t i) const { return !exits_[i].empty(); }

  // Cost in ns of one configurable node under resolved layouts (exposed for tests).
  double NodeCostNs(size_t i, const std::vector<int64_t>& out, const std::vector<int64_t>& in,
                    const std::vector<int64_t>& kernel,
                    const std::vector<std::vector<int64_t>>& producer_layouts) const;

 private:
  // A node whose layout follows a configurable node's output layout (see the doc, "Layout
  // regions"): its cost is max(compute, (other_bytes + region_bytes * padded elements)/BW).
  struct RegionNode {
    int32_t node;
    double executions;
    double compute_ns;
    double other_bytes;   // operands outside the region, in their own layouts
    double region_bytes;  // bytes per padded element of the region tensors it touches
  };
  // Cost of region `i` (its region nodes and exit copies) when its source has layout `layout`.
  double RegionCostNs(size_t i, const std::vector<int64_t>& layout) const;

  const ModuleAnalysis& a_;
  std::vector<int64_t> configurable_;
  std::vector<int32_t> config_slot_;  // node -> index in configurable_, -1 if not configurable
  std::vector<int32_t> owner_;        // node -> region (configurable index) it belongs to, or -1
  std::vector<std::vector<RegionNode>> regions_;
  // A region tensor read in its proto layout outside the region (copied back if it differs).
  struct Exit {
    int32_t node;
    double executions;
    double element_bytes;
    double proto_bytes;  // padded bytes in the proto layout
  };
  std::vector<std::vector<Exit>> exits_;
  TpuConstants k_;
  double fixed_ns_ = 0;
};

// The kernel a tile configuration tiles: the entry root's output and how its inputs are read.
class TileCostModel {
 public:
  static StatusOr<TileCostModel> Create(const ModuleAnalysis& a, const std::string& what,
                                        TpuConstants k = {});

  const std::vector<int64_t>& output_dims() const { return out_dims_; }
  const std::vector<int64_t>& output_m2m() const { return out_m2m_; }
  // Dims of the "kernel" (weights) operand of a convolution/dot kernel; empty otherwise.
  const std::vector<int64_t>& kernel_dims() const { return kernel_dims_; }

  // Runtime in ns (no noise). output_bounds: tile size per output dim (empty or wrong length:
  // the whole output in one tile); kernel_bounds: tile of the kernel operand (same rules).
  double RuntimeNs(const tpu_graphs::TileSizeConfig& config) const;
  // Bytes of fast memory one tile needs (double-buffered inputs and output).
  double WorkingSetBytes(const tpu_graphs::TileSizeConfig& config) const;

 private:
  struct Terms;
  Terms Compute(const tpu_graphs::TileSizeConfig& config) const;

  TpuConstants k_;
  std::vector<int64_t> out_dims_, out_m2m_, kernel_dims_, kernel_m2m_;
  int32_t out_bytes_ = 4, kernel_bytes_ = 2;
  double vector_flops_per_out_ = 1;  // vector flops per output element
  double matrix_flops_ = 0;          // total matrix flops
  double streamed_bytes_ = 0;        // input bytes read once (scaled by padding waste)
  double streamed_per_out_ = 0;      // streamed input bytes per output element
  double kernel_total_bytes_ = 0;    // bytes of the kernel operand
};

// Multiplicative measurement noise exp(sigma * z), z standard normal clipped to [-3, 3], drawn
// from a stream derived from `seed`.
double NoiseFactor(uint64_t seed, double sigma);

}  // namespace tpugraphs::synth

#endif  // TPUGRAPHS_SYNTH_COST_MODEL_H_
