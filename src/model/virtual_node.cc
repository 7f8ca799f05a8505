#include "tpugraphs/model/virtual_node.h"

#include <string>
#include <vector>

namespace tpugraphs::model {

Status AddVirtualNode(ModelSpec::VirtualNode mode, int opcode, Graph* g) {
  const int64_t n = g->num_nodes();
  if (mode == ModelSpec::VIRTUAL_NODE_NONE || !g->is_layout() || n == 0) return Status::Ok();
  if (opcode < 0 || opcode > 255) {
    return InvalidArgumentError("graph " + g->name + ": virtual node opcode " +
                                std::to_string(opcode) + " is outside [0, 255]");
  }
  std::vector<uint8_t> chosen(n, 0);
  if (mode == ModelSpec::VIRTUAL_NODE_OUTPUTS) {
    std::vector<uint8_t> read(n, 0);
    for (size_t e = 0; e < g->edge_index.size(); ++e) {
      const int64_t v = g->edge_index[e];
      if (v < 0 || v >= n) {
        return InvalidArgumentError("graph " + g->name + ": edge " + std::to_string(e / 2) +
                                    " refers to node " + std::to_string(v) + " outside [0, " +
                                    std::to_string(n) + ")");
      }
      if (e % 2 == 1) read[v] = 1;
    }
    for (int64_t v = 0; v < n; ++v) chosen[v] = read[v] ? 0 : 1;
  } else {
    for (int64_t v : g->node_config_ids) {
      if (v < 0 || v >= n) {
        return InvalidArgumentError("graph " + g->name + ": configurable node " +
                                    std::to_string(v) + " outside [0, " + std::to_string(n) + ")");
      }
    }
  }
  g->node_opcode.push_back(static_cast<uint8_t>(opcode));
  g->node_feat.resize(g->node_feat.size() + kNodeFeatureCount, 0.0f);
  if (mode == ModelSpec::VIRTUAL_NODE_OUTPUTS) {
    for (int64_t v = 0; v < n; ++v) {
      if (!chosen[v]) continue;
      g->edge_index.push_back(n);
      g->edge_index.push_back(v);
    }
  } else {
    for (int64_t v : g->node_config_ids) {
      if (chosen[v]) continue;
      chosen[v] = 1;
      g->edge_index.push_back(n);
      g->edge_index.push_back(v);
    }
  }
  return Status::Ok();
}

}  // namespace tpugraphs::model
