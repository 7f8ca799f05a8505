#include "tpugraphs/eval/submission.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <set>
#include <unordered_map>

#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/text_lines.h"
#include "tpugraphs/eval/metrics.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs::eval {
namespace {

std::string SourceLine(const std::string& what, int64_t line) {
  return what + ":" + std::to_string(line) + ": ";
}

// Splits an ID "<collection>:<name>" where the collection has 2 (tile) or 3 (layout) parts.
Status ValidateId(std::string_view id) {
  const size_t c1 = id.find(':');
  if (c1 == std::string_view::npos) return InvalidArgumentError("no ':' in the ID");
  const bool tile = id.substr(0, c1) == "tile";
  size_t end = id.find(':', c1 + 1);
  if (!tile && end != std::string_view::npos) end = id.find(':', end + 1);
  if (end == std::string_view::npos || end + 1 >= id.size()) {
    return InvalidArgumentError("expected <collection>:<name>");
  }
  return ValidateCollection(id.substr(0, end));
}

}  // namespace

std::string FormatTopConfigs(TaskKind kind, const std::vector<int64_t>& ranking) {
  std::string s;
  const size_t n = kind == TaskKind::kTile ? static_cast<size_t>(kTileTopConfigs) : ranking.size();
  for (size_t i = 0; i < n; ++i) {
    if (i) s.push_back(';');
    s += std::to_string(i < ranking.size() ? ranking[i] : 0);
  }
  return s;
}

StatusOr<Submission> ReadSubmission(const std::string& path) {
  std::string text;
  if (path == "-") {
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), stdin)) > 0) text.append(buf, n);
    return ParseSubmission(text, "<stdin>");
  }
  TPUG_ASSIGN_OR_RETURN(text, ReadFileToString(path));
  return ParseSubmission(text, path);
}

StatusOr<Submission> ParseSubmission(std::string_view text, std::string what) {
  Submission sub;
  sub.source = std::move(what);
  const std::string& src = sub.source;
  std::unordered_map<std::string, int64_t> seen;
  TextLines lines(text);
  std::string_view line;
  while (lines.Next(&line)) {
    const int64_t line_no = lines.line_no();
    if (line_no == 1) {
      if (line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
      if (line != kSubmissionHeader) {
        return InvalidArgumentError(SourceLine(src, 1) + "expected the header \"ID,TopConfigs\"");
      }
      continue;
    }
    if (line.empty()) continue;
    const size_t comma = line.find(',');
    if (comma == std::string_view::npos || line.find(',', comma + 1) != std::string_view::npos) {
      return InvalidArgumentError(SourceLine(src, line_no) +
                                  "expected exactly two fields: ID,TopConfigs");
    }
    std::string_view id = line.substr(0, comma), top = line.substr(comma + 1);
    if (Status s = ValidateId(id); !s.ok()) {
      return InvalidArgumentError(SourceLine(src, line_no) + "bad ID \"" + std::string(id) +
                                  "\": " + s.message());
    }
    // TopConfigs: non-empty ';'-separated non-negative integers.
    bool ok = !top.empty();
    bool digit_seen = false;
    for (char c : top) {
      if (c >= '0' && c <= '9') {
        digit_seen = true;
      } else if (c == ';' && digit_seen) {
        digit_seen = false;
      } else {
        ok = false;
        break;
      }
    }
    if (!ok || !digit_seen) {
      return InvalidArgumentError(SourceLine(src, line_no) + "TopConfigs of " + std::string(id) +
                                  " is not a ';'-separated list of config indices");
    }
    auto [it, inserted] = seen.emplace(std::string(id), line_no);
    if (!inserted) {
      return InvalidArgumentError(SourceLine(src, line_no) + "duplicate ID " + std::string(id) +
                                  " (first on line " + std::to_string(it->second) + ")");
    }
    sub.rows.push_back({std::string(id), std::string(top), line_no});
  }
  if (lines.line_no() == 0) return InvalidArgumentError(src + ": empty submission file");
  return sub;
}

StatusOr<std::vector<SubmissionRow>> MergeSubmissions(const std::vector<Submission>& parts) {
  std::vector<SubmissionRow> out;
  std::unordered_map<std::string, std::pair<size_t, int64_t>> seen;  // id -> (part, line)
  for (size_t p = 0; p < parts.size(); ++p) {
    for (const auto& row : parts[p].rows) {
      auto [it, inserted] = seen.emplace(row.id, std::make_pair(p, row.line));
      if (!inserted) {
        return InvalidArgumentError(SourceLine(parts[p].source, row.line) + "duplicate ID " +
                                    row.id + " (already in " +
                                    SourceLine(parts[it->second.first].source, it->second.second) +
                                    "merge inputs must not overlap)");
      }
      out.push_back(row);
    }
  }
  return out;
}

Status CheckIds(const std::vector<SubmissionRow>& rows, const Submission& expected) {
  std::set<std::string> have, want;
  for (const auto& r : rows) have.insert(r.id);
  for (const auto& r : expected.rows) want.insert(r.id);
  std::vector<std::string> missing, extra;
  std::set_difference(want.begin(), want.end(), have.begin(), have.end(),
                      std::back_inserter(missing));
  std::set_difference(have.begin(), have.end(), want.begin(), want.end(),
                      std::back_inserter(extra));
  if (missing.empty() && extra.empty()) return Status::Ok();
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 20; ++i) s += "\n  " + v[i];
    if (v.size() > 20) s += "\n  ... and " + std::to_string(v.size() - 20) + " more";
    return s;
  };
  std::string msg = "IDs differ from " + expected.source + ": " + std::to_string(missing.size()) +
                    " missing, " + std::to_string(extra.size()) + " extra";
  if (!missing.empty()) msg += "\nmissing:" + list(missing);
  if (!extra.empty()) msg += "\nextra:" + list(extra);
  return FailedPreconditionError(msg);
}

