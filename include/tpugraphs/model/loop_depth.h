// How many while loops run each node: the number of while instructions whose body (or
// condition) computation contains the node, directly or through nested calls. A node inside k
// nested loops executes about trip_count^k times per program run, so its share of the runtime
// grows with k, yet message passing cannot see it: a body is linked to its while instruction only
// through one called-computation edge to the body's root, often many hops away.
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_MODEL_LOOP_DEPTH_H_
#define TPUGRAPHS_MODEL_LOOP_DEPTH_H_

#include <cstdint>
#include <vector>

#include "tpugraphs/common/graph.h"

namespace tpugraphs::model {

// Opcode id of `while` in the release's table (ingest-spec section 2; src/ingest/opcodes.cc).
inline constexpr uint8_t kWhileOpcodeId = 102;

// Per node, the number of enclosing while loops. Read from the graph alone: the callees of a
// while node w are the producers of w (edges [w, v]) that are computation roots (raw feature
// is_root, column 0); everything reachable from a callee root along producer edges is run by
// w's loop. Graphs without node features (or with edges out of range) get zeros for the nodes
// that cannot be resolved. O(while nodes x nodes).
std::vector<int32_t> WhileLoopDepths(const Graph& g);

// The same for the configurable nodes only, in node_config_ids order (empty for tile graphs).
std::vector<int32_t> ConfigNodeLoopDepths(const Graph& g);

}  // namespace tpugraphs::model

#endif  // TPUGRAPHS_MODEL_LOOP_DEPTH_H_
