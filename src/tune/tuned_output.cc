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
#include "tpugraphs/ingest/layout_candidates.h"
#include "tpugraphs/io/npz.h"

namespace tpugraphs::tune {
namespace {

std::string Num(double v) { return JsonNumber(v, 9); }

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

// The header's shape `sh` (entry_computation_layout's `what`) with the layout `m2m` of the array
// instruction `name`, whose shape is `type_dims` + layout; "" if it states that layout already
// (it stays byte-identical).
StatusOr<std::string> HeaderShapeWithLayout(std::string_view sh, const std::string& what,
                                            const std::string& name, const std::string& type_dims,
                                            const std::vector<int64_t>& m2m,
                                            const std::string& path) {
  const std::string prefix =
      path + ": entry_computation_layout's " + what + " '" + std::string(sh) + "' ";
  const size_t b = sh.find('[');
  if (sh.empty() || sh[0] == '(' || b == kNpos) {
    return InvalidArgumentError(prefix + "is not an array shape like instruction " + name + "'s " +
                                type_dims);
  }
  ArrayShapeParts parts;
  const std::string_view s = sh.substr(b);
  if (SplitArrayShape(s, &parts) != ShapeSplit::kOk || parts.layout_end != s.size()) {
    return InvalidArgumentError(prefix + "is not a well-formed array shape");
  }
  if (sh.substr(0, b + parts.dims_end) != type_dims) {
    return InvalidArgumentError(prefix + "does not match instruction " + name + " (" + type_dims +
                                "); is this the file the graph came from?");
  }
  std::vector<int64_t> stated;
  const bool same = m2m.empty() ? parts.layout_end == parts.dims_end
                                : StatedMinorToMajor(s, parts, &stated) && stated == m2m;
  if (same) return std::string();
  return std::string(sh.substr(0, b)) + WithLayout(s, parts, m2m);
}

using WantedLayouts = std::map<std::string, std::vector<int64_t>>;  // instruction -> minor_to_major

// Where the array shape "type[dims]{layout}" that ends just before `end` in `line` starts (at
// its '['), or kNpos if the text before `end` is not such a shape. A shape with a layout ends
// in '}' whose '{' follows the dims' ']'; one without a layout ends in ']'.
size_t ArrayShapeBefore(std::string_view line, size_t end) {
  if (end == 0) return kNpos;
  size_t dims_close = end - 1;
  if (line[dims_close] == '}') {
    const size_t open = line.rfind('{', dims_close);
    if (open == kNpos || open == 0 || line[open - 1] != ']') return kNpos;
    dims_close = open - 1;
  } else if (line[dims_close] != ']') {
    return kNpos;
  }
  const size_t b = line.rfind('[', dims_close);
  if (b == kNpos || b == 0 || !std::isalnum(static_cast<unsigned char>(line[b - 1]))) return kNpos;
  for (size_t i = b + 1; i < dims_close; ++i) {  // dims: digits, ',', '<=', '?' (dynamic)
    const char c = line[i];
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != ',' && c != '<' && c != '=' &&
        c != '?' && c != ' ') {
      return kNpos;
    }
  }
  return b;
}

// One line of the module body, appended to `out` with the layouts of `wanted` written in: the
// defining shape "name = type[dims]{layout}" of a wanted instruction (its "type[dims]" kept in
// `type_dims`, `found` counted), and every operand shape written inline before a wanted name
// ("dot(f32[20,30]{1,0} %p, ...)", the older text style). The scan only moves forward: each
// shape is rewritten at most once and the line is read once (strings skipped whole).
Status RewriteLine(std::string_view line, const WantedLayouts& wanted, const std::string& path,
                   std::string* out, std::map<std::string, std::string>* type_dims, size_t* found) {
  size_t copied = 0;  // line[0, copied) is in `out` already
  size_t i = 0;
  while (i < line.size() && IsBlank(line[i])) ++i;
  if (line.compare(i, 5, "ROOT ") == 0) {
    i += 5;
    while (i < line.size() && line[i] == ' ') ++i;
  }
  if (i < line.size() && line[i] == '%') ++i;
  size_t j = i;
  while (j < line.size() && IsNameChar(line[j])) ++j;
  size_t k = j;
  while (k < line.size() && line[k] == ' ') ++k;
  size_t scan = 0;
  if (j > i && k < line.size() && line[k] == '=') {
    scan = k + 1;
    const auto it = wanted.find(std::string(line.substr(i, j - i)));
    if (it != wanted.end()) {
      const std::string& name = it->first;
      size_t t = k + 1;
      while (t < line.size() && line[t] == ' ') ++t;
      const size_t b = line.find('[', t);
      ArrayShapeParts parts;
      const ShapeSplit split =
          b == kNpos ? ShapeSplit::kNoDims : SplitArrayShape(line.substr(b), &parts);
      if (split == ShapeSplit::kNoDims) {
        return InvalidArgumentError(path + ": cannot find the shape of instruction " + name);
      }
      if (split == ShapeSplit::kUnterminatedLayout) {
        return InvalidArgumentError(path + ": unterminated layout of instruction " + name);
      }
      (*type_dims)[name] = std::string(line.substr(t, b + parts.dims_end - t));
      out->append(line.substr(0, b));
      out->append(WithLayout(line.substr(b), parts, it->second));
      copied = b + parts.layout_end;
      scan = copied;
      ++*found;
    }
  }
  for (size_t p = scan; p < line.size();) {
    const char c = line[p];
    if (c == '"') {
      const size_t e = StringEnd(line, p);
      p = e == kNpos ? line.size() : e;
      continue;
    }
    if (c != ' ' || p == 0 || (line[p - 1] != '}' && line[p - 1] != ']')) {
      ++p;
      continue;
    }
    size_t n = p + 1;
    if (n < line.size() && line[n] == '%') ++n;
    const size_t name_begin = n;
    while (n < line.size() && IsNameChar(line[n])) ++n;
    if (n > name_begin) {
      const auto it = wanted.find(std::string(line.substr(name_begin, n - name_begin)));
      const size_t b = it == wanted.end() ? kNpos : ArrayShapeBefore(line, p);
      ArrayShapeParts parts;
      if (b != kNpos && b >= copied &&
          SplitArrayShape(line.substr(b, p - b), &parts) == ShapeSplit::kOk &&
          parts.layout_end == p - b) {
        out->append(line.substr(copied, b - copied));
        out->append(WithLayout(line.substr(b, p - b), parts, it->second));
        copied = p;
      }
    }
    p = std::max(n, p + 1);
  }
  out->append(line.substr(copied));
  return Status::Ok();
}

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
      ",\"default_score\":" + Num(r.default_config.score) + ",\"best_score\":" + Num(best) +
      ",\"best_dataset_score\":" + Num(r.best_dataset_score) +
      ",\"score_improvement\":" + Num(r.default_config.score - best);
  // Model scores are not runtimes; only the oracle's ns give a speedup.
  s += ",\"predicted_speedup\":" +
       (scores_are_ns && best > 0 ? Num(r.default_config.score / best) : std::string("null"));
  s += ",\"seconds\":" + Num(r.seconds) + ",\"configs_per_second\":" +
       Num(r.seconds > 0 ? static_cast<double>(r.scored) / r.seconds : 0.0) + ",\"chosen\":[";
  for (size_t i = 0; i < r.chosen.size(); ++i) {
    if (i > 0) s += ",";
    s += "{\"score\":" + Num(r.chosen[i].score) + ",\"origin\":" + JsonQuote(r.chosen[i].origin) +
         "}";
  }
  s += "],\"output\":" + JsonQuote(output) + "}";
  return s;
}