std::string FormatSubmission(const std::vector<SubmissionRow>& rows) {
  std::string out = std::string(kSubmissionHeader) + "\n";
  for (const auto& r : rows) out += r.id + "," + r.top_configs + "\n";
  return out;
}

std::string FormatLayoutBlock(const int8_t* block) {
  if (block[0] < 0) return "*";
  std::string s = "{";
  for (int i = 0; i < 6 && block[i] >= 0; ++i) {
    if (i > 0) s.push_back(',');
    s += std::to_string(block[i]);
  }
  s.push_back('}');
  return s;
}

void AppendExplainRows(const Graph& g, int64_t first_rank, const std::vector<int64_t>& configs,
                       const std::vector<int8_t>& values, const std::vector<double>& scores,
                       const std::vector<int8_t>& config0, bool all_nodes, std::string* out) {
  const int64_t nc = g.num_config_nodes();
  const size_t row = static_cast<size_t>(nc) * kLayoutConfigFeatureCount;
  char buf[64];
  std::vector<int64_t> nodes;
  std::vector<bool> changed(static_cast<size_t>(nc));
  for (size_t j = 0; j < configs.size(); ++j) {
    const int8_t* config = values.data() + j * row;
    nodes.clear();
    for (int64_t k = 0; k < nc; ++k) {
      const size_t at = static_cast<size_t>(k) * kLayoutConfigFeatureCount;
      changed[k] = std::memcmp(config + at, config0.data() + at, kLayoutConfigFeatureCount) != 0;
      if (all_nodes || configs[j] == 0 || changed[k]) nodes.push_back(k);
    }
    // A configuration with configuration 0's layouts still gets a row: its first node.
    if (nodes.empty() && nc > 0) nodes.push_back(0);
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), scores[j]);
    const std::string prefix = g.collection + "\t" + g.name + "\t" +
                               std::to_string(first_rank + static_cast<int64_t>(j)) + "\t" +
                               std::to_string(configs[j]) + "\t" + std::string(buf, end) + "\t";
    for (int64_t k : nodes) {
      const int8_t* v = config + static_cast<size_t>(k) * kLayoutConfigFeatureCount;
      out->append(prefix);
      out->append(std::to_string(g.node_config_ids[k])).push_back('\t');
      out->append(g.config_node_names.empty() ? std::string("-") : g.config_node_names[k]);
      out->append(changed[k] ? "\t1\t" : "\t0\t");
      out->append(FormatLayoutBlock(v)).push_back('\t');
      out->append(FormatLayoutBlock(v + 6)).push_back('\t');
      out->append(FormatLayoutBlock(v + 12)).push_back('\n');
    }
  }
}

