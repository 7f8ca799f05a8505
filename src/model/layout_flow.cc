#include "tpugraphs/model/layout_flow.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/ingest/opcodes.h"

namespace tpugraphs::model {
namespace {

// Raw node feature columns (ingest-spec section 4).
constexpr int kIsRoot = 0, kDims = 21, kMinorToMajor = 134;

// The class of an opcode id (ingest/opcodes.h). Ids the table does not know (0, and anything
// above its largest id, which a hostile dataset may hold) are free: they neither follow a layout
// nor are configurable.
ingest::OpClass ClassOfOpcodeId(uint8_t opcode) {
  static const std::array<ingest::OpClass, ingest::kNumOpcodeIds> table = [] {
    std::array<ingest::OpClass, ingest::kNumOpcodeIds> t{};
    t[0] = ingest::OpClass::kFree;
    for (int id = 1; id < ingest::kNumOpcodeIds; ++id) {
      t[id] = ingest::OpClassOf(ingest::OpcodeName(id));
    }
    return t;
  }();
  return opcode < ingest::kNumOpcodeIds ? table[opcode] : ingest::OpClass::kFree;
}

// Elementwise instructions and fusions take their first operand's layout.
bool FollowsOperandLayout(uint8_t opcode) {
  const ingest::OpClass c = ClassOfOpcodeId(opcode);
  return c == ingest::OpClass::kElementwise || c == ingest::OpClass::kFusion;
}

bool IsReshape(uint8_t opcode) { return ClassOfOpcodeId(opcode) == ingest::OpClass::kReshape; }

}  // namespace

LayoutFlow ConfigLayoutFlow(const Graph& g) {
  LayoutFlow flow;
  if (!g.is_layout()) return flow;
  const int64_t n = g.num_nodes(), m = g.num_edges();
  const int64_t nc = static_cast<int64_t>(g.node_config_ids.size());
  flow.source.assign(nc * 2, -1);
  flow.follower_size.assign(nc, 0.0f);
  flow.has_exit.assign(nc, 0.0f);
  if (static_cast<int64_t>(g.node_feat.size()) != n * kNodeFeatureCount ||
      static_cast<int64_t>(g.node_opcode.size()) != n) {
    return flow;
  }
  std::vector<int32_t> slot(n, -1);
  for (int64_t j = 0; j < nc; ++j) {
    const int64_t v = g.node_config_ids[j];
    if (v >= 0 && v < n) slot[v] = static_cast<int32_t>(j);
  }
  // Operands (edge order) and users of every node, in CSR form; row [u, v]: u reads v.
  auto valid = [&](int64_t e) {
    const int64_t u = g.edge_index[2 * e], v = g.edge_index[2 * e + 1];
    return u >= 0 && u < n && v >= 0 && v < n;
  };
  std::vector<int64_t> op_ptr(n + 1, 0), us_ptr(n + 1, 0);
  for (int64_t e = 0; e < m; ++e) {
    if (!valid(e)) continue;
    ++op_ptr[g.edge_index[2 * e] + 1];
    ++us_ptr[g.edge_index[2 * e + 1] + 1];
  }
  for (int64_t i = 0; i < n; ++i) op_ptr[i + 1] += op_ptr[i], us_ptr[i + 1] += us_ptr[i];
  std::vector<int64_t> ops(op_ptr[n]), users(us_ptr[n]);
  {
    std::vector<int64_t> of(op_ptr.begin(), op_ptr.end() - 1), uf(us_ptr.begin(), us_ptr.end() - 1);
    for (int64_t e = 0; e < m; ++e) {
      if (!valid(e)) continue;
      const int64_t u = g.edge_index[2 * e], v = g.edge_index[2 * e + 1];
      ops[of[u]++] = v;
      users[uf[v]++] = u;
    }
  }
  const float* feat = g.node_feat.data();
  auto same_array = [&](int64_t a, int64_t b) {
    const float* fa = feat + a * kNodeFeatureCount;
    const float* fb = feat + b * kNodeFeatureCount;
    for (int i = 0; i < 6; ++i) {
      if (fa[kDims + i] != fb[kDims + i] || fa[kMinorToMajor + i] != fb[kMinorToMajor + i]) {
        return false;
      }
    }
    return true;
  };
  auto elements = [&](int64_t v) {
    double e = 1.0;
    for (int i = 0; i < 6; ++i) {
      const float d = feat[v * kNodeFeatureCount + kDims + i];
      if (d >= 1) e *= d;
    }
    return e;
  };
  // Followers: an instruction that takes its first operand's layout, whose first operand is a
  // configurable node or a follower of one, and whose array (dims and graph layout) is that
  // node's, follows the node's chosen output layout.
  std::vector<int32_t> owner(n, -1);
  std::vector<double> follower_elements(nc, 0.0);
  for (int64_t u = 0; u < n; ++u) {
    if (slot[u] >= 0 || !FollowsOperandLayout(g.node_opcode[u])) continue;
    // The graph's edges are sorted by producer, not in operand order (ingest-spec section 3), so
    // the first operand is not known: the first operand in edge order that is a configurable
    // node or a follower with u's array stands for it.
    for (int64_t x = op_ptr[u]; x < op_ptr[u + 1]; ++x) {
      const int64_t s = ops[x];
      const int32_t src = slot[s] >= 0 ? slot[s] : owner[s];
      if (src < 0 || !same_array(u, g.node_config_ids[src])) continue;
      owner[u] = src;
      follower_elements[src] += elements(u);
      break;
    }
  }
  for (int64_t j = 0; j < nc; ++j) {
    flow.follower_size[j] = static_cast<float>(std::log1p(follower_elements[j]) / 16);
  }
  // Sources of each configurable node's input (operand 0) and kernel (operand 1).
  for (int64_t j = 0; j < nc; ++j) {
    const int64_t v = g.node_config_ids[j];
    if (v < 0 || v >= n) continue;
    for (int t = 0; t < 2 && op_ptr[v] + t < op_ptr[v + 1]; ++t) {
      const int64_t p = ops[op_ptr[v] + t];
      flow.source[2 * j + t] = slot[p] >= 0 ? slot[p] : owner[p];
    }
  }
  // Exits: a member of j's layout group (the node or a follower) read by an instruction outside
  // the group that does not read it as a configurable node's input or kernel, or a root.
  auto reads_as_config_operand = [&](int64_t w, int64_t v) {
    if (slot[w] < 0) return false;
    const int tensors = IsReshape(g.node_opcode[w]) ? 1 : 2;  // operands with a chosen layout
    for (int t = 0; t < tensors && op_ptr[w] + t < op_ptr[w + 1]; ++t) {
      if (ops[op_ptr[w] + t] == v) return true;
    }
    return false;
  };
  for (int64_t v = 0; v < n; ++v) {
    const int32_t j = slot[v] >= 0 ? slot[v] : owner[v];
    if (j < 0 || flow.has_exit[j] != 0.0f) continue;
    bool exit = feat[v * kNodeFeatureCount + kIsRoot] == 1.0f;
    for (int64_t x = us_ptr[v]; x < us_ptr[v + 1] && !exit; ++x) {
      const int64_t w = users[x];
      if (owner[w] == j) continue;
      if (!reads_as_config_operand(w, v)) exit = true;
    }
    if (exit) flow.has_exit[j] = 1.0f;
  }
  return flow;
}

LayoutFlow SliceLayoutFlow(const LayoutFlow& flow, const std::vector<int64_t>& slots) {
  LayoutFlow out;
  if (flow.size() == 0) return out;
  std::vector<int32_t> local(flow.size(), -1);
  for (size_t i = 0; i < slots.size(); ++i) local[slots[i]] = static_cast<int32_t>(i);
  for (int64_t s : slots) {
    for (int t = 0; t < 2; ++t) {
      const int32_t src = flow.source[2 * s + t];
      out.source.push_back(src >= 0 ? local[src] : -1);
    }
    out.follower_size.push_back(flow.follower_size[s]);
    out.has_exit.push_back(flow.has_exit[s]);
  }
  return out;
}

}  // namespace tpugraphs::model
