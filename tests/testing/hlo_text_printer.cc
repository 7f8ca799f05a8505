#include "testing/hlo_text_printer.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

namespace tpugraphs::testing {
namespace {

const char* TypeName(int type) {
  switch (type) {
    case 1:
      return "pred";
    case 2:
      return "s8";
    case 3:
      return "s16";
    case 4:
      return "s32";
    case 5:
      return "s64";
    case 6:
      return "u8";
    case 7:
      return "u16";
    case 8:
      return "u32";
    case 9:
      return "u64";
    case 10:
      return "f16";
    case 11:
      return "f32";
    case 12:
      return "f64";
    case 14:
      return "opaque";
    case 15:
      return "c64";
    case 16:
      return "bf16";
    case 17:
      return "token";
    case 18:
      return "c128";
    default:
      return "invalid";
  }
}

template <typename R>
std::string JoinInts(const R& r, const char* sep) {
  std::string out;
  bool first = true;
  for (const auto& v : r) {
    if (!first) out += sep;
    first = false;
    out += std::to_string(v);
  }
  return out;
}

template <typename R>
std::string Braced(const R& r) {
  std::string out = "{";
  out.append(JoinInts(r, ",")).push_back('}');
  return out;
}

void AppendShape(const xla::ShapeProto& s, std::string* out) {
  if (s.element_type() == xla::TUPLE) {
    out->push_back('(');
    for (int i = 0; i < s.tuple_shapes_size(); ++i) {
      if (i > 0) out->append(", ");
      AppendShape(s.tuple_shapes(i), out);
    }
    out->push_back(')');
    return;
  }
  out->append(TypeName(s.element_type()));
  out->push_back('[');
  for (int i = 0; i < s.dimensions_size(); ++i) {
    if (i > 0) out->push_back(',');
    const int64_t d = s.dimensions(i);
    const bool dynamic = i < s.is_dynamic_dimension_size() && s.is_dynamic_dimension(i);
    if (d == std::numeric_limits<int64_t>::min()) {
      out->push_back('?');
    } else {
      if (dynamic) out->append("<=");
      out->append(std::to_string(d));
    }
  }
  out->push_back(']');
  if (!s.has_layout()) return;
  const xla::LayoutProto& l = s.layout();
  out->push_back('{');
  out->append(JoinInts(l.minor_to_major(), ","));
  if (l.tiles_size() > 0 || l.memory_space() != 0 || l.element_size_in_bits() != 0) {
    out->push_back(':');
    if (l.tiles_size() > 0) {
      out->push_back('T');
      for (const auto& t : l.tiles()) {
        out->push_back('(');
        for (int i = 0; i < t.dimensions_size(); ++i) {
          if (i > 0) out->push_back(',');
          if (t.dimensions(i) == std::numeric_limits<int64_t>::min()) {
            out->push_back('*');
          } else {
            out->append(std::to_string(t.dimensions(i)));
          }
        }
        out->push_back(')');
      }
    }
    if (l.element_size_in_bits() != 0) {
      out->append("E(" + std::to_string(l.element_size_in_bits()) + ")");
    }
    if (l.memory_space() != 0) out->append("S(" + std::to_string(l.memory_space()) + ")");
  }
  out->push_back('}');
}

std::string ShapeText(const xla::ShapeProto& s) {
  std::string out;
  AppendShape(s, &out);
  return out;
}

// dim_labels of convolution dimension numbers, e.g. b01f_01io->b01f.
std::string DimLabels(const xla::ConvolutionDimensionNumbers& d) {
  auto part = [](int64_t a, char ca, int64_t b, char cb, const auto& spatial) {
    std::string s(static_cast<size_t>(spatial.size()) + 2, '?');
    auto put = [&](int64_t pos, char c) {
      if (pos >= 0 && pos < static_cast<int64_t>(s.size())) s[static_cast<size_t>(pos)] = c;
    };
    put(a, ca);
    put(b, cb);
    for (int i = 0; i < spatial.size(); ++i) put(spatial.Get(i), static_cast<char>('0' + i));
    return s;
  };
  return part(d.input_batch_dimension(), 'b', d.input_feature_dimension(), 'f',
              d.input_spatial_dimensions()) +
         "_" +
         part(d.kernel_input_feature_dimension(), 'i', d.kernel_output_feature_dimension(), 'o',
              d.kernel_spatial_dimensions()) +
         "->" +
         part(d.output_batch_dimension(), 'b', d.output_feature_dimension(), 'f',
              d.output_spatial_dimensions());
}

std::string WindowText(const xla::Window& w) {
  std::string size, stride, pad, lhs, rhs, rev;
  for (int i = 0; i < w.dimensions_size(); ++i) {
    const auto& d = w.dimensions(i);
    if (i > 0) {
      for (std::string* f : {&size, &stride, &pad, &lhs, &rhs, &rev}) f->push_back('x');
    }
    size.append(std::to_string(d.size()));
    stride.append(std::to_string(d.stride()));
    pad.append(std::to_string(d.padding_low()))
        .append("_")
        .append(std::to_string(d.padding_high()));
    lhs.append(std::to_string(d.base_dilation()));
    rhs.append(std::to_string(d.window_dilation()));
    rev.append(d.window_reversal() ? "1" : "0");
  }
  return std::string("{size=") + size + " stride=" + stride + " pad=" + pad + " lhs_dilate=" + lhs +
         " rhs_dilate=" + rhs + " rhs_reversal=" + rev + "}";
}

}  // namespace

std::string PrintHloText(const xla::HloModuleProto& module, HloTextStyle style) {
  const bool older = style == HloTextStyle::kOlder;
  const std::string pct = older ? "%" : "";
  std::unordered_map<int64_t, std::string> computation_name;
  for (const auto& c : module.computations()) computation_name[c.id()] = c.name();
  int64_t entry_id = module.entry_computation_id();
  if (module.entry_computation_name().empty() && entry_id == 0 && module.computations_size() > 0) {
    entry_id = module.computations(module.computations_size() - 1).id();
  }

  std::string out = "HloModule " + module.name();
  out += ", is_scheduled=true, entry_computation_layout={(f32[2]{0})->f32[]}\n";
  std::string line;
  for (const auto& comp : module.computations()) {
    std::unordered_map<int64_t, const xla::HloInstructionProto*> by_id;
    std::vector<const xla::HloInstructionProto*> params;
    for (const auto& inst : comp.instructions()) {
      by_id[inst.id()] = &inst;
      if (inst.opcode() == "parameter") params.push_back(&inst);
    }
    std::sort(params.begin(), params.end(), [](const auto* a, const auto* b) {
      return a->parameter_number() < b->parameter_number();
    });
    out += "\n";
    if (comp.id() == entry_id || comp.name() == module.entry_computation_name()) out += "ENTRY ";
    out += "%" + comp.name() + " (";
    for (size_t i = 0; i < params.size(); ++i) {
      if (i > 0) out += ", ";
      out += params[i]->name() + ": " + ShapeText(params[i]->shape());
    }
    out += ") -> ";
    auto root = by_id.find(comp.root_id());
    out += root == by_id.end() ? "f32[]" : ShapeText(root->second->shape());
    out += " {\n";
    for (const auto& inst : comp.instructions()) {
      line = "  ";
      if (inst.id() == comp.root_id()) line += "ROOT ";
      line += pct + inst.name() + " = " + ShapeText(inst.shape()) + " " + inst.opcode() + "(";
      if (inst.opcode() == "parameter") {
        line += std::to_string(inst.parameter_number());
      } else if (inst.opcode() == "constant") {
        line += "{...}";
      } else {
        for (int i = 0; i < inst.operand_ids_size(); ++i) {
          if (i > 0) line += ", ";
          auto it = by_id.find(inst.operand_ids(i));
          const xla::HloInstructionProto* op = it == by_id.end() ? nullptr : it->second;
          if (older && op != nullptr) line += ShapeText(op->shape()) + " ";
          line += pct + (op != nullptr ? op->name() : "missing_" + std::to_string(i));
        }
      }
      line += ")";
      const std::string& opc = inst.opcode();
      if (inst.dimensions_size() > 0) {
        if (opc == "iota") {
          line += ", iota_dimension=" + std::to_string(inst.dimensions(0));
        } else {
          line += ", dimensions=" + Braced(inst.dimensions());
        }
      }
      if (inst.window().dimensions_size() > 0) line += ", window=" + WindowText(inst.window());
      if (inst.has_convolution_dimension_numbers()) {
        line += ", dim_labels=" + DimLabels(inst.convolution_dimension_numbers());
      }
      if (inst.feature_group_count() != 0 || opc == "convolution") {
        line += ", feature_group_count=" + std::to_string(inst.feature_group_count());
      }
      if (inst.batch_group_count() != 0 || opc == "convolution") {
        line += ", batch_group_count=" + std::to_string(inst.batch_group_count());
      }
      if (inst.slice_dimensions_size() > 0) {
        line += ", slice={";
        for (int i = 0; i < inst.slice_dimensions_size(); ++i) {
          const auto& s = inst.slice_dimensions(i);
          if (i > 0) line += ", ";
          line.append("[").append(std::to_string(s.start())).append(":");
          line.append(std::to_string(s.limit())).append(":").append(std::to_string(s.stride()));
          line.append("]");
        }
        line += "}";
      }
      if (inst.dynamic_slice_sizes_size() > 0) {
        line += ", dynamic_slice_sizes=" + Braced(inst.dynamic_slice_sizes());
      }
      if (inst.padding_config().dimensions_size() > 0) {
        line += ", padding=";
        for (int i = 0; i < inst.padding_config().dimensions_size(); ++i) {
          const auto& p = inst.padding_config().dimensions(i);
          if (i > 0) line += "x";
          line += std::to_string(p.edge_padding_low()) + "_" +
                  std::to_string(p.edge_padding_high()) + "_" +
                  std::to_string(p.interior_padding());
        }
      }
      if (inst.is_stable()) line += ", is_stable=true";
      if (opc == "get-tuple-element") line += ", index=" + std::to_string(inst.tuple_index());
      if (inst.has_dot_dimension_numbers()) {
        const auto& d = inst.dot_dimension_numbers();
        line += ", lhs_batch_dims=" + Braced(d.lhs_batch_dimensions()) +
                ", lhs_contracting_dims=" + Braced(d.lhs_contracting_dimensions()) +
                ", rhs_batch_dims=" + Braced(d.rhs_batch_dimensions()) +
                ", rhs_contracting_dims=" + Braced(d.rhs_contracting_dimensions());
      }
      if (inst.has_gather_dimension_numbers()) {
        const auto& g = inst.gather_dimension_numbers();
        line += ", offset_dims=" + Braced(g.offset_dims()) +
                ", collapsed_slice_dims=" + Braced(g.collapsed_slice_dims()) +
                ", start_index_map=" + Braced(g.start_index_map()) +
                ", index_vector_dim=" + std::to_string(g.index_vector_dim());
      }
      if (inst.gather_slice_sizes_size() > 0) {
        line += ", slice_sizes=" + Braced(inst.gather_slice_sizes());
      }
      // Called computations, with the attribute names XLA uses for each opcode.
      const auto& called = inst.called_computation_ids();
      auto cname = [&](int i) {
        auto it = computation_name.find(called.Get(i));
        return pct + (it == computation_name.end() ? "missing" : it->second);
      };
      if (called.size() > 0) {
        if (opc == "while" && called.size() == 2) {
          line += ", condition=" + cname(0) + ", body=" + cname(1);
        } else if (opc == "select-and-scatter" && called.size() == 2) {
          line += ", select=" + cname(0) + ", scatter=" + cname(1);
        } else if (opc == "fusion" && called.size() == 1) {
          line += ", kind=kLoop, calls=" + cname(0);
        } else if (opc == "conditional") {
          line += ", branch_computations={";
          for (int i = 0; i < called.size(); ++i) line += (i > 0 ? ", " : "") + cname(i);
          line += "}";
        } else if (called.size() == 1) {
          line += ", to_apply=" + cname(0);
        } else {
          line += ", called_computations={";
          for (int i = 0; i < called.size(); ++i) line += (i > 0 ? ", " : "") + cname(i);
          line += "}";
        }
      }
      if (older) {
        line += ", sharding={replicated}, metadata={op_type=\"Op, \\\"quoted\\\"\" op_name=\"" +
                inst.name() + "/x\" source_line=3}, backend_config=\"{\\\"k\\\":[1,2]}\"";
      }
      line += "\n";
      out += line;
    }
    out += "}\n";
  }
  return out;
}

}  // namespace tpugraphs::testing
