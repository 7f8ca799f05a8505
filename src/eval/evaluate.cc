#include "tpugraphs/eval/evaluate.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "tpugraphs/common/json_util.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/eval/metrics.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs::eval {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Mean of the defined (non-NaN) values; NaN if none. `undefined` counts the NaNs.
double MeanDefined(const std::vector<double>& v, int64_t* undefined = nullptr) {
  double sum = 0;
  int64_t n = 0, nan = 0;
  for (double x : v) {
    if (std::isnan(x)) {
      ++nan;
    } else {
      sum += x;
      ++n;
    }
  }
  if (undefined != nullptr) *undefined = nan;
  return n == 0 ? kNaN : sum / static_cast<double>(n);
}

}  // namespace

const std::vector<std::string>& KaggleCollections() {
  static const std::vector<std::string> c = {"tile:xla", "layout:xla:random", "layout:xla:default",
                                             "layout:nlp:random", "layout:nlp:default"};
  return c;
}

const std::vector<int64_t>& TopKs(TaskKind kind) {
  static const std::vector<int64_t> tile = {1, 5, 10}, layout = {1, 10, 100};
  return kind == TaskKind::kTile ? tile : layout;
}

GraphMetrics ComputeGraphMetrics(TaskKind kind, const std::vector<double>& scores,
                                 const std::vector<double>& runtimes) {
  GraphMetrics m;
  m.kind = kind;
  m.num_evaluated = static_cast<int64_t>(scores.size());
  const PairCounts counts = CountPairs(scores, runtimes);
  // Same arithmetic as KendallTauB / OrderedPairAccuracy, from one pass over the pairs.
  if (counts.n < 2 || counts.x_ties == counts.total || counts.y_ties == counts.total) {
    m.kendall_tau = kNaN;
  } else {
    const int64_t cmd =
        counts.total - counts.x_ties - counts.y_ties + counts.joint_ties - 2 * counts.discordant;
    m.kendall_tau = std::clamp(static_cast<double>(cmd) /
                                   std::sqrt(static_cast<double>(counts.total - counts.x_ties)) /
                                   std::sqrt(static_cast<double>(counts.total - counts.y_ties)),
                               -1.0, 1.0);
  }
  const int64_t ordered = counts.total - counts.y_ties;
  m.opa =
      ordered == 0 ? kNaN : static_cast<double>(counts.concordant()) / static_cast<double>(ordered);
  for (int64_t k : TopKs(kind)) m.top_k.push_back(TopKError(scores, runtimes, k));
  m.kaggle = kind == TaskKind::kTile ? 1.0 - TopKError(scores, runtimes, 5) : m.kendall_tau;
  return m;
}

EvaluationReport Summarize(std::vector<GraphMetrics> graphs, std::string scorer_name) {
  EvaluationReport r;
  r.scorer = std::move(scorer_name);
  std::map<std::string, std::vector<const GraphMetrics*>> by_collection;
  for (const auto& g : graphs) by_collection[g.collection].push_back(&g);
  for (const auto& [collection, members] : by_collection) {
    CollectionMetrics c;
    c.collection = collection;
    c.kind = members.front()->kind;
    c.num_graphs = static_cast<int64_t>(members.size());
    std::vector<double> tau, opa, kaggle;
    const size_t nk = TopKs(c.kind).size();
    std::vector<std::vector<double>> topk(nk);
    for (const GraphMetrics* g : members) {
      c.num_evaluated += g->num_evaluated;
      tau.push_back(g->kendall_tau);
      opa.push_back(g->opa);
      kaggle.push_back(g->kaggle);
      for (size_t k = 0; k < nk && k < g->top_k.size(); ++k) topk[k].push_back(g->top_k[k]);
    }
    c.kendall_tau = MeanDefined(tau, &c.undefined_tau);
    c.opa = MeanDefined(opa);
    c.kaggle = MeanDefined(kaggle, &c.undefined_kaggle);
    for (const auto& v : topk) c.top_k.push_back(MeanDefined(v));
    r.collections.push_back(std::move(c));
  }
  std::vector<double> values;
  for (const auto& official : KaggleCollections()) {
    for (const auto& c : r.collections) {
      if (c.collection == official) {
        values.push_back(c.kaggle);
        r.kaggle_collections.push_back(c.collection);
      }
    }
  }
  r.kaggle_official = !values.empty();
  r.kaggle_complete = values.size() == KaggleCollections().size();
  if (values.empty()) {
    for (const auto& c : r.collections) {
      values.push_back(c.kaggle);
      r.kaggle_collections.push_back(c.collection);
    }
  }
  r.kaggle = MeanDefined(values);
  r.graphs = std::move(graphs);
  return r;
}

