// Pruning a layout graph to the k-hop neighbourhood of its configurable nodes (the main trick of
// the top Kaggle solutions, field-notes.md section 3; docs/gst.md).
//
// Thread-safety: pure function.
#ifndef TPUGRAPHS_MODEL_PRUNING_H_
#define TPUGRAPHS_MODEL_PRUNING_H_

#include <cstdint>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"

namespace tpugraphs::model {

// Keeps the nodes within `hops` hops of a configurable node, following edges in either
// direction (hops = 0 keeps the configurable nodes only), in their original order. Node arrays
// are sliced, edges with both ends kept are renumbered (order kept), node_config_ids renumbered
// (order kept, so layout config values need no change), node_splits mapped to the number of
// kept nodes below each boundary (empty intervals dropped). Configurations are copied unchanged.
// kept_nodes (optional) receives the original ids of the kept nodes. Tile graphs and graphs
// without configurable nodes are returned unchanged. Fails on hops < 0 or on out-of-range edges
// or node_config_ids (message names g.name).
StatusOr<Graph> PruneToConfigNeighbourhood(const Graph& g, int hops,
                                           std::vector<int64_t>* kept_nodes);

// The nodes v of g with new_id[v] >= 0, numbered in order, as a graph without edges or
// configurations: g's name, collection, split, kind and absent-dimension mark; the kept nodes'
// opcodes and features; node_splits mapped to the number of kept nodes below each boundary
// (empty intervals dropped); node_config_ids renumbered (order kept). kept_nodes (optional)
// receives the original ids of the kept nodes. REQUIRES: new_id has g.num_nodes() entries,
// numbers the kept nodes 0, 1, ... in order, and keeps every configurable node.
Graph SliceNodes(const Graph& g, const std::vector<int64_t>& new_id,
                 std::vector<int64_t>* kept_nodes);

// What graph surgery that keeps some nodes checks first: every edge and node_config_ids entry
// names a node of g (the message names g.name). Returns which nodes are configurable [n].
StatusOr<std::vector<uint8_t>> CheckedConfigurableNodes(const Graph& g);

// Graph surgery's answer for a graph it leaves as it is (tile graphs): GraphStructureOf(g), and
// every node in kept_nodes (optional).
Graph EveryNodeKept(const Graph& g, std::vector<int64_t>* kept_nodes);

// The parts of a graph that CostModel::Prepare reads (name, collection, split, kind, opcodes,
// node features, edges, node splits, the configurable nodes and the absent-dimension mark),
// without its configurations: what graph surgery starts from when it has no copy of its own.
Graph GraphStructureOf(const Graph& g);

}  // namespace tpugraphs::model

#endif  // TPUGRAPHS_MODEL_PRUNING_H_
