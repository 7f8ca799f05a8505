#include "tpugraphs/ingest/hlo_text.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tpugraphs/ingest/opcodes.h"

namespace tpugraphs::ingest {
namespace {

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Element type names as XLA prints them, with the upstream PrimitiveType numbers (values above
// 18 are newer than the r2.10 subset; the featurizer's one-hot leaves them all zero).
int PrimitiveTypeOf(std::string_view s) {
  static const auto* map = new std::unordered_map<std::string_view, int>{
      {"pred", 1},        {"s8", 2},
      {"s16", 3},         {"s32", 4},
      {"s64", 5},         {"u8", 6},
      {"u16", 7},         {"u32", 8},
      {"u64", 9},         {"f16", 10},
      {"f32", 11},        {"f64", 12},
      {"opaque", 14},     {"c64", 15},
      {"bf16", 16},       {"token", 17},
      {"c128", 18},       {"f8e5m2", 19},
      {"f8e4m3fn", 20},   {"s4", 21},
      {"u4", 22},         {"f8e4m3b11fnuz", 23},
      {"f8e5m2fnuz", 24}, {"f8e4m3fnuz", 25},
      {"s2", 26},         {"u2", 27},
      {"f8e4m3", 28},     {"f8e3m4", 29},
      {"f4e2m1fn", 30},   {"f8e8m0fnu", 31},
  };
  auto it = map->find(s);
  return it == map->end() ? -1 : it->second;
}

// Attributes that are read.
enum class Attr {
  kDimensions,
  kIotaDimension,
  kWindow,
  kDimLabels,
  kFeatureGroupCount,
  kBatchGroupCount,
  kSlice,
  kDynamicSliceSizes,
  kPadding,
  kIsStable,
  kIndex,
  kLhsContracting,
  kRhsContracting,
  kLhsBatch,
  kRhsBatch,
  kOffsetDims,
  kCollapsedSliceDims,
  kStartIndexMap,
  kIndexVectorDim,
  kSliceSizes,
  kUpdateWindowDims,
  kInsertedWindowDims,
  kScatterDimsToOperandDims,
  kIndicesAreSorted,
  kUniqueIndices,
  kFftType,
  kFftLength,
  kExponentBits,
  kMantissaBits,
  kIsHostTransfer,
  kConstrainLayout,
  kCustomCallHasSideEffect,
  kCalledComputation,  // to_apply=, calls=, body=, condition=, ... (one or a list)
  kControlPredecessors,
  kSkip,  // known, not needed for the features
};

const std::unordered_map<std::string_view, Attr>& AttrTable() {
  static const auto* table = new std::unordered_map<std::string_view, Attr>{
      {"dimensions", Attr::kDimensions},
      {"iota_dimension", Attr::kIotaDimension},
      {"window", Attr::kWindow},
      {"dim_labels", Attr::kDimLabels},
      {"feature_group_count", Attr::kFeatureGroupCount},
      {"batch_group_count", Attr::kBatchGroupCount},
      {"slice", Attr::kSlice},
      {"dynamic_slice_sizes", Attr::kDynamicSliceSizes},
      {"padding", Attr::kPadding},
      {"is_stable", Attr::kIsStable},
      {"index", Attr::kIndex},
      {"lhs_contracting_dims", Attr::kLhsContracting},
      {"rhs_contracting_dims", Attr::kRhsContracting},
      {"lhs_batch_dims", Attr::kLhsBatch},
      {"rhs_batch_dims", Attr::kRhsBatch},
      {"offset_dims", Attr::kOffsetDims},
      {"collapsed_slice_dims", Attr::kCollapsedSliceDims},
      {"start_index_map", Attr::kStartIndexMap},
      {"index_vector_dim", Attr::kIndexVectorDim},
      {"slice_sizes", Attr::kSliceSizes},
      {"update_window_dims", Attr::kUpdateWindowDims},
      {"inserted_window_dims", Attr::kInsertedWindowDims},
      {"scatter_dims_to_operand_dims", Attr::kScatterDimsToOperandDims},
      {"indices_are_sorted", Attr::kIndicesAreSorted},
      {"unique_indices", Attr::kUniqueIndices},
      {"fft_type", Attr::kFftType},
      {"fft_length", Attr::kFftLength},
      {"exponent_bits", Attr::kExponentBits},
      {"mantissa_bits", Attr::kMantissaBits},
      {"is_host_transfer", Attr::kIsHostTransfer},
      {"constrain_layout", Attr::kConstrainLayout},
      {"custom_call_has_side_effect", Attr::kCustomCallHasSideEffect},
      {"to_apply", Attr::kCalledComputation},
      {"calls", Attr::kCalledComputation},
      {"body", Attr::kCalledComputation},
      {"condition", Attr::kCalledComputation},
      {"branch_computations", Attr::kCalledComputation},
      {"true_computation", Attr::kCalledComputation},
      {"false_computation", Attr::kCalledComputation},
      {"select", Attr::kCalledComputation},
      {"scatter", Attr::kCalledComputation},
      {"called_computations", Attr::kCalledComputation},
      {"control-predecessors", Attr::kControlPredecessors},
      // Known and skipped.
      {"metadata", Attr::kSkip},
      {"backend_config", Attr::kSkip},
      {"sharding", Attr::kSkip},
      {"frontend_attributes", Attr::kSkip},
      {"statistics_viz", Attr::kSkip},
      {"parameter_replication", Attr::kSkip},
      {"custom_call_target", Attr::kSkip},
      {"custom_call_schedule", Attr::kSkip},
      {"api_version", Attr::kSkip},
      {"operand_layout_constraints", Attr::kSkip},
      {"output_to_operand_aliasing", Attr::kSkip},
      {"literal", Attr::kSkip},
      {"kind", Attr::kSkip},
      {"replica_groups", Attr::kSkip},
      {"channel_id", Attr::kSkip},
      {"use_global_device_ids", Attr::kSkip},
      {"source_target_pairs", Attr::kSkip},
      {"slice_sizes_are_dynamic", Attr::kSkip},
      {"comparison_direction", Attr::kSkip},
      {"type", Attr::kSkip},
      {"distribution", Attr::kSkip},
      {"rng_algorithm", Attr::kSkip},
      {"operand_precision", Attr::kSkip},
      {"algorithm", Attr::kSkip},
      {"precision_config", Attr::kSkip},
      {"epsilon", Attr::kSkip},
      {"feature_index", Attr::kSkip},
      {"infeed_config", Attr::kSkip},
      {"outfeed_config", Attr::kSkip},
      {"outfeed_shape", Attr::kSkip},
      {"domain", Attr::kSkip},
      {"async_execution_thread", Attr::kSkip},
      {"execution_thread", Attr::kSkip},
      {"largest", Attr::kSkip},
      {"k", Attr::kSkip},
      {"delta", Attr::kSkip},
      {"lhs_ragged_dims", Attr::kSkip},
      {"rhs_group_dims", Attr::kSkip},
      {"left_padding", Attr::kSkip},
      {"right_padding", Attr::kSkip},
      {"lower", Attr::kSkip},
      {"left_side", Attr::kSkip},
      {"transpose_a", Attr::kSkip},
      {"unit_diagonal", Attr::kSkip},
      {"reverse", Attr::kSkip},
      {"operand_batching_dims", Attr::kSkip},
      {"start_indices_batching_dims", Attr::kSkip},
      {"input_batching_dims", Attr::kSkip},
      {"scatter_indices_batching_dims", Attr::kSkip},
      {"cross_program_prefetch_index", Attr::kSkip},
      {"is_cross_program_prefetch", Attr::kSkip},
      {"dynamic_slice_sizes_dynamic", Attr::kSkip},
      {"split_dimension", Attr::kSkip},
      {"result_accuracy", Attr::kSkip},
      {"origin", Attr::kSkip},
      {"direction", Attr::kSkip},
      {"schedule", Attr::kSkip},
      {"sparsity", Attr::kSkip},
      {"original_value", Attr::kSkip},
      {"padding_type", Attr::kSkip},
  };
  return *table;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& path, xla::HloModuleProto* module,
         std::vector<std::string>* warnings, const HloTextLimits& limits, HloTextShapeSpans* spans)
      : text_(text),
        path_(path),
        module_(module),
        warnings_(warnings),
        limits_(limits),
        spans_(spans) {}

  Status ParseModule();

 private:
  // ---- errors ------------------------------------------------------------------------------
  std::string Where(size_t at) const {
    int64_t line = 1;
    size_t line_start = 0;
    const size_t end = std::min(at, text_.size());
    for (size_t i = 0; i < end; ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    return path_ + ":" + std::to_string(line) + ":" + std::to_string(end - line_start + 1);
  }
  // A short description of what is at `at`.
  std::string Found(size_t at) const {
    if (at >= text_.size()) return "end of file";
    size_t e = at;
    if (IsNameChar(text_[e])) {
      while (e < text_.size() && e - at < 40 && IsNameChar(text_[e])) ++e;
    } else {
      e = at + 1;
    }
    std::string tok;
    for (size_t i = at; i < e; ++i) {
      const char c = text_[i];
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(c));
        tok += buf;
      } else {
        tok.push_back(c);
      }
    }
    return "'" + tok + "'";
  }
  Status ErrorAt(size_t at, const std::string& what) const {
    return InvalidArgumentError(Where(at) + ": " + what);
  }
  Status Expected(const std::string& what) {
    SkipWs();
    return ErrorAt(pos_, "expected " + what + ", found " + Found(pos_));
  }
  // At most kMaxWarnings are reported (each costs a scan for its line number).
  static constexpr int kMaxWarnings = 20;
  void Warn(size_t at, const std::string& what) {
    if (warnings_ == nullptr) return;
    if (num_warnings_++ < kMaxWarnings) warnings_->push_back(Where(at) + ": " + what);
  }

