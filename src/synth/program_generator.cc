#include "tpugraphs/synth/program_generator.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tpugraphs/common/rng.h"

namespace tpugraphs::synth {
namespace {

using xla::PrimitiveType;

// A value defined by an instruction: its id and array shape.
struct Val {
  int64_t id = -1;
  std::vector<int64_t> dims;
  PrimitiveType type = xla::F32;
  std::vector<int64_t> m2m;  // minor_to_major
  bool is_tuple = false;
};

std::vector<int64_t> DescendingLayout(size_t rank) {
  std::vector<int64_t> m2m(rank);
  for (size_t i = 0; i < rank; ++i) m2m[i] = static_cast<int64_t>(rank - 1 - i);
  return m2m;
}

void SetArrayShape(xla::ShapeProto* shape, PrimitiveType type, const std::vector<int64_t>& dims,
                   const std::vector<int64_t>& m2m) {
  shape->set_element_type(type);
  for (int64_t d : dims) shape->add_dimensions(d);
  auto* layout = shape->mutable_layout();
  for (int64_t m : m2m) layout->add_minor_to_major(m);
}

int64_t Pick(Rng& rng, std::initializer_list<int64_t> values) {
  return *(values.begin() + rng.UniformInt(values.size()));
}

class ModuleBuilder;

// Builds one computation; instructions are appended in definition order (operands first).
class CompBuilder {
 public:
  CompBuilder(ModuleBuilder* mb, std::string name);

  Val Param(PrimitiveType type, std::vector<int64_t> dims) {
    return Param(type, dims, DescendingLayout(dims.size()));
  }
  Val Param(PrimitiveType type, std::vector<int64_t> dims, std::vector<int64_t> m2m) {
    Val v = Add("parameter", type, std::move(dims), {}, std::move(m2m));
    last()->set_parameter_number(next_param_++);
    return v;
  }
  Val TupleParam(const std::vector<Val>& elements) {
    Val v = Tuple(elements, "parameter");
    last()->set_parameter_number(next_param_++);
    return v;
  }
  // An array-shaped instruction with the descending (row-major) layout unless m2m is given.
  Val Add(const std::string& opcode, PrimitiveType type, std::vector<int64_t> dims,
          const std::vector<Val>& operands, std::vector<int64_t> m2m = {});
  Val Tuple(const std::vector<Val>& elements, const std::string& opcode = "tuple");
  Val Gte(const Val& tuple, const Val& element, int64_t index) {
    Val v = Add("get-tuple-element", element.type, element.dims, {tuple}, element.m2m);
    last()->set_tuple_index(index);
    return v;
  }
  Val Constant(PrimitiveType type) { return Add("constant", type, {}, {}); }
  Val Broadcast(const Val& x, std::vector<int64_t> dims, std::vector<int64_t> mapping) {
    Val v = Add("broadcast", x.type, std::move(dims), {x});
    for (int64_t d : mapping) last()->add_dimensions(d);
    return v;
  }
  // A scalar constant broadcast to `like`'s shape.
  Val Splat(const Val& like) { return Broadcast(Constant(like.type), like.dims, {}); }

  xla::HloInstructionProto* last() {
    return comp_.mutable_instructions(comp_.instructions_size() - 1);
  }
  // Sets the root, appends the computation to the module (after all its callees) and returns
  // the computation id.
  int64_t Finish(const Val& root);

 private:
  ModuleBuilder* mb_;
  xla::HloComputationProto comp_;
  int64_t next_param_ = 0;
};

class ModuleBuilder {
 public:
  ModuleBuilder(uint64_t seed, const std::string& name) : rng(seed) { module_.set_name(name); }

  int64_t NextInstructionId() { return next_instruction_id_++; }
  int64_t NextComputationId() { return next_computation_id_++; }
  int64_t num_instructions() const { return next_instruction_id_; }
  void AddComputation(xla::HloComputationProto comp) {
    *module_.add_computations() = std::move(comp);
  }
  int64_t NameIndex(const std::string& prefix) { return name_counters_[prefix]++; }

  // The scalar `add` reducer for `type`, created on first use.
  int64_t Reducer(PrimitiveType type) {
    auto it = reducers_.find(type);
    if (it != reducers_.end()) return it->second;
    CompBuilder cb(this, "scalar_add_computation." + std::to_string(NameIndex("reducer")));
    Val x = cb.Param(type, {});
    Val y = cb.Param(type, {});
    int64_t id = cb.Finish(cb.Add("add", type, {}, {x, y}));
    reducers_[type] = id;
    return id;
  }

