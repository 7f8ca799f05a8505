#include "tpugraphs/ingest/layout_candidates.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "tpu_graphs/tuning.pb.h"
#include "tpugraphs/common/hash.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/ingest/node_features.h"

namespace tpugraphs::ingest {
namespace {

bool IsConfigurableOpcode(const std::string& opcode) {
  return opcode == "convolution" || opcode == "dot" || opcode == "reshape";
}

bool IsArray(const xla::ShapeProto& shape) {
  switch (shape.element_type()) {
    case xla::TUPLE:
    case xla::TOKEN:
    case xla::OPAQUE_TYPE:
    case xla::PRIMITIVE_TYPE_INVALID:
      return false;
    default:
      return true;
  }
}

// The layout of `shape` as a LayoutTensor; InvalidArgument if it is not a permutation.
StatusOr<LayoutTensor> TensorOf(const xla::ShapeProto& shape, const std::string& what) {
  LayoutTensor t;
  if (!IsArray(shape)) {
    t.rank = -1;  // not an array: never configured
    return t;
  }
  t.rank = shape.dimensions_size();
  const auto& m2m = shape.layout().minor_to_major();
  if (m2m.empty()) return t;
  std::vector<bool> seen(static_cast<size_t>(t.rank), false);
  bool ok = m2m.size() == t.rank;
  for (int i = 0; ok && i < m2m.size(); ++i) {
    const int64_t d = m2m.Get(i);
    ok = d >= 0 && d < t.rank && !seen[static_cast<size_t>(d)];
    if (ok) seen[static_cast<size_t>(d)] = true;
  }
  if (!ok) {
    std::string list;
    for (int i = 0; i < m2m.size(); ++i) {
      if (i > 0) list.push_back(',');
      list.append(std::to_string(m2m.Get(i)));
    }
    return InvalidArgumentError(what + ": layout {" + list + "} is not a permutation of the " +
                                std::to_string(t.rank) + " dimensions of the shape");
  }
  t.minor_to_major.assign(m2m.begin(), m2m.end());
  return t;
}

// The layout a candidate starts from: the stated one, else row-major (descending).
std::vector<int64_t> BaseLayout(const LayoutTensor& t) {
  if (!t.minor_to_major.empty()) return t.minor_to_major;
  std::vector<int64_t> out;
  for (int64_t d = t.rank - 1; d >= 0; --d) out.push_back(d);
  return out;
}

// A permutation whose two most minor dimensions are a pair other than base's, drawn uniformly
// among the r * (r - 1) - 1 other ordered pairs; the rest keep their relative order in base.
std::vector<int64_t> OtherMinorPair(const std::vector<int64_t>& base, Rng& rng) {
  const int64_t r = static_cast<int64_t>(base.size());
  const int64_t current = base[0] * r + base[1];  // ordered pair (minor, second minor)
  // Enumerate ordered pairs (a, b), a != b, as a * r + b; skip the current one.
  int64_t k = static_cast<int64_t>(rng.UniformInt(static_cast<uint64_t>(r * (r - 1) - 1)));
  int64_t a = 0, b = 0;
  for (int64_t code = 0; code < r * r; ++code) {
    a = code / r;
    b = code % r;
    if (a == b || code == current) continue;
    if (k-- == 0) break;
  }
  std::vector<int64_t> out = {a, b};
  for (int64_t d : base) {
    if (d != a && d != b) out.push_back(d);
  }
  return out;
}

// FNV-1a over a configuration's values. Equal configurations hash equal, so a set of hashes
// keeps the configurations distinct (a collision only makes a distinct draw look like a repeat,
// which is then redrawn).
uint64_t HashConfig(const std::vector<int8_t>& values) {
  return Fnv1a(values.data(), values.size());
}

// Stop drawing after this many repeats in a row: the program has (nearly) no other layouts.
constexpr int64_t kMaxRepeatsInARow = 2000;

}  // namespace

StatusOr<std::vector<ConfigurableNode>> FindConfigurableNodes(const xla::HloModuleProto& module,
                                                              const std::string& what) {
  std::unordered_map<int64_t, const xla::HloInstructionProto*> by_id;
  for (const auto& comp : module.computations()) {
    for (const auto& inst : comp.instructions()) by_id.emplace(inst.id(), &inst);
  }
  std::vector<ConfigurableNode> out;
  int64_t node = 0;
  for (const auto& comp : module.computations()) {
    for (const auto& inst : comp.instructions()) {
      const int64_t v = node++;
      if (!IsConfigurableOpcode(inst.opcode()) || inst.operand_ids_size() == 0) continue;
      const std::string where = what + ": instruction " + inst.name();
      ConfigurableNode c;
      c.node = v;
      c.instruction = inst.name();
      c.opcode = inst.opcode();
      const int operands = inst.opcode() == "reshape" ? 1 : std::min(2, inst.operand_ids_size());
      TPUG_ASSIGN_OR_RETURN(LayoutTensor out_tensor, TensorOf(inst.shape(), where));
      c.tensors.push_back(std::move(out_tensor));
      for (int i = 0; i < operands; ++i) {
        const auto it = by_id.find(inst.operand_ids(i));
        if (it == by_id.end()) {
          return InvalidArgumentError(where + ": operand id " +
                                      std::to_string(inst.operand_ids(i)) + " does not exist");
        }
        TPUG_ASSIGN_OR_RETURN(LayoutTensor t, TensorOf(it->second->shape(),
                                                       where + ", operand " + it->second->name()));
        c.tensors.push_back(std::move(t));
      }
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::vector<std::string> InstructionNamesOfNodes(const xla::HloModuleProto& module,
                                                 const std::vector<int64_t>& nodes) {
  std::unordered_map<int64_t, std::vector<size_t>> wanted;  // node -> positions in `nodes`
  for (size_t i = 0; i < nodes.size(); ++i) wanted[nodes[i]].push_back(i);
  std::vector<std::string> out(nodes.size());
  int64_t node = 0;
  for (const auto& comp : module.computations()) {
    for (const auto& inst : comp.instructions()) {
      const auto it = wanted.find(node++);
      if (it == wanted.end()) continue;
      for (size_t i : it->second) out[i] = inst.name();
    }
  }
  return out;
}

Status FeaturizeNodeLayouts(const std::vector<std::vector<int64_t>>& layouts,
                            const std::string& what, int8_t* out) {
  tpu_graphs::LayoutConfig::NodeLayoutConfig node;
  for (const auto& m2m : layouts) {
    auto* tensor = node.add_tensors();
    for (int64_t d : m2m) tensor->add_dims(static_cast<int32_t>(d));
  }
  return FeaturizeLayoutNode(node, what, out);
}

Status AddLayoutCandidates(const xla::HloModuleProto& module, const std::string& what,
                           const LayoutCandidateOptions& options, Graph* g) {
  TPUG_ASSIGN_OR_RETURN(std::vector<ConfigurableNode> nodes, FindConfigurableNodes(module, what));
  g->node_config_ids.clear();
  g->config_node_names.clear();
  g->node_config_feat.clear();
  g->config_runtime.clear();
  g->config_runtime_normalizers.clear();
  g->config_feat.clear();
  g->num_configs = 0;
  if (nodes.empty()) {
    spdlog::info("{}: no configurable node (convolution, dot, reshape); no layout configurations",
                 what);
    return Status::Ok();
  }
  const int64_t nc = static_cast<int64_t>(nodes.size());
  const int64_t row = nc * kLayoutConfigFeatureCount;
  if ((options.alternatives + 1) > kMaxCandidateConfigBytes / row) {
    return InvalidArgumentError(
        what + ": " + std::to_string(options.alternatives) + " layout candidates of " +
        std::to_string(nc) + " configurable nodes would take more than " +
        std::to_string(kMaxCandidateConfigBytes >> 20) + " MiB of config values; ask for fewer");
  }
  for (const auto& c : nodes) {
    g->node_config_ids.push_back(c.node);
    g->config_node_names.push_back(c.instruction);
  }

  // Configuration 0: the layouts the dump states.
  std::vector<std::vector<std::vector<int64_t>>> layouts(nodes.size());
  std::vector<int8_t> config(static_cast<size_t>(row));
  for (size_t k = 0; k < nodes.size(); ++k) {
    for (const LayoutTensor& t : nodes[k].tensors) layouts[k].push_back(t.minor_to_major);
    TPUG_RETURN_IF_ERROR(FeaturizeNodeLayouts(layouts[k], what + ": " + nodes[k].instruction,
                                              &config[k * kLayoutConfigFeatureCount]));
  }
  std::vector<int8_t> feat = config;
  std::unordered_set<uint64_t> seen = {HashConfig(config)};

  // Nodes with a tensor that has more than one layout.
  std::vector<size_t> changeable;
  for (size_t k = 0; k < nodes.size(); ++k) {
    for (const LayoutTensor& t : nodes[k].tensors) {
      if (t.rank >= 2) {
        changeable.push_back(k);
        break;
      }
    }
  }
  int64_t produced = 0;
  if (options.alternatives > 0 && !changeable.empty()) {
    Rng rng(DeriveSeed(options.seed, "layout-candidates:" + g->name));
    int64_t repeats = 0;
    while (produced < options.alternatives && repeats < kMaxRepeatsInARow) {
      const int64_t max_nodes = std::min<int64_t>(3, static_cast<int64_t>(changeable.size()));
      const int64_t count = 1 + static_cast<int64_t>(rng.UniformInt(max_nodes));
      std::vector<int8_t> cand = config;
      for (int64_t pick :
           rng.SampleWithoutReplacement(static_cast<int64_t>(changeable.size()), count)) {
        const size_t k = changeable[static_cast<size_t>(pick)];
        const ConfigurableNode& c = nodes[k];
        std::vector<size_t> tensors;
        for (size_t t = 0; t < c.tensors.size(); ++t) {
          if (c.tensors[t].rank >= 2) tensors.push_back(t);
        }
        // Each such tensor changes with probability 1/2, at least one of them.
        std::vector<bool> change(c.tensors.size(), false);
        bool any = false;
        for (size_t t : tensors) {
          change[t] = rng.Uniform() < 0.5;
          any = any || change[t];
        }
        if (!any) change[tensors[rng.UniformInt(tensors.size())]] = true;
        std::vector<std::vector<int64_t>> node_layouts = layouts[k];
        for (size_t t = 0; t < c.tensors.size(); ++t) {
          if (change[t]) node_layouts[t] = OtherMinorPair(BaseLayout(c.tensors[t]), rng);
        }
        TPUG_RETURN_IF_ERROR(FeaturizeNodeLayouts(node_layouts, what + ": " + c.instruction,
                                                  &cand[k * kLayoutConfigFeatureCount]));
      }
      if (!seen.insert(HashConfig(cand)).second) {
        ++repeats;
        continue;
      }
      repeats = 0;
      feat.insert(feat.end(), cand.begin(), cand.end());
      ++produced;
    }
  }
  if (produced < options.alternatives) {
    spdlog::warn("{}: {} distinct alternative layout configurations found of the {} asked for",
                 what, produced, options.alternatives);
  }
  g->num_configs = 1 + produced;
  g->node_config_feat = std::move(feat);
  g->config_runtime.assign(static_cast<size_t>(g->num_configs), 0);
  return Status::Ok();
}

}  // namespace tpugraphs::ingest
