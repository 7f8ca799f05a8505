#include "tpugraphs/model/pruning.h"

#include <algorithm>
#include <string>

namespace tpugraphs::model {

StatusOr<Graph> PruneToConfigNeighbourhood(const Graph& g, int hops,
                                           std::vector<int64_t>* kept_nodes) {
  if (hops < 0) {
    return InvalidArgumentError("graph " + g.name + ": prune hops must be >= 0, got " +
                                std::to_string(hops));
  }
  const int64_t n = g.num_nodes();
  if (kept_nodes != nullptr) kept_nodes->clear();
  if (!g.is_layout() || g.node_config_ids.empty()) {
    if (kept_nodes != nullptr) {
      for (int64_t v = 0; v < n; ++v) kept_nodes->push_back(v);
    }
    return g;
  }
  const int64_t m = g.num_edges();
  TPUG_RETURN_IF_ERROR(CheckedConfigurableNodes(g).status());
  // Undirected CSR.
  std::vector<int64_t> ptr(n + 1, 0), adj(2 * m);
  for (int64_t e = 0; e < m; ++e) {
    ++ptr[g.edge_index[2 * e] + 1];
    ++ptr[g.edge_index[2 * e + 1] + 1];
  }
  for (int64_t v = 0; v < n; ++v) ptr[v + 1] += ptr[v];
  std::vector<int64_t> fill(ptr.begin(), ptr.end() - 1);
  for (int64_t e = 0; e < m; ++e) {
    const int64_t u = g.edge_index[2 * e], v = g.edge_index[2 * e + 1];
    adj[fill[u]++] = v;
    adj[fill[v]++] = u;
  }
  // Breadth-first search from all configurable nodes at once, `hops` levels deep.
  std::vector<int32_t> dist(n, -1);
  std::vector<int64_t> frontier;
  for (int64_t v : g.node_config_ids) {
    if (dist[v] < 0) dist[v] = 0, frontier.push_back(v);
  }
  for (int h = 1; h <= hops && !frontier.empty(); ++h) {
    std::vector<int64_t> next;
    for (int64_t v : frontier) {
      for (int64_t e = ptr[v]; e < ptr[v + 1]; ++e) {
        if (dist[adj[e]] < 0) dist[adj[e]] = h, next.push_back(adj[e]);
      }
    }
    frontier.swap(next);
  }
  std::vector<int64_t> new_id(n, -1);
  int64_t kept = 0;
  for (int64_t v = 0; v < n; ++v) {
    if (dist[v] >= 0) new_id[v] = kept++;
  }
  Graph out = SliceNodes(g, new_id, kept_nodes);
  for (int64_t e = 0; e < m; ++e) {
    const int64_t u = new_id[g.edge_index[2 * e]], v = new_id[g.edge_index[2 * e + 1]];
    if (u >= 0 && v >= 0) {
      out.edge_index.push_back(u);
      out.edge_index.push_back(v);
    }
  }
  out.num_configs = g.num_configs;
  out.config_runtime = g.config_runtime;
  out.config_runtime_normalizers = g.config_runtime_normalizers;
  out.config_feat = g.config_feat;
  out.node_config_feat = g.node_config_feat;
  return out;
}

namespace {

// A graph with g's name, collection, split, kind and absent-dimension mark, and nothing else.
Graph EmptyLike(const Graph& g) {
  Graph out;
  out.name = g.name;
  out.collection = g.collection;
  out.split = g.split;
  out.kind = g.kind;
  out.absent_dimensions_marked = g.absent_dimensions_marked;
  return out;
}

}  // namespace

StatusOr<std::vector<uint8_t>> CheckedConfigurableNodes(const Graph& g) {
  const int64_t n = g.num_nodes(), m = g.num_edges();
  const std::string what = "graph " + g.name;
  for (int64_t e = 0; e < 2 * m; ++e) {
    if (g.edge_index[e] < 0 || g.edge_index[e] >= n) {
      return InvalidArgumentError(what + ": edge " + std::to_string(e / 2) + " refers to node " +
                                  std::to_string(g.edge_index[e]) + " outside [0, " +
                                  std::to_string(n) + ")");
    }
  }
  std::vector<uint8_t> configurable(n, 0);
  for (int64_t v : g.node_config_ids) {
    if (v < 0 || v >= n) {
      return InvalidArgumentError(what + ": node_config_ids holds " + std::to_string(v) +
                                  ", outside [0, " + std::to_string(n) + ")");
    }
    configurable[v] = 1;
  }
  return configurable;
}

Graph EveryNodeKept(const Graph& g, std::vector<int64_t>* kept_nodes) {
  if (kept_nodes != nullptr) {
    kept_nodes->clear();
    for (int64_t v = 0; v < g.num_nodes(); ++v) kept_nodes->push_back(v);
  }
  return GraphStructureOf(g);
}

Graph SliceNodes(const Graph& g, const std::vector<int64_t>& new_id,
                 std::vector<int64_t>* kept_nodes) {
  const int64_t n = g.num_nodes();
  if (kept_nodes != nullptr) kept_nodes->clear();
  Graph out = EmptyLike(g);
  const int64_t kept =
      std::count_if(new_id.begin(), new_id.end(), [](int64_t i) { return i >= 0; });
  out.node_opcode.reserve(kept);
  out.node_feat.reserve(kept * kNodeFeatureCount);
  for (int64_t v = 0; v < n; ++v) {
    if (new_id[v] < 0) continue;
    if (kept_nodes != nullptr) kept_nodes->push_back(v);
    out.node_opcode.push_back(g.node_opcode[v]);
    out.node_feat.insert(out.node_feat.end(), g.node_feat.begin() + v * kNodeFeatureCount,
                         g.node_feat.begin() + (v + 1) * kNodeFeatureCount);
  }
  // node_splits: a boundary b becomes the number of kept nodes with id < b.
  std::vector<int64_t> below(n + 1, 0);
  for (int64_t v = 0; v < n; ++v) below[v + 1] = below[v] + (new_id[v] >= 0 ? 1 : 0);
  for (int64_t b : g.node_splits) {
    if (b < 0 || b > n) continue;
    const int64_t nb = below[b];
    if (out.node_splits.empty() ? true : nb > out.node_splits.back()) {
      out.node_splits.push_back(nb);
    }
  }
  for (int64_t v : g.node_config_ids) out.node_config_ids.push_back(new_id[v]);
  return out;
}

Graph GraphStructureOf(const Graph& g) {
  Graph out = EmptyLike(g);
  out.node_opcode = g.node_opcode;
  out.node_feat = g.node_feat;
  out.edge_index = g.edge_index;
  out.node_splits = g.node_splits;
  out.node_config_ids = g.node_config_ids;
  return out;
}

}  // namespace tpugraphs::model