  xla::HloModuleProto Release(int64_t entry_id, const std::string& entry_name) {
    module_.set_entry_computation_name(entry_name);
    module_.set_entry_computation_id(entry_id);
    module_.set_id(1);
    return std::move(module_);
  }

  Rng rng;

 private:
  xla::HloModuleProto module_;
  int64_t next_instruction_id_ = 0;
  int64_t next_computation_id_ = 0;
  std::map<std::string, int64_t> name_counters_;
  std::map<PrimitiveType, int64_t> reducers_;
};

CompBuilder::CompBuilder(ModuleBuilder* mb, std::string name) : mb_(mb) {
  comp_.set_name(std::move(name));
}

Val CompBuilder::Add(const std::string& opcode, PrimitiveType type, std::vector<int64_t> dims,
                     const std::vector<Val>& operands, std::vector<int64_t> m2m) {
  if (m2m.empty()) m2m = DescendingLayout(dims.size());
  auto* inst = comp_.add_instructions();
  const int64_t id = mb_->NextInstructionId();
  inst->set_id(id);
  inst->set_opcode(opcode);
  inst->set_name(opcode + "." + std::to_string(id));
  SetArrayShape(inst->mutable_shape(), type, dims, m2m);
  for (const Val& op : operands) inst->add_operand_ids(op.id);
  Val v;
  v.id = id;
  v.dims = std::move(dims);
  v.type = type;
  v.m2m = std::move(m2m);
  return v;
}

Val CompBuilder::Tuple(const std::vector<Val>& elements, const std::string& opcode) {
  auto* inst = comp_.add_instructions();
  const int64_t id = mb_->NextInstructionId();
  inst->set_id(id);
  inst->set_opcode(opcode);
  inst->set_name(opcode + "." + std::to_string(id));
  auto* shape = inst->mutable_shape();
  shape->set_element_type(xla::TUPLE);
  for (const Val& e : elements) {
    SetArrayShape(shape->add_tuple_shapes(), e.type, e.dims, e.m2m);
    if (opcode == "tuple") inst->add_operand_ids(e.id);
  }
  Val v;
  v.id = id;
  v.type = xla::TUPLE;
  v.is_tuple = true;
  return v;
}

int64_t CompBuilder::Finish(const Val& root) {
  const int64_t id = mb_->NextComputationId();
  comp_.set_id(id);
  comp_.set_root_id(root.id);
  mb_->AddComputation(std::move(comp_));
  return id;
}

// ------------------------------------------------------------------------------------------
// Blocks of a layout program. Activations are [batch, spatial..., feature] arrays.

const char* kUnary[] = {"exponential", "tanh", "rsqrt", "negate", "sqrt", "log", "abs"};
const char* kBinary[] = {"add", "multiply", "subtract", "maximum", "divide", "minimum"};

// An activation-like layout: usually row-major (feature minor); sometimes the two minor
// dimensions swapped or the batch dimension minor, as layout assignment would leave them.
std::vector<int64_t> ActivationLayout(Rng& rng, size_t rank) {
  std::vector<int64_t> m2m = DescendingLayout(rank);
  if (rank >= 3) {
    const double u = rng.Uniform();
    if (u < 0.12) {
      std::swap(m2m[0], m2m[1]);
    } else if (u < 0.18) {
      m2m.erase(std::find(m2m.begin(), m2m.end(), 0));
      m2m.insert(m2m.begin(), 0);
    }
  }
  return m2m;
}

// Applies `count` elementwise ops to x in computation cb (operands: x, splats, earlier values).
Val ElementwiseChain(CompBuilder& cb, Rng& rng, Val x, int count) {
  std::vector<Val> pool = {x};
  for (int i = 0; i < count; ++i) {
    const double u = rng.Uniform();
    Val y;
    if (u < 0.3) {
      y = cb.Add(kUnary[rng.UniformInt(std::size(kUnary))], x.type, x.dims, {x});
    } else if (u < 0.45) {
      Val pred = cb.Add("compare", xla::PRED, x.dims, {x, cb.Splat(x)});
      y = cb.Add("select", x.type, x.dims, {pred, x, pool[rng.UniformInt(pool.size())]});
    } else if (u < 0.55 && x.type == xla::BF16) {
      Val wide = cb.Add("convert", xla::F32, x.dims, {x});
      Val z = cb.Add("multiply", xla::F32, x.dims, {wide, wide});
      y = cb.Add("convert", x.type, x.dims, {z});
    } else {
      const Val& other = rng.Uniform() < 0.5 ? cb.Splat(x) : pool[rng.UniformInt(pool.size())];
      y = cb.Add(kBinary[rng.UniformInt(std::size(kBinary))], x.type, x.dims, {x, other});
    }
    y.m2m = x.m2m;
    cb.last()->mutable_shape()->mutable_layout()->clear_minor_to_major();
    for (int64_t m : x.m2m) cb.last()->mutable_shape()->mutable_layout()->add_minor_to_major(m);
    pool.push_back(y);
    x = y;
  }
  return x;
}

// A fusion of an elementwise chain over `inputs` (same shape as inputs[0]; further inputs may be
// per-feature vectors that are broadcast along the last dimension).
Val Fusion(ModuleBuilder& mb, CompBuilder& cb, const std::vector<Val>& inputs, int ops,
           bool with_reduce) {
  Rng& rng = mb.rng;
  const Val& x0 = inputs[0];
  CompBuilder fc(&mb, "fused_computation." + std::to_string(mb.NameIndex("fused")));
  std::vector<Val> params;
  for (const Val& in : inputs) params.push_back(fc.Param(in.type, in.dims, in.m2m));
  Val acc = params[0];
  for (size_t i = 1; i < params.size(); ++i) {
    Val b = params[i];
    if (b.dims != acc.dims) {
      b = fc.Broadcast(b, acc.dims, {static_cast<int64_t>(acc.dims.size()) - 1});
    }
    acc = fc.Add(i % 2 ? "add" : "multiply", acc.type, acc.dims, {acc, b}, acc.m2m);
  }
  acc = ElementwiseChain(fc, rng, acc, ops);
  Val out = acc;
  if (with_reduce && acc.dims.size() >= 2) {
    // Reduce the feature dimension (as in a normalisation) and broadcast the result back.
    std::vector<int64_t> rdims(acc.dims.begin(), acc.dims.end() - 1);
    const int64_t reducer = mb.Reducer(acc.type);
    Val r = fc.Add("reduce", acc.type, rdims, {acc, fc.Constant(acc.type)});
    fc.last()->add_dimensions(static_cast<int64_t>(acc.dims.size()) - 1);
    fc.last()->add_called_computation_ids(reducer);
    std::vector<int64_t> keep;
    for (size_t d = 0; d + 1 < acc.dims.size(); ++d) keep.push_back(static_cast<int64_t>(d));
    Val b = fc.Broadcast(r, acc.dims, keep);
    out = fc.Add("subtract", acc.type, acc.dims, {acc, b}, acc.m2m);
  }
  const int64_t fused_id = fc.Finish(out);
  Val f = cb.Add("fusion", x0.type, x0.dims, inputs, x0.m2m);
  cb.last()->add_called_computation_ids(fused_id);
  return f;
}

struct ConvSpec {
  int64_t window = 3;
  int64_t stride = 1;
  int64_t cout = 0;
  bool depthwise = false;
};

// Convolution of activation x [N, S..., C] with kernel [K..., Cin/groups, Cout].
Val Convolution(CompBuilder& cb, const Val& x, const Val& kernel, const ConvSpec& spec,
                std::vector<int64_t> out_m2m) {
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  const int64_t nsp = rank - 2;
  std::vector<int64_t> out_dims = x.dims;
  out_dims[rank - 1] = spec.cout;
  const int64_t pad = (spec.window - 1) / 2;
  for (int64_t s = 0; s < nsp; ++s) {
    out_dims[1 + s] = (x.dims[1 + s] + 2 * pad - spec.window) / spec.stride + 1;
  }
  Val y = cb.Add("convolution", x.type, out_dims, {x, kernel}, std::move(out_m2m));
  auto* inst = cb.last();
  for (int64_t s = 0; s < nsp; ++s) {
    auto* wd = inst->mutable_window()->add_dimensions();
    wd->set_size(spec.window);
    wd->set_stride(spec.stride);
    wd->set_padding_low(pad);
    wd->set_padding_high(pad);
    wd->set_window_dilation(1);
    wd->set_base_dilation(1);
  }
  auto* cdn = inst->mutable_convolution_dimension_numbers();
  cdn->set_input_batch_dimension(0);
  cdn->set_input_feature_dimension(rank - 1);
  cdn->set_kernel_input_feature_dimension(rank - 2);
  cdn->set_kernel_output_feature_dimension(rank - 1);
  cdn->set_output_batch_dimension(0);
  cdn->set_output_feature_dimension(rank - 1);
  for (int64_t s = 0; s < nsp; ++s) {
    cdn->add_input_spatial_dimensions(1 + s);
    cdn->add_kernel_spatial_dimensions(s);
    cdn->add_output_spatial_dimensions(1 + s);
  }
  inst->set_feature_group_count(spec.depthwise ? x.dims[rank - 1] : 1);
  inst->set_batch_group_count(1);
  return y;
}

std::vector<int64_t> KernelDims(const Val& x, const ConvSpec& spec) {
  const size_t rank = x.dims.size();
  std::vector<int64_t> k(rank - 2, spec.window);
  k.push_back(spec.depthwise ? 1 : x.dims[rank - 1]);
  k.push_back(spec.cout);
  return k;
}

class LayoutProgramGenerator {
 public:
  LayoutProgramGenerator(int64_t target, uint64_t seed, const std::string& name)
      : target_(target), mb_(seed, name), rng_(mb_.rng), name_(name) {}