namespace {

// The graphs of the filter and the evaluation indices (graphs of a collection the indices cover
// are scored only when listed); listed graphs missing from the dataset are reported.
StatusOr<std::vector<int64_t>> SelectForEvaluation(const io::DatasetReader& reader,
                                                   const EvaluateOptions& options) {
  const std::string& path = reader.path();
  const io::GraphFilter& filter = options.filter;
  const EvalIndices* indices = options.eval_indices;
  // Graphs of a collection the evaluation indices cover are scored only when listed.
  auto listed = [&](int64_t i) {
    const io::GraphInfo& info = reader.info(i);
    return indices == nullptr || !indices->Covers(info.collection) ||
           indices->Find(info.collection, info.name) != nullptr;
  };
  TPUG_ASSIGN_OR_RETURN(const std::vector<int64_t> selected,
                        io::SelectGraphs(reader, filter, listed));
  if (indices != nullptr) {
    std::set<std::string> present;
    for (int64_t i = 0; i < reader.num_graphs(); ++i) present.insert(reader.info(i).collection);
    for (const auto& collection : indices->collections()) {
      if (present.count(collection) == 0) continue;
      if (!filter.collections.empty() &&
          std::find(filter.collections.begin(), filter.collections.end(), collection) ==
              filter.collections.end()) {
        continue;
      }
      int64_t absent = 0;
      for (const auto& [name, list] : *options.eval_indices->Lists(collection)) {
        if (reader.Find(collection, name) < 0) ++absent;
      }
      if (absent > 0) {
        spdlog::warn("{}: {} graph(s) listed in {} are not in the dataset", path, absent,
                     options.eval_indices->SourceOf(collection));
      }
    }
  }
  return selected;
}

// One graph's scores and normalised runtimes, waiting for its metrics.
struct PendingGraph {
  GraphMetrics meta;
  std::vector<double> scores, runtimes;
};

// The configurations of `g` to score: its evaluation index list, else all of them.
StatusOr<std::vector<int64_t>> ConfigsToScore(const Graph& g, const io::GraphInfo& info,
                                              const EvaluateOptions& options,
                                              const std::string& path, bool* restricted) {
  const std::vector<int64_t>* list = options.eval_indices == nullptr
                                         ? nullptr
                                         : options.eval_indices->Find(info.collection, info.name);
  std::vector<int64_t> configs;
  *restricted = list != nullptr;
  if (list == nullptr) {
    configs.resize(g.num_configs);
    std::iota(configs.begin(), configs.end(), int64_t{0});
    return configs;
  }
  for (int64_t c : *list) {
    if (c >= g.num_configs) {
      return OutOfRangeError(options.eval_indices->SourceOf(info.collection) + ": eval index " +
                             std::to_string(c) + " of graph " + info.name +
                             " is out of range: " + path + " has " + std::to_string(g.num_configs) +
                             " configs for " + info.collection + ":" + info.name);
    }
  }
  return *list;
}

// Reads graph i and scores its configurations.
StatusOr<PendingGraph> ScoreGraph(const io::DatasetReader& reader, int64_t i, ConfigScorer& scorer,
                                  const EvaluateOptions& options) {
  const std::string& path = reader.path();
  const io::GraphInfo& info = reader.info(i);
  const std::string id = info.collection + ":" + info.name;
  TPUG_ASSIGN_OR_RETURN(Graph g, reader.ReadGraph(i, scorer.wants_layout_configs()));
  PendingGraph p;
  p.meta.collection = info.collection;
  p.meta.name = info.name;
  p.meta.split = info.split;
  p.meta.kind = info.kind;
  p.meta.num_configs = g.num_configs;
  TPUG_ASSIGN_OR_RETURN(const std::vector<int64_t> configs,
                        ConfigsToScore(g, info, options, path, &p.meta.restricted));
  p.runtimes.reserve(configs.size());
  double max_runtime = 0;
  for (int64_t c : configs) {
    p.runtimes.push_back(g.NormalizedRuntime(c));
    max_runtime = std::max(max_runtime, p.runtimes.back());
  }
  if (!(max_runtime > 0)) {
    return FailedPreconditionError(path + ": graph " + id +
                                   " has no measured runtimes (all 0, as in the hidden "
                                   "test split or for layouts ingested from an HLO module "
                                   "without runs): nothing to evaluate against; `tpugraphs "
                                   "predict` ranks such graphs");
  }
  ScoringInput input{g, &reader, i};
  TPUG_ASSIGN_OR_RETURN(p.scores, scorer.Score(input, configs));
  if (p.scores.size() != configs.size()) {
    return InternalError(scorer.name() + ": returned " + std::to_string(p.scores.size()) +
                         " scores for " + std::to_string(configs.size()) + " configs of " + id);
  }
  for (size_t k = 0; k < p.scores.size(); ++k) {
    if (!std::isfinite(p.scores[k])) {
      return InvalidArgumentError(scorer.name() + ": non-finite score for config " +
                                  std::to_string(configs[k]) + " of " + id);
    }
  }
  return p;
}

// The metrics of every graph of `batch`, in parallel; p.meta then holds them.
void MeasureBatch(ThreadPool& pool, bool keep_scores, std::vector<PendingGraph>* batch) {
  pool.ParallelFor(static_cast<int64_t>(batch->size()), 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      PendingGraph& p = (*batch)[j];
      GraphMetrics m = ComputeGraphMetrics(p.meta.kind, p.scores, p.runtimes);
      m.collection = std::move(p.meta.collection);
      m.name = std::move(p.meta.name);
      m.split = std::move(p.meta.split);
      m.num_configs = p.meta.num_configs;
      m.restricted = p.meta.restricted;
      if (keep_scores) {
        m.scores = std::move(p.scores);
        m.runtimes = std::move(p.runtimes);
      }
      p.meta = std::move(m);
    }
  });
}

}  // namespace