  // ---- lexing ------------------------------------------------------------------------------
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  char PeekAt(size_t i) const { return i < text_.size() ? text_[i] : '\0'; }

  // Whitespace, /* */ and // comments. An unterminated /* comment runs to the end of the file.
  void SkipWs() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
      } else if (c == '/' && PeekAt(pos_ + 1) == '*') {
        const size_t e = text_.find("*/", pos_ + 2);
        pos_ = e == std::string_view::npos ? text_.size() : e + 2;
      } else if (c == '/' && PeekAt(pos_ + 1) == '/') {
        const size_t e = text_.find('\n', pos_);
        pos_ = e == std::string_view::npos ? text_.size() : e + 1;
      } else {
        break;
      }
    }
  }
  bool Consume(char c) {
    SkipWs();
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  Status Expect(char c) {
    if (Consume(c)) return Status::Ok();
    return Expected(std::string("'") + c + "'");
  }
  // A keyword: exactly `kw` not followed by a name character.
  bool ConsumeKeyword(std::string_view kw) {
    SkipWs();
    if (text_.substr(pos_, kw.size()) != kw || IsNameChar(PeekAt(pos_ + kw.size()))) return false;
    pos_ += kw.size();
    return true;
  }
  // A name with an optional '%'; empty if there is none.
  std::string_view ParseName() {
    SkipWs();
    size_t p = pos_;
    if (PeekAt(p) == '%') ++p;
    const size_t start = p;
    while (p < text_.size() && IsNameChar(text_[p])) ++p;
    if (p == start) return {};
    pos_ = p;
    return text_.substr(start, p - start);
  }
  StatusOr<std::string_view> ExpectName(const char* what) {
    std::string_view name = ParseName();
    if (name.empty()) return Expected(what);
    return name;
  }
  // An integer right at the cursor (no whitespace skipped), with overflow detection.
  Status RawInt(int64_t* out, const char* what) {
    const size_t start = pos_;
    bool neg = false;
    if (Peek() == '-' || Peek() == '+') {
      neg = Peek() == '-';
      ++pos_;
    }
    if (!IsDigit(Peek())) {
      pos_ = start;
      return ErrorAt(start, std::string("expected ") + what + ", found " + Found(start));
    }
    uint64_t v = 0;
    const uint64_t limit = neg ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    while (IsDigit(Peek())) {
      const uint64_t d = static_cast<uint64_t>(Peek() - '0');
      if (v > (limit - d) / 10) {
        return ErrorAt(start, std::string(what) + " does not fit a 64-bit integer");
      }
      v = v * 10 + d;
      ++pos_;
    }
    *out = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
    return Status::Ok();
  }
  Status Int(int64_t* out, const char* what) {
    SkipWs();
    return RawInt(out, what);
  }
  // {a, b, c} (possibly empty).
  Status IntList(std::vector<int64_t>* out, const char* what) {
    out->clear();
    TPUG_RETURN_IF_ERROR(Expect('{'));
    if (Consume('}')) return Status::Ok();
    do {
      int64_t v = 0;
      TPUG_RETURN_IF_ERROR(Int(&v, what));
      out->push_back(v);
    } while (Consume(','));
    return Expect('}');
  }
  template <typename Field>
  Status IntListInto(Field* field, const char* what) {
    TPUG_RETURN_IF_ERROR(IntList(&scratch_, what));
    field->Clear();
    for (int64_t v : scratch_) field->Add(v);
    return Status::Ok();
  }
  Status Bool(bool* out) {
    if (ConsumeKeyword("true")) {
      *out = true;
    } else if (ConsumeKeyword("false")) {
      *out = false;
    } else {
      return Expected("true or false");
    }
    return Status::Ok();
  }

  // Skips a bracketed group starting at the cursor ('(', '{' or '['), with strings inside.
  Status SkipGroup() {
    std::string closers;
    const size_t start = pos_;
    do {
      const char c = Peek();
      if (AtEnd()) return ErrorAt(start, "unbalanced bracket: no matching close before the end");
      if (c == '"') {
        TPUG_RETURN_IF_ERROR(SkipString());
        continue;
      }
      if (c == '/' && (PeekAt(pos_ + 1) == '*' || PeekAt(pos_ + 1) == '/')) {
        SkipWs();
        continue;
      }
      if (c == '(' || c == '{' || c == '[') {
        if (static_cast<int>(closers.size()) >= limits_.max_nesting) {
          return ErrorAt(pos_, "brackets nested deeper than " +
                                   std::to_string(limits_.max_nesting) + " levels");
        }
        closers.push_back(c == '(' ? ')' : c == '{' ? '}' : ']');
      } else if (c == ')' || c == '}' || c == ']') {
        if (closers.empty() || closers.back() != c) {
          return ErrorAt(
              pos_, std::string("unbalanced '") + c + "'" +
                        (closers.empty() ? std::string()
                                         : std::string(" (expected '") + closers.back() + "')"));
        }
        closers.pop_back();
      }
      ++pos_;
    } while (!closers.empty());
    return Status::Ok();
  }
  Status SkipString() {
    const size_t start = pos_;
    ++pos_;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\\') {
        pos_ += 2;
        continue;
      }
      ++pos_;
      if (c == '"') return Status::Ok();
    }
    return ErrorAt(start, "unterminated string");
  }
  // An attribute value that is not needed: groups, strings and other non-blank characters up to
  // a ',' or blank at depth 0 (or a closing bracket of the enclosing construct).
  Status SkipValue() {
    SkipWs();
    const size_t start = pos_;
    while (!AtEnd()) {
      const char c = Peek();
      if (c == '(' || c == '{' || c == '[') {
        TPUG_RETURN_IF_ERROR(SkipGroup());
      } else if (c == '"') {
        TPUG_RETURN_IF_ERROR(SkipString());
      } else if (c == ',' || c == ')' || c == '}' || c == ']' || c == ' ' || c == '\n' ||
                 c == '\t' || c == '\r') {
        break;
      } else {
        ++pos_;
      }
    }
    if (pos_ == start) return Expected("an attribute value");
    return Status::Ok();
  }

  // ---- shapes ------------------------------------------------------------------------------
  Status Shape(xla::ShapeProto* shape, int depth);
  Status Layout(xla::LayoutProto* layout);
  // True if an array or tuple shape starts at the cursor (for old-style operands).
  bool ShapeAhead() {
    SkipWs();
    if (Peek() == '(') return true;
    size_t p = pos_;
    while (p < text_.size() && ((text_[p] >= 'a' && text_[p] <= 'z') || IsDigit(text_[p]))) ++p;
    return p > pos_ && PeekAt(p) == '[' && PrimitiveTypeOf(text_.substr(pos_, p - pos_)) >= 0;
  }

  // ---- instruction attributes ----------------------------------------------------------------
  Status Window(xla::Window* window);
  Status DimLabels(xla::ConvolutionDimensionNumbers* dnums);
  Status Slice(xla::HloInstructionProto* inst);
  Status Padding(xla::PaddingConfig* padding);
  Status ComputationRefs(xla::HloInstructionProto* inst);
  Status ControlPredecessors(xla::HloInstructionProto* inst);
  Status Attribute(xla::HloInstructionProto* inst, bool* has_feature_group, bool* has_batch_group);

  Status Computation();
  Status Instruction(xla::HloComputationProto* comp, bool* has_root);
  Status Operands(xla::HloInstructionProto* inst);

  std::string_view text_;
  const std::string& path_;
  xla::HloModuleProto* module_;
  std::vector<std::string>* warnings_;
  HloTextLimits limits_;
  HloTextShapeSpans* spans_ = nullptr;  // where the shapes are, when asked for
  size_t pos_ = 0;

  int64_t next_instruction_id_ = 1;
  int64_t next_computation_id_ = 1;
  std::unordered_map<std::string_view, int64_t> computation_ids_;
  std::unordered_map<std::string_view, int64_t> instruction_ids_;  // of the current computation
  std::unordered_set<std::string> warned_;
  int num_warnings_ = 0;
  std::vector<int64_t> scratch_;
};