  xla::HloModuleProto Run() {
    const int64_t spatial = rng_.Uniform() < 0.2 ? 3 : 2;
    act_type_ = rng_.Uniform() < 0.75 ? xla::BF16 : xla::F32;
    std::vector<int64_t> dims = {Pick(rng_, {1, 2, 4, 8, 16, 32})};
    const int64_t side =
        spatial == 3 ? Pick(rng_, {16, 24, 32, 48}) : Pick(rng_, {14, 28, 32, 56, 64, 112});
    for (int64_t s = 0; s < spatial; ++s) dims.push_back(side);
    dims.push_back(Pick(rng_, {3, 4, 8, 16, 32}));
    const std::string entry_name = "main." + std::to_string(target_);
    CompBuilder entry(&mb_, entry_name);
    Val act = entry.Param(act_type_, dims);
    history_.push_back(act);
    std::vector<Val> outputs;
    // Every program starts with a convolution, so it has at least one configurable node.
    act = ConvBlock(entry, act);
    history_.push_back(act);
    while (mb_.num_instructions() + 3 < target_) {
      const int64_t remain = target_ - mb_.num_instructions();
      act = Block(entry, act, remain);
      history_.push_back(act);
      if (history_.size() > 16) history_.erase(history_.begin());
      if (rng_.Uniform() < 0.03 && outputs.size() < 8) outputs.push_back(act);
    }
    outputs.push_back(act);
    Val root = entry.Tuple(outputs);
    const int64_t entry_id = entry.Finish(root);
    return mb_.Release(entry_id, entry_name);
  }