StatusOr<EvaluationReport> Evaluate(const io::DatasetReader& reader, ConfigScorer& scorer,
                                    const EvaluateOptions& options) {
  const std::string& path = reader.path();
  TPUG_ASSIGN_OR_RETURN(const std::vector<int64_t> selected, SelectForEvaluation(reader, options));
  if (auto* ps = dynamic_cast<PredictionsScorer*>(&scorer)) {
    // Rows for dataset graphs outside the selection are ignored; rows for graphs the dataset does
    // not have are an error (a wrong dataset or a typo in a name).
    std::vector<std::string> ids;
    for (int64_t i = 0; i < reader.num_graphs(); ++i) {
      ids.push_back(reader.info(i).collection + ":" + reader.info(i).name);
    }
    TPUG_RETURN_IF_ERROR(ps->predictions().CheckAllKnown(ids));
  }

  // Score and measure, a batch of graphs at a time.
  ThreadPool pool(options.threads);
  std::vector<GraphMetrics> results;
  int64_t skipped_empty = 0;
  std::unique_ptr<Progress> progress;
  if (options.progress) {
    progress =
        std::make_unique<Progress>("evaluate", static_cast<int64_t>(selected.size()), "graphs");
  }
  const size_t kBatch = 16;
  for (size_t start = 0; start < selected.size(); start += kBatch) {
    std::vector<PendingGraph> batch;
    for (size_t s = start; s < std::min(selected.size(), start + kBatch); ++s) {
      if (reader.info(selected[s]).num_configs == 0) {
        ++skipped_empty;
        continue;
      }
      TPUG_ASSIGN_OR_RETURN(PendingGraph p, ScoreGraph(reader, selected[s], scorer, options));
      batch.push_back(std::move(p));
    }
    MeasureBatch(pool, options.keep_scores, &batch);
    for (auto& p : batch) results.push_back(std::move(p.meta));
    if (progress)
      progress->Add(static_cast<int64_t>(std::min(selected.size(), start + kBatch) - start));
  }
  if (progress) progress->Finish();
  if (skipped_empty > 0)
    spdlog::warn("{}: skipped {} graph(s) without configs", path, skipped_empty);
  if (results.empty()) return NotFoundError(path + ": no selected graph has configs");
  return Summarize(std::move(results), scorer.name());
}