StatusOr<std::string> RewriteHloLayouts(const std::string& text, const std::string& path,
                                        const xla::HloModuleProto& module, const SearchSpace& space,
                                        const Config& c) {
  std::vector<int64_t> nodes;
  for (const auto& v : space.variables()) {
    if (v.array_node < 0) {
      return InvalidArgumentError(path + ": the search space was not made from the program");
    }
    nodes.push_back(v.array_node);
  }
  const std::vector<std::string> names = ingest::InstructionNamesOfNodes(module, nodes);
  WantedLayouts wanted;
  for (size_t v = 0; v < nodes.size(); ++v) wanted[names[v]] = space.Get(c, v);
  // The entry computation's parameters and root among them: their layouts are also stated by
  // the header's entry_computation_layout.
  std::map<std::string, int64_t> entry_params;  // instruction -> parameter number
  std::string entry_root;
  for (const auto& comp : module.computations()) {
    if (comp.id() != module.entry_computation_id()) continue;
    for (const auto& inst : comp.instructions()) {
      if (!wanted.count(inst.name())) continue;
      if (inst.opcode() == "parameter") entry_params[inst.name()] = inst.parameter_number();
      if (inst.id() == comp.root_id()) entry_root = inst.name();
    }
  }
  TPUG_ASSIGN_OR_RETURN(const ModuleHeader header, FindModuleHeader(text, path));
  // The body is rewritten in one forward pass, line by line; the header is rewritten last, from
  // the shapes found.
  const std::string_view body = std::string_view(text).substr(header.end);
  std::map<std::string, std::string> type_dims;  // instruction -> its shape's "type[dims]"
  std::string out;
  out.reserve(body.size() + 64 * wanted.size());
  size_t pos = 0, found = 0;
  while (pos < body.size()) {
    size_t eol = body.find('\n', pos);
    if (eol == std::string::npos) eol = body.size();
    TPUG_RETURN_IF_ERROR(
        RewriteLine(body.substr(pos, eol - pos), wanted, path, &out, &type_dims, &found));
    if (eol < body.size()) out.push_back('\n');
    pos = eol + 1;
  }
  if (found != wanted.size()) {
    return InvalidArgumentError(path + ": found " + std::to_string(found) + " of the " +
                                std::to_string(wanted.size()) +
                                " instructions to rewrite; is this the file the graph came from?");
  }
  // The header's entry_computation_layout follows the new layouts of the entry's parameters and
  // root (an array root; a tuple root is not a variable).
  std::string head = text.substr(0, header.end);
  if (header.has_entry_layout && (!entry_params.empty() || !entry_root.empty())) {
    TPUG_ASSIGN_OR_RETURN(const EntryLayout entry,
                          ParseEntryLayout(text, header.entry_layout, path));
    std::map<size_t, std::pair<size_t, std::string>> edits;  // begin -> (end, new text)
    auto edit = [&](Span sh, const std::string& what, const std::string& name) -> Status {
      TPUG_ASSIGN_OR_RETURN(
          std::string repl,
          HeaderShapeWithLayout(std::string_view(text).substr(sh.begin, sh.end - sh.begin), what,
                                name, type_dims[name], wanted[name], path));
      if (!repl.empty()) edits[sh.begin] = {sh.end, std::move(repl)};
      return Status::Ok();
    };
    for (const auto& [name, number] : entry_params) {
      if (number < 0 || number >= static_cast<int64_t>(entry.params.size())) {
        return InvalidArgumentError(path + ": entry_computation_layout in the module header has " +
                                    std::to_string(entry.params.size()) +
                                    " parameter shapes, no shape for parameter " +
                                    std::to_string(number) + " (instruction " + name + ")");
      }
      TPUG_RETURN_IF_ERROR(edit(entry.params[number], "parameter " + std::to_string(number), name));
    }
    if (!entry_root.empty()) TPUG_RETURN_IF_ERROR(edit(entry.result, "result", entry_root));
    for (auto e = edits.rbegin(); e != edits.rend(); ++e) {
      head.replace(e->first, e->second.first - e->first, e->second.second);
    }
  }
  return head + out;
}
}  // namespace tpugraphs::tune