 private:
  ConvSpec RandomConv(const Val& x) {
    ConvSpec spec;
    const int64_t c = x.dims.back();
    const bool first = c < 8;
    spec.window = first ? Pick(rng_, {3, 5, 7}) : (rng_.Uniform() < 0.35 ? 1 : 3);
    spec.stride = (x.dims[1] >= 8 && rng_.Uniform() < 0.12) ? 2 : 1;
    spec.depthwise = !first && spec.window == 3 && rng_.Uniform() < 0.1;
    if (spec.depthwise) {
      spec.cout = c;
    } else {
      const double u = rng_.Uniform();
      spec.cout = first     ? Pick(rng_, {16, 32, 64})
                  : u < 0.5 ? c
                  : u < 0.8 ? std::min<int64_t>(2 * c, 1024)
                            : std::max<int64_t>(c / 2, 8);
      if (spec.stride == 2) spec.cout = std::min<int64_t>(2 * c, 1024);
    }
    return spec;
  }

  // The layout of a new convolution/dot output: usually row-major, sometimes not.
  std::vector<int64_t> OutLayout(size_t rank) { return ActivationLayout(rng_, rank); }

  Val ConvBlock(CompBuilder& cb, const Val& x) {
    ConvSpec spec = RandomConv(x);
    Val kernel = cb.Param(x.type, KernelDims(x, spec));
    Val y = Convolution(cb, x, kernel, spec, OutLayout(x.dims.size()));
    Val bias = cb.Param(x.type, {spec.cout});
    if (rng_.Uniform() < 0.6) {
      return Fusion(mb_, cb, {y, bias}, 1 + static_cast<int>(rng_.UniformInt(4)),
                    rng_.Uniform() < 0.2);
    }
    Val b = cb.Broadcast(bias, y.dims, {static_cast<int64_t>(y.dims.size()) - 1});
    Val z = cb.Add("add", y.type, y.dims, {y, b}, y.m2m);
    return cb.Add("maximum", y.type, y.dims, {z, cb.Splat(z)}, y.m2m);
  }

