// HLO module -> program graph (ingest-spec section 4): node order, instruction-id map, edges,
// node_splits, opcodes and node features.
//
// Node order: computations in proto order, instructions in proto order. Edges: for each node u,
// one edge to each distinct operand (ascending instruction id), then one edge per called
// computation to that computation's root (duplicates kept); the final list is sorted by (u, v).
// Duplicate edges after sorting, self-edges, unknown operand or computation ids and duplicate
// instruction ids are errors (the release's encoder CHECK-fails on them).
//
// Thread-safety: pure function.
#ifndef TPUGRAPHS_INGEST_HLO_GRAPH_H_
#define TPUGRAPHS_INGEST_HLO_GRAPH_H_

#include <string>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::ingest {

// Fills g->node_opcode, node_feat, edge_index and node_splits from `module`; other fields are
// untouched. Errors are InvalidArgument prefixed with `what` (the file name).
// `mark_absent_dimensions`: -1 in the node features' slots beyond each rank-bearing list, read
// from the instructions (absent_dimensions.h); sets g->absent_dimensions_marked to it.
Status BuildProgramGraph(const xla::HloModuleProto& module, const std::string& what, Graph* g,
                         bool mark_absent_dimensions = false);

// node_splits rule alone (exposed for tests): end offsets of computations whose name contains
// "cluster", "while" or "cond", starting with 0 and ending with the node count.
std::vector<int64_t> ComputeNodeSplits(const xla::HloModuleProto& module);

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_HLO_GRAPH_H_
