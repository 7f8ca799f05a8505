// Random-walk positional encodings (RWPE) of the configurable nodes: for steps t = 2..K+1, the
// probability that a random walk on the graph, started at the node, is back at it after t steps.
// The walk moves to a uniformly chosen neighbour over the graph's edges taken in both
// directions (a repeated edge counts each time); a node without neighbours stays where it is.
// Step 1 is left out: without self-edges it is 0 everywhere. The encodings tell a node in a
// chain (p_2 = 1/2) from one that fans out to many users (p_2 small) or sits in a short cycle of
// shared operands, which a model without message passing cannot see from the node's own
// features. The 3rd-place team of the Kaggle competition used them (field-notes.md).
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_MODEL_RANDOM_WALK_H_
#define TPUGRAPHS_MODEL_RANDOM_WALK_H_

#include <cstdint>
#include <vector>

namespace tpugraphs::model {

// Return probabilities [nodes.size(), steps]: row i, column s is the probability of being at
// nodes[i] after s + 2 steps of a walk started there. The graph has n nodes and undirected
// adjacency in CSR form: the neighbours of v are adj[ptr[v]..ptr[v + 1]). Sparse propagation from
// each start: O(nodes x steps x edges within steps + 1 hops).
std::vector<float> RandomWalkReturnProbabilities(int64_t n, const std::vector<int64_t>& ptr,
                                                 const std::vector<int64_t>& adj,
                                                 const std::vector<int64_t>& nodes, int steps);

// The same, computed densely: the matrix power of the transition matrix (the reference the
// sparse version is tested against; O(n^2) memory).
std::vector<float> RandomWalkReturnProbabilitiesDense(int64_t n, const std::vector<int64_t>& ptr,
                                                      const std::vector<int64_t>& adj,
                                                      const std::vector<int64_t>& nodes, int steps);

}  // namespace tpugraphs::model

#endif  // TPUGRAPHS_MODEL_RANDOM_WALK_H_