  Val DotBlock(CompBuilder& cb, const Val& x) {
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < x.dims.size(); ++d) rows *= x.dims[d];
    const int64_t k = x.dims.back();
    const int64_t n = Pick(rng_, {64, 128, 256, 512, 1024});
    Val flat = cb.Add("reshape", x.type, {rows, k}, {x});
    Val w = cb.Param(x.type, {k, n});
    Val y = cb.Add("dot", x.type, {rows, n}, {flat, w},
                   rng_.Uniform() < 0.15 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{});
    auto* dnums = cb.last()->mutable_dot_dimension_numbers();
    dnums->add_lhs_contracting_dimensions(1);
    dnums->add_rhs_contracting_dimensions(0);
    Val z = ElementwiseChain(cb, rng_, y, 1 + static_cast<int>(rng_.UniformInt(3)));
    std::vector<int64_t> back = x.dims;
    back.back() = n;
    return cb.Add("reshape", x.type, back, {z});
  }

  Val ReduceBlock(CompBuilder& cb, const Val& x) {
    const int64_t rank = static_cast<int64_t>(x.dims.size());
    Val wide = cb.Add("convert", xla::F32, x.dims, {x}, x.m2m);
    std::vector<int64_t> rdims = {x.dims[0], x.dims[rank - 1]};
    Val r = cb.Add("reduce", xla::F32, rdims, {wide, cb.Constant(xla::F32)});
    for (int64_t d = 1; d + 1 < rank; ++d) cb.last()->add_dimensions(d);
    cb.last()->add_called_computation_ids(mb_.Reducer(xla::F32));
    Val mean = cb.Add("divide", xla::F32, rdims, {r, cb.Splat(r)});
    Val s = cb.Add("logistic", xla::F32, rdims, {mean});
    Val b = cb.Broadcast(s, x.dims, {0, rank - 1});
    Val narrow = cb.Add("convert", x.type, x.dims, {b}, x.m2m);
    return cb.Add("multiply", x.type, x.dims, {x, narrow}, x.m2m);
  }

  Val TransposeBlock(CompBuilder& cb, const Val& x) {
    const int64_t rank = static_cast<int64_t>(x.dims.size());
    std::vector<int64_t> perm = {0, rank - 1};
    for (int64_t d = 1; d + 1 < rank; ++d) perm.push_back(d);
    std::vector<int64_t> tdims;
    for (int64_t p : perm) tdims.push_back(x.dims[p]);
    Val t = cb.Add("transpose", x.type, tdims, {x});
    for (int64_t p : perm) cb.last()->add_dimensions(p);
    Val e = ElementwiseChain(cb, rng_, t, 1 + static_cast<int>(rng_.UniformInt(2)));
    std::vector<int64_t> inv(rank);
    for (int64_t i = 0; i < rank; ++i) inv[perm[i]] = i;
    Val back = cb.Add("transpose", x.type, x.dims, {e}, x.m2m);
    for (int64_t p : inv) cb.last()->add_dimensions(p);
    return back;
  }

  Val ResidualBlock(CompBuilder& cb, const Val& x) {
    for (auto it = history_.rbegin() + 1; it < history_.rend(); ++it) {
      if (it->dims == x.dims && it->type == x.type) {
        return cb.Add("add", x.type, x.dims, {x, *it}, x.m2m);
      }
    }
    return ElementwiseChain(cb, rng_, x, 2);
  }

