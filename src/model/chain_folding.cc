#include "tpugraphs/model/chain_folding.h"

#include "tpugraphs/model/pruning.h"

namespace tpugraphs::model {

StatusOr<Graph> FoldChains(const Graph& g, std::vector<int64_t>* kept_nodes) {
  const int64_t n = g.num_nodes(), m = g.num_edges();
  if (!g.is_layout()) return EveryNodeKept(g, kept_nodes);
  TPUG_ASSIGN_OR_RETURN(const std::vector<uint8_t> configurable, CheckedConfigurableNodes(g));
  // Per node: the operand edges it reads, the edges that read it, and its one operand.
  std::vector<int64_t> reads(n, 0), read_by(n, 0), operand(n, -1);
  for (int64_t e = 0; e < m; ++e) {
    const int64_t u = g.edge_index[2 * e], v = g.edge_index[2 * e + 1];
    ++reads[u];
    ++read_by[v];
    operand[u] = v;
  }
  std::vector<uint8_t> link(n, 0);
  for (int64_t v = 0; v < n; ++v) {
    link[v] = !configurable[v] && reads[v] == 1 && read_by[v] == 1 ? 1 : 0;
  }
  std::vector<int64_t> new_id(n, -1);
  int64_t kept = 0;
  for (int64_t v = 0; v < n; ++v) {
    if (!link[v]) new_id[v] = kept++;
  }
  Graph out = SliceNodes(g, new_id, kept_nodes);
  for (int64_t e = 0; e < m; ++e) {
    const int64_t u = g.edge_index[2 * e];
    if (link[u]) continue;
    int64_t v = g.edge_index[2 * e + 1];
    // Up the chain. It ends: each link's one reader is the node before it on the walk, which
    // starts at a kept node, so the walk cannot come back to a node it has passed.
    while (link[v]) v = operand[v];
    out.edge_index.push_back(new_id[u]);
    out.edge_index.push_back(new_id[v]);
  }
  return out;
}

}  // namespace tpugraphs::model
