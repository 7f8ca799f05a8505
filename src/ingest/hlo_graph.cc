#include "tpugraphs/ingest/hlo_graph.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>

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

Status BuildProgramGraph(const xla::HloModuleProto& module, const std::string& what, Graph* g) {
  int64_t n = 0;
  for (const auto& comp : module.computations()) n += comp.instructions_size();
  if (n == 0) return InvalidArgumentError(what + ": the HLO module has no instructions");

  // Instruction id -> node index, and computation id -> node index of its root.
  std::unordered_map<int64_t, int64_t> node_of_id;
  node_of_id.reserve(static_cast<size_t>(n) * 2);
  {
    int64_t index = 0;
    for (const auto& comp : module.computations()) {
      for (const auto& inst : comp.instructions()) {
        if (!node_of_id.emplace(inst.id(), index).second) {
          return InvalidArgumentError(what + ": instruction id " + std::to_string(inst.id()) +
                                      " (" + inst.name() + ") occurs twice in the module");
        }
        ++index;
      }
    }
  }
  std::unordered_map<int64_t, int64_t> root_of_computation;
  for (const auto& comp : module.computations()) {
    auto it = node_of_id.find(comp.root_id());
    if (it == node_of_id.end()) {
      return InvalidArgumentError(what + ": computation " + comp.name() + " has root id " +
                                  std::to_string(comp.root_id()) +
                                  ", which is no instruction of the module");
    }
    if (!root_of_computation.emplace(comp.id(), it->second).second) {
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
      FeaturizeInstruction(inst, inst.id() == comp.root_id(),
                           &g->node_feat[static_cast<size_t>(u) * kNodeFeatureCount]);
      operands.assign(inst.operand_ids().begin(), inst.operand_ids().end());
      std::sort(operands.begin(), operands.end());
      operands.erase(std::unique(operands.begin(), operands.end()), operands.end());
      for (int64_t id : operands) {
        auto it = node_of_id.find(id);
        if (it == node_of_id.end()) {
          return InvalidArgumentError(what + ": instruction " + inst.name() + " (id " +
                                      std::to_string(inst.id()) + ") has operand id " +
                                      std::to_string(id) + ", which does not exist");
        }
        edges.emplace_back(u, it->second);
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
  return Status::Ok();
}

}  // namespace tpugraphs::ingest
