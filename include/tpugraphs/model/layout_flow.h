// How each configurable node's layouts travel through the program: which configurable node's
// chosen output layout its input and kernel arrive in, how much data follows its output layout,
// and whether that data must be copied back for readers with fixed layouts.
//
// Layout assignment propagates a layout through layout-agnostic instructions (elementwise ops and
// fusions whose output has the same dims and layout as their first operand), and inserts a copy
// wherever a reader wants another layout than its operand has. So whether a configuration pays a
// copy at a convolution's input depends on the layout chosen for a *different* node, the
// convolution or dot upstream, often several instructions away: a relation between two nodes'
// configuration values that the value embeddings and a few rounds of message passing can only
// approximate, and that pruning may cut off entirely. These facts are read from the whole graph
// (before pruning or segmentation) and turned into per-configuration features by
// LayoutFlowFeatures (docs/model.md, "Layout flow features").
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_MODEL_LAYOUT_FLOW_H_
#define TPUGRAPHS_MODEL_LAYOUT_FLOW_H_

#include <cstdint>
#include <vector>

#include "tpugraphs/common/graph.h"

namespace tpugraphs::model {

inline constexpr int kLayoutFlowFeatureCount = 4;

struct LayoutFlow {
  // [nc, 2]: for operand 0 (input) and operand 1 (kernel) of each configurable node, the slot of
  // the configurable node whose chosen output layout the operand carries (the operand itself, or
  // the source of the layout-following chain it ends), or -1 when its layout is fixed.
  std::vector<int32_t> source;
  // [nc]: log1p(elements of the layout-following instructions downstream of the node) / 16.
  std::vector<float> follower_size;
  // [nc]: 1 if the node's output or a follower is read by an instruction that needs the graph's
  // layout (anything but a follower or a configurable node's input/kernel) or is a computation
  // root, so that another output layout costs a copy back; else 0.
  std::vector<float> has_exit;
  int64_t size() const { return static_cast<int64_t>(has_exit.size()); }
};

// Computes the flow of g's configurable nodes (node_config_ids order) from the opcodes, edges and
// raw node features (dims 21-26, minor_to_major 134-139, is_root 0). Instructions are visited in
// node order, so a follower whose first operand comes later in the node order is not joined.
// Graphs without node features, tile graphs and out-of-range edges give an empty or partial
// (all -1 / 0) flow. O(n + m).
LayoutFlow ConfigLayoutFlow(const Graph& g);

// The flow of a subset of the configurable nodes (`slots`, indices into `flow`): sources outside
// the subset become -1 (their chosen layout is not in the subset's configurations).
LayoutFlow SliceLayoutFlow(const LayoutFlow& flow, const std::vector<int64_t>& slots);

}  // namespace tpugraphs::model

#endif  // TPUGRAPHS_MODEL_LAYOUT_FLOW_H_
