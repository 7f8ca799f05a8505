// Folding the chains of a layout graph (ModelSpec.fold_chains; docs/model.md, "Folded chains"):
// the graph compression of the 1st-place Kaggle team (../shared/docs/field-notes.md), in its
// simplest form. A node that is not configurable, reads exactly one operand and is read exactly
// once is a link of a chain (a convert, a bitcast, an elementwise op between two others); such
// links are removed, and their reader reads the first node up the chain that is kept instead.
// Pruning to k hops after folding then reaches k nodes that are not links.
//
// Thread-safety: pure function.
#ifndef TPUGRAPHS_MODEL_CHAIN_FOLDING_H_
#define TPUGRAPHS_MODEL_CHAIN_FOLDING_H_

#include <cstdint>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"

namespace tpugraphs::model {

// The graph with its chain links removed (above), counted on edges: a node that reads one
// operand twice reads two. Kept nodes stay in their order, with their opcodes and features; an
// edge whose reader is kept is kept, its operand replaced by the first kept node up the chain;
// edges read by a link go. node_config_ids are renumbered (order kept), node_splits mapped to
// the number of kept nodes below each boundary (empty intervals dropped). Configurations are not
// copied (the result is the graph's structure: GraphStructureOf's fields). kept_nodes (optional)
// receives the original ids of the kept nodes. Tile graphs are returned as their structure,
// unchanged. Fails on out-of-range edges or node_config_ids (message names g.name).
StatusOr<Graph> FoldChains(const Graph& g, std::vector<int64_t>* kept_nodes);

}  // namespace tpugraphs::model

#endif  // TPUGRAPHS_MODEL_CHAIN_FOLDING_H_
