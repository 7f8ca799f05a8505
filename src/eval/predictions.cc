#include "tpugraphs/eval/predictions.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_map>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/text_lines.h"

namespace tpugraphs::eval {
namespace {

std::string At(const std::string& what, int64_t line) {
  return what + ":" + std::to_string(line) + ": ";
}

StatusOr<std::string> ReadStdin() {
  std::string data;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), stdin)) > 0) data.append(buf, n);
  if (std::ferror(stdin)) return IoError("<stdin>: read error");
  return data;
}

}  // namespace

StatusOr<Predictions> Predictions::Read(const std::string& path) {
  if (path == "-") {
    TPUG_ASSIGN_OR_RETURN(std::string text, ReadStdin());
    return Parse(text, "<stdin>");
  }
  TPUG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return Parse(text, path);
}

StatusOr<Predictions> Predictions::Parse(std::string_view text, std::string what) {
  Predictions p;
  p.source_ = std::move(what);
  const std::string& src = p.source_;
  bool seen_header = false;
  std::string last_key;  // rows of one graph usually come together: skip the map lookup
  size_t last_graph = 0;
  std::unordered_map<std::string, size_t> index;
  TextLines lines(text);
  std::string_view line;
  while (lines.Next(&line)) {
    const int64_t line_no = lines.line_no();
    if (line_no == 1) {
      if (line != kPredictionsVersionLine) {
        if (line.rfind("# tpugraphs predictions v", 0) == 0) {
          return UnimplementedError(At(src, 1) + "unsupported predictions format version \"" +
                                    std::string(line) + "\" (this build reads v1)");
        }
        return InvalidArgumentError(At(src, 1) +
                                    "not a predictions file: the first line must be \"" +
                                    std::string(kPredictionsVersionLine) + "\"");
      }
      continue;
    }
    if (line.empty() || line.front() == '#') continue;
    if (!seen_header) {
      if (line != kPredictionsHeader) {
        return InvalidArgumentError(At(src, line_no) + "expected the header line \"" +
                                    "collection<TAB>graph<TAB>config_index<TAB>score\"");
      }
      seen_header = true;
      continue;
    }
    // Split into exactly four tab-separated fields.
    std::string_view f[4];
    size_t start = 0;
    int nf = 0;
    for (;;) {
      const size_t tab = line.find('\t', start);
      if (nf == 4) {
        nf = 5;
        break;
      }
      if (tab == std::string_view::npos) {
        f[nf++] = line.substr(start);
        break;
      }
      f[nf++] = line.substr(start, tab - start);
      start = tab + 1;
    }
    if (nf != 4) {
      return InvalidArgumentError(At(src, line_no) +
                                  "expected 4 tab-separated fields (collection, graph, "
                                  "config_index, score)");
    }
    if (f[1].empty()) return InvalidArgumentError(At(src, line_no) + "empty graph name");
    int64_t config_index = 0;
    {
      auto [ptr, ec] = std::from_chars(f[2].data(), f[2].data() + f[2].size(), config_index);
      if (ec != std::errc() || ptr != f[2].data() + f[2].size() || config_index < 0) {
        return InvalidArgumentError(At(src, line_no) + "config_index \"" + std::string(f[2]) +
                                    "\" is not a non-negative integer");
      }
    }
    double score = 0;
    {
      auto [ptr, ec] = std::from_chars(f[3].data(), f[3].data() + f[3].size(), score);
      if (ec != std::errc() || ptr != f[3].data() + f[3].size()) {
        return InvalidArgumentError(At(src, line_no) + "score \"" + std::string(f[3]) +
                                    "\" is not a number");
      }
      if (!std::isfinite(score)) {
        return InvalidArgumentError(At(src, line_no) + "score \"" + std::string(f[3]) +
                                    "\" is not finite (NaN and infinities are not allowed)");
      }
    }
    std::string key;
    key.reserve(f[0].size() + 1 + f[1].size());
    key.append(f[0]).push_back(':');
    key.append(f[1]);
    size_t g;
    if (!p.graphs_.empty() && key == last_key) {
      g = last_graph;
    } else {
      auto it = index.find(key);
      if (it == index.end()) {
        if (Status s = ValidateCollection(f[0]); !s.ok()) {
          return InvalidArgumentError(At(src, line_no) + "bad collection \"" + std::string(f[0]) +
                                      "\": " + s.message());
        }
        g = p.graphs_.size();
        GraphPredictions gp;
        gp.collection = std::string(f[0]);
        gp.name = std::string(f[1]);
        gp.first_line = line_no;
        p.graphs_.push_back(std::move(gp));
        index.emplace(key, g);
      } else {
        g = it->second;
      }
      last_key = std::move(key);
      last_graph = g;
    }
    p.graphs_[g].entries.push_back({config_index, score, line_no});
    ++p.num_rows_;
  }
  if (lines.line_no() == 0) return InvalidArgumentError(src + ": empty predictions file");
  if (!seen_header) return InvalidArgumentError(src + ": missing the header line");

  for (size_t g = 0; g < p.graphs_.size(); ++g) {
    auto& e = p.graphs_[g].entries;
    std::stable_sort(e.begin(), e.end(),
                     [](const auto& a, const auto& b) { return a.config_index < b.config_index; });
    for (size_t i = 1; i < e.size(); ++i) {
      if (e[i].config_index == e[i - 1].config_index) {
        const int64_t first = std::min(e[i].line, e[i - 1].line);
        const int64_t second = std::max(e[i].line, e[i - 1].line);
        return InvalidArgumentError(At(src, second) + "duplicate entry for graph " +
                                    p.graphs_[g].Id() + " config " +
                                    std::to_string(e[i].config_index) + " (first given on line " +
                                    std::to_string(first) + ")");
      }
    }
    p.by_id_.emplace(p.graphs_[g].Id(), g);
  }
  return p;
}

