#include "tpugraphs/tune/tuned_output.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tpugraphs/common/json_util.h"
#include "tpugraphs/ingest/hlo_text.h"
#include "tpugraphs/io/npz.h"

namespace tpugraphs::tune {
namespace {

std::string JsonNum(double v) { return JsonNumber(v, 9); }

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

constexpr size_t kNpos = std::string_view::npos;

bool IsBlank(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}
bool IsOpening(char c) { return c == '(' || c == '[' || c == '{'; }
bool IsClosing(char c) { return c == ')' || c == ']' || c == '}'; }

// "{a,b,...": a layout without its closing brace, or "" for none (the compiler's choice).
std::string LayoutOpening(const std::vector<int64_t>& m2m) {
  if (m2m.empty()) return "";
  std::string s = "{";
  for (size_t d = 0; d < m2m.size(); ++d) {
    if (d > 0) s.push_back(',');
    s.append(std::to_string(m2m[d]));
  }
  return s;
}

// The "[dims]{layout}" of an array shape `s` that starts at its '[': where the dims end (after
// ']'), where the layout ends (dims_end if there is none) and the ':' of its tiles and memory
// space (kNpos if none).
struct ArrayShapeParts {
  size_t dims_end = 0;
  size_t layout_end = 0;
  size_t colon = kNpos;
};
enum class ShapeSplit { kOk, kNoDims, kUnterminatedLayout };
ShapeSplit SplitArrayShape(std::string_view s, ArrayShapeParts* p) {
  const size_t e = s.find(']');
  if (e == kNpos) return ShapeSplit::kNoDims;
  p->dims_end = e + 1;
  p->layout_end = p->dims_end;
  p->colon = kNpos;
  if (p->dims_end < s.size() && s[p->dims_end] == '{') {
    const size_t close = s.find('}', p->dims_end);
    if (close == kNpos) return ShapeSplit::kUnterminatedLayout;
    const size_t colon = s.find(':', p->dims_end);
    if (colon != kNpos && colon < close) p->colon = colon;
    p->layout_end = close + 1;
  }
  return ShapeSplit::kOk;
}

// The "[dims]{layout}" of `s` (split into `p`) with the layout `m2m`: the tiles and memory space
// after ':' kept; no layout at all if m2m is empty.
std::string WithLayout(std::string_view s, const ArrayShapeParts& p,
                       const std::vector<int64_t>& m2m) {
  std::string out(s.substr(0, p.dims_end));
  std::string layout = LayoutOpening(m2m);
  if (!layout.empty()) {
    if (p.colon != kNpos) layout.append(s.substr(p.colon, p.layout_end - 1 - p.colon));
    out += layout + "}";
  }
  return out;
}

// The minor_to_major list a layout "{1,0:T(8,128)}" (split into `p`) states; empty without one.
// False if it is not a list of numbers.
bool StatedMinorToMajor(std::string_view s, const ArrayShapeParts& p, std::vector<int64_t>* m2m) {
  m2m->clear();
  if (p.layout_end == p.dims_end) return true;
  const size_t stop = p.colon != kNpos ? p.colon : p.layout_end - 1;
  size_t i = p.dims_end + 1;
  while (i < stop) {
    while (i < stop && IsBlank(s[i])) ++i;
    if (i == stop) break;
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    int64_t v = 0;
    while (i < stop && std::isdigit(static_cast<unsigned char>(s[i])) && v < (int64_t{1} << 40)) {
      v = v * 10 + (s[i++] - '0');
    }
    m2m->push_back(v);
    while (i < stop && IsBlank(s[i])) ++i;
    if (i < stop && s[i++] != ',') return false;
  }
  return true;
}

// Blanks and comments from `p` on, skipped as the HLO text parser skips them.
size_t SkipBlanks(std::string_view s, size_t p) {
  while (p < s.size()) {
    if (IsBlank(s[p])) {
      ++p;
    } else if (s.compare(p, 2, "/*") == 0) {
      const size_t e = s.find("*/", p + 2);
      p = e == kNpos ? s.size() : e + 2;
    } else if (s.compare(p, 2, "//") == 0) {
      const size_t e = s.find('\n', p);
      p = e == kNpos ? s.size() : e + 1;
    } else {
      break;
    }
  }
  return p;
}

// After the string whose '"' is at s[p] ('\' escapes); kNpos if it is not closed.
size_t StringEnd(std::string_view s, size_t p) {
  for (++p; p < s.size(); ++p) {
    if (s[p] == '\\') {
      ++p;
    } else if (s[p] == '"') {
      return p + 1;
    }
  }
  return kNpos;
}

// After the bracket group that opens at s[p] (strings and comments inside skipped); kNpos if it
// is not closed by matching brackets.
size_t GroupEnd(std::string_view s, size_t p) {
  std::string closers;
  do {
    if (p >= s.size()) return kNpos;
    const char c = s[p];
    if (IsOpening(c)) {
      closers.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (IsClosing(c)) {
      if (closers.empty() || c != closers.back()) return kNpos;
      closers.pop_back();
    } else if (c == '"') {
      p = StringEnd(s, p);
      if (p == kNpos) return kNpos;
      continue;
    } else if (s.compare(p, 2, "/*") == 0 || s.compare(p, 2, "//") == 0) {
      p = SkipBlanks(s, p);
      continue;
    }
    ++p;
  } while (!closers.empty());
  return p;
}

// After an attribute value starting at s[p]: bracket groups, strings and other non-blank
// characters up to a ',' or blank at depth 0, as the HLO text parser skips values. kNpos if a
// group or string is not closed.
size_t ValueEnd(std::string_view s, size_t p) {
  while (p < s.size()) {
    const char c = s[p];
    if (IsOpening(c)) {
      p = GroupEnd(s, p);
    } else if (c == '"') {
      p = StringEnd(s, p);
    } else if (c == ',' || IsClosing(c) || IsBlank(c)) {
      break;
    } else {
      ++p;
    }
    if (p == kNpos) return kNpos;
  }
  return p;
}

// [begin, end) of a text without the blanks at either end.
struct Span {
  size_t begin = 0;
  size_t end = 0;
};
Span Trim(std::string_view s, size_t begin, size_t end) {
  while (begin < end && IsBlank(s[begin])) ++begin;
  while (end > begin && IsBlank(s[end - 1])) --end;
  return {begin, end};
}

// The module header "HloModule name, key=value, ...": where it ends and where the value of its
// entry_computation_layout attribute is (empty span if it has none).
struct ModuleHeader {
  size_t end = 0;
  bool has_entry_layout = false;
  Span entry_layout;
};

StatusOr<ModuleHeader> FindModuleHeader(std::string_view text, const std::string& path) {
  auto malformed = [&](const std::string& what) {
    return InvalidArgumentError(path + ": malformed module header: " + what);
  };
  size_t p = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // UTF-8 BOM
  p = SkipBlanks(text, p);
  constexpr std::string_view kKeyword = "HloModule";
  if (text.compare(p, kKeyword.size(), kKeyword) != 0) return malformed("no 'HloModule'");
  p = SkipBlanks(text, p + kKeyword.size());
  if (p < text.size() && text[p] == '%') ++p;
  while (p < text.size() && IsNameChar(text[p])) ++p;
  ModuleHeader h;
  for (;;) {
    size_t q = SkipBlanks(text, p);
    if (q >= text.size() || text[q] != ',') break;
    q = SkipBlanks(text, q + 1);
    const size_t key = q;
    while (q < text.size() && IsNameChar(text[q])) ++q;
    const std::string name(text.substr(key, q - key));
    q = SkipBlanks(text, q);
    if (name.empty() || q >= text.size() || text[q] != '=') {
      return malformed("expected 'attribute=value' after ','");
    }
    const size_t value = SkipBlanks(text, q + 1);
    q = ValueEnd(text, value);
    if (q == kNpos) return malformed("unbalanced brackets or quotes in attribute " + name);
    if (name == "entry_computation_layout") {
      if (h.has_entry_layout) return malformed("entry_computation_layout given twice");
      h.has_entry_layout = true;
      h.entry_layout = {value, q};
    }
    p = q;
  }
  h.end = p;
  return h;
}

// The shapes of an entry_computation_layout value "{(param shapes...)->result shape}": each
// parameter's (split at the ',' at bracket depth 0, so tuples and tiles stay whole) and the
// result's.
struct EntryLayout {
  std::vector<Span> params;
  Span result;
};

StatusOr<EntryLayout> ParseEntryLayout(std::string_view text, Span value, const std::string& path) {
  const std::string_view v = text.substr(value.begin, value.end - value.begin);
  auto malformed = [&](const std::string& what) {
    std::string shown(v.substr(0, 200));
    if (v.size() > shown.size()) shown += "...";
    return InvalidArgumentError(path +
                                ": malformed entry_computation_layout in the module header (" +
                                what + "): '" + shown + "'");
  };
  constexpr char kForm[] = "expected {(parameter shapes)->result shape}";
  if (v.size() < 2 || v[0] != '{' || GroupEnd(v, 0) != v.size()) return malformed(kForm);
  const size_t open = SkipBlanks(v, 1);
  if (open >= v.size() || v[open] != '(') return malformed(kForm);
  const size_t after = GroupEnd(v, open);
  if (after == kNpos) return malformed(kForm);
  const size_t close = after - 1;
  EntryLayout e;
  if (Trim(v, open + 1, close).begin < close) {
    int depth = 0;
    size_t item = open + 1;
    for (size_t i = open + 1; i <= close; ++i) {
      if (i < close && v.compare(i, 2, "/*") == 0) {
        // XLA's "/*index=N*/" before every fifth element of a long tuple, or any comment.
        const size_t e_comment = v.find("*/", i + 2);
        if (e_comment == kNpos || e_comment + 2 > close) return malformed("unterminated comment");
        i = e_comment + 1;
        continue;
      }
      if (i == close || (depth == 0 && v[i] == ',')) {
        Span s = Trim(v, item, i);
        s.begin = std::min(SkipBlanks(v, s.begin), s.end);  // the comments before the shape
        if (s.begin == s.end) return malformed("an empty parameter shape");
        e.params.push_back({value.begin + s.begin, value.begin + s.end});
        item = i + 1;
      } else if (IsOpening(v[i])) {
        ++depth;
      } else if (IsClosing(v[i])) {
        --depth;
      }
    }
  }
  const size_t arrow = SkipBlanks(v, after);
  if (v.compare(arrow, 2, "->") != 0) return malformed("expected '->' after the parameter shapes");
  Span r = Trim(v, arrow + 2, v.size() - 1);
  r.begin = std::min(SkipBlanks(v, r.begin), r.end);
  if (r.begin == r.end) return malformed("no result shape");
  e.result = {value.begin + r.begin, value.begin + r.end};
  return e;
}

// An array shape "f32[2,3]{1,0:T(8,128)}" as a whole: where its '[' is (`*b`) and its parts
// from there. False if `shape` is not one whole array shape (a tuple, no dims, text after it).
bool SplitWholeArrayShape(std::string_view shape, size_t* b, ArrayShapeParts* parts) {
  *b = shape.find('[');
  return !shape.empty() && shape[0] != '(' && *b != kNpos &&
         SplitArrayShape(shape.substr(*b), parts) == ShapeSplit::kOk &&
         *b + parts->layout_end == shape.size();
}

// `shape` (split by SplitWholeArrayShape) with the layout `m2m`; "" if it states that layout
// already (it stays byte-identical).
std::string ReplacedLayout(std::string_view shape, size_t b, const ArrayShapeParts& parts,
                           const std::vector<int64_t>& m2m) {
  std::vector<int64_t> stated;
  const bool same = m2m.empty()
                        ? parts.layout_end == parts.dims_end
                        : StatedMinorToMajor(shape.substr(b), parts, &stated) && stated == m2m;
  return same ? std::string()
              : std::string(shape.substr(0, b)) + WithLayout(shape.substr(b), parts, m2m);
}

// The header's shape `sh` (entry_computation_layout's `what`) with the layout `m2m` of the array
// instruction `name`, whose shape is `type_dims` + layout; "" if it states that layout already.
StatusOr<std::string> HeaderShapeWithLayout(std::string_view sh, const std::string& what,
                                            const std::string& name, const std::string& type_dims,
                                            const std::vector<int64_t>& m2m,
                                            const std::string& path) {
  const std::string prefix =
      path + ": entry_computation_layout's " + what + " '" + std::string(sh) + "' ";
  if (sh.empty() || sh[0] == '(' || sh.find('[') == kNpos) {
    return InvalidArgumentError(prefix + "is not an array shape like instruction " + name + "'s " +
                                type_dims);
  }
  size_t b = 0;
  ArrayShapeParts parts;
  if (!SplitWholeArrayShape(sh, &b, &parts)) {
    return InvalidArgumentError(prefix + "is not a well-formed array shape");
  }
  if (sh.substr(0, b + parts.dims_end) != type_dims) {
    return InvalidArgumentError(prefix + "does not match instruction " + name + " (" + type_dims +
                                "); is this the file the graph came from?");
  }
  return ReplacedLayout(sh, b, parts, m2m);
}

// One replacement of text[begin, end).
struct Edit {
  size_t begin = 0, end = 0;
  std::string text;
};

}  // namespace

Status WriteTunedNpz(const Graph& g, const SearchResult& r, const std::string& path,
                     const MeasuredArrays* measured) {
  TPUG_ASSIGN_OR_RETURN(auto w, io::NpzWriter::Create(path, /*compress=*/true));
  const int64_t k = static_cast<int64_t>(r.chosen.size());
  std::vector<double> scores;
  for (const auto& s : r.chosen) scores.push_back(s.score);
  if (g.is_layout()) {
    const int64_t nc = g.num_config_nodes();
    std::vector<int8_t> feat;
    for (const auto& s : r.chosen) {
      feat.insert(feat.end(), s.config.layout.begin(), s.config.layout.end());
    }
    TPUG_RETURN_IF_ERROR(
        w->Add("node_config_feat", {k, nc, kLayoutConfigFeatureCount}, feat.data()));
    TPUG_RETURN_IF_ERROR(w->Add("node_config_ids", {nc}, g.node_config_ids.data()));
    TPUG_RETURN_IF_ERROR(w->Add("default_node_config_feat", {nc, kLayoutConfigFeatureCount},
                                r.default_config.config.layout.data()));
  } else {
    std::vector<float> feat;
    for (const auto& s : r.chosen) {
      feat.insert(feat.end(), s.config.tile.begin(), s.config.tile.end());
    }
    TPUG_RETURN_IF_ERROR(w->Add("config_feat", {k, kTileConfigFeatureCount}, feat.data()));
    TPUG_RETURN_IF_ERROR(w->Add("default_config_feat", {kTileConfigFeatureCount},
                                r.default_config.config.tile.data()));
  }
  TPUG_RETURN_IF_ERROR(w->Add("score", {k}, scores.data()));
  const double default_score = r.default_config.score;
  TPUG_RETURN_IF_ERROR(w->Add("default_score", {1}, &default_score));
  const int64_t scored = r.scored;
  TPUG_RETURN_IF_ERROR(w->Add("configs_scored", {1}, &scored));
  if (measured != nullptr) {
    if (static_cast<int64_t>(measured->runtime.size()) != k ||
        static_cast<int64_t>(measured->round.size()) != k) {
      return InternalError(path + ": measured arrays do not match the configurations");
    }
    TPUG_RETURN_IF_ERROR(w->Add("runtime", {k}, measured->runtime.data()));
    TPUG_RETURN_IF_ERROR(w->Add("round", {k}, measured->round.data()));
  }
  return w->Finish();
}

std::string TunedJson(const Graph& g, const SearchSpace& space, const SearchResult& r,
                      const std::string& scorer, bool scores_are_ns, const std::string& output) {
  const double best = r.chosen.empty() ? r.default_config.score : r.chosen[0].score;
  std::string s =
      "{\"graph\":" + JsonQuote(g.Id()) + ",\"nodes\":" + std::to_string(g.num_nodes()) +
      ",\"configurable_nodes\":" + std::to_string(g.num_config_nodes()) +
      ",\"decisions\":" + std::to_string(space.num_decisions()) +
      ",\"scorer\":" + JsonQuote(scorer) + ",\"configs_scored\":" + std::to_string(r.scored) +
      ",\"dataset_configs_scored\":" + std::to_string(r.dataset_configs) +
      ",\"invalid_dataset_configs\":" + std::to_string(r.invalid_dataset_configs) +
      ",\"default_score\":" + JsonNum(r.default_config.score) + ",\"best_score\":" + JsonNum(best) +
      ",\"best_dataset_score\":" + JsonNum(r.best_dataset_score) +
      ",\"score_improvement\":" + JsonNum(r.default_config.score - best);
  // Model scores are not runtimes; only the oracle's ns give a speedup.
  s += ",\"predicted_speedup\":" +
       (scores_are_ns && best > 0 ? JsonNum(r.default_config.score / best) : std::string("null"));
  s += ",\"seconds\":" + JsonNum(r.seconds) + ",\"configs_per_second\":" +
       JsonNum(r.seconds > 0 ? static_cast<double>(r.scored) / r.seconds : 0.0) + ",\"chosen\":[";
  for (size_t i = 0; i < r.chosen.size(); ++i) {
    if (i > 0) s += ",";
    s += "{\"score\":" + JsonNum(r.chosen[i].score) +
         ",\"origin\":" + JsonQuote(r.chosen[i].origin) + "}";
  }
  s += "],\"output\":" + JsonQuote(output) + "}";
  return s;
}

StatusOr<std::string> RewriteHloLayouts(const std::string& text, const std::string& path,
                                        const xla::HloModuleProto& module,
                                        const ingest::HloTextShapeSpans& spans,
                                        const SearchSpace& space, const Config& c) {
  // The instructions whose arrays are the space's variables, by instruction id (ids are unique
  // in a module; names only in a computation), with their new minor_to_major.
  std::vector<const xla::HloInstructionProto*> by_node;
  for (const auto& comp : module.computations()) {
    for (const auto& inst : comp.instructions()) by_node.push_back(&inst);
  }
  std::map<int64_t, std::vector<int64_t>> wanted;  // instruction id -> new minor_to_major
  std::map<int64_t, std::string> names;
  for (size_t v = 0; v < space.variables().size(); ++v) {
    const int64_t node = space.variables()[v].array_node;
    if (node < 0 || node >= static_cast<int64_t>(by_node.size())) {
      return InvalidArgumentError(path + ": the search space was not made from the program");
    }
    wanted[by_node[node]->id()] = space.Get(c, v);
    names[by_node[node]->id()] = by_node[node]->name();
  }
  // The entry computation's parameters and root among them: their layouts are also stated by
  // the header's entry_computation_layout.
  std::map<int64_t, int64_t> entry_params;  // instruction id -> parameter number
  int64_t entry_root = -1;
  for (const auto& comp : module.computations()) {
    if (comp.id() != module.entry_computation_id()) continue;
    for (const auto& inst : comp.instructions()) {
      if (!wanted.count(inst.id())) continue;
      if (inst.opcode() == "parameter") entry_params[inst.id()] = inst.parameter_number();
      if (inst.id() == comp.root_id()) entry_root = inst.id();
    }
  }
  // `spans` say where the text states those arrays' shapes, exactly as ingest read them: each
  // defining shape and each operand shape written inline (the older style), strings and
  // comments excluded. The edits are spliced in one pass.
  std::vector<Edit> edits;
  std::map<int64_t, std::string> type_dims;  // instruction id -> its shape's "type[dims]"
  auto rewrite = [&](const ingest::HloShapeSpan& span, bool definition) -> Status {
    const auto it = wanted.find(span.instruction_id);
    if (it == wanted.end()) return Status::Ok();
    const std::string_view shape = std::string_view(text).substr(span.begin, span.end - span.begin);
    size_t b = 0;
    ArrayShapeParts parts;
    if (!SplitWholeArrayShape(shape, &b, &parts)) {
      return InvalidArgumentError(path + ": the shape '" + std::string(shape.substr(0, 200)) +
                                  "' of " + (definition ? "instruction " : "an operand ") +
                                  names[span.instruction_id] + " is not an array shape");
    }
    if (definition)
      type_dims[span.instruction_id] = std::string(shape.substr(0, b + parts.dims_end));
    std::string repl = ReplacedLayout(shape, b, parts, it->second);
    if (!repl.empty()) edits.push_back({span.begin, span.end, std::move(repl)});
    return Status::Ok();
  };
  for (const auto& span : spans.definitions) TPUG_RETURN_IF_ERROR(rewrite(span, true));
  for (const auto& span : spans.operands) TPUG_RETURN_IF_ERROR(rewrite(span, false));
  if (type_dims.size() != wanted.size()) {
    return InvalidArgumentError(path + ": found " + std::to_string(type_dims.size()) + " of the " +
                                std::to_string(wanted.size()) +
                                " instructions to rewrite; is this the file the graph came from?");
  }
  // The header's entry_computation_layout follows the new layouts of the entry's parameters and
  // root (an array root; a tuple root is not a variable).
  TPUG_ASSIGN_OR_RETURN(const ModuleHeader header, FindModuleHeader(text, path));
  if (header.has_entry_layout && (!entry_params.empty() || entry_root >= 0)) {
    TPUG_ASSIGN_OR_RETURN(const EntryLayout entry,
                          ParseEntryLayout(text, header.entry_layout, path));
    auto edit = [&](Span sh, const std::string& what, int64_t id) -> Status {
      TPUG_ASSIGN_OR_RETURN(
          std::string repl,
          HeaderShapeWithLayout(std::string_view(text).substr(sh.begin, sh.end - sh.begin), what,
                                names[id], type_dims[id], wanted[id], path));
      if (!repl.empty()) edits.push_back({sh.begin, sh.end, std::move(repl)});
      return Status::Ok();
    };
    for (const auto& [id, number] : entry_params) {
      if (number < 0 || number >= static_cast<int64_t>(entry.params.size())) {
        return InvalidArgumentError(path + ": entry_computation_layout in the module header has " +
                                    std::to_string(entry.params.size()) +
                                    " parameter shapes, no shape for parameter " +
                                    std::to_string(number) + " (instruction " + names[id] + ")");
      }
      TPUG_RETURN_IF_ERROR(edit(entry.params[number], "parameter " + std::to_string(number), id));
    }
    if (entry_root >= 0) TPUG_RETURN_IF_ERROR(edit(entry.result, "result", entry_root));
  }
  std::sort(edits.begin(), edits.end(),
            [](const Edit& a, const Edit& b) { return a.begin < b.begin; });
  std::string out;
  out.reserve(text.size() + 8 * edits.size());
  size_t copied = 0;
  for (const Edit& e : edits) {
    if (e.begin < copied) {
      return InternalError(path + ": overlapping layout edits at byte " + std::to_string(e.begin));
    }
    out.append(text, copied, e.begin - copied);
    out.append(e.text);
    copied = e.end;
  }
  out.append(text, copied, std::string::npos);
  return out;
}
}  // namespace tpugraphs::tune