  Val WhileBlock(CompBuilder& cb, const Val& x) {
    const int64_t k = mb_.NameIndex("while");
    ConvSpec spec;
    spec.window = 3;
    spec.cout = x.dims.back();
    const std::vector<int64_t> kdims = KernelDims(x, spec);
    Val ctr_shape{-1, {}, xla::S32, {}};
    Val kernel_shape{-1, kdims, x.type, DescendingLayout(kdims.size())};
    const std::vector<Val> elems = {ctr_shape, x, kernel_shape};
    // Body: one convolution step per trip.
    CompBuilder body(&mb_, "while_body." + std::to_string(k));
    Val p = body.TupleParam(elems);
    Val ctr = body.Gte(p, ctr_shape, 0);
    Val act = body.Gte(p, x, 1);
    Val ker = body.Gte(p, kernel_shape, 2);
    Val y = Convolution(body, act, ker, spec, x.m2m);
    y = ElementwiseChain(body, rng_, y, 1 + static_cast<int>(rng_.UniformInt(3)));
    if (rng_.Uniform() < 0.5) {
      Val r = body.Add("reshape", y.type, y.dims, {y}, y.m2m);
      y = r;
    }
    Val next = body.Add("add", xla::S32, {}, {ctr, body.Constant(xla::S32)});
    const int64_t body_id = body.Finish(body.Tuple({next, y, ker}));
    CompBuilder cond(&mb_, "while_cond." + std::to_string(k));
    Val cp = cond.TupleParam(elems);
    Val cctr = cond.Gte(cp, ctr_shape, 0);
    const int64_t cond_id =
        cond.Finish(cond.Add("compare", xla::PRED, {}, {cctr, cond.Constant(xla::S32)}));
    Val init = cb.Constant(xla::S32);
    Val kp = cb.Param(x.type, kdims);
    Val tuple = cb.Tuple({init, x, kp});
    Val w = cb.Tuple(elems, "while");
    cb.last()->add_operand_ids(tuple.id);
    cb.last()->add_called_computation_ids(body_id);
    cb.last()->add_called_computation_ids(cond_id);
    return cb.Gte(w, x, 1);
  }

  Val Block(CompBuilder& cb, const Val& x, int64_t remain) {
    const double u = rng_.Uniform();
    if (u < 0.18) return ConvBlock(cb, x);
    if (u < 0.24) return DotBlock(cb, x);
    if (u < 0.34) return ReduceBlock(cb, x);
    if (u < 0.40) return TransposeBlock(cb, x);
    if (u < 0.50) return ResidualBlock(cb, x);
    if (u < 0.54 && remain > 40) return WhileBlock(cb, x);
    if (u < 0.76) {
      std::vector<Val> inputs = {x};
      if (rng_.Uniform() < 0.5) inputs.push_back(cb.Param(x.type, {x.dims.back()}));
      return Fusion(mb_, cb, inputs, 2 + static_cast<int>(rng_.UniformInt(8)),
                    rng_.Uniform() < 0.3);
    }
    return ElementwiseChain(cb, rng_, x, 1 + static_cast<int>(rng_.UniformInt(5)));
  }

  int64_t target_;
  ModuleBuilder mb_;
  Rng& rng_;
  std::string name_;
  PrimitiveType act_type_ = xla::BF16;
  std::vector<Val> history_;
};

// A "tile-sized" dimension: mostly powers of two, sometimes the odd sizes of real models.
int64_t TileDim(Rng& rng) {
  if (rng.Uniform() < 0.25) return Pick(rng, {3, 7, 14, 28, 56, 100, 196, 384, 768});
  return int64_t{1} << (3 + rng.UniformInt(8));  // 8 .. 1024
}

}  // namespace

xla::HloModuleProto GenerateLayoutProgram(int64_t target_nodes, uint64_t seed,
                                          const std::string& name) {
  return LayoutProgramGenerator(std::max<int64_t>(target_nodes, 30), seed, name).Run();
}

