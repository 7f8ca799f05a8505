#include "tpugraphs/model/loop_depth.h"

#include <cstdint>
#include <vector>

#include "tpugraphs/common/graph.h"

namespace tpugraphs::model {

std::vector<int32_t> WhileLoopDepths(const Graph& g) {
  const int64_t n = g.num_nodes(), m = g.num_edges();
  std::vector<int32_t> depth(n, 0);
  const bool have_feat = static_cast<int64_t>(g.node_feat.size()) == n * kNodeFeatureCount;
  if (!have_feat) return depth;
  // Producer lists in CSR form (row [u, v]: u consumes v), skipping out-of-range edges.
  std::vector<int64_t> ptr(n + 1, 0), prod;
  auto valid = [&](int64_t e) {
    const int64_t u = g.edge_index[2 * e], v = g.edge_index[2 * e + 1];
    return u >= 0 && u < n && v >= 0 && v < n;
  };
  for (int64_t e = 0; e < m; ++e) {
    if (valid(e)) ++ptr[g.edge_index[2 * e] + 1];
  }
  for (int64_t i = 0; i < n; ++i) ptr[i + 1] += ptr[i];
  prod.resize(ptr[n]);
  std::vector<int64_t> fill(ptr.begin(), ptr.end() - 1);
  for (int64_t e = 0; e < m; ++e) {
    if (valid(e)) prod[fill[g.edge_index[2 * e]]++] = g.edge_index[2 * e + 1];
  }
  auto is_root = [&](int64_t v) { return g.node_feat[v * kNodeFeatureCount] == 1.0f; };
  std::vector<int64_t> stamp(n, -1), stack;
  for (int64_t w = 0; w < n; ++w) {
    if (g.node_opcode[w] != kWhileOpcodeId) continue;
    stack.clear();
    for (int64_t x = ptr[w]; x < ptr[w + 1]; ++x) {
      const int64_t r = prod[x];
      if (r != w && is_root(r) && stamp[r] != w) stamp[r] = w, stack.push_back(r);
    }
    while (!stack.empty()) {
      const int64_t v = stack.back();
      stack.pop_back();
      ++depth[v];
      for (int64_t x = ptr[v]; x < ptr[v + 1]; ++x) {
        const int64_t p = prod[x];
        if (stamp[p] != w) stamp[p] = w, stack.push_back(p);
      }
    }
  }
  return depth;
}

std::vector<int32_t> ConfigNodeLoopDepths(const Graph& g) {
  if (!g.is_layout()) return {};
  const std::vector<int32_t> all = WhileLoopDepths(g);
  std::vector<int32_t> out;
  out.reserve(g.node_config_ids.size());
  for (int64_t v : g.node_config_ids) {
    out.push_back(v >= 0 && v < static_cast<int64_t>(all.size()) ? all[v] : 0);
  }
  return out;
}

}  // namespace tpugraphs::model
