#include "tpugraphs/report/report.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/text_lines.h"
#include "tpugraphs/eval/evaluate.h"
#include "tpugraphs/eval/metrics.h"
#include "tpugraphs/eval/scorer.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/report/svg_plot.h"
#include "tpugraphs/train/model_file.h"
#include "tpugraphs/train/model_scorer.h"
#include "tpugraphs/train/trainer.h"

namespace tpugraphs::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kReferenceColor = 8;  // grey: the random baseline

// Log scale "where it helps": positive data spanning more than `ratio`.
ScaleKind ScaleFor(const std::vector<double>& values, double ratio) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (double v : values) {
    if (std::isnan(v)) continue;
    if (!(v > 0)) return ScaleKind::kLinear;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  return hi > 0 && hi / lo > ratio ? ScaleKind::kLog : ScaleKind::kLinear;
}

std::string H(std::string_view s) { return EscapeXml(s); }

// One model file and the history read from it.
struct ModelRun {
  std::string path;
  ModelFile file;
  std::vector<double> epochs, loss, metric, lr, grad_norm;
  double wall_seconds = 0;
  bool has_history = false;
};

ModelRun ReadRun(const std::string& path, ModelFile file) {
  ModelRun run;
  run.path = path;
  run.file = std::move(file);
  const TrainingSummary& s = run.file.summary();
  if (s.history_size() > 0) {
    run.has_history = true;
    for (const EpochRecord& r : s.history()) {
      run.epochs.push_back(r.epoch());
      run.loss.push_back(r.train_loss());
      run.metric.push_back(r.has_valid_metric() ? r.valid_metric() : kNaN);
      run.lr.push_back(r.learning_rate());
      run.grad_norm.push_back(r.grad_norm());
      run.wall_seconds += r.wall_seconds();
    }
  } else {
    for (int e = 0; e < s.epoch_metric_size(); ++e) {
      run.epochs.push_back(e + 1);
      run.metric.push_back(s.epoch_metric(e));
    }
  }
  return run;
}

// What one evaluation scored: a model on its collection, or a predictions file.
struct Evaluation {
  std::string label;  // model path or predictions file
  int color = 0;      // palette index: the model's colour in the learning curves
  eval::EvaluationReport model, random;
};

bool HigherIsBetter(TaskKind kind) { return kind == TaskKind::kLayout; }

// The per-graph value the report ranks graphs by: layout tau-b, tile top-5 error.
double GraphValue(const eval::GraphMetrics& g) {
  return g.kind == TaskKind::kLayout ? g.kendall_tau : (g.top_k.size() > 1 ? g.top_k[1] : kNaN);
}

std::string ValueName(TaskKind kind) {
  return kind == TaskKind::kLayout ? "Kendall tau-b" : "top-5 error";
}

std::string Row(const std::vector<std::string>& cells, const char* tag = "td") {
  std::string out = "<tr>";
  for (const auto& c : cells) out += std::string("<") + tag + ">" + c + "</" + tag + ">";
  return out + "</tr>";
}