// ----------------------------------------------------------------------------------------------
// Output

namespace {

std::string Num(double v, int precision = 4) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", precision, v);
  return buf;
}

// Top-K errors of layout graphs are often tiny (1e-5): keep two significant digits there.
std::string TopKNum(double v) {
  if (v != 0 && std::abs(v) < 0.01) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.2e", v);
    return buf;
  }
  return Num(v);
}

std::string JsonNum(double v) { return JsonNumber(v); }

// Left-aligned first column, right-aligned others.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) {
      const std::string pad(width[i] - r[i].size(), ' ');
      if (i == 0) {
        out += r[i] + pad;
      } else {
        out += "  " + pad + r[i];
      }
    }
    out += '\n';
  }
  return out;
}

std::string KName(TaskKind kind, int64_t k) {
  return (kind == TaskKind::kTile ? "err@" : "slowdown@") + std::to_string(k);
}

}  // namespace

std::string FormatReportTable(const EvaluationReport& report, bool per_graph) {
  std::string out;
  for (TaskKind kind : {TaskKind::kTile, TaskKind::kLayout}) {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> header = {
        kind == TaskKind::kTile ? "tile collection" : "layout collection", "graphs", "configs"};
    if (kind == TaskKind::kLayout) {
      header.insert(header.end(), {"kendall_tau", "opa"});
    }
    for (int64_t k : TopKs(kind)) header.push_back(KName(kind, k));
    if (kind == TaskKind::kTile) header.insert(header.end(), {"kendall_tau", "opa"});
    header.push_back("kaggle");
    rows.push_back(header);
    for (const auto& c : report.collections) {
      if (c.kind != kind) continue;
      std::vector<std::string> row = {c.collection, std::to_string(c.num_graphs),
                                      std::to_string(c.num_evaluated)};
      if (kind == TaskKind::kLayout) row.insert(row.end(), {Num(c.kendall_tau), Num(c.opa)});
      for (double v : c.top_k) row.push_back(TopKNum(v));
      if (kind == TaskKind::kTile) row.insert(row.end(), {Num(c.kendall_tau), Num(c.opa)});
      row.push_back(Num(c.kaggle));
      rows.push_back(row);
      if (per_graph) {
        for (const auto& g : report.graphs) {
          if (g.collection != c.collection) continue;
          std::vector<std::string> gr = {"  " + g.name, "", std::to_string(g.num_evaluated)};
          if (kind == TaskKind::kLayout) gr.insert(gr.end(), {Num(g.kendall_tau), Num(g.opa)});
          for (double v : g.top_k) gr.push_back(TopKNum(v));
          if (kind == TaskKind::kTile) gr.insert(gr.end(), {Num(g.kendall_tau), Num(g.opa)});
          gr.push_back(Num(g.kaggle));
          rows.push_back(gr);
        }
      }
    }
    if (rows.size() > 1) out += RenderTable(rows) + "\n";
  }
  for (const auto& c : report.collections) {
    if (c.undefined_tau > 0) {
      out += "note: " + c.collection +
             ": Kendall tau undefined (all scores or all runtimes tied) " + "for " +
             std::to_string(c.undefined_tau) + " graph(s), left out of the mean\n";
    }
  }
  std::string which;
  for (const auto& c : report.kaggle_collections) which += (which.empty() ? "" : ", ") + c;
  out += "kaggle score: " + Num(report.kaggle) + "  (mean over " +
         std::to_string(report.kaggle_collections.size()) + " collection(s): " + which;
  if (!report.kaggle_official) {
    out += "; none of the five Kaggle collections present";
  } else if (!report.kaggle_complete) {
    out += "; only " + std::to_string(report.kaggle_collections.size()) +
           " of the 5 Kaggle collections present";
  }
  out += ")\nscorer: " + report.scorer + "\n";
  return out;
}

