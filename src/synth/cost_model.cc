#include "tpugraphs/synth/cost_model.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

#include "tpugraphs/common/rng.h"

namespace tpugraphs::synth {
namespace {

int32_t ElementBytes(int type) {
  switch (type) {
    case xla::PRED:
    case xla::S8:
    case xla::U8:
      return 1;
    case xla::S16:
    case xla::U16:
    case xla::F16:
    case xla::BF16:
      return 2;
    case xla::S64:
    case xla::U64:
    case xla::F64:
    case xla::C64:
      return 8;
    case xla::C128:
      return 16;
    default:
      return 4;
  }
}

double Elements(const std::vector<int64_t>& dims) {
  double e = 1;
  for (int64_t d : dims) e *= static_cast<double>(d);
  return e;
}

bool IsPermutation(const std::vector<int64_t>& p, size_t rank) {
  if (p.size() != rank || rank > 64) return false;
  uint64_t seen = 0;
  for (int64_t v : p) {
    if (v < 0 || v >= static_cast<int64_t>(rank) || (seen >> v) & 1) return false;
    seen |= uint64_t{1} << v;
  }
  return true;
}

std::vector<int64_t> Descending(size_t rank) {
  std::vector<int64_t> m(rank);
  for (size_t i = 0; i < rank; ++i) m[i] = static_cast<int64_t>(rank - 1 - i);
  return m;
}

bool IsDescending(const std::vector<int64_t>& m) {
  for (size_t i = 0; i < m.size(); ++i) {
    if (m[i] != static_cast<int64_t>(m.size() - 1 - i)) return false;
  }
  return true;
}

double PaddedElements(const std::vector<int64_t>& dims, const std::vector<int64_t>& m2m,
                      const TpuConstants& k) {
  if (dims.empty()) return 1;
  double e = 1;
  for (size_t pos = 0; pos < m2m.size(); ++pos) {
    double d = static_cast<double>(dims[m2m[pos]]);
    if (pos == 0) d = std::ceil(d / k.lane_tile) * k.lane_tile;
    if (pos == 1) d = std::ceil(d / k.sublane_tile) * k.sublane_tile;
    e *= d;
  }
  return e;
}

}  // namespace

double PaddedBytes(const std::vector<int64_t>& dims, const std::vector<int64_t>& m2m,
                   int32_t element_bytes, const TpuConstants& k) {
  const std::vector<int64_t>& layout =
      IsPermutation(m2m, dims.size()) ? m2m : Descending(dims.size());
  return PaddedElements(dims, layout, k) * element_bytes;
}

StatusOr<ModuleAnalysis> AnalyzeModule(const xla::HloModuleProto& module, const std::string& what) {
  ModuleAnalysis a;
  if (module.computations_size() == 0)
    return InvalidArgumentError(what + ": module has no computations");
  std::unordered_map<int64_t, int32_t> comp_index, node_index;
  int64_t total = 0;
  for (const auto& c : module.computations()) total += c.instructions_size();
  if (total > (int64_t{1} << 30)) return InvalidArgumentError(what + ": too many instructions");
  a.nodes.resize(total);
  int32_t n = 0;
  for (int ci = 0; ci < module.computations_size(); ++ci) {
    const auto& c = module.computations(ci);
    if (!comp_index.emplace(c.id(), ci).second) {
      return InvalidArgumentError(what + ": duplicate computation id " + std::to_string(c.id()));
    }
    ComputationInfo info;
    info.name = c.name();
    info.first_node = n;
    info.num_nodes = c.instructions_size();
    info.root = -1;
    for (const auto& inst : c.instructions()) {
      if (!node_index.emplace(inst.id(), n).second) {
        return InvalidArgumentError(what + ": duplicate instruction id " +
                                    std::to_string(inst.id()));
      }
      if (inst.id() == c.root_id()) info.root = n;
      ++n;
    }
    if (info.root < 0) {
      return InvalidArgumentError(what + ": computation '" + c.name() + "' has root_id " +
                                  std::to_string(c.root_id()) +
                                  " that is not one of its instructions");
    }
    a.computations.push_back(std::move(info));
  }
  // Instructions.
  n = 0;
  for (int ci = 0; ci < module.computations_size(); ++ci) {
    const auto& c = module.computations(ci);
    for (const auto& inst : c.instructions()) {
      NodeInfo& node = a.nodes[n];
      node.opcode = inst.opcode();
      node.cls = ingest::OpClassOf(inst.opcode());
      node.computation = ci;
      const xla::ShapeProto* shape = &inst.shape();
      if (shape->element_type() == xla::TUPLE && shape->tuple_shapes_size() > 0) {
        shape = &shape->tuple_shapes(0);
      }
      node.element_bytes = ElementBytes(shape->element_type());
      for (int64_t d : shape->dimensions()) {
        if (d < 0 || d > (int64_t{1} << 40)) {
          return InvalidArgumentError(what + ": instruction " + inst.name() + " has dimension " +
                                      std::to_string(d));
        }
        node.dims.push_back(d);
      }
      std::vector<int64_t> m2m(shape->layout().minor_to_major().begin(),
                               shape->layout().minor_to_major().end());
      node.m2m = IsPermutation(m2m, node.dims.size()) ? m2m : Descending(node.dims.size());
      for (int64_t op : inst.operand_ids()) {
        auto it = node_index.find(op);
        if (it == node_index.end() || it->second < a.computations[ci].first_node ||
            it->second >= a.computations[ci].first_node + a.computations[ci].num_nodes) {
          return InvalidArgumentError(what + ": instruction " + inst.name() + " has operand id " +
                                      std::to_string(op) +
                                      " that is not defined in its computation");
        }
        node.operands.push_back(it->second);
      }
      for (int64_t cc : inst.called_computation_ids()) {
        auto it = comp_index.find(cc);
        if (it == comp_index.end()) {
          return InvalidArgumentError(what + ": instruction " + inst.name() +
                                      " calls unknown computation id " + std::to_string(cc));
        }
        if (it->second >= ci) {
          return InvalidArgumentError(what + ": instruction " + inst.name() +
                                      " calls a computation that does not precede its caller");
        }
        node.called.push_back(it->second);
      }
      ++n;
    }
  }
  for (int32_t v = 0; v < n; ++v) {
    std::vector<int32_t> ops = a.nodes[v].operands;
    std::sort(ops.begin(), ops.end());
    ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    for (int32_t u : ops) a.nodes[u].users.push_back(v);
  }
  // Flops per execution.
  for (int32_t v = 0; v < n; ++v) {
    NodeInfo& node = a.nodes[v];
    const double out = Elements(node.dims);
    switch (node.cls) {
      case OpClass::kElementwise:
        node.vector_flops = out;
        break;
      case OpClass::kReduce:
        node.vector_flops = node.operands.empty() ? out : Elements(a.nodes[node.operands[0]].dims);
        break;
      case OpClass::kConvolution: {
        double macs = 1;
        const int64_t kernel_rank =
            node.operands.size() > 1 ? static_cast<int64_t>(a.nodes[node.operands[1]].dims.size())
                                     : 0;
        const auto& inst_dims =
            node.operands.size() > 1 ? a.nodes[node.operands[1]].dims : node.dims;
        // Kernel elements / output features = window size x input features per group.
        const int64_t out_feature = node.dims.empty() ? 1 : std::max<int64_t>(1, node.dims.back());
        if (kernel_rank > 0) macs = Elements(inst_dims) / static_cast<double>(out_feature);
        node.matrix_flops = 2.0 * out * std::max(1.0, macs);
        break;
      }
      case OpClass::kDot: {
        double kdim = 1;
        if (!node.operands.empty()) {
          const auto& lhs = a.nodes[node.operands[0]].dims;
          if (!lhs.empty()) kdim = static_cast<double>(lhs.back());
        }
        node.matrix_flops = 2.0 * out * kdim;
        break;
      }
      default:
        break;
    }
  }
  // Executions: the entry (last computation) runs once; callees after callers in reverse order.
  a.entry = static_cast<int32_t>(a.computations.size()) - 1;
  a.computations[a.entry].executions = 1;
  for (int32_t ci = a.entry; ci >= 0; --ci) {
    const ComputationInfo& c = a.computations[ci];
    for (int32_t v = c.first_node; v < c.first_node + c.num_nodes; ++v) {
      const NodeInfo& node = a.nodes[v];
      for (int32_t callee : node.called) {
        ComputationInfo& cc = a.computations[callee];
        if (node.opcode == "fusion") {
          cc.fused = true;
        } else if (node.opcode == "while") {
          cc.executions += c.executions * TpuConstants{}.while_trip_count;
        } else if (node.opcode == "call" || node.opcode == "conditional") {
          cc.executions += c.executions;
        }
        // Reducers, comparators and scatter combiners are priced inside their caller.
      }
    }
  }
  return a;
}

std::vector<int64_t> ConfigurableNodes(const ModuleAnalysis& a) {
  std::vector<int64_t> out;
  for (size_t v = 0; v < a.nodes.size(); ++v) {
    const NodeInfo& node = a.nodes[v];
    if (a.computations[node.computation].fused) continue;
    if (node.cls == OpClass::kConvolution || node.cls == OpClass::kDot ||
        node.cls == OpClass::kReshape) {
      if (node.operands.empty()) continue;
      out.push_back(static_cast<int64_t>(v));
    }
  }
  return out;
}

namespace {

// Cost in ns of one execution of a non-configurable node with its proto layouts.
double FixedNodeCost(const ModuleAnalysis& a, const NodeInfo& node, const TpuConstants& k) {
  if (node.cls == OpClass::kFree) return 0;
  double vf = node.vector_flops, mf = node.matrix_flops;
  if (node.cls == OpClass::kFusion) {
    for (int32_t c : node.called) {
      const ComputationInfo& fc = a.computations[c];
      for (int32_t v = fc.first_node; v < fc.first_node + fc.num_nodes; ++v) {
        vf += a.nodes[v].vector_flops;
        mf += a.nodes[v].matrix_flops;
      }
    }
  }
  double bytes = PaddedBytes(node.dims, node.m2m, node.element_bytes, k);
  std::vector<int32_t> ops = node.operands;
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  for (int32_t op : ops) {
    const NodeInfo& o = a.nodes[op];
    bytes += PaddedBytes(o.dims, o.m2m, o.element_bytes, k);
  }
  const double compute = vf / k.vpu_flops_per_ns + mf / k.mxu_flops_per_ns;
  return std::max(compute, bytes / k.hbm_bytes_per_ns) + k.op_overhead_ns;
}

}  // namespace

LayoutCostModel::LayoutCostModel(const ModuleAnalysis& a, std::vector<int64_t> configurable,
                                 TpuConstants k)
    : a_(a), configurable_(std::move(configurable)), k_(k) {
  const size_t n = a_.nodes.size();
  const size_t nc = configurable_.size();
  config_slot_.assign(n, -1);
  for (size_t i = 0; i < nc; ++i) config_slot_[configurable_[i]] = static_cast<int32_t>(i);
  // Regions: a forward pass in node order. A layout-agnostic node (elementwise or fusion) with
  // the source's dims and proto layout joins the region of its first operand.
  owner_.assign(n, -1);
  regions_.assign(nc, {});
  exits_.assign(nc, {});
  for (size_t u = 0; u < n; ++u) {
    const NodeInfo& node = a_.nodes[u];
    if (config_slot_[u] >= 0 || node.operands.empty()) continue;
    if (node.cls != OpClass::kElementwise && node.cls != OpClass::kFusion) continue;
    const int32_t s = node.operands[0];
    const int32_t src = config_slot_[s] >= 0 ? config_slot_[s] : owner_[s];
    if (src < 0) continue;
    const NodeInfo& source = a_.nodes[configurable_[src]];
    if (node.dims != source.dims || node.m2m != source.m2m) continue;
    owner_[u] = src;
  }
  auto in_region = [&](int32_t v, size_t i) {
    return owner_[v] == static_cast<int32_t>(i) || config_slot_[v] == static_cast<int32_t>(i);
  };
  for (size_t u = 0; u < n; ++u) {
    const int32_t i = owner_[u];
    if (i < 0) continue;
    const NodeInfo& node = a_.nodes[u];
    RegionNode r;
    r.node = static_cast<int32_t>(u);
    r.executions = a_.computations[node.computation].executions;
    double vf = node.vector_flops, mf = node.matrix_flops;
    if (node.cls == OpClass::kFusion) {
      for (int32_t c : node.called) {
        const ComputationInfo& fc = a_.computations[c];
        for (int32_t v = fc.first_node; v < fc.first_node + fc.num_nodes; ++v) {
          vf += a_.nodes[v].vector_flops;
          mf += a_.nodes[v].matrix_flops;
        }
      }
    }
    r.compute_ns = vf / k_.vpu_flops_per_ns + mf / k_.mxu_flops_per_ns;
    r.other_bytes = 0;
    r.region_bytes = node.element_bytes;
    std::vector<int32_t> ops = node.operands;
    std::sort(ops.begin(), ops.end());
    ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    for (int32_t op : ops) {
      const NodeInfo& o = a_.nodes[op];
      if (in_region(op, i) && o.dims == node.dims) {
        r.region_bytes += o.element_bytes;
      } else {
        r.other_bytes += PaddedBytes(o.dims, o.m2m, o.element_bytes, k_);
      }
    }
    if (r.executions > 0) regions_[i].push_back(r);
  }
  // Exits: region tensors (the source included) read by a node outside the region that is not a
  // configurable node reading it through its own input/kernel layout, or a computation root.
  for (size_t i = 0; i < nc; ++i) {
    std::vector<int32_t> members = {static_cast<int32_t>(configurable_[i])};
    for (const RegionNode& r : regions_[i]) members.push_back(r.node);
    for (int32_t v : members) {
      const NodeInfo& node = a_.nodes[v];
      bool exit = a_.computations[node.computation].root == v;
      for (int32_t w : node.users) {
        if (owner_[w] == static_cast<int32_t>(i)) continue;
        const int32_t slot = config_slot_[w];
        bool through_config = false;
        if (slot >= 0) {
          const auto& wops = a_.nodes[w].operands;
          for (size_t t = 0; t < wops.size() && t + 1 < static_cast<size_t>(NumTensors(slot));
               ++t) {
            if (wops[t] == v) through_config = true;
          }
        }
        if (!through_config) exit = true;
      }
      const double e = a_.computations[node.computation].executions;
      if (exit && e > 0) {
        exits_[i].push_back({v, e, static_cast<double>(node.element_bytes),
                             PaddedBytes(node.dims, node.m2m, node.element_bytes, k_)});
      }
    }
  }
  for (size_t v = 0; v < n; ++v) {
    const NodeInfo& node = a_.nodes[v];
    const double e = a_.computations[node.computation].executions;
    if (e == 0 || config_slot_[v] >= 0 || owner_[v] >= 0) continue;
    fixed_ns_ += e * FixedNodeCost(a_, node, k_);
  }
}

double LayoutCostModel::RegionCostNs(size_t i, const std::vector<int64_t>& layout) const {
  const NodeInfo& source = a_.nodes[configurable_[i]];
  const double padded = PaddedElements(source.dims, layout, k_);
  double cost = 0;
  for (const RegionNode& r : regions_[i]) {
    const double bytes = r.other_bytes + r.region_bytes * padded;
    cost +=
        r.executions * (std::max(r.compute_ns, bytes / k_.hbm_bytes_per_ns) + k_.op_overhead_ns);
  }
  for (const Exit& x : exits_[i]) {
    if (layout == a_.nodes[x.node].m2m) continue;
    cost += x.executions * ((x.element_bytes * padded + x.proto_bytes) / k_.hbm_bytes_per_ns +
                            k_.copy_overhead_ns);
  }
  return cost;
}

int LayoutCostModel::NumTensors(size_t i) const {
  const NodeInfo& node = a_.nodes[configurable_[i]];
  if (node.cls == OpClass::kReshape) return 2;
  return node.operands.size() >= 2 ? 3 : 2;
}

int64_t LayoutCostModel::TensorRank(size_t i, int t) const {
  const NodeInfo& node = a_.nodes[configurable_[i]];
  if (t == 0) return static_cast<int64_t>(node.dims.size());
  return static_cast<int64_t>(a_.nodes[node.operands[t - 1]].dims.size());
}

const std::vector<int64_t>& LayoutCostModel::DefaultOutputLayout(size_t i) const {
  return a_.nodes[configurable_[i]].m2m;
}

double LayoutCostModel::NodeCostNs(size_t i, const std::vector<int64_t>& out,
                                   const std::vector<int64_t>& in,
                                   const std::vector<int64_t>& kernel,
                                   const std::vector<std::vector<int64_t>>& producer) const {
  const NodeInfo& node = a_.nodes[configurable_[i]];
  const NodeInfo& x = a_.nodes[node.operands[0]];
  double cost = 0;
  // Copies of inputs whose producer layout differs from the layout this node reads.
  auto copy = [&](const NodeInfo& t, const std::vector<int64_t>& from,
                  const std::vector<int64_t>& to) {
    if (from == to) return 0.0;
    return (PaddedBytes(t.dims, from, t.element_bytes, k_) +
            PaddedBytes(t.dims, to, t.element_bytes, k_)) /
               k_.hbm_bytes_per_ns +
           k_.copy_overhead_ns;
  };
  cost += copy(x, producer[0], in);
  const double out_bytes = PaddedBytes(node.dims, out, node.element_bytes, k_);
  const double in_bytes = PaddedBytes(x.dims, in, x.element_bytes, k_);
  if (node.cls == OpClass::kReshape) {
    if (IsDescending(in) && IsDescending(out)) return cost + 0.2 * k_.op_overhead_ns;  // bitcast
    return cost + (in_bytes + out_bytes) / k_.hbm_bytes_per_ns + k_.op_overhead_ns;
  }
  double bytes = in_bytes + out_bytes;
  double eff = 1.0;
  // The matrix unit wants the contracted (input feature) dimension minor on the input.
  if (!x.dims.empty() && !in.empty() && in[0] != static_cast<int64_t>(x.dims.size()) - 1)
    eff *= 1.15;
  if (node.operands.size() >= 2) {
    const NodeInfo& w = a_.nodes[node.operands[1]];
    cost += copy(w, producer[1], kernel);
    bytes += PaddedBytes(w.dims, kernel, w.element_bytes, k_);
    // ... and the output feature dimension minor on the kernel.
    if (!w.dims.empty() && !kernel.empty() && kernel[0] != static_cast<int64_t>(w.dims.size()) - 1)
      eff *= 1.05;
  }
  const double compute = node.matrix_flops * eff / k_.mxu_flops_per_ns;
  return cost + std::max(compute, bytes / k_.hbm_bytes_per_ns) + k_.op_overhead_ns;
}

double LayoutCostModel::RuntimeNs(const std::vector<NodeLayout>& config) const {
  const size_t nc = configurable_.size();
  auto chosen = [&](size_t i, int t, size_t rank) -> const std::vector<int64_t>* {
    if (i >= config.size() || static_cast<size_t>(t) >= config[i].size()) return nullptr;
    const auto& l = config[i][t];
    return IsPermutation(l, rank) ? &l : nullptr;
  };
  // Resolved output layouts first: inputs of one configurable node may come from another.
  std::vector<const std::vector<int64_t>*> out_layout(nc);
  for (size_t i = 0; i < nc; ++i) {
    const NodeInfo& node = a_.nodes[configurable_[i]];
    const auto* l = chosen(i, 0, node.dims.size());
    out_layout[i] = l ? l : &node.m2m;
  }
  double total = fixed_ns_;
  std::vector<std::vector<int64_t>> producer(2);
  static const std::vector<int64_t> kNone;
  for (size_t i = 0; i < nc; ++i) {
    const NodeInfo& node = a_.nodes[configurable_[i]];
    const double e = a_.computations[node.computation].executions;
    if (e == 0) continue;
    const int nt = NumTensors(i);
    const std::vector<int64_t>* layouts[3] = {out_layout[i], &kNone, &kNone};
    for (int t = 1; t < nt; ++t) {
      const int32_t op = node.operands[t - 1];
      const int32_t slot = config_slot_[op];
      const int32_t src = slot >= 0 ? slot : owner_[op];
      producer[t - 1] = src >= 0 && k_.cross_node_terms ? *out_layout[src] : a_.nodes[op].m2m;
      const auto* l = chosen(i, t, a_.nodes[op].dims.size());
      layouts[t] = l ? l : &producer[t - 1];
    }
    double cost = NodeCostNs(i, *layouts[0], *layouts[1], *layouts[2], producer);
    total += e * cost + RegionCostNs(i, *layouts[0]);
  }
  return total;
}

// ------------------------------------------------------------------------------------------

struct TileCostModel::Terms {
  double compute_ns = 0, traffic_bytes = 0, working_set = 0, steps = 0;
};

StatusOr<TileCostModel> TileCostModel::Create(const ModuleAnalysis& a, const std::string& what,
                                              TpuConstants k) {
  TileCostModel m;
  m.k_ = k;
  const ComputationInfo& entry = a.computations[a.entry];
  const NodeInfo& root = a.nodes[entry.root];
  m.out_dims_ = root.dims;
  m.out_m2m_ = root.m2m;
  m.out_bytes_ = root.element_bytes;
  const double out_elems = std::max(1.0, Elements(root.dims));
  double vf = root.cls == OpClass::kFusion ? 0 : std::max(root.vector_flops, out_elems);
  double mf = root.matrix_flops;
  const NodeInfo* kernel = nullptr;
  if (root.cls == OpClass::kFusion) {
    if (root.called.empty())
      return InvalidArgumentError(what + ": fusion root calls no computation");
    const ComputationInfo& fc = a.computations[root.called[0]];
    for (int32_t v = fc.first_node; v < fc.first_node + fc.num_nodes; ++v) {
      const NodeInfo& node = a.nodes[v];
      vf += node.vector_flops;
      mf += node.matrix_flops;
      if (!kernel && (node.cls == OpClass::kConvolution || node.cls == OpClass::kDot) &&
          node.operands.size() >= 2) {
        kernel = &a.nodes[node.operands[1]];
      }
    }
  } else if (root.cls == OpClass::kConvolution || root.cls == OpClass::kDot) {
    if (root.operands.size() >= 2) kernel = &a.nodes[root.operands[1]];
  }
  if (kernel) {
    m.kernel_dims_ = kernel->dims;
    m.kernel_m2m_ = kernel->m2m;
    m.kernel_bytes_ = kernel->element_bytes;
    m.kernel_total_bytes_ = Elements(kernel->dims) * kernel->element_bytes;
  }
  bool kernel_skipped = false;
  for (int32_t op : root.operands) {
    const NodeInfo& o = a.nodes[op];
    if (kernel && !kernel_skipped && o.dims == kernel->dims) {
      kernel_skipped = true;
      continue;
    }
    m.streamed_bytes_ += Elements(o.dims) * o.element_bytes;
  }
  m.vector_flops_per_out_ = vf / out_elems;
  m.matrix_flops_ = mf;
  m.streamed_per_out_ = m.streamed_bytes_ / out_elems;
  return m;
}

namespace {
// Clamped bounds: `bounds` when it has one entry per dim, else the whole dims.
std::vector<int64_t> Bounds(const google::protobuf::RepeatedField<int64_t>& bounds,
                            const std::vector<int64_t>& dims) {
  std::vector<int64_t> b = dims;
  if (bounds.size() == static_cast<int>(dims.size())) {
    for (size_t i = 0; i < dims.size(); ++i)
      b[i] = std::clamp<int64_t>(bounds[i], 1, std::max<int64_t>(dims[i], 1));
  }
  return b;
}
}  // namespace

TileCostModel::Terms TileCostModel::Compute(const tpu_graphs::TileSizeConfig& config) const {
  Terms t;
  const std::vector<int64_t> tile = Bounds(config.output_bounds(), out_dims_);
  double n_tiles = 1;
  for (size_t i = 0; i < out_dims_.size(); ++i) {
    n_tiles *= std::ceil(static_cast<double>(out_dims_[i]) / std::max<int64_t>(tile[i], 1));
  }
  const double tile_elems = PaddedElements(tile, out_m2m_, k_);
  const double covered = n_tiles * tile_elems;  // >= output elements: padding waste
  const double waste = covered / std::max(1.0, Elements(out_dims_));
  double k_steps = 1, kernel_tile_bytes = 0, kernel_waste = 1;
  if (!kernel_dims_.empty()) {
    const std::vector<int64_t> kb = Bounds(config.kernel_bounds(), kernel_dims_);
    for (size_t i = 0; i < kernel_dims_.size(); ++i) {
      k_steps *= std::ceil(static_cast<double>(kernel_dims_[i]) / std::max<int64_t>(kb[i], 1));
    }
    kernel_tile_bytes = PaddedElements(kb, kernel_m2m_, k_) * kernel_bytes_;
    kernel_waste = k_steps * kernel_tile_bytes / std::max(1.0, kernel_total_bytes_);
  }
  t.compute_ns = vector_flops_per_out_ * covered / k_.vpu_flops_per_ns +
                 matrix_flops_ * waste * kernel_waste / k_.mxu_flops_per_ns;
  t.traffic_bytes =
      covered * out_bytes_ + streamed_bytes_ * waste + n_tiles * k_steps * kernel_tile_bytes;
  t.working_set = 2.0 * (tile_elems * (out_bytes_ + streamed_per_out_) + kernel_tile_bytes);
  t.steps = n_tiles * k_steps;
  return t;
}

double TileCostModel::WorkingSetBytes(const tpu_graphs::TileSizeConfig& config) const {
  return Compute(config).working_set;
}

double TileCostModel::RuntimeNs(const tpu_graphs::TileSizeConfig& config) const {
  const Terms t = Compute(config);
  double traffic = t.traffic_bytes;
  if (t.working_set > k_.fast_memory_bytes) {
    traffic *= 1.0 + k_.spill_factor;
  }
  return std::max(t.compute_ns, traffic / k_.hbm_bytes_per_ns) + t.steps * k_.per_tile_overhead_ns +
         k_.kernel_launch_ns;
}

double NoiseFactor(uint64_t seed, double sigma) {
  Rng rng(seed);
  const double z = std::clamp(rng.Normal(), -3.0, 3.0);
  return std::exp(sigma * z);
}

}  // namespace tpugraphs::synth
