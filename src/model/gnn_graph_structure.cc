// The graph structure of the GNN: CSR adjacency of the whole graph and the per-layer plans of
// the nodes recomputed per configuration (S_0 .. S_L).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tpugraphs/common/status.h"
#include "tpugraphs/model/gnn.h"

namespace tpugraphs::model::internal {

namespace {

// The plan of the whole graph from its edges [m, 2] (row [u, v]: u consumes v): S = all n nodes,
// every ref local, CSR of each node's operands and users in edge order.
void BuildFullPlan(int64_t n, const std::vector<int64_t>& edges, LayerPlan& p) {
  const int64_t m = static_cast<int64_t>(edges.size() / 2);
  p.whole = true;
  p.nodes.resize(n);
  p.self_ref.resize(n);
  for (int64_t i = 0; i < n; ++i) p.nodes[i] = p.self_ref[i] = i;
  // Row [u, v]: u consumes v. Operands of u are the v's; users of v are the u's.
  p.op_ptr.assign(n + 1, 0);
  p.us_ptr.assign(n + 1, 0);
  for (int64_t e = 0; e < m; ++e) {
    ++p.op_ptr[edges[2 * e] + 1];
    ++p.us_ptr[edges[2 * e + 1] + 1];
  }
  for (int64_t i = 0; i < n; ++i) {
    p.op_ptr[i + 1] += p.op_ptr[i];
    p.us_ptr[i + 1] += p.us_ptr[i];
  }
  p.op_ref.resize(m);
  p.us_ref.resize(m);
  std::vector<int64_t> op_fill(p.op_ptr.begin(), p.op_ptr.end() - 1);
  std::vector<int64_t> us_fill(p.us_ptr.begin(), p.us_ptr.end() - 1);
  for (int64_t e = 0; e < m; ++e) {
    const int64_t u = edges[2 * e], v = edges[2 * e + 1];
    p.op_ref[op_fill[u]++] = v;
    p.us_ref[us_fill[v]++] = u;
  }
}

// The edges [m, 2] of a graph of n nodes: an even count, every node id in [0, n).
Status CheckEdges(int64_t n, const std::vector<int64_t>& edge_index, const std::string& what) {
  if (edge_index.size() % 2 != 0) {
    return InvalidArgumentError(what + ": edge_index has an odd number of values");
  }
  const int64_t m = static_cast<int64_t>(edge_index.size() / 2);
  for (int64_t e = 0; e < 2 * m; ++e) {
    if (edge_index[e] < 0 || edge_index[e] >= n) {
      return InvalidArgumentError(what + ": edge " + std::to_string(e / 2) + " refers to node " +
                                  std::to_string(edge_index[e]) + " outside [0, " +
                                  std::to_string(n) + ")");
    }
  }
  return Status::Ok();
}

// The configurable nodes [nc] of a layout graph of n nodes: each in [0, n), none twice.
Status CheckConfigNodes(int64_t n, const std::vector<int64_t>& config_nodes,
                        const std::string& what) {
  std::vector<uint8_t> seen(n, 0);
  for (int64_t v : config_nodes) {
    if (v < 0 || v >= n) {
      return InvalidArgumentError(what + ": node_config_ids holds " + std::to_string(v) +
                                  ", outside [0, " + std::to_string(n) + ")");
    }
    if (seen[v]++) {
      return InvalidArgumentError(what + ": node_config_ids lists node " + std::to_string(v) +
                                  " twice");
    }
  }
  return Status::Ok();
}

// Plan p of layer l from the plan prev of layer l - 1 over the whole graph's adjacency full:
// S_l = S_{l-1} plus its operands and users, with refs into prev's rows (or base refs).
// pos and prev_pos are scratch of n entries.
void BuildAffectedPlan(const LayerPlan& full, const LayerPlan& prev, std::vector<int64_t>& pos,
                       std::vector<int64_t>& prev_pos, LayerPlan& p) {
  std::fill(prev_pos.begin(), prev_pos.end(), -1);
  for (int64_t i = 0; i < prev.rows(); ++i) prev_pos[prev.nodes[i]] = i;
  p.nodes = prev.nodes;
  std::fill(pos.begin(), pos.end(), -1);
  for (int64_t i = 0; i < p.rows(); ++i) pos[p.nodes[i]] = i;
  for (int64_t v : prev.nodes) {
    for (int64_t e = full.op_ptr[v]; e < full.op_ptr[v + 1]; ++e) {
      const int64_t u = full.op_ref[e];
      if (pos[u] < 0) pos[u] = p.rows(), p.nodes.push_back(u);
    }
    for (int64_t e = full.us_ptr[v]; e < full.us_ptr[v + 1]; ++e) {
      const int64_t u = full.us_ref[e];
      if (pos[u] < 0) pos[u] = p.rows(), p.nodes.push_back(u);
    }
  }
  auto ref = [&](int64_t u) { return prev_pos[u] >= 0 ? prev_pos[u] : -(u + 1); };
  const int64_t R = p.rows();
  p.self_ref.resize(R);
  p.op_ptr.assign(R + 1, 0);
  p.us_ptr.assign(R + 1, 0);
  p.op_ref.clear();
  p.us_ref.clear();
  for (int64_t i = 0; i < R; ++i) {
    const int64_t v = p.nodes[i];
    p.self_ref[i] = ref(v);
    for (int64_t e = full.op_ptr[v]; e < full.op_ptr[v + 1]; ++e) {
      p.op_ref.push_back(ref(full.op_ref[e]));
    }
    for (int64_t e = full.us_ptr[v]; e < full.us_ptr[v + 1]; ++e) {
      p.us_ref.push_back(ref(full.us_ref[e]));
    }
    p.op_ptr[i + 1] = static_cast<int64_t>(p.op_ref.size());
    p.us_ptr[i + 1] = static_cast<int64_t>(p.us_ref.size());
  }
}

// Rows of the configurable nodes in S_0 and S_L; nodes outside S_L.
void FillConfigRows(int L, GraphStructure& gs) {
  const int64_t n = gs.n;
  const LayerPlan& first = gs.plan(0);
  const LayerPlan& last = gs.plan(L);
  std::vector<int64_t> pos0(n, -1), posL(n, -1);
  for (int64_t i = 0; i < first.rows(); ++i) pos0[first.nodes[i]] = i;
  for (int64_t i = 0; i < last.rows(); ++i) posL[last.nodes[i]] = i;
  for (int64_t v : gs.config_nodes) {
    gs.config_rows_first.push_back(pos0[v]);
    gs.config_rows_last.push_back(posL[v]);
  }
  for (int64_t v = 0; v < n; ++v) {
    if (posL[v] < 0) gs.unaffected_last.push_back(v);
  }
}

}  // namespace

StatusOr<GraphStructure> BuildGraphStructure(const ModelSpec& spec, TaskKind task,
                                             const std::vector<uint8_t>& opcodes,
                                             const std::vector<int64_t>& edge_index,
                                             const std::vector<int64_t>& config_nodes,
                                             std::vector<int> node_cols, std::vector<int> cfg_cols,
                                             bool naive, const std::string& what) {
  GraphStructure gs;
  const int64_t n = static_cast<int64_t>(opcodes.size());
  if (n == 0) return InvalidArgumentError(what + ": graph has no nodes");
  TPUG_RETURN_IF_ERROR(CheckEdges(n, edge_index, what));
  gs.n = n;
  gs.m = static_cast<int64_t>(edge_index.size() / 2);
  gs.opcode.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    gs.opcode[i] = opcodes[i] < spec.num_opcodes() ? opcodes[i] : 0;
  }
  gs.node_cols = std::move(node_cols);
  gs.cfg_cols = std::move(cfg_cols);
  const bool layout = task == TaskKind::kLayout;
  if (layout) {
    TPUG_RETURN_IF_ERROR(CheckConfigNodes(n, config_nodes, what));
    gs.config_nodes = config_nodes;
  }
  BuildFullPlan(n, edge_index, gs.full);
  const int L = spec.num_layers();
  gs.plans.resize(L + 1);
  gs.use_full.assign(L + 1, 0);
  const bool early = !layout && spec.tile_join() == ModelSpec::TILE_JOIN_EARLY;
  gs.all_affected = naive || early;
  if (gs.all_affected) {
    std::fill(gs.use_full.begin(), gs.use_full.end(), 1);
  } else {
    // S_0: configurable nodes (layout) or none (tile late join).
    std::vector<int64_t> pos(n, -1), prev_pos(n, -1);
    if (layout) gs.plans[0].nodes = gs.config_nodes;
    for (int l = 1; l <= L; ++l) {
      BuildAffectedPlan(gs.full, gs.plans[l - 1], pos, prev_pos, gs.plans[l]);
    }
  }
  FillConfigRows(L, gs);
  if (!gs.all_affected) {
    gs.base_rows.resize(L);
    std::vector<uint8_t> seen(n);
    for (int l = 1; l <= L; ++l) {
      std::fill(seen.begin(), seen.end(), 0);
      const LayerPlan& p = gs.plans[l];
      for (const auto* refs : {&p.self_ref, &p.op_ref, &p.us_ref}) {
        for (int64_t r : *refs) {
          if (r < 0) seen[-r - 1] = 1;
        }
      }
      for (int64_t v = 0; v < n; ++v) {
        if (seen[v]) gs.base_rows[l - 1].push_back(v);
      }
    }
  }
  return gs;
}

}  // namespace tpugraphs::model::internal
