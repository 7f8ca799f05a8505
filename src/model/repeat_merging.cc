#include "tpugraphs/model/repeat_merging.h"

#include <cstring>
#include <string>
#include <unordered_map>

#include "tpugraphs/model/pruning.h"

namespace tpugraphs::model {

StatusOr<Graph> MergeRepeated(const Graph& g, std::vector<int64_t>* kept_nodes) {
  const int64_t n = g.num_nodes(), m = g.num_edges();
  if (!g.is_layout()) return EveryNodeKept(g, kept_nodes);
  TPUG_ASSIGN_OR_RETURN(const std::vector<uint8_t> configurable, CheckedConfigurableNodes(g));
  if (static_cast<int64_t>(g.node_feat.size()) != n * kNodeFeatureCount) {
    return InvalidArgumentError("graph " + g.name + ": node_feat has " +
                                std::to_string(g.node_feat.size()) + " values, expected " +
                                std::to_string(n * kNodeFeatureCount));
  }
  // Operands of every node in edge order (CSR).
  std::vector<int64_t> ptr(n + 1, 0), operands(m);
  for (int64_t e = 0; e < m; ++e) ++ptr[g.edge_index[2 * e] + 1];
  for (int64_t v = 0; v < n; ++v) ptr[v + 1] += ptr[v];
  std::vector<int64_t> fill(ptr.begin(), ptr.end() - 1);
  for (int64_t e = 0; e < m; ++e) operands[fill[g.edge_index[2 * e]]++] = g.edge_index[2 * e + 1];
  // rep[v]: the node v is merged into (v itself while it stays). A pass merges every node whose
  // key (opcode, features, operands' reps) an earlier kept node already has; a merge can make
  // the keys of the nodes that read it equal, so passes repeat until one merges nothing. Each
  // pass merges at least one node or ends, and reps always point at kept nodes.
  std::vector<int64_t> rep(n);
  for (int64_t v = 0; v < n; ++v) rep[v] = v;
  const size_t feat_bytes = kNodeFeatureCount * sizeof(float);
  std::string key;
  for (bool merged = true; merged;) {
    merged = false;
    std::unordered_map<std::string, int64_t> first;
    first.reserve(static_cast<size_t>(n));
    for (int64_t v = 0; v < n; ++v) {
      if (rep[v] != v || configurable[v]) continue;
      key.assign(1, static_cast<char>(g.node_opcode[v]));
      key.append(reinterpret_cast<const char*>(g.node_feat.data() + v * kNodeFeatureCount),
                 feat_bytes);
      for (int64_t i = ptr[v]; i < ptr[v + 1]; ++i) {
        const int64_t p = rep[operands[i]];
        key.append(reinterpret_cast<const char*>(&p), sizeof(p));
      }
      const auto [it, inserted] = first.emplace(key, v);
      if (!inserted) {
        rep[v] = it->second;
        merged = true;
      }
    }
    // Merged nodes may be operands' reps of kept ones: point every rep at a kept node.
    for (int64_t v = 0; v < n; ++v) rep[v] = rep[rep[v]];
  }
  std::vector<int64_t> new_id(n, -1);
  int64_t kept = 0;
  for (int64_t v = 0; v < n; ++v) {
    if (rep[v] == v) new_id[v] = kept++;
  }
  Graph out = SliceNodes(g, new_id, kept_nodes);
  for (int64_t e = 0; e < m; ++e) {
    const int64_t u = g.edge_index[2 * e];
    if (rep[u] != u) continue;
    out.edge_index.push_back(new_id[u]);
    out.edge_index.push_back(new_id[rep[g.edge_index[2 * e + 1]]]);
  }
  return out;
}

}  // namespace tpugraphs::model