Status Parser::Layout(xla::LayoutProto* layout) {
  // '{' already consumed by the caller.
  if (Consume('}')) return Status::Ok();
  SkipWs();
  if (Peek() != ':') {
    do {
      int64_t v = 0;
      TPUG_RETURN_IF_ERROR(Int(&v, "a minor_to_major dimension"));
      layout->add_minor_to_major(v);
    } while (Consume(','));
  }
  if (Consume(':')) {
    // Layout attributes: T(..)(..) tiles, S(n) memory space, E(n) element size; others skipped.
    while (true) {
      SkipWs();
      size_t p = pos_;
      while (p < text_.size() && (std::isalpha(static_cast<unsigned char>(text_[p])) ||
                                  text_[p] == '#' || text_[p] == '*')) {
        ++p;
      }
      if (p == pos_) break;
      const std::string_view key = text_.substr(pos_, p - pos_);
      pos_ = p;
      if (Peek() != '(')
        return ErrorAt(pos_, "expected '(' after layout attribute " + std::string(key) +
                                 ", found " + Found(pos_));
      if (key == "T") {
        while (Peek() == '(') {
          ++pos_;
          xla::TileProto* tile = layout->add_tiles();
          if (!Consume(')')) {
            do {
              SkipWs();
              if (Peek() == '*') {
                ++pos_;
                tile->add_dimensions(kInt64Min);  // XLA's combined-dimension marker
              } else {
                int64_t v = 0;
                TPUG_RETURN_IF_ERROR(RawInt(&v, "a tile dimension"));
                tile->add_dimensions(v);
              }
            } while (Consume(','));
            TPUG_RETURN_IF_ERROR(Expect(')'));
          }
        }
      } else if (key == "S" || key == "E") {
        ++pos_;
        int64_t v = 0;
        TPUG_RETURN_IF_ERROR(Int(&v, key == "S" ? "a memory space" : "an element size"));
        if (key == "S") {
          layout->set_memory_space(v);
        } else {
          layout->set_element_size_in_bits(v);
        }
        TPUG_RETURN_IF_ERROR(Expect(')'));
      } else {
        TPUG_RETURN_IF_ERROR(SkipGroup());
        // Some attributes take several groups (e.g. D(D,C)); skip any that follow directly.
        while (Peek() == '(') TPUG_RETURN_IF_ERROR(SkipGroup());
      }
    }
  }
  return Expect('}');
}

