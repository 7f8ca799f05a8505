// Layout configurations of a program dump that carries no measured runs (HLO text, a bare
// HloModuleProto or HloProto): the configurable nodes, the configuration the dump itself carries
// ("as compiled") and seeded alternative layouts to rank with a layout model (docs/hlo-text.md,
// "Ranking your own program's layouts").
//
// Configurable nodes are chosen as in the release: every convolution, dot and reshape
// instruction (with at least one operand), in node order. In both release layout files of
// tests/data/real and in the real U-Net dump, config_index_to_node lists exactly these nodes.
// Their tensors are those of a release layout configuration: output, input (operand 0) and, for
// a convolution or dot, kernel (operand 1); a reshape has output and input only.
//
// A tensor's layout is its shape's minor_to_major (an operand's: the producing instruction's
// shape). Configuration 0 writes these lists into a tpu_graphs LayoutConfig node and featurises
// it with FeaturizeLayoutNode, the code that featurises the runs of a raw layout dump: the first
// 6 entries of each list, -1 padded; a tensor whose shape states no layout is all -1 ("the
// compiler chooses").
//
// Alternatives (configurations 1..N) change the layouts of 1 to 3 configurable nodes of
// configuration 0. A changed tensor (rank >= 2) gets a full minor_to_major permutation: a new
// (most minor, second most minor) pair of dimensions, drawn uniformly among the pairs other than
// the current one, followed by the remaining dimensions in their current relative order. The two
// minor dimensions are the ones TPU tiling depends on and the ones the release's configurations
// set (most release tensors list exactly these two). Duplicates (of configuration 0 or an earlier
// candidate, compared on the 18 features per node) are redrawn, so all configurations differ;
// after 2000 repeats in a row the program is taken to have no more layouts and fewer than N are
// kept. The draws depend only on (seed, graph name).
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_INGEST_LAYOUT_CANDIDATES_H_
#define TPUGRAPHS_INGEST_LAYOUT_CANDIDATES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::ingest {

// One tensor of a configurable node.
struct LayoutTensor {
  int64_t rank = 0;                     // dimensions of the array shape
  std::vector<int64_t> minor_to_major;  // as the dump states it; empty: no layout given
};

struct ConfigurableNode {
  int64_t node = 0;         // node index (featurizer order)
  std::string instruction;  // instruction name
  std::string opcode;
  std::vector<LayoutTensor> tensors;  // output, input[, kernel]
};

// The configurable nodes of `module`, in node order. InvalidArgument naming `what` and the
// instruction if a tensor's layout is not a permutation of its dimensions, or an operand does
// not exist.
StatusOr<std::vector<ConfigurableNode>> FindConfigurableNodes(const xla::HloModuleProto& module,
                                                              const std::string& what);

// The 18 features of one configurable node whose tensors have the given minor_to_major lists
// (empty list = no layout), computed by FeaturizeLayoutNode.
Status FeaturizeNodeLayouts(const std::vector<std::vector<int64_t>>& layouts,
                            const std::string& what, int8_t* out);

// The instruction names of the given node indices (node order: computations, then
// instructions, as the featurizer numbers them); "" for an index that is not a node.
std::vector<std::string> InstructionNamesOfNodes(const xla::HloModuleProto& module,
                                                 const std::vector<int64_t>& nodes);

struct LayoutCandidateOptions {
  int64_t alternatives = 0;  // N: alternative configurations after configuration 0
  uint64_t seed = 1;
};

// Sets g->node_config_ids, config_node_names, num_configs, node_config_feat (configuration 0,
// then up to N distinct alternatives) and config_runtime (all 0: not measured). A module without
// configurable nodes gets no configurations. Fewer than N alternatives are produced only when
// the layouts allow fewer (logged). REQUIRES: g is a layout graph built from `module`.
Status AddLayoutCandidates(const xla::HloModuleProto& module, const std::string& what,
                           const LayoutCandidateOptions& options, Graph* g);

// Limit on N (ValidateIngestConfig) and on the config values of one graph.
inline constexpr int64_t kMaxLayoutCandidates = 1000000;
inline constexpr int64_t kMaxCandidateConfigBytes = int64_t{1} << 30;

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_LAYOUT_CANDIDATES_H_
