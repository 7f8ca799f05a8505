// Graph segments for Graph Segment Training (docs/gst.md): a partition of a graph's nodes into
// contiguous node-id ranges of bounded size, and the induced subgraph of one range.
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_MODEL_SEGMENT_H_
#define TPUGRAPHS_MODEL_SEGMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"

namespace tpugraphs::model {

// Segment boundaries [0 = b_0 < b_1 < ... < b_S = n]: segment s is the node ids [b_s, b_{s+1}).
// Every segment has at most max_size nodes. node_splits (end offsets, optionally starting with
// 0, as in Graph) are the preferred cut points: consecutive node_splits intervals are merged
// greedily while the merged range stays within max_size, and an interval longer than max_size
// is cut into ceil(len / max_size) near-equal pieces. Without node_splits the graph is cut into
// ceil(n / max_size) near-equal pieces. Node ids follow the program order (ingest-spec), so a
// segment is a contiguous stretch of the program and most edges stay inside one segment.
// Fails (prefixed by `what`) on max_size < 1 or node_splits that are not increasing within
// [0, n]. n = 0 gives {0}.
StatusOr<std::vector<int64_t>> PartitionSegments(int64_t n, const std::vector<int64_t>& node_splits,
                                                 int64_t max_size, const std::string& what);

// Segment index of every node, from boundaries.
std::vector<int32_t> SegmentOfNodes(const std::vector<int64_t>& bounds);

// Removes the edges ([m, 2] rows) whose two ends lie in different segments, in place, keeping
// the order of the others. Returns the number removed.
int64_t DropCutEdges(const std::vector<int64_t>& bounds, std::vector<int64_t>* edge_index);

// The subgraph induced by the node ids [begin, end) of g: node arrays sliced, edges with both
// ends inside (renumbered), node_config_ids inside (renumbered, in g's order), node_splits
// clipped to the range, configurations and runtimes copied except the layout values
// (node_config_feat is left empty: callers slice per batch with config_slots). config_slots
// receives, for every configurable node of the segment, its index j in g.node_config_ids, so the
// segment's values of config c are g's values [c, config_slots[i], :].
Graph ExtractSegment(const Graph& g, int64_t begin, int64_t end,
                     std::vector<int64_t>* config_slots);

}  // namespace tpugraphs::model

#endif  // TPUGRAPHS_MODEL_SEGMENT_H_