std::string FormatReportJson(const EvaluationReport& report, bool per_graph) {
  auto topk_json = [](TaskKind kind, const std::vector<double>& v) {
    std::string s = "{";
    const auto& ks = TopKs(kind);
    for (size_t i = 0; i < v.size() && i < ks.size(); ++i) {
      s += (i ? ", " : "") + JsonQuote(std::to_string(ks[i])) + ": " + JsonNum(v[i]);
    }
    return s + "}";
  };
  std::string out = "{\n  \"scorer\": " + JsonQuote(report.scorer) + ",\n";
  out += "  \"kaggle\": {\"score\": " + JsonNum(report.kaggle) + ", \"collections\": [";
  for (size_t i = 0; i < report.kaggle_collections.size(); ++i) {
    out += (i ? ", " : "") + JsonQuote(report.kaggle_collections[i]);
  }
  out += std::string("], \"complete\": ") + (report.kaggle_complete ? "true" : "false") +
         ", \"official\": " + (report.kaggle_official ? "true" : "false") + "},\n";
  out += "  \"collections\": [";
  for (size_t i = 0; i < report.collections.size(); ++i) {
    const auto& c = report.collections[i];
    out += std::string(i ? "," : "") + "\n    {\"collection\": " + JsonQuote(c.collection) +
           ", \"task\": " + JsonQuote(TaskKindName(c.kind)) +
           ", \"graphs\": " + std::to_string(c.num_graphs) +
           ", \"configs\": " + std::to_string(c.num_evaluated) +
           ", \"kendall_tau\": " + JsonNum(c.kendall_tau) + ", \"opa\": " + JsonNum(c.opa) +
           ", \"" + (c.kind == TaskKind::kTile ? "top_k_error" : "top_k_slowdown") +
           "\": " + topk_json(c.kind, c.top_k) + ", \"kaggle\": " + JsonNum(c.kaggle) +
           ", \"undefined_tau\": " + std::to_string(c.undefined_tau) + "}";
  }
  out += "\n  ]";
  if (per_graph) {
    out += ",\n  \"graphs\": [";
    for (size_t i = 0; i < report.graphs.size(); ++i) {
      const auto& g = report.graphs[i];
      out += std::string(i ? "," : "") + "\n    {\"collection\": " + JsonQuote(g.collection) +
             ", \"graph\": " + JsonQuote(g.name) + ", \"split\": " + JsonQuote(g.split) +
             ", \"configs\": " + std::to_string(g.num_configs) +
             ", \"evaluated\": " + std::to_string(g.num_evaluated) +
             ", \"restricted\": " + (g.restricted ? "true" : "false") +
             ", \"kendall_tau\": " + JsonNum(g.kendall_tau) + ", \"opa\": " + JsonNum(g.opa) +
             ", \"" + (g.kind == TaskKind::kTile ? "top_k_error" : "top_k_slowdown") +
             "\": " + topk_json(g.kind, g.top_k) + ", \"kaggle\": " + JsonNum(g.kaggle) + "}";
    }
    out += "\n  ]";
  }
  out += "\n}\n";
  return out;
}

}  // namespace tpugraphs::eval
