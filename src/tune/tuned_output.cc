#include "tpugraphs/tune/tuned_output.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

#include "tpugraphs/common/json_util.h"
#include "tpugraphs/ingest/layout_candidates.h"
#include "tpugraphs/io/npz.h"

namespace tpugraphs::tune {
namespace {

std::string Num(double v) { return JsonNumber(v, 9); }

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
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
  std::map<std::string, std::vector<int64_t>> wanted;  // instruction -> new minor_to_major
  for (size_t v = 0; v < nodes.size(); ++v) wanted[names[v]] = space.Get(c, v);
  // Names are unique in an HLO module; find each definition "<name> = <shape>" at the start of a
  // line (after indentation, "ROOT" and an optional '%').
  std::string out;
  out.reserve(text.size() + 64 * wanted.size());
  size_t pos = 0, found = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    size_t i = 0;
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (line.compare(i, 5, "ROOT ") == 0) {
      i += 5;
      while (i < line.size() && line[i] == ' ') ++i;
    }
    if (i < line.size() && line[i] == '%') ++i;
    size_t j = i;
    while (j < line.size() && IsNameChar(line[j])) ++j;
    const std::string name(line.substr(i, j - i));
    size_t k = j;
    while (k < line.size() && line[k] == ' ') ++k;
    const auto it = j > i ? wanted.find(name) : wanted.end();
    if (it == wanted.end() || k >= line.size() || line[k] != '=') {
      out.append(line);
    } else {
      // The shape: element type, [dims], optional {layout}.
      size_t b = line.find('[', k);
      size_t e = b == std::string_view::npos ? b : line.find(']', b);
      if (e == std::string_view::npos) {
        return InvalidArgumentError(path + ": cannot find the shape of instruction " + name);
      }
      ++e;
      std::string layout;
      if (!it->second.empty()) {
        layout = "{";
        for (size_t d = 0; d < it->second.size(); ++d) {
          if (d > 0) layout += ",";
          layout += std::to_string(it->second[d]);
        }
      }
      out.append(line.substr(0, e));
      size_t rest = e;
      if (e < line.size() && line[e] == '{') {
        const size_t close = line.find('}', e);
        const size_t colon = line.find(':', e);
        if (close == std::string_view::npos) {
          return InvalidArgumentError(path + ": unterminated layout of instruction " + name);
        }
        if (!layout.empty() && colon != std::string_view::npos && colon < close) {
          layout.append(line.substr(colon, close - colon));  // tiles, memory space
        }
        rest = close + 1;
      }
      if (!layout.empty()) out += layout + "}";
      out.append(line.substr(rest));
      ++found;
    }
    if (eol < text.size()) out.push_back('\n');
    pos = eol + 1;
  }
  // Operand shapes written inline (the older text style, "dot(f32[20,30]{1,0} %p, ...)") state
  // the same array's layout: rewrite them too.
  for (const auto& [name, m2m] : wanted) {
    const std::string token = "%" + name;
    std::string layout = "{";
    for (size_t d = 0; d < m2m.size(); ++d) {
      if (d > 0) layout.push_back(',');
      layout.append(std::to_string(m2m[d]));
    }
    layout += "}";
    for (size_t at = out.find(token); at != std::string::npos; at = out.find(token, at + 1)) {
      const size_t end = at + token.size();
      if (end < out.size() && IsNameChar(out[end])) continue;  // a longer name
      if (at < 2 || out[at - 1] != ' ' || out[at - 2] != '}') continue;
      const size_t open = out.rfind('{', at - 2);
      if (open == std::string::npos || open == 0 || out[open - 1] != ']') continue;
      const size_t colon = out.find(':', open);
      const size_t stop = colon != std::string::npos && colon < at - 2 ? colon : at - 2;
      if (m2m.empty()) {
        out.erase(open, at - 1 - open);
        at = open;
      } else {
        const std::string repl = layout.substr(0, layout.size() - 1);
        out.replace(open, stop - open, repl);
        at = open + repl.size();
      }
    }
  }
  if (found != wanted.size()) {
    return InvalidArgumentError(path + ": found " + std::to_string(found) + " of the " +
                                std::to_string(wanted.size()) +
                                " instructions to rewrite; is this the file the graph came from?");
  }
  return out;
}

}  // namespace tpugraphs::tune