const char* kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222;
background:#fff;max-width:1200px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ccc}
h3{font-size:15px;margin:18px 0 4px}p.note{color:#555;font-size:13px;margin:4px 0}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}th{background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.row{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
svg.chart{background:#fff;border:1px solid #e4e4e4}
svg .title{font-size:13px;font-weight:600;fill:#222}
svg .tick{font-size:11px;fill:#444}svg .legend{font-size:11px;fill:#222}
svg .axis-label{font-size:12px;fill:#222}svg .note{font-size:12px;fill:#888}
svg .marker-label{font-size:10px}
svg .grid{stroke:#ececec;stroke-width:1}svg .frame{fill:none;stroke:#999;stroke-width:1}
svg .zero{stroke:#666;stroke-width:1}
)";

// --- learning curves ---

std::string LearningCurves(const std::vector<ModelRun>& runs) {
  std::string out = "<h2 id=\"curves\">Learning curves</h2>";
  std::vector<std::string> missing;
  for (const ModelRun& r : runs) {
    if (!r.has_history) missing.push_back(H(r.path));
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    out += "<p class=\"note\">No per-epoch training history in " + list +
           " (written before the history was recorded): only the validation metric is "
           "shown.</p>";
  }
  out += "<div class=\"row\">";
  // Training loss, all runs with history.
  Chart loss;
  loss.id = "loss";
  loss.title = "Training loss per epoch";
  loss.x = {"epoch", ScaleKind::kLinear, std::nullopt, std::nullopt, true};
  std::vector<double> all;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].has_history) continue;
    all.insert(all.end(), runs[i].loss.begin(), runs[i].loss.end());
  }
  loss.y.scale = ScaleFor(all, 10);
  loss.y.label = std::string("training loss") + (loss.y.scale == ScaleKind::kLog ? " (log)" : "");
  for (size_t i = 0; i < runs.size(); ++i) {
    const ModelRun& r = runs[i];
    if (!r.has_history) continue;
    loss.series.push_back(
        {r.path, r.epochs, r.loss, {}, {}, SeriesStyle::kLineAndPoints, static_cast<int>(i)});
    if (r.file.summary().best_epoch() > 0) {
      loss.markers.push_back({static_cast<double>(r.file.summary().best_epoch()),
                              "best " + std::to_string(r.file.summary().best_epoch()),
                              static_cast<int>(i)});
    }
  }
  out += RenderChart(loss);
  // Validation metric: one chart per metric name.
  std::map<std::string, std::vector<size_t>> by_metric;
  for (size_t i = 0; i < runs.size(); ++i) {
    by_metric[runs[i].file.summary().metric_name()].push_back(i);
  }
  for (const auto& [name, members] : by_metric) {
    Chart c;
    c.id = "valid-" + (name.empty() ? std::string("metric") : name);
    c.title = (name.empty() ? std::string("Validation metric") : name) + " per epoch";
    c.x = {"epoch", ScaleKind::kLinear, std::nullopt, std::nullopt, true};
    std::vector<double> values;
    for (size_t i : members)
      values.insert(values.end(), runs[i].metric.begin(), runs[i].metric.end());
    c.y.scale = ScaleFor(values, 20);
    c.y.label = (name.empty() ? std::string("metric") : name) +
                (c.y.scale == ScaleKind::kLog ? " (log)" : "");
    for (size_t i : members) {
      const ModelRun& r = runs[i];
      c.series.push_back(
          {r.path, r.epochs, r.metric, {}, {}, SeriesStyle::kLineAndPoints, static_cast<int>(i)});
      if (r.file.summary().best_epoch() > 0) {
        c.markers.push_back({static_cast<double>(r.file.summary().best_epoch()),
                             "best " + std::to_string(r.file.summary().best_epoch()),
                             static_cast<int>(i)});
      }
    }
    out += RenderChart(c);
  }
  // Gradient norm and learning rate.
  Chart gn, lr;
  gn.id = "grad-norm";
  gn.title = "Gradient norm before clipping (epoch mean)";
  lr.id = "learning-rate";
  lr.title = "Learning rate (last step of the epoch)";
  gn.width = lr.width = 420;
  gn.height = lr.height = 260;
  gn.x = lr.x = {"epoch", ScaleKind::kLinear, std::nullopt, std::nullopt, true};
  std::vector<double> gns;
  for (const ModelRun& r : runs) gns.insert(gns.end(), r.grad_norm.begin(), r.grad_norm.end());
  gn.y.scale = ScaleFor(gns, 10);
  gn.y.label = std::string("gradient norm") + (gn.y.scale == ScaleKind::kLog ? " (log)" : "");
  lr.y.label = "learning rate";
  lr.y.min = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const ModelRun& r = runs[i];
    if (!r.has_history) continue;
    gn.series.push_back(
        {r.path, r.epochs, r.grad_norm, {}, {}, SeriesStyle::kLineAndPoints, static_cast<int>(i)});
    lr.series.push_back(
        {r.path, r.epochs, r.lr, {}, {}, SeriesStyle::kLineAndPoints, static_cast<int>(i)});
  }
  out += RenderChart(gn) + RenderChart(lr);
  return out + "</div>";
}

std::string ModelTable(const std::vector<ModelRun>& runs) {
  std::string out = "<h2 id=\"models\">Models</h2><table>";
  out += Row({"file", "task", "collection", "trained on", "parameters", "epochs", "best epoch",
              "metric", "best value", "training time"},
             "th");
  for (const ModelRun& r : runs) {
    const TrainingSummary& s = r.file.summary();
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.1f s", r.wall_seconds);
    out += Row({H(r.path), H(r.file.task()), H(r.file.data().collection()),
                H(r.file.data().dataset()), std::to_string(r.file.num_parameters()),
                std::to_string(s.epochs_run()), std::to_string(s.best_epoch()), H(s.metric_name()),
                FormatNumber(s.best_metric()), r.has_history ? std::string(secs) : "-"});
  }
  return out + "</table>";
}

// --- evaluation panels ---

// Index of `id` (collection:name) in the random baseline's graphs.
std::map<std::string, const eval::GraphMetrics*> ById(const eval::EvaluationReport& r) {
  std::map<std::string, const eval::GraphMetrics*> m;
  for (const auto& g : r.graphs) m[g.collection + ":" + g.name] = &g;
  return m;
}

std::string GraphBars(const Evaluation& ev, const std::vector<const eval::GraphMetrics*>& order,
                      const ReportOptions& options, int index) {
  const auto random = ById(ev.random);
  const size_t shown = std::min(order.size(), static_cast<size_t>(options.max_bar_graphs));
  BarChart c;
  c.id = "per-graph-" + std::to_string(index);
  const TaskKind kind = order.front()->kind;
  c.title = ValueName(kind) + " per graph, worst first";
  c.width = static_cast<int>(std::clamp<size_t>(120 + 22 * shown, 560, 1160));
  c.height = 380;
  c.y.label = ValueName(kind);
  BarChart::Bars model{"model", {}, ev.color}, base{"random baseline", {}, kReferenceColor};
  for (size_t i = 0; i < shown; ++i) {
    const eval::GraphMetrics& g = *order[i];
    c.categories.push_back(g.name);
    model.values.push_back(GraphValue(g));
    auto it = random.find(g.collection + ":" + g.name);
    base.values.push_back(it == random.end() ? kNaN : GraphValue(*it->second));
  }
  c.series = {model, base};
  std::string out = RenderBarChart(c);
  if (shown < order.size()) {
    out += "<p class=\"note\">The worst " + std::to_string(shown) + " of " +
           std::to_string(order.size()) + " graphs.</p>";
  }
  return out;
}

// Predicted score against measured runtime, and the top-K slowdown curve, of one graph.
std::string GraphDetail(const eval::GraphMetrics& g, const std::string& tag, const std::string& id,
                        int color, const ReportOptions& options) {
  const int64_t n = static_cast<int64_t>(g.scores.size());
  std::string out = "<h3 id=\"detail-" + id + "\">" + H(tag) + ": " + H(g.collection) + " " +
                    H(g.name) + " (" + ValueName(g.kind) + " " + FormatNumber(GraphValue(g)) +
                    ", " + std::to_string(n) + " configurations)</h3><div class=\"row\">";
  // Scatter, evenly subsampled in evaluation order.
  const int64_t shown = std::min<int64_t>(n, options.max_scatter_points);
  Series pts;
  pts.name = "";
  pts.style = SeriesStyle::kPoints;
  pts.color = color;
  for (int64_t j = 0; j < shown; ++j) {
    const int64_t i = shown == n ? j : j * n / shown;
    pts.x.push_back(g.runtimes[i]);
    pts.y.push_back(g.scores[i]);
  }
  Chart sc;
  sc.id = "scatter-" + id;
  sc.title = "Predicted score vs measured runtime";
  if (shown < n) {
    sc.title = "Predicted score vs runtime (" + std::to_string(shown) + " of " + std::to_string(n) +
               " configs)";
  }
  sc.width = 480;
  sc.x.scale = ScaleFor(pts.x, 3);
  sc.x.label = std::string(g.kind == TaskKind::kTile ? "runtime / normalizer" : "runtime") +
               (sc.x.scale == ScaleKind::kLog ? " (log)" : "");
  sc.y.label = "predicted score (lower = faster)";
  sc.series.push_back(std::move(pts));
  out += RenderChart(sc);
  // Top-K slowdown: best runtime among the K best-scored configurations / best runtime - 1.
  const std::vector<int64_t> rank = eval::RankByScore(g.scores);
  const double best = *std::min_element(g.runtimes.begin(), g.runtimes.end());
  const int64_t kmax = std::min<int64_t>(n, options.max_top_k);
  Series model, random;
  model.name = "model";
  model.color = color;
  random.name = "random ranking (expected)";
  random.color = kReferenceColor;
  random.dashed = true;
  double running = std::numeric_limits<double>::infinity();
  for (int64_t k = 1; k <= kmax; ++k) {
    running = std::min(running, g.runtimes[rank[k - 1]]);
    model.x.push_back(static_cast<double>(k));
    model.y.push_back(best > 0 ? running / best - 1 : kNaN);
    random.x.push_back(static_cast<double>(k));
    random.y.push_back(train::RandomRankingTopKError(g.runtimes, k));
  }
  Chart tk;
  tk.id = "topk-" + id;
  tk.title = "Top-K slowdown";
  tk.width = 480;
  tk.x = {"K (configurations tried, best predicted first)", ScaleKind::kLinear, std::nullopt,
          std::nullopt, true};
  tk.y.label = "best runtime in top K / best - 1";
  tk.y.min = 0;
  tk.series = {model, random};
  out += RenderChart(tk);
  return out + "</div>";
}

std::string DatasetPanel(const Evaluation& ev, const io::DatasetReader& reader, int index) {
  std::string out =
      "<h3 id=\"dataset-" + std::to_string(index) + "\">Dataset</h3><div class=\"row\">";
  // Runtime spread: max / min and median / min of each graph's evaluated runtimes.
  struct Spread {
    double median, max;
  };
  std::vector<Spread> spreads;
  Series sizes;
  sizes.style = SeriesStyle::kPoints;
  sizes.color = 2;
  sizes.point_radius = 3.5;
  for (const auto& g : ev.model.graphs) {
    std::vector<double> rt = g.runtimes;
    std::sort(rt.begin(), rt.end());
    if (!rt.empty() && rt.front() > 0) {
      spreads.push_back({rt[rt.size() / 2] / rt.front(), rt.back() / rt.front()});
    }
    const int64_t i = reader.Find(g.collection, g.name);
    if (i >= 0) {
      sizes.x.push_back(static_cast<double>(reader.info(i).num_nodes));
      sizes.y.push_back(static_cast<double>(reader.info(i).num_configs));
    }
  }
  std::sort(spreads.begin(), spreads.end(),
            [](const Spread& a, const Spread& b) { return a.max < b.max; });
  Series range;
  range.name = "min..max, dot = median";
  range.style = SeriesStyle::kRange;
  range.color = 2;
  for (size_t i = 0; i < spreads.size(); ++i) {
    range.x.push_back(static_cast<double>(i + 1));
    range.y.push_back(spreads[i].median);
    range.y_low.push_back(1.0);
    range.y_high.push_back(spreads[i].max);
  }
  Chart sp;
  sp.id = "spread-" + std::to_string(index);
  sp.title = "Runtime spread per graph (relative to its fastest configuration)";
  sp.width = 560;
  sp.x = {"graph (sorted by spread)", ScaleKind::kLinear, std::nullopt, std::nullopt, true};
  std::vector<double> hi;
  for (const auto& s : spreads) hi.push_back(s.max);
  hi.push_back(1.0);
  sp.y.scale = ScaleFor(hi, 3);
  sp.y.label = std::string("runtime / fastest") + (sp.y.scale == ScaleKind::kLog ? " (log)" : "");
  sp.series.push_back(std::move(range));
  out += RenderChart(sp);
  Chart sz;
  sz.id = "sizes-" + std::to_string(index);
  sz.title = "Graph sizes and configurations per graph";
  sz.width = 480;
  sz.x.scale = ScaleFor(sizes.x, 10);
  sz.x.label = std::string("nodes") + (sz.x.scale == ScaleKind::kLog ? " (log)" : "");
  sz.y.scale = ScaleFor(sizes.y, 10);
  sz.y.label = std::string("configurations") + (sz.y.scale == ScaleKind::kLog ? " (log)" : "");
  sz.series.push_back(std::move(sizes));
  out += RenderChart(sz);
  return out + "</div>";
}

std::string EvaluationSection(const Evaluation& ev, const io::DatasetReader& reader,
                              const ReportOptions& options, int index) {
  std::string out =
      "<h2 id=\"ranking-" + std::to_string(index) + "\">Ranking: " + H(ev.label) + "</h2>";
  out += "<p class=\"note\">" + H(reader.path()) +
         (options.split.empty() ? std::string() : ", split " + H(options.split)) + ", " +
         std::to_string(ev.model.graphs.size()) + " graphs; random baseline seed " +
         std::to_string(options.baseline_seed) + ".</p>";
  out += "<table>" + Row({"collection", "graphs", "configurations", "Kendall tau-b", "random tau-b",
                          "Kaggle value", "random Kaggle value"},
                         "th");
  std::map<std::string, const eval::CollectionMetrics*> random;
  for (const auto& c : ev.random.collections) random[c.collection] = &c;
  for (const auto& c : ev.model.collections) {
    const auto it = random.find(c.collection);
    const bool has = it != random.end();
    out += Row({H(c.collection), std::to_string(c.num_graphs), std::to_string(c.num_evaluated),
                FormatNumber(c.kendall_tau), has ? FormatNumber(it->second->kendall_tau) : "-",
                FormatNumber(c.kaggle), has ? FormatNumber(it->second->kaggle) : "-"});
  }
  out += "</table>";
  // Graphs of each task separately (the per-graph value differs).
  for (TaskKind kind : {TaskKind::kTile, TaskKind::kLayout}) {
    std::vector<const eval::GraphMetrics*> order;
    for (const auto& g : ev.model.graphs) {
      if (g.kind == kind) order.push_back(&g);
    }
    if (order.empty()) continue;
    const bool higher = HigherIsBetter(kind);
    // Worst first; undefined values (NaN) last.
    std::stable_sort(order.begin(), order.end(), [&](const auto* a, const auto* b) {
      const double va = GraphValue(*a), vb = GraphValue(*b);
      if (std::isnan(va) || std::isnan(vb)) return !std::isnan(va) && std::isnan(vb);
      return higher ? va < vb : va > vb;
    });
    const int sub = index * 2 + (kind == TaskKind::kLayout ? 1 : 0);
    out += "<div class=\"row\">" + GraphBars(ev, order, options, sub) + "</div>";
    std::vector<const eval::GraphMetrics*> defined;
    for (const auto* g : order) {
      if (!std::isnan(GraphValue(*g))) defined.push_back(g);
    }
    const size_t k = std::min(defined.size(), static_cast<size_t>(options.extreme_graphs));
    for (size_t i = 0; i < k; ++i) {
      out +=
          GraphDetail(*defined[i], "worst " + std::to_string(i + 1),
                      std::to_string(sub) + "-worst-" + std::to_string(i + 1), ev.color, options);
    }
    for (size_t i = 0; i < k && k + i < defined.size(); ++i) {
      out += GraphDetail(*defined[defined.size() - 1 - i], "best " + std::to_string(i + 1),
                         std::to_string(sub) + "-best-" + std::to_string(i + 1), ev.color, options);
    }
  }
  out += DatasetPanel(ev, reader, index);
  return out;
}

// The collections a model is evaluated on: its training collection if the dataset has it,
// otherwise every collection of its task.
StatusOr<std::vector<std::string>> CollectionsFor(const ModelFile& file,
                                                  const io::DatasetReader& reader,
                                                  const std::string& model_path) {
  std::set<std::string> same_task;
  bool has_own = false;
  for (int64_t i = 0; i < reader.num_graphs(); ++i) {
    const io::GraphInfo& info = reader.info(i);
    if (info.collection == file.data().collection()) has_own = true;
    if (TaskKindName(info.kind) == file.task()) same_task.insert(info.collection);
  }
  if (has_own) return std::vector<std::string>{file.data().collection()};
  if (same_task.empty()) {
    return NoMatchingGraphsError(reader.path() + ": no " + file.task() + " graphs to evaluate " +
                                 model_path + " on");
  }
  return std::vector<std::string>(same_task.begin(), same_task.end());
}

StatusOr<Evaluation> EvaluateWith(eval::ConfigScorer& scorer, std::string label,
                                  const io::DatasetReader& reader,
                                  std::vector<std::string> collections,
                                  const ReportOptions& options) {
  eval::EvaluateOptions eo;
  eo.filter.collections = std::move(collections);
  if (!options.split.empty()) eo.filter.splits = {options.split};
  eo.threads = options.threads;
  eo.progress = options.progress;
  eo.keep_scores = true;
  Evaluation ev;
  ev.label = std::move(label);
  TPUG_ASSIGN_OR_RETURN(ev.model, eval::Evaluate(reader, scorer, eo));
  TPUG_ASSIGN_OR_RETURN(auto random, eval::MakeBaselineScorer("random", options.baseline_seed));
  eo.keep_scores = false;
  eo.progress = false;
  TPUG_ASSIGN_OR_RETURN(ev.random, eval::Evaluate(reader, *random, eo));
  return ev;
}

// --- tuning loops ---

// The columns of a `tpugraphs tune` trace, in the order tune prints them.
constexpr std::array<std::string_view, 10> kTraceColumns = {
    "graph",           "round",   "measured",      "new",     "best_runtime",
    "default_runtime", "speedup", "batch_kendall", "seconds", "output"};
enum TraceColumn {
  kGraph,
  kRound,
  kMeasured,
  kNew,
  kBestRuntime,
  kDefaultRuntime,
  kSpeedup,
  kBatchKendall,
  kSeconds,
  kOutput
};

// One row of a trace: one graph (or benchmark method) after one round.
struct TraceRow {
  int64_t round = 0, measured = 0, fresh = 0;
  double best_runtime = 0, default_runtime = kNaN, speedup = kNaN, batch_kendall = kNaN;
  double seconds = 0;
  std::string output;
};

struct TraceSeries {
  std::string name;
  std::vector<TraceRow> rows;  // in file order
};

struct TuneTrace {
  std::string path;
  std::vector<TraceSeries> series;  // in order of first appearance
  int64_t num_rows = 0;
};

std::string At(const std::string& path, int64_t line) {
  return path + ":" + std::to_string(line) + ": ";
}

std::vector<std::string_view> SplitTabs(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    if (tab == std::string_view::npos) {
      fields.push_back(line.substr(start));
      return fields;
    }
    fields.push_back(line.substr(start, tab - start));
    start = tab + 1;
  }
}

bool ParseInt(std::string_view s, int64_t* v) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

// A decimal number, "nan" and "inf" included.
bool ParseDouble(std::string_view s, double* v) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

std::string ColumnList() {
  std::string list;
  for (std::string_view c : kTraceColumns) list += (list.empty() ? "" : ", ") + std::string(c);
  return list;
}

// Reads the TSV that `tpugraphs tune --measure-cmd` prints (docs/report.md). Errors name the file
// and the line.
StatusOr<TuneTrace> ReadTuneTrace(const std::string& path) {
  TPUG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  TuneTrace trace;
  trace.path = path;
  TextLines lines(text);
  std::string_view line;
  if (!lines.Next(&line)) {
    return InvalidArgumentError(At(path, 1) + "empty file: expected the header line (" +
                                ColumnList() + ")");
  }
  // The header: every column once, in any order.
  std::array<int, kTraceColumns.size()> column;  // column -> field index
  column.fill(-1);
  const std::vector<std::string_view> names = SplitTabs(line);
  for (size_t i = 0; i < names.size(); ++i) {
    const auto it = std::find(kTraceColumns.begin(), kTraceColumns.end(), names[i]);
    if (it == kTraceColumns.end()) {
      return InvalidArgumentError(At(path, 1) + "unknown column \"" + std::string(names[i]) +
                                  "\" in the header (a tune trace has the tab-separated columns " +
                                  ColumnList() + ")");
    }
    int& c = column[it - kTraceColumns.begin()];
    if (c >= 0) {
      return InvalidArgumentError(At(path, 1) + "column \"" + std::string(names[i]) +
                                  "\" appears twice in the header");
    }
    c = static_cast<int>(i);
  }
  for (size_t c = 0; c < kTraceColumns.size(); ++c) {
    if (column[c] < 0) {
      return InvalidArgumentError(
          At(path, 1) + "the header has no column \"" + std::string(kTraceColumns[c]) +
          "\" (a tune trace has the tab-separated columns " + ColumnList() + ")");
    }
  }
  std::map<std::string, size_t, std::less<>> index;
  while (lines.Next(&line)) {
    if (line.empty()) continue;
    const std::string at = At(path, lines.line_no());
    const std::vector<std::string_view> f = SplitTabs(line);
    if (f.size() != kTraceColumns.size()) {
      return InvalidArgumentError(at + "expected " + std::to_string(kTraceColumns.size()) +
                                  " tab-separated fields, found " + std::to_string(f.size()));
    }
    auto field = [&](TraceColumn c) { return f[column[c]]; };
    auto bad = [&](TraceColumn c, const char* what) {
      return InvalidArgumentError(at + std::string(kTraceColumns[c]) + " \"" +
                                  std::string(field(c)) + "\" is not " + what);
    };
    TraceRow row;
    if (field(kGraph).empty()) return InvalidArgumentError(at + "empty graph");
    if (!ParseInt(field(kRound), &row.round) || row.round < 1) {
      return bad(kRound, "an integer >= 1");
    }
    if (!ParseInt(field(kMeasured), &row.measured) || row.measured < 0) {
      return bad(kMeasured, "an integer >= 0");
    }
    if (!ParseInt(field(kNew), &row.fresh) || row.fresh < 0) return bad(kNew, "an integer >= 0");
    if (!ParseDouble(field(kBestRuntime), &row.best_runtime) ||
        !(std::isfinite(row.best_runtime) && row.best_runtime > 0)) {
      return bad(kBestRuntime, "a positive number");
    }
    for (auto [c, value] :
         {std::pair{kDefaultRuntime, &row.default_runtime}, std::pair{kSpeedup, &row.speedup}}) {
      if (!ParseDouble(field(c), value) ||
          !(std::isnan(*value) || (std::isfinite(*value) && *value > 0))) {
        return bad(c, "a positive number or nan");
      }
    }
    if (!ParseDouble(field(kBatchKendall), &row.batch_kendall) ||
        !(std::isnan(row.batch_kendall) || (row.batch_kendall >= -1 && row.batch_kendall <= 1))) {
      return bad(kBatchKendall, "a number in [-1, 1] or nan");
    }
    if (!ParseDouble(field(kSeconds), &row.seconds)) return bad(kSeconds, "a number");
    row.output = std::string(field(kOutput));
    const std::string_view graph = field(kGraph);
    auto it = index.find(graph);
    if (it == index.end()) {
      it = index.emplace(std::string(graph), trace.series.size()).first;
      trace.series.push_back({std::string(graph), {}});
    }
    trace.series[it->second].rows.push_back(std::move(row));
    ++trace.num_rows;
  }
  return trace;
}

// Above this many series a tuning chart draws them all in light grey under their median.
constexpr size_t kMaxTraceSeries = 12;

// The median of each x: over the series that have a point at x (step = false) or, with
// step = true, over the series whose points span x, each at its last point at or before x (a
// best-so-far curve holds its value between measurements). Series points sorted by x.
Series MedianSeries(const std::vector<Series>& series, bool step) {
  std::set<double> xs;
  for (const Series& s : series) xs.insert(s.x.begin(), s.x.end());
  Series median;
  median.name = "median";
  median.style = SeriesStyle::kLineAndPoints;
  median.color = 0;
  std::vector<double> values;
  for (double x : xs) {
    values.clear();
    for (const Series& s : series) {
      if (s.x.empty() || x < s.x.front() || x > s.x.back()) continue;
      const size_t i = std::upper_bound(s.x.begin(), s.x.end(), x) - s.x.begin() - 1;
      if (!step && s.x[i] != x) continue;
      if (std::isfinite(s.y[i])) values.push_back(s.y[i]);
    }
    if (values.empty()) continue;
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    median.x.push_back(x);
    median.y.push_back(n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2);
  }
  return median;
}

// The series of one chart: one line with markers each (palette colours, dashed after the
// eighth), or, when there are many, all in see-through grey plus their median.
void AddTraceSeries(Chart* chart, std::vector<Series> series, bool step_median) {
  if (series.size() <= kMaxTraceSeries) {
    for (size_t i = 0; i < series.size(); ++i) {
      series[i].style = SeriesStyle::kLineAndPoints;
      series[i].color = static_cast<int>(i % 8);
      series[i].dashed = i >= 8;
      chart->series.push_back(std::move(series[i]));
    }
    return;
  }
  Series median = MedianSeries(series, step_median);
  for (size_t i = 0; i < series.size(); ++i) {
    Series s = std::move(series[i]);
    s.name = i == 0 ? "each of the " + std::to_string(series.size()) + " series" : "";
    s.style = SeriesStyle::kLine;
    s.color = kReferenceColor;
    s.opacity = 0.35;
    chart->series.push_back(std::move(s));
  }
  chart->series.push_back(std::move(median));
}

std::string TuningLoop(const TuneTrace& trace, int index) {
  const std::string id = std::to_string(index);
  std::string out = "<h3 id=\"tune-" + id + "\">" + H(trace.path) + "</h3>";
  out += "<p class=\"note\">" + std::to_string(trace.series.size()) + " series, " +
         std::to_string(trace.num_rows) + " rows.</p>";
  // Speedup over the default when every row has one, else the best runtime on a log axis.
  bool speedup = trace.num_rows > 0;
  for (const TraceSeries& s : trace.series) {
    for (const TraceRow& r : s.rows) speedup = speedup && std::isfinite(r.speedup);
  }
  std::vector<Series> best, kendall;
  std::vector<double> all;
  for (const TraceSeries& ts : trace.series) {
    std::vector<const TraceRow*> rows;
    for (const TraceRow& r : ts.rows) rows.push_back(&r);
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto* a, const auto* b) { return a->measured < b->measured; });
    Series b;
    b.name = ts.name;
    for (const TraceRow* r : rows) {
      b.x.push_back(static_cast<double>(r->measured));
      b.y.push_back(speedup ? r->speedup : r->best_runtime);
    }
    all.insert(all.end(), b.y.begin(), b.y.end());
    best.push_back(std::move(b));
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto* a, const auto* b) { return a->round < b->round; });
    Series k;
    k.name = ts.name;
    for (const TraceRow* r : rows) {
      if (std::isnan(r->batch_kendall)) continue;
      k.x.push_back(static_cast<double>(r->round));
      k.y.push_back(r->batch_kendall);
    }
    kendall.push_back(std::move(k));
  }
  const bool many = trace.series.size() > kMaxTraceSeries;
  const int height = 300 + (many ? 16 : 16 * static_cast<int>((trace.series.size() + 1) / 2));
  out += "<div class=\"row\">";
  Chart bc;
  bc.id = "tune-best-" + id;
  bc.width = 560;
  bc.height = height;
  bc.x = {"configurations measured", ScaleKind::kLinear, std::nullopt, std::nullopt, true};
  if (speedup) {
    bc.title = "Best so far: speedup over the default configuration";
    bc.y.scale = ScaleFor(all, 10);
    bc.y.label =
        std::string("default / best runtime") + (bc.y.scale == ScaleKind::kLog ? " (log)" : "");
  } else {
    bc.title = "Best runtime so far";
    bc.y.scale = ScaleKind::kLog;
    bc.y.label = "best runtime (log)";
  }
  AddTraceSeries(&bc, std::move(best), true);
  out += RenderChart(bc);
  Chart kc;
  kc.id = "tune-kendall-" + id;
  kc.title = "Kendall tau of the model on each round's measured batch";
  kc.width = 560;
  kc.height = height;
  kc.x = {"round", ScaleKind::kLinear, std::nullopt, std::nullopt, true};
  kc.y.label = "batch Kendall tau";
  kc.y.min = -1;
  kc.y.max = 1;
  AddTraceSeries(&kc, std::move(kendall), false);
  out += RenderChart(kc);
  out += "</div>";
  if (many) {
    out += "<p class=\"note\">" + std::to_string(trace.series.size()) +
           " series, each in light grey; in blue their median at each x (left: over the series "
           "whose measurements span x, each at its last point at or before x; right: over the "
           "series with a value in that round).</p>";
  }
  if (!speedup && trace.num_rows > 0) {
    out +=
        "<p class=\"note\">Not every row has a speedup over the default (default_runtime "
        "nan): the best runtime is shown.</p>";
  }
  // Per series: the final row (the latest round, the latest measurement within it).
  out += "<table>" + Row({"series", "rounds", "measured", "best runtime", "speedup"}, "th");
  for (const TraceSeries& ts : trace.series) {
    const TraceRow* last = &ts.rows.front();
    for (const TraceRow& r : ts.rows) {
      if (std::pair(r.round, r.measured) >= std::pair(last->round, last->measured)) last = &r;
    }
    out += Row({H(ts.name), std::to_string(ts.rows.size()), std::to_string(last->measured),
                FormatNumber(last->best_runtime), FormatNumber(last->speedup)});
  }
  return out + "</table>";
}