Status Parser::Shape(xla::ShapeProto* shape, int depth) {
  SkipWs();
  if (depth > limits_.max_nesting) {
    return ErrorAt(
        pos_, "tuple shapes nested deeper than " + std::to_string(limits_.max_nesting) + " levels");
  }
  if (Peek() == '(') {
    ++pos_;
    shape->set_element_type(xla::TUPLE);
    if (Consume(')')) return Status::Ok();
    do {
      TPUG_RETURN_IF_ERROR(Shape(shape->add_tuple_shapes(), depth + 1));
    } while (Consume(','));
    return Expect(')');
  }
  const size_t at = pos_;
  size_t p = pos_;
  while (p < text_.size() && ((text_[p] >= 'a' && text_[p] <= 'z') || IsDigit(text_[p]))) ++p;
  const int type = PrimitiveTypeOf(text_.substr(pos_, p - pos_));
  if (type < 0 || PeekAt(p) != '[') {
    return ErrorAt(at,
                   "expected a shape (an element type such as f32 followed by '[', or a "
                   "tuple '(...)'), found " +
                       Found(at));
  }
  shape->set_element_type(static_cast<xla::PrimitiveType>(type));
  pos_ = p + 1;
  int64_t elements = 1;
  bool overflow = false;
  if (!Consume(']')) {
    do {
      if (shape->dimensions_size() >= limits_.max_rank) {
        return ErrorAt(pos_,
                       "shape has more than " + std::to_string(limits_.max_rank) + " dimensions");
      }
      SkipWs();
      int64_t d = 0;
      bool dynamic = false;
      if (Peek() == '?') {
        ++pos_;
        d = kInt64Min;  // XLA's unbounded dynamic size
        dynamic = true;
      } else {
        if (Peek() == '<' && PeekAt(pos_ + 1) == '=') {
          pos_ += 2;
          dynamic = true;
        }
        SkipWs();
        if (!IsDigit(Peek())) return Expected("a dimension size");
        TPUG_RETURN_IF_ERROR(RawInt(&d, "a dimension size"));
        if (!overflow && d > 0 && elements > std::numeric_limits<int64_t>::max() / d) {
          overflow = true;
        }
        if (!overflow) elements *= d;
      }
      shape->add_dimensions(d);
      shape->add_is_dynamic_dimension(dynamic);
    } while (Consume(','));
    TPUG_RETURN_IF_ERROR(Expect(']'));
  }
  if (overflow) {
    return ErrorAt(at, "shape has more than 2^63-1 elements (its dimensions' product overflows)");
  }
  bool any_dynamic = false;
  for (bool b : shape->is_dynamic_dimension()) any_dynamic = any_dynamic || b;
  if (!any_dynamic) shape->clear_is_dynamic_dimension();
  // A layout follows directly ("f32[2,3]{1,0}"); '{' after blanks belongs to something else.
  if (Peek() == '{') {
    ++pos_;
    TPUG_RETURN_IF_ERROR(Layout(shape->mutable_layout()));
  }
  return Status::Ok();
}

