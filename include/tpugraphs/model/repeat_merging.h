// Merging the repeated sub-graphs of a layout graph (ModelSpec.merge_repeated; docs/model.md,
// "Merged repeats"): the other half of the 1st-place Kaggle team's graph compression
// (../shared/docs/field-notes.md). Two nodes that are not configurable, with the same opcode, the
// same node features and the same operands in the same order compute the same thing as far as
// the model can tell; the later one is merged into the earlier one, its readers reading the
// earlier one instead. Merging repeats until nothing changes, so whole repeated sub-graphs (a
// broadcast of a constant built twice, the same reshape of one parameter in two branches) fold
// into one, bottom up.
//
// Thread-safety: pure function.
#ifndef TPUGRAPHS_MODEL_REPEAT_MERGING_H_
#define TPUGRAPHS_MODEL_REPEAT_MERGING_H_

#include <cstdint>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"

namespace tpugraphs::model {

// The graph with its repeats merged (above). Kept nodes stay in their order, with their opcodes
// and features; the edges a merged node reads go (the node it was merged into reads the same),
// and every other edge is kept with its operand replaced by the node that operand was merged
// into, so a node that read two repeats reads the kept one twice. node_config_ids are renumbered
// (order kept), node_splits mapped to the number of kept nodes below each boundary (empty
// intervals dropped). Configurations are not copied (the result is the graph's structure:
// GraphStructureOf's fields). kept_nodes (optional) receives the original ids of the kept nodes.
// Tile graphs are returned as their structure, unchanged. Fails on out-of-range edges or
// node_config_ids (message names g.name).
StatusOr<Graph> MergeRepeated(const Graph& g, std::vector<int64_t>* kept_nodes);

}  // namespace tpugraphs::model

#endif  // TPUGRAPHS_MODEL_REPEAT_MERGING_H_