std::string TuningLoops(const std::vector<TuneTrace>& traces) {
  std::string out = "<h2 id=\"tuning\">Tuning loops</h2>";
  out +=
      "<p class=\"note\">Traces of <code>tpugraphs tune --measure-cmd</code>: the best "
      "configuration found so far against the configurations measured, and how well the "
      "model ranked each round's measured batch.</p>";
  for (size_t i = 0; i < traces.size(); ++i) out += TuningLoop(traces[i], static_cast<int>(i));
  return out;
}

Status ValidateOptions(const ReportOptions& options) {
  if (options.models.empty() && options.tune_traces.empty()) {
    return UsageError("usage: at least one --model or --tune-trace is needed");
  }
  if (!options.predictions.empty() && options.data.empty()) {
    return UsageError("usage: --predictions needs --data");
  }
  if (!options.data.empty() && options.models.empty() && options.predictions.empty()) {
    return UsageError("usage: --data needs --model or --predictions");
  }
  if (!options.split.empty()) TPUG_RETURN_IF_ERROR(ValidateSplit(options.split));
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> BuildReport(const ReportOptions& options) {
  TPUG_RETURN_IF_ERROR(ValidateOptions(options));
  // The traces first: they are cheap to read, and a bad one fails before any scoring.
  std::vector<TuneTrace> traces;
  for (const std::string& path : options.tune_traces) {
    TPUG_ASSIGN_OR_RETURN(TuneTrace trace, ReadTuneTrace(path));
    traces.push_back(std::move(trace));
  }
  std::unique_ptr<io::DatasetReader> reader;
  if (!options.data.empty()) {
    TPUG_ASSIGN_OR_RETURN(reader, io::DatasetReader::Open(options.data));
  }
  std::vector<ModelRun> runs;
  std::vector<Evaluation> evaluations;
  const bool score_models = reader != nullptr && options.predictions.empty();
  for (const std::string& path : options.models) {
    if (score_models) {
      TPUG_ASSIGN_OR_RETURN(auto scorer, train::ModelScorer::Load(path, options.threads));
      TPUG_ASSIGN_OR_RETURN(std::vector<std::string> collections,
                            CollectionsFor(scorer->file(), *reader, path));
      TPUG_ASSIGN_OR_RETURN(Evaluation ev,
                            EvaluateWith(*scorer, path, *reader, collections, options));
      ev.color = static_cast<int>(runs.size());
      evaluations.push_back(std::move(ev));
      runs.push_back(ReadRun(path, scorer->file()));
    } else {
      TPUG_ASSIGN_OR_RETURN(ModelFile file, train::ReadModelFile(path));
      runs.push_back(ReadRun(path, std::move(file)));
    }
  }
  if (reader != nullptr && !options.predictions.empty()) {
    eval::ScorerSpec spec;
    spec.predictions = options.predictions;
    TPUG_ASSIGN_OR_RETURN(auto scorer, eval::MakeScorer(spec, reader.get()));
    TPUG_ASSIGN_OR_RETURN(Evaluation ev,
                          EvaluateWith(*scorer, options.predictions, *reader, {}, options));
    evaluations.push_back(std::move(ev));
  }

  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
                     H(options.title) + "</title><style>" + kStyle + "</style></head><body>";
  html += "<h1>" + H(options.title) + "</h1>";
  html += "<p class=\"note\">Written by tpugraphs " + std::string(TPUGRAPHS_VERSION) + ".";
  if (!runs.empty() || !evaluations.empty()) {
    html +=
        " Lower scores mean predicted faster; the random baseline is `tpugraphs evaluate "
        "--baseline random`.";
  }
  html += "</p>";
  if (!runs.empty()) {
    html += ModelTable(runs);
    html += LearningCurves(runs);
  }
  for (size_t i = 0; i < evaluations.size(); ++i) {
    html += EvaluationSection(evaluations[i], *reader, options, static_cast<int>(i));
  }
  if (!traces.empty()) html += TuningLoops(traces);
  html += "</body></html>\n";
  return html;
}

Status WriteReport(const ReportOptions& options, const std::string& output) {
  TPUG_RETURN_IF_ERROR(ValidateOptions(options));  // a usage error before an unwritable output
  AtomicFileWriter writer;
  RemoveStaleTemporaries(output);  // left by a killed earlier run
  TPUG_RETURN_IF_ERROR(writer.Open(output));
  TPUG_ASSIGN_OR_RETURN(std::string html, BuildReport(options));
  TPUG_RETURN_IF_ERROR(writer.Append(html));
  return writer.Commit();
}

}  // namespace tpugraphs::report