// window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=1x1 rhs_dilate=1x1 rhs_reversal=0x1}
Status Parser::Window(xla::Window* window) {
  TPUG_RETURN_IF_ERROR(Expect('{'));
  struct Field {
    std::vector<int64_t> a, b;
    bool set = false;
  };
  Field size, stride, pad, lhs, rhs, rev;
  const size_t at = pos_;
  while (!Consume('}')) {
    SkipWs();
    const size_t key_at = pos_;
    std::string_view key = ParseName();
    if (key.empty()) return Expected("a window field (size, stride, pad, lhs_dilate, ...) or '}'");
    Field* f = key == "size"           ? &size
               : key == "stride"       ? &stride
               : key == "pad"          ? &pad
               : key == "lhs_dilate"   ? &lhs
               : key == "rhs_dilate"   ? &rhs
               : key == "rhs_reversal" ? &rev
                                       : nullptr;
    if (f == nullptr) {
      return ErrorAt(key_at, "unknown window field '" + std::string(key) +
                                 "' (expected size, stride, pad, lhs_dilate, rhs_dilate or "
                                 "rhs_reversal)");
    }
    if (f->set) return ErrorAt(key_at, "window field '" + std::string(key) + "' given twice");
    f->set = true;
    TPUG_RETURN_IF_ERROR(Expect('='));
    SkipWs();
    do {
      int64_t v = 0;
      TPUG_RETURN_IF_ERROR(RawInt(&v, "a window value"));
      f->a.push_back(v);
      if (f == &pad) {
        if (Peek() != '_') return Expected("'_' between low and high padding");
        ++pos_;
        TPUG_RETURN_IF_ERROR(RawInt(&v, "a window padding"));
        f->b.push_back(v);
      }
    } while (Peek() == 'x' && (++pos_, true));
  }
  const size_t n = size.a.size();
  for (const Field* f : {&stride, &pad, &lhs, &rhs, &rev}) {
    if (f->set && f->a.size() != n) {
      return ErrorAt(at, "window fields have different numbers of dimensions (size has " +
                             std::to_string(n) + ")");
    }
  }
  for (size_t i = 0; i < n; ++i) {
    auto* d = window->add_dimensions();
    d->set_size(size.a[i]);
    d->set_stride(stride.set ? stride.a[i] : 1);
    d->set_padding_low(pad.set ? pad.a[i] : 0);
    d->set_padding_high(pad.set ? pad.b[i] : 0);
    d->set_base_dilation(lhs.set ? lhs.a[i] : 1);
    d->set_window_dilation(rhs.set ? rhs.a[i] : 1);
    d->set_window_reversal(rev.set && rev.a[i] != 0);
  }
  return Status::Ok();
}

// dim_labels=b01f_01io->b01f
Status Parser::DimLabels(xla::ConvolutionDimensionNumbers* dn) {
  SkipWs();
  const size_t at = pos_;
  size_t p = pos_;
  while (p < text_.size() && (IsNameChar(text_[p]) || text_[p] == '>')) ++p;
  const std::string_view s = text_.substr(pos_, p - pos_);
  const size_t us = s.find('_'), arrow = s.find("->");
  if (us == std::string_view::npos || arrow == std::string_view::npos || arrow < us) {
    return ErrorAt(at, "expected dim_labels like b01f_01io->b01f, found " + Found(at));
  }
  pos_ = p;
  const std::string_view in = s.substr(0, us), kernel = s.substr(us + 1, arrow - us - 1),
                         out = s.substr(arrow + 2);
  auto bad = [&](std::string_view part) {
    return ErrorAt(at, "bad dim_labels part '" + std::string(part) +
                           "' (each part needs its two named dimensions once and spatial "
                           "digits 0..n-1)");
  };
  // Fills the two named positions and the spatial positions (by digit) of one part.
  auto part = [&](std::string_view labels, char a, char b, int64_t* pa, int64_t* pb,
                  std::vector<int64_t>* spatial) {
    int64_t fa = -1, fb = -1;
    spatial->assign(labels.size(), -1);
    size_t nsp = 0;
    for (size_t i = 0; i < labels.size(); ++i) {
      const char c = labels[i];
      if (c == a && fa < 0) {
        fa = static_cast<int64_t>(i);
      } else if (c == b && fb < 0) {
        fb = static_cast<int64_t>(i);
      } else if (IsDigit(c) && static_cast<size_t>(c - '0') < labels.size() &&
                 (*spatial)[c - '0'] < 0) {
        (*spatial)[c - '0'] = static_cast<int64_t>(i);
        ++nsp;
      } else {
        return false;
      }
    }
    if (fa < 0 || fb < 0) return false;
    spatial->resize(nsp);
    for (int64_t v : *spatial) {
      if (v < 0) return false;
    }
    *pa = fa;
    *pb = fb;
    return true;
  };
  int64_t x = 0, y = 0;
  std::vector<int64_t> sp;
  if (!part(in, 'b', 'f', &x, &y, &sp)) return bad(in);
  dn->set_input_batch_dimension(x);
  dn->set_input_feature_dimension(y);
  for (int64_t v : sp) dn->add_input_spatial_dimensions(v);
  const size_t rank = sp.size();
  if (!part(kernel, 'i', 'o', &x, &y, &sp) || sp.size() != rank) return bad(kernel);
  dn->set_kernel_input_feature_dimension(x);
  dn->set_kernel_output_feature_dimension(y);
  for (int64_t v : sp) dn->add_kernel_spatial_dimensions(v);
  if (!part(out, 'b', 'f', &x, &y, &sp) || sp.size() != rank) return bad(out);
  dn->set_output_batch_dimension(x);
  dn->set_output_feature_dimension(y);
  for (int64_t v : sp) dn->add_output_spatial_dimensions(v);
  return Status::Ok();
}

// slice={[0:10], [0:5:2]}
Status Parser::Slice(xla::HloInstructionProto* inst) {
  inst->clear_slice_dimensions();
  TPUG_RETURN_IF_ERROR(Expect('{'));
  if (Consume('}')) return Status::Ok();
  do {
    TPUG_RETURN_IF_ERROR(Expect('['));
    int64_t start = 0, limit = 0, stride = 1;
    TPUG_RETURN_IF_ERROR(Int(&start, "a slice start"));
    TPUG_RETURN_IF_ERROR(Expect(':'));
    TPUG_RETURN_IF_ERROR(Int(&limit, "a slice limit"));
    if (Consume(':')) TPUG_RETURN_IF_ERROR(Int(&stride, "a slice stride"));
    TPUG_RETURN_IF_ERROR(Expect(']'));
    auto* d = inst->add_slice_dimensions();
    d->set_start(start);
    d->set_limit(limit);
    d->set_stride(stride);
  } while (Consume(','));
  return Expect('}');
}

