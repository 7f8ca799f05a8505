// A virtual node added to a layout graph (ModelSpec.virtual_node; docs/model.md, "A virtual
// node"): one more node, the consumer of a chosen set of the graph's nodes, so that message
// passing gathers a summary of all of them in one place and hands it back to each of them a
// layer later. The 3rd-place Kaggle team joined such a node to their graphs' outputs
// (../shared/docs/field-notes.md).
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_MODEL_VIRTUAL_NODE_H_
#define TPUGRAPHS_MODEL_VIRTUAL_NODE_H_

#include <cstdint>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/model.pb.h"
#include "tpugraphs/model/pruning.h"  // GraphStructureOf

namespace tpugraphs::model {

// Appends node n = g->num_nodes() with opcode `opcode` and an all-zero feature row, and one edge
// [n, v] (n reads v) for each v of the set `mode` names: the outputs (the nodes no edge reads,
// in node order) or the configurable nodes (in node_config_ids order, repeats once). Node
// splits are left as they are (the new node lies past the last one); configurations and
// node_config_ids are unchanged. A graph without nodes, a tile graph and VIRTUAL_NODE_NONE are
// left unchanged. Fails on edges outside [0, n) or an opcode outside [0, 255] (message names
// g->name).
Status AddVirtualNode(ModelSpec::VirtualNode mode, int opcode, Graph* g);

}  // namespace tpugraphs::model

#endif  // TPUGRAPHS_MODEL_VIRTUAL_NODE_H_
