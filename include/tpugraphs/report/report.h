// `tpugraphs report`: one self-contained HTML page (inline SVG and CSS, no scripts, nothing
// fetched) that shows how models trained and how they rank (docs/report.md).
//
// Sections:
//   - the models: task, collection, epochs, best epoch and metric (one table row per file);
//   - learning curves from each model file's training history (TrainingSummary.history):
//     training loss, validation metric (one chart per metric name), gradient norm and learning
//     rate per epoch, best epochs marked; several models overlay. Files written before the
//     history existed show their per-epoch validation metric only;
//   - with a dataset: per evaluation (each model on its own collection, or the predictions file
//     on the selection), the per-graph metric (layout Kendall tau-b, tile top-5 error) next to
//     the seeded random baseline, worst graphs first; for the worst and the best graphs the
//     predicted score against the measured runtime (one point per configuration shown) and the
//     top-K slowdown for K = 1..100 against the expected slowdown of a random ranking; and a
//     dataset panel: runtime spread per graph, nodes and configurations per graph;
//   - tuning loops, one per trace of `tpugraphs tune --measure-cmd`: per graph the speedup over
//     the default (or the best runtime) so far against the configurations measured, the Kendall
//     tau of each round's measured batch, and a table of the final values.
// The evaluation goes through eval::Evaluate (keep_scores), exactly what `tpugraphs evaluate`
// computes.
//
// Thread-safety: BuildReport may run concurrently with other calls.
#ifndef TPUGRAPHS_REPORT_REPORT_H_
#define TPUGRAPHS_REPORT_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/status.h"

namespace tpugraphs::report {

struct ReportOptions {
  std::vector<std::string> models;  // model (or checkpoint) files
  // Traces printed by `tpugraphs tune --measure-cmd` (TSV, docs/report.md). At least one model
  // or one trace.
  std::vector<std::string> tune_traces;
  std::string data;         // dataset to evaluate on ("" = learning curves only)
  std::string split;        // only graphs of this split ("" = all)
  std::string predictions;  // score with this predictions file instead of the models
  std::string title = "tpugraphs report";
  uint64_t baseline_seed = 1;  // seed of the random baseline (as `evaluate --baseline random`)
  int threads = 0;             // 0 = all cores
  bool progress = false;
  int max_bar_graphs = 40;       // per-graph bars: the worst this many graphs
  int extreme_graphs = 3;        // this many worst and best graphs in detail
  int max_scatter_points = 500;  // configurations per scatter plot (evenly subsampled)
  int max_top_k = 100;           // top-K slowdown curve for K = 1..this
};

// The HTML text. Errors name the file at fault (unreadable model, dataset, predictions, no
// graph of a model's collection in the dataset), and the line of a malformed tune trace.
StatusOr<std::string> BuildReport(const ReportOptions& options);

// BuildReport, written atomically to `output` (checked to be writable before any work).
Status WriteReport(const ReportOptions& options, const std::string& output);

}  // namespace tpugraphs::report

#endif  // TPUGRAPHS_REPORT_REPORT_H_
