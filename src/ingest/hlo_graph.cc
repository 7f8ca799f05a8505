#include "tpugraphs/ingest/hlo_graph.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>

#include "tpugraphs/ingest/absent_dimensions.h"
#include "tpugraphs/ingest/node_features.h"
#include "tpugraphs/ingest/opcodes.h"

namespace tpugraphs::ingest {

std::vector<int64_t> ComputeNodeSplits(const xla::HloModuleProto& module) {
  std::vector<int64_t> splits = {0};
  int64_t count = 0;
  for (const xla::HloComputationProto& comp : module.computations()) {
    count += comp.instructions_size();
    const std::string& name = comp.name();
    if (name.find("cluster") != std::string::npos || name.find("while") != std::string::npos ||
        name.find("cond") != std::string::npos) {
      splits.push_back(count);
    }
  }
  if (splits.back() < count) splits.push_back(count);
  return splits;
}

namespace {

// Map from instruction id to node index. HLO ids are nearly dense, so when they span a range
// of at most a few times the number of instructions the map is a plain table (no hashing, one
// allocation); otherwise a hash map.
class IdIndex {
 public:
  void Init(int64_t lo, int64_t hi, int64_t n) {
    lo_ = lo;
    // hi - lo computed without overflow; the table is used when the span is small.
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    dense_ = n > 0 && span < static_cast<uint64_t>(4 * n + 1024);
    if (dense_) {
      table_.assign(static_cast<size_t>(span) + 1, -1);
    } else {
      map_.reserve(static_cast<size_t>(n) * 2);
    }
  }
  // false if `id` is already present.
  bool Insert(int64_t id, int64_t index) {
    if (!dense_) return map_.emplace(id, index).second;
    int64_t& slot = table_[Slot(id)];
    if (slot >= 0) return false;
    slot = index;
    return true;
  }
  // The node index of `id`, or -1.
  int64_t Find(int64_t id) const {
    if (dense_) {
      const uint64_t off = static_cast<uint64_t>(id) - static_cast<uint64_t>(lo_);
      return off < table_.size() ? table_[static_cast<size_t>(off)] : -1;
    }
    auto it = map_.find(id);
    return it == map_.end() ? -1 : it->second;
  }

 private:
  size_t Slot(int64_t id) const {
    return static_cast<size_t>(static_cast<uint64_t>(id) - static_cast<uint64_t>(lo_));
  }
  bool dense_ = false;
  int64_t lo_ = 0;
  std::vector<int64_t> table_;
  std::unordered_map<int64_t, int64_t> map_;
};

}  // namespace

Status BuildProgramGraph(const xla::HloModuleProto& module, const std::string& what, Graph* g,
                         bool mark_absent_dimensions) {
  int64_t n = 0;
  for (const auto& comp : module.computations()) n += comp.instructions_size();
  if (n == 0) return InvalidArgumentError(what + ": the HLO module has no instructions");

  // Instruction id -> node index, and computation id -> node index of its root.
  IdIndex node_of_id;
  {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    for (const auto& comp : module.computations()) {
      for (const auto& inst : comp.instructions()) {
        lo = std::min(lo, inst.id());
        hi = std::max(hi, inst.id());
      }
    }
    node_of_id.Init(lo, hi, n);
    int64_t index = 0;
    for (const auto& comp : module.computations()) {
      for (const auto& inst : comp.instructions()) {
        if (!node_of_id.Insert(inst.id(), index)) {
          return InvalidArgumentError(what + ": instruction id " + std::to_string(inst.id()) +
                                      " (" + inst.name() + ") occurs twice in the module");
        }
        ++index;
      }
    }
  }
  std::unordered_map<int64_t, int64_t> root_of_computation;
  for (const auto& comp : module.computations()) {
    const int64_t root = node_of_id.Find(comp.root_id());
    if (root < 0) {
      return InvalidArgumentError(what + ": computation " + comp.name() + " has root id " +
                                  std::to_string(comp.root_id()) +
                                  ", which is no instruction of the module");
    }
    if (!root_of_computation.emplace(comp.id(), root).second) {
      return InvalidArgumentError(what + ": computation id " + std::to_string(comp.id()) +
                                  " occurs twice in the module");
    }
  }

  g->node_opcode.assign(static_cast<size_t>(n), 0);
  g->node_feat.assign(static_cast<size_t>(n) * kNodeFeatureCount, 0.0f);
  std::vector<std::pair<int64_t, int64_t>> edges;
  std::vector<int64_t> operands;
  int64_t u = 0;
  for (const auto& comp : module.computations()) {
    for (const auto& inst : comp.instructions()) {
      g->node_opcode[u] = OpcodeId(inst.opcode());
      float* row = &g->node_feat[static_cast<size_t>(u) * kNodeFeatureCount];
      FeaturizeInstruction(inst, inst.id() == comp.root_id(), row);
      if (mark_absent_dimensions) MarkAbsentDimensions(CountsOfInstruction(inst), row);
      operands.assign(inst.operand_ids().begin(), inst.operand_ids().end());
      std::sort(operands.begin(), operands.end());
      operands.erase(std::unique(operands.begin(), operands.end()), operands.end());
      for (int64_t id : operands) {
        const int64_t v = node_of_id.Find(id);
        if (v < 0) {
          return InvalidArgumentError(what + ": instruction " + inst.name() + " (id " +
                                      std::to_string(inst.id()) + ") has operand id " +
                                      std::to_string(id) + ", which does not exist");
        }
        edges.emplace_back(u, v);
      }
      for (int64_t cid : inst.called_computation_ids()) {
        auto it = root_of_computation.find(cid);
        if (it == root_of_computation.end()) {
          return InvalidArgumentError(what + ": instruction " + inst.name() + " (id " +
                                      std::to_string(inst.id()) + ") calls computation id " +
                                      std::to_string(cid) + ", which does not exist");
        }
        edges.emplace_back(u, it->second);
      }
      ++u;
    }
  }

  std::sort(edges.begin(), edges.end());
  for (size_t i = 0; i < edges.size(); ++i) {
    const auto& [a, b] = edges[i];
    if (a == b) {
      return InvalidArgumentError(what + ": node " + std::to_string(a) +
                                  " would get an edge to itself (it uses its own result)");
    }
    if (i > 0 && edges[i - 1] == edges[i]) {
      return InvalidArgumentError(
          what + ": duplicate edge [" + std::to_string(a) + ", " + std::to_string(b) +
          "] (an instruction calls the same computation twice, or uses a computation's root "
          "both as operand and callee); the release's encoder rejects such modules");
    }
  }
  g->edge_index.resize(edges.size() * 2);
  for (size_t i = 0; i < edges.size(); ++i) {
    g->edge_index[2 * i] = edges[i].first;
    g->edge_index[2 * i + 1] = edges[i].second;
  }
  g->node_splits = ComputeNodeSplits(module);
  g->absent_dimensions_marked = mark_absent_dimensions;
  return Status::Ok();
}

}  // namespace tpugraphs::ingest