namespace {

// The explanation of one scored layout graph, in ranked order, reading its config values in
// chunks of at most 64 MiB (a release graph's values can be gigabytes).
Status WriteExplanation(const ScoringInput& input, const std::vector<double>& scores,
                        bool all_nodes, AtomicFileWriter* out) {
  const Graph& g = input.graph;
  const std::vector<int64_t> ranking = RankByScore(scores);  // positions are config indices
  TPUG_ASSIGN_OR_RETURN(std::vector<int8_t> config0, input.LayoutConfigs({0}));
  const int64_t row = std::max<int64_t>(1, g.num_config_nodes() * kLayoutConfigFeatureCount);
  const int64_t chunk = std::max<int64_t>(1, (int64_t{64} << 20) / row);
  const int64_t n = static_cast<int64_t>(ranking.size());
  for (int64_t start = 0; start < n; start += chunk) {
    const std::vector<int64_t> ids(ranking.begin() + start,
                                   ranking.begin() + std::min(n, start + chunk));
    std::vector<double> chunk_scores;
    chunk_scores.reserve(ids.size());
    for (int64_t c : ids) chunk_scores.push_back(scores[static_cast<size_t>(c)]);
    TPUG_ASSIGN_OR_RETURN(std::vector<int8_t> values, input.LayoutConfigs(ids));
    std::string rows;
    AppendExplainRows(g, start, ids, values, chunk_scores, config0, all_nodes, &rows);
    TPUG_RETURN_IF_ERROR(out->Append(rows));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<std::string>> Predict(const io::DatasetReader* reader,
                                           const Predictions* predictions_only,
                                           ConfigScorer& scorer, const PredictOptions& options,
                                           AtomicFileWriter* out) {
  // The graphs to write: (collection, name, kind, num_configs, reader index or -1).
  struct Item {
    std::string collection, name;
    TaskKind kind;
    int64_t num_configs;
    int64_t index;
  };
  const io::GraphFilter& filter = options.filter;
  std::vector<Item> items;
  if (reader != nullptr) {
    TPUG_ASSIGN_OR_RETURN(const std::vector<int64_t> chosen, io::SelectGraphs(*reader, filter));
    for (int64_t i : chosen) {
      const io::GraphInfo& info = reader->info(i);
      items.push_back({info.collection, info.name, info.kind, info.num_configs, i});
    }
    if (auto* ps = dynamic_cast<PredictionsScorer*>(&scorer)) {
      std::vector<std::string> ids;
      for (int64_t i = 0; i < reader->num_graphs(); ++i) {
        ids.push_back(reader->info(i).collection + ":" + reader->info(i).name);
      }
      TPUG_RETURN_IF_ERROR(ps->predictions().CheckAllKnown(ids));
    }
  } else if (predictions_only != nullptr) {
    if (!filter.splits.empty()) {
      return InvalidArgumentError("--split needs --data (a predictions file has no splits)");
    }
    std::vector<io::GraphKey> keys;
    for (const auto& g : predictions_only->graphs()) keys.push_back({g.collection, "", g.name});
    TPUG_ASSIGN_OR_RETURN(const std::vector<int64_t> chosen,
                          io::SelectGraphs(predictions_only->source(), keys, filter));
    for (int64_t i : chosen) {
      const auto& g = predictions_only->graphs()[i];
      const int64_t n = g.max_index() + 1;
      if (static_cast<int64_t>(g.entries.size()) != n) {
        // Entries are sorted and distinct: find the first gap.
        int64_t gap = 0;
        while (gap < n && g.entries[gap].config_index == gap) ++gap;
        return InvalidArgumentError(predictions_only->source() + ": graph " + g.Id() +
                                    " (first row on line " + std::to_string(g.first_line) +
                                    ") has no score for config " + std::to_string(gap) +
                                    " but scores up to config " + std::to_string(n - 1) +
                                    " (without --data every config 0..n-1 must be scored)");
      }
      items.push_back({g.collection, g.name, TaskKindOfCollection(g.collection), n, -1});
    }
  } else {
    return UsageError("usage: predict needs --data or --predictions");
  }

  if (out == nullptr) {
    // A dry run: everything is scored, nothing written.
  } else if (options.format == PredictFormat::kKaggle) {
    TPUG_RETURN_IF_ERROR(out->Append(std::string(kSubmissionHeader) + "\n"));
  } else {
    TPUG_RETURN_IF_ERROR(out->Append(std::string(kPredictionsVersionLine) +
                                     "\n# scorer: " + scorer.name() + "\n" +
                                     std::string(kPredictionsHeader) + "\n"));
  }
  if (options.explain != nullptr) {
    if (reader == nullptr) return UsageError("usage: --explain needs --data");
    TPUG_RETURN_IF_ERROR(options.explain->Append(std::string(kExplainVersionLine) +
                                                 "\n# scorer: " + scorer.name() + "\n" +
                                                 std::string(kExplainHeader) + "\n"));
  }
  std::unique_ptr<Progress> progress;
  if (options.progress) {
    progress = std::make_unique<Progress>("predict", static_cast<int64_t>(items.size()), "graphs");
  }
  std::vector<std::string> written;
  for (const Item& it : items) {
    Graph g;
    if (it.index >= 0) {
      TPUG_ASSIGN_OR_RETURN(g, reader->ReadGraph(it.index, scorer.wants_layout_configs()));
    } else {
      g.collection = it.collection;
      g.name = it.name;
      g.kind = it.kind;
      g.num_configs = it.num_configs;
    }
    const std::string id = it.collection + ":" + it.name;
    if (g.num_configs == 0) {
      std::string why;
      if (it.kind == TaskKind::kTile) {
        why =
            ": tile configurations are the tile sizes of one fused kernel's measured runs "
            "(TuningData dumps); a program ingested from HLO text or a module proto has none, "
            "so tile models cannot rank it (ingest it into a layout collection and use a "
            "layout model)";
      } else if (it.index >= 0 && g.num_config_nodes() == 0) {
        why =
            ": it has no configurable node (convolution, dot or reshape), so there is no "
            "layout to choose";
      }
      return FailedPreconditionError("graph " + id + " has no configs to rank" + why);
    }
    std::vector<int64_t> configs(g.num_configs);
    std::iota(configs.begin(), configs.end(), int64_t{0});
    ScoringInput input{g, reader, it.index};
    TPUG_ASSIGN_OR_RETURN(std::vector<double> scores, scorer.Score(input, configs));
    if (scores.size() != configs.size()) {
      return InternalError(scorer.name() + ": wrong number of scores for " + id);
    }
    for (size_t k = 0; k < scores.size(); ++k) {
      if (!std::isfinite(scores[k])) {
        return InvalidArgumentError(scorer.name() + ": non-finite score for config " +
                                    std::to_string(k) + " of " + id);
      }
    }
    if (options.explain != nullptr && g.is_layout()) {
      TPUG_RETURN_IF_ERROR(WriteExplanation(input, scores, options.explain_all, options.explain));
    }
    std::string text;
    if (out == nullptr) {
      // dry run
    } else if (options.format == PredictFormat::kKaggle) {
      text = id + "," + FormatTopConfigs(it.kind, RankByScore(scores)) + "\n";
    } else {
      AppendPredictionRows(it.collection, it.name, scores, &text);
    }
    if (out != nullptr) TPUG_RETURN_IF_ERROR(out->Append(text));
    written.push_back(id);
    if (progress) progress->Add();
  }
  if (progress) progress->Finish();
  return written;
}

}  // namespace tpugraphs::eval