// padding=0_0x1_2_1 (low_high[_interior] per dimension)
Status Parser::Padding(xla::PaddingConfig* padding) {
  padding->Clear();
  SkipWs();
  do {
    int64_t lo = 0, hi = 0, interior = 0;
    TPUG_RETURN_IF_ERROR(RawInt(&lo, "a low padding"));
    if (Peek() != '_') return Expected("'_' between low and high padding");
    ++pos_;
    TPUG_RETURN_IF_ERROR(RawInt(&hi, "a high padding"));
    if (Peek() == '_') {
      ++pos_;
      TPUG_RETURN_IF_ERROR(RawInt(&interior, "an interior padding"));
    }
    auto* d = padding->add_dimensions();
    d->set_edge_padding_low(lo);
    d->set_edge_padding_high(hi);
    d->set_interior_padding(interior);
  } while (Peek() == 'x' && (++pos_, true));
  return Status::Ok();
}

// to_apply=%name or branch_computations={%a, %b}
Status Parser::ComputationRefs(xla::HloInstructionProto* inst) {
  auto one = [&]() -> Status {
    SkipWs();
    const size_t at = pos_;
    TPUG_ASSIGN_OR_RETURN(std::string_view name, ExpectName("a computation name"));
    auto it = computation_ids_.find(name);
    if (it == computation_ids_.end()) {
      return ErrorAt(at, "unknown computation '" + std::string(name) +
                             "' (a called computation must be defined earlier in the module)");
    }
    inst->add_called_computation_ids(it->second);
    return Status::Ok();
  };
  if (Consume('{')) {
    if (Consume('}')) return Status::Ok();
    do {
      TPUG_RETURN_IF_ERROR(one());
    } while (Consume(','));
    return Expect('}');
  }
  return one();
}

Status Parser::ControlPredecessors(xla::HloInstructionProto* inst) {
  TPUG_RETURN_IF_ERROR(Expect('{'));
  if (Consume('}')) return Status::Ok();
  do {
    SkipWs();
    const size_t at = pos_;
    TPUG_ASSIGN_OR_RETURN(std::string_view name, ExpectName("an instruction name"));
    auto it = instruction_ids_.find(name);
    if (it == instruction_ids_.end()) {
      return ErrorAt(at, "unknown control predecessor '" + std::string(name) +
                             "' (it must be defined earlier in the computation)");
    }
    inst->add_control_predecessor_ids(it->second);
  } while (Consume(','));
  return Expect('}');
}

Status Parser::Attribute(xla::HloInstructionProto* inst, bool* has_feature_group,
                         bool* has_batch_group) {
  SkipWs();
  const size_t at = pos_;
  std::string_view key = ParseName();
  if (key.empty()) return Expected("an attribute name");
  TPUG_RETURN_IF_ERROR(Expect('='));
  const auto& table = AttrTable();
  auto it = table.find(key);
  if (it == table.end()) {
    if (warned_.insert(std::string(key)).second) {
      Warn(at, "unknown attribute '" + std::string(key) + "' skipped");
    }
    return SkipValue();
  }
  const bool scatter = inst->opcode() == "scatter";
  int64_t v = 0;
  bool b = false;
  switch (it->second) {
    case Attr::kDimensions:
      return IntListInto(inst->mutable_dimensions(), "a dimension");
    case Attr::kIotaDimension:
      TPUG_RETURN_IF_ERROR(Int(&v, "a dimension"));
      inst->clear_dimensions();
      inst->add_dimensions(v);
      return Status::Ok();
    case Attr::kWindow:
      inst->clear_window();
      return Window(inst->mutable_window());
    case Attr::kDimLabels:
      inst->clear_convolution_dimension_numbers();
      return DimLabels(inst->mutable_convolution_dimension_numbers());
    case Attr::kFeatureGroupCount:
      TPUG_RETURN_IF_ERROR(Int(&v, "a feature group count"));
      inst->set_feature_group_count(v);
      *has_feature_group = true;
      return Status::Ok();
    case Attr::kBatchGroupCount:
      TPUG_RETURN_IF_ERROR(Int(&v, "a batch group count"));
      inst->set_batch_group_count(v);
      *has_batch_group = true;
      return Status::Ok();
    case Attr::kSlice:
      return Slice(inst);
    case Attr::kDynamicSliceSizes:
      return IntListInto(inst->mutable_dynamic_slice_sizes(), "a slice size");
    case Attr::kPadding:
      return Padding(inst->mutable_padding_config());
    case Attr::kIsStable:
      TPUG_RETURN_IF_ERROR(Bool(&b));
      inst->set_is_stable(b);
      return Status::Ok();
    case Attr::kIndex:
      TPUG_RETURN_IF_ERROR(Int(&v, "a tuple index"));
      inst->set_tuple_index(v);
      return Status::Ok();
    case Attr::kLhsContracting:
      return IntListInto(
          inst->mutable_dot_dimension_numbers()->mutable_lhs_contracting_dimensions(),
          "a dimension");
    case Attr::kRhsContracting:
      return IntListInto(
          inst->mutable_dot_dimension_numbers()->mutable_rhs_contracting_dimensions(),
          "a dimension");
    case Attr::kLhsBatch:
      return IntListInto(inst->mutable_dot_dimension_numbers()->mutable_lhs_batch_dimensions(),
                         "a dimension");
    case Attr::kRhsBatch:
      return IntListInto(inst->mutable_dot_dimension_numbers()->mutable_rhs_batch_dimensions(),
                         "a dimension");
    case Attr::kOffsetDims:
      return IntListInto(inst->mutable_gather_dimension_numbers()->mutable_offset_dims(),
                         "a dimension");
    case Attr::kCollapsedSliceDims:
      return IntListInto(inst->mutable_gather_dimension_numbers()->mutable_collapsed_slice_dims(),
                         "a dimension");
    case Attr::kStartIndexMap:
      return IntListInto(inst->mutable_gather_dimension_numbers()->mutable_start_index_map(),
                         "a dimension");
    case Attr::kIndexVectorDim:
      TPUG_RETURN_IF_ERROR(Int(&v, "a dimension"));
      if (scatter) {
        inst->mutable_scatter_dimension_numbers()->set_index_vector_dim(v);
      } else {
        inst->mutable_gather_dimension_numbers()->set_index_vector_dim(v);
      }
      return Status::Ok();
    case Attr::kSliceSizes:
      return IntListInto(inst->mutable_gather_slice_sizes(), "a slice size");
    case Attr::kUpdateWindowDims:
      return IntListInto(inst->mutable_scatter_dimension_numbers()->mutable_update_window_dims(),
                         "a dimension");
    case Attr::kInsertedWindowDims:
      return IntListInto(inst->mutable_scatter_dimension_numbers()->mutable_inserted_window_dims(),
                         "a dimension");
    case Attr::kScatterDimsToOperandDims:
      return IntListInto(
          inst->mutable_scatter_dimension_numbers()->mutable_scatter_dims_to_operand_dims(),
          "a dimension");
    case Attr::kIndicesAreSorted:
      TPUG_RETURN_IF_ERROR(Bool(&b));
      inst->set_indices_are_sorted(b);
      return Status::Ok();
    case Attr::kUniqueIndices:
      TPUG_RETURN_IF_ERROR(Bool(&b));
      inst->set_unique_indices(b);
      return Status::Ok();
    case Attr::kFftType: {
      SkipWs();
      std::string_view t = ParseName();
      xla::FftType type;
      if (!xla::FftType_Parse(std::string(t), &type)) {
        return ErrorAt(at, "fft_type must be FFT, IFFT, RFFT or IRFFT");
      }
      inst->set_fft_type(type);
      return Status::Ok();
    }
    case Attr::kFftLength:
      return IntListInto(inst->mutable_fft_length(), "an FFT length");
    case Attr::kExponentBits:
      TPUG_RETURN_IF_ERROR(Int(&v, "a bit count"));
      inst->set_exponent_bits(static_cast<int32_t>(v));
      return Status::Ok();
    case Attr::kMantissaBits:
      TPUG_RETURN_IF_ERROR(Int(&v, "a bit count"));
      inst->set_mantissa_bits(static_cast<int32_t>(v));
      return Status::Ok();
    case Attr::kIsHostTransfer:
      TPUG_RETURN_IF_ERROR(Bool(&b));
      inst->set_is_host_transfer(b);
      return Status::Ok();
    case Attr::kConstrainLayout:
      TPUG_RETURN_IF_ERROR(Bool(&b));
      inst->set_constrain_layout(b);
      return Status::Ok();
    case Attr::kCustomCallHasSideEffect:
      TPUG_RETURN_IF_ERROR(Bool(&b));
      inst->set_custom_call_has_side_effect(b);
      return Status::Ok();
    case Attr::kCalledComputation:
      return ComputationRefs(inst);
    case Attr::kControlPredecessors:
      return ControlPredecessors(inst);
    case Attr::kSkip:
      return SkipValue();
  }
  return SkipValue();
}