xla::HloModuleProto GenerateTileKernel(uint64_t seed, const std::string& name) {
  ModuleBuilder mb(seed, name);
  Rng& rng = mb.rng;
  const PrimitiveType type = rng.Uniform() < 0.7 ? xla::BF16 : xla::F32;
  const double kind = rng.Uniform();
  const std::string entry_name = name + ".entry";
  if (kind < 0.1) {
    // A layout-changing copy kernel (2 nodes), like copy.24 in the real dump.
    const int64_t rank = 2 + static_cast<int64_t>(rng.UniformInt(3));
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < rank; ++i) dims.push_back(TileDim(rng));
    CompBuilder entry(&mb, entry_name);
    Val p = entry.Param(type, dims);
    std::vector<int64_t> m2m = DescendingLayout(rank);
    std::swap(m2m[0], m2m[1]);
    const int64_t id = entry.Finish(entry.Add("copy", type, dims, {p}, m2m));
    return mb.Release(id, entry_name);
  }
  std::vector<Val> inputs;  // entry-side shapes of the fusion operands
  CompBuilder fc(&mb, "fused_computation");
  Val out;
  if (kind < 0.35) {
    // Convolution (+ bias, activation) fusion.
    const int64_t spatial = rng.Uniform() < 0.8 ? 2 : 1;
    std::vector<int64_t> dims = {Pick(rng, {1, 2, 4, 8, 16})};
    const int64_t side = Pick(rng, {7, 8, 14, 16, 28, 32, 56});
    for (int64_t s = 0; s < spatial; ++s) dims.push_back(side);
    dims.push_back(Pick(rng, {16, 32, 64, 128, 256, 512}));
    ConvSpec spec;
    spec.window = Pick(rng, {1, 3, 3});
    spec.stride = rng.Uniform() < 0.2 ? 2 : 1;
    spec.cout = Pick(rng, {32, 64, 128, 256, 512});
    Val x = fc.Param(type, dims);
    Val k = fc.Param(type, KernelDims(x, spec));
    inputs = {x, k};
    Val y = Convolution(fc, x, k, spec, {});
    Val bias = fc.Param(type, {spec.cout});
    inputs.push_back(bias);
    Val b = fc.Broadcast(bias, y.dims, {static_cast<int64_t>(y.dims.size()) - 1});
    out = fc.Add("add", type, y.dims, {y, b});
    out = ElementwiseChain(fc, rng, out, static_cast<int>(rng.UniformInt(4)));
  } else if (kind < 0.5) {
    // Dot (+ elementwise epilogue) fusion.
    const int64_t m = TileDim(rng) * Pick(rng, {1, 4, 16}), kk = TileDim(rng), n = TileDim(rng);
    Val a = fc.Param(type, {m, kk});
    Val w = fc.Param(type, {kk, n});
    inputs = {a, w};
    out = fc.Add("dot", type, {m, n}, {a, w});
    auto* dnums = fc.last()->mutable_dot_dimension_numbers();
    dnums->add_lhs_contracting_dimensions(1);
    dnums->add_rhs_contracting_dimensions(0);
    out = ElementwiseChain(fc, rng, out, 1 + static_cast<int>(rng.UniformInt(4)));
  } else {
    // Elementwise fusion, optionally reducing the minor dimension.
    const int64_t rank = 2 + static_cast<int64_t>(rng.UniformInt(3));
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < rank; ++i) dims.push_back(TileDim(rng));
    Val x = fc.Param(type, dims);
    inputs = {x};
    Val acc = x;
    if (rng.Uniform() < 0.5) {
      Val y = fc.Param(type, dims);
      inputs.push_back(y);
      acc = fc.Add("add", type, dims, {x, y});
    }
    acc = ElementwiseChain(fc, rng, acc, 2 + static_cast<int>(rng.UniformInt(10)));
    if (kind > 0.8) {
      std::vector<int64_t> rdims(dims.begin(), dims.end() - 1);
      out = fc.Add("reduce", type, rdims, {acc, fc.Constant(type)});
      fc.last()->add_dimensions(rank - 1);
      // The reducer must precede the fused computation; ModuleBuilder appends it on creation.
      fc.last()->add_called_computation_ids(mb.Reducer(type));
    } else {
      out = acc;
    }
  }
  const int64_t fused_id = fc.Finish(out);
  CompBuilder entry(&mb, entry_name);
  std::vector<Val> params;
  for (const Val& in : inputs) params.push_back(entry.Param(in.type, in.dims, in.m2m));
  Val f = entry.Add("fusion", out.type, out.dims, params, out.m2m);
  entry.last()->add_called_computation_ids(fused_id);
  const int64_t entry_id = entry.Finish(f);
  return mb.Release(entry_id, entry_name);
}

}  // namespace tpugraphs::synth