const GraphPredictions* Predictions::Find(std::string_view collection,
                                          std::string_view name) const {
  std::string key;
  key.append(collection).push_back(':');
  key.append(name);
  auto it = by_id_.find(key);
  return it == by_id_.end() ? nullptr : &graphs_[it->second];
}

StatusOr<std::vector<double>> Predictions::ScoresFor(
    std::string_view collection, std::string_view name, int64_t num_configs,
    const std::vector<int64_t>& config_indices) const {
  const GraphPredictions* gp = Find(collection, name);
  const std::string id = std::string(collection) + ":" + std::string(name);
  if (gp == nullptr) return NotFoundError(source_ + ": no predictions for graph " + id);
  if (gp->max_index() >= num_configs) {
    const auto& last = gp->entries.back();
    return OutOfRangeError(At(source_, last.line) + "config index " +
                           std::to_string(last.config_index) + " out of range: graph " + id +
                           " has " + std::to_string(num_configs) + " configs");
  }
  std::vector<double> dense(num_configs, std::numeric_limits<double>::quiet_NaN());
  for (const auto& e : gp->entries) dense[e.config_index] = e.score;
  std::vector<double> out;
  out.reserve(config_indices.size());
  int64_t missing = 0, first_missing = -1;
  for (int64_t c : config_indices) {
    const double s = (c >= 0 && c < num_configs) ? dense[c] : std::nan("");
    if (std::isnan(s)) {
      if (missing++ == 0) first_missing = c;
    }
    out.push_back(s);
  }
  if (missing > 0) {
    return InvalidArgumentError(source_ + ": graph " + id + " (first row on line " +
                                std::to_string(gp->first_line) + ") has no score for config " +
                                std::to_string(first_missing) + " (" + std::to_string(missing) +
                                " of " + std::to_string(config_indices.size()) +
                                " requested configs missing)");
  }
  return out;
}

Status Predictions::CheckAllKnown(const std::vector<std::string>& known_ids) const {
  std::unordered_map<std::string_view, bool> known;
  for (const auto& id : known_ids) known.emplace(id, true);
  const GraphPredictions* first_unknown = nullptr;
  int64_t unknown = 0;
  for (const auto& g : graphs_) {
    if (known.count(g.Id()) == 0) {
      ++unknown;
      if (first_unknown == nullptr || g.first_line < first_unknown->first_line) first_unknown = &g;
    }
  }
  if (unknown == 0) return Status::Ok();
  return NotFoundError(At(source_, first_unknown->first_line) + "unknown graph " +
                       first_unknown->Id() + " (not in the dataset; " + std::to_string(unknown) +
                       " unknown graph(s) in the file)");
}

void AppendPredictionRows(std::string_view collection, std::string_view name,
                          const std::vector<double>& scores, std::string* out) {
  char buf[64];
  for (size_t i = 0; i < scores.size(); ++i) {
    out->append(collection).push_back('\t');
    out->append(name).push_back('\t');
    out->append(std::to_string(i)).push_back('\t');
    // Shortest representation that round-trips.
    auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), scores[i]);
    out->append(buf, ptr);
    out->push_back('\n');
  }
}

}  // namespace tpugraphs::eval