// Operands: "name", "%name" or "<shape> %name"; parameter(N) and constant(<literal>) are special.
Status Parser::Operands(xla::HloInstructionProto* inst) {
  TPUG_RETURN_IF_ERROR(Expect('('));
  if (inst->opcode() == "parameter") {
    int64_t v = 0;
    TPUG_RETURN_IF_ERROR(Int(&v, "a parameter number"));
    inst->set_parameter_number(v);
    return Expect(')');
  }
  if (inst->opcode() == "constant") {
    --pos_;
    return SkipGroup();  // the literal's value is not needed
  }
  if (Consume(')')) return Status::Ok();
  do {
    size_t shape_begin = std::string_view::npos, shape_end = 0;
    if (ShapeAhead()) {
      xla::ShapeProto ignored;
      shape_begin = pos_;
      TPUG_RETURN_IF_ERROR(Shape(&ignored, 0));
      shape_end = pos_;
    }
    SkipWs();
    const size_t at = pos_;
    TPUG_ASSIGN_OR_RETURN(std::string_view name, ExpectName("an operand name"));
    auto it = instruction_ids_.find(name);
    if (it == instruction_ids_.end()) {
      return ErrorAt(at, "unknown operand '" + std::string(name) +
                             "' (no instruction of that name is defined earlier in this "
                             "computation; a use before definition would be a cycle)");
    }
    inst->add_operand_ids(it->second);
    if (spans_ != nullptr && shape_begin != std::string_view::npos) {
      spans_->operands.push_back({it->second, shape_begin, shape_end});
    }
  } while (Consume(','));
  return Expect(')');
}

Status Parser::Instruction(xla::HloComputationProto* comp, bool* has_root) {
  SkipWs();
  const size_t start = pos_;
  const bool is_root = ConsumeKeyword("ROOT");
  SkipWs();
  const size_t name_at = pos_;
  TPUG_ASSIGN_OR_RETURN(std::string_view name, ExpectName("an instruction name or '}'"));
  TPUG_RETURN_IF_ERROR(Expect('='));
  xla::HloInstructionProto* inst = comp->add_instructions();
  inst->set_name(std::string(name));
  SkipWs();
  const size_t shape_begin = pos_;
  TPUG_RETURN_IF_ERROR(Shape(inst->mutable_shape(), 0));
  const size_t shape_end = pos_;
  SkipWs();
  const size_t op_at = pos_;
  size_t p = pos_;
  while (p < text_.size() && ((text_[p] >= 'a' && text_[p] <= 'z') || IsDigit(text_[p]) ||
                              text_[p] == '-' || text_[p] == '_')) {
    ++p;
  }
  if (p == pos_) return Expected("an opcode");
  inst->set_opcode(std::string(text_.substr(pos_, p - pos_)));
  pos_ = p;
  if (OpcodeId(inst->opcode()) == 0 && warned_.insert("opcode " + inst->opcode()).second) {
    Warn(op_at, "unknown opcode '" + inst->opcode() +
                    "' (not in the release's opcode table; its node gets opcode id 0)");
  }
  TPUG_RETURN_IF_ERROR(Operands(inst));
  bool has_feature_group = false, has_batch_group = false;
  while (Consume(',')) {
    TPUG_RETURN_IF_ERROR(Attribute(inst, &has_feature_group, &has_batch_group));
  }
  // XLA prints the group counts of a convolution only when they are not 1.
  if (inst->opcode() == "convolution") {
    if (!has_feature_group) inst->set_feature_group_count(1);
    if (!has_batch_group) inst->set_batch_group_count(1);
  }
  const int64_t id = next_instruction_id_++;
  inst->set_id(id);
  if (spans_ != nullptr) spans_->definitions.push_back({id, shape_begin, shape_end});
  if (!instruction_ids_.emplace(name, id).second) {
    return ErrorAt(name_at,
                   "instruction '" + std::string(name) + "' is defined twice in the computation");
  }
  if (is_root) {
    if (*has_root) return ErrorAt(start, "a second ROOT instruction in the computation");
    *has_root = true;
    comp->set_root_id(id);
  }
  return Status::Ok();
}

Status Parser::Computation() {
  SkipWs();
  const size_t start = pos_;
  const bool is_entry = ConsumeKeyword("ENTRY");
  SkipWs();
  const size_t name_at = pos_;
  TPUG_ASSIGN_OR_RETURN(std::string_view name, ExpectName("a computation name"));
  SkipWs();
  if (Peek() == '(') {
    TPUG_RETURN_IF_ERROR(SkipGroup());  // parameter names and shapes (the body repeats them)
    SkipWs();
    if (Peek() != '-' || PeekAt(pos_ + 1) != '>') return Expected("'->' and the result shape");
    pos_ += 2;
    xla::ShapeProto result;
    TPUG_RETURN_IF_ERROR(Shape(&result, 0));
  }
  TPUG_RETURN_IF_ERROR(Expect('{'));
  xla::HloComputationProto* comp = module_->add_computations();
  comp->set_name(std::string(name));
  const int64_t id = next_computation_id_++;
  comp->set_id(id);
  instruction_ids_.clear();
  bool has_root = false;
  while (!Consume('}')) {
    if (AtEnd()) return Expected("'}' closing computation " + std::string(name));
    TPUG_RETURN_IF_ERROR(Instruction(comp, &has_root));
  }
  if (comp->instructions_size() == 0) {
    return ErrorAt(start, "computation " + std::string(name) + " has no instructions");
  }
  if (!has_root) comp->set_root_id(comp->instructions(comp->instructions_size() - 1).id());
  // Attributes after the body (e.g. execution_thread="...").
  while (Consume(',')) {
    TPUG_ASSIGN_OR_RETURN(std::string_view key, ExpectName("a computation attribute"));
    (void)key;
    TPUG_RETURN_IF_ERROR(Expect('='));
    TPUG_RETURN_IF_ERROR(SkipValue());
  }
  if (!computation_ids_.emplace(name, id).second) {
    return ErrorAt(name_at, "computation '" + std::string(name) + "' is defined twice");
  }
  if (is_entry) {
    if (!module_->entry_computation_name().empty()) {
      return ErrorAt(start, "a second ENTRY computation");
    }
    module_->set_entry_computation_name(std::string(name));
    module_->set_entry_computation_id(id);
  }
  return Status::Ok();
}

Status Parser::ParseModule() {
  module_->Clear();
  if (text_.size() >= 3 && text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // UTF-8 BOM
  if (!ConsumeKeyword("HloModule")) return Expected("'HloModule' at the start of the module");
  TPUG_ASSIGN_OR_RETURN(std::string_view name, ExpectName("the module name"));
  module_->set_name(std::string(name));
  while (Consume(',')) {
    TPUG_ASSIGN_OR_RETURN(std::string_view key, ExpectName("a module attribute"));
    (void)key;
    TPUG_RETURN_IF_ERROR(Expect('='));
    TPUG_RETURN_IF_ERROR(SkipValue());
  }
  SkipWs();
  while (!AtEnd()) {
    if (ConsumeKeyword("HloModule")) {
      return ErrorAt(pos_ - 9, "a second HloModule in the file (one module per file)");
    }
    TPUG_RETURN_IF_ERROR(Computation());
    SkipWs();
  }
  if (module_->computations_size() == 0) return Expected("a computation");
  if (warnings_ != nullptr && num_warnings_ > kMaxWarnings) {
    warnings_->push_back(path_ + ": " + std::to_string(num_warnings_ - kMaxWarnings) +
                         " more warnings (unknown opcodes or attributes) not shown");
  }
  if (module_->entry_computation_name().empty()) {
    const auto& last = module_->computations(module_->computations_size() - 1);
    module_->set_entry_computation_name(last.name());
    module_->set_entry_computation_id(last.id());
  }
  return Status::Ok();
}

}  // namespace

bool LooksLikeHloText(std::string_view bytes) {
  size_t p = 0;
  if (bytes.substr(0, 3) == "\xEF\xBB\xBF") p = 3;
  while (p < bytes.size()) {
    const char c = bytes[p];
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      ++p;
    } else if (c == '/' && p + 1 < bytes.size() && bytes[p + 1] == '/') {
      const size_t e = bytes.find('\n', p);
      p = e == std::string_view::npos ? bytes.size() : e + 1;
    } else if (c == '/' && p + 1 < bytes.size() && bytes[p + 1] == '*') {
      const size_t e = bytes.find("*/", p + 2);
      if (e == std::string_view::npos) return false;
      p = e + 2;
    } else {
      break;
    }
  }
  constexpr std::string_view kKeyword = "HloModule";
  return bytes.substr(p, kKeyword.size()) == kKeyword && p + kKeyword.size() < bytes.size() &&
         (bytes[p + kKeyword.size()] == ' ' || bytes[p + kKeyword.size()] == '\t' ||
          bytes[p + kKeyword.size()] == '\n' || bytes[p + kKeyword.size()] == '\r');
}

Status ParseHloText(std::string_view text, const std::string& path, xla::HloModuleProto* module,
                    std::vector<std::string>* warnings, const HloTextLimits& limits,
                    HloTextShapeSpans* spans) {
  if (spans != nullptr) *spans = HloTextShapeSpans();
  Parser parser(text, path, module, warnings, limits, spans);
  return parser.ParseModule();
}

}  // namespace tpugraphs::ingest
