// Evaluation of a scorer on a dataset: per-graph metrics, per-collection means and the Kaggle
// score (docs/metrics.md, docs/evaluate.md).
//
// Per graph (metrics.h for the definitions):
//   tile:   top-K error for K = 1, 5, 10 on runtime / normalizer; Kaggle value 1 - error@5;
//           Kendall tau-b and OPA as extra information.
//   layout: Kendall tau-b, OPA, top-K slowdown for K = 1, 10, 100; Kaggle value = tau-b.
// Per collection: the plain mean over graphs of every metric, skipping graphs where it is
// undefined (NaN: e.g. tau when all scores tie); the number of such graphs is reported.
// Kaggle score: mean of the collection Kaggle values over the official five collections present
// (tile:xla, layout:{xla,nlp}:{random,default}); when none of them is present, over all present
// collections. The report says which collections it averaged and whether all five were there.
//
// Thread-safety: Evaluate uses the scorer from the calling thread only; metric kernels run on
// `threads` worker threads. Results do not depend on the thread count.
#ifndef TPUGRAPHS_EVAL_EVALUATE_H_
#define TPUGRAPHS_EVAL_EVALUATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/eval/eval_indices.h"
#include "tpugraphs/eval/scorer.h"
#include "tpugraphs/io/graph_filter.h"

namespace tpugraphs::io {
class DatasetReader;
}

namespace tpugraphs::eval {

// The official five, in Kaggle's order.
const std::vector<std::string>& KaggleCollections();

// K values reported per task.
const std::vector<int64_t>& TopKs(TaskKind kind);  // tile {1, 5, 10}; layout {1, 10, 100}

struct GraphMetrics {
  std::string collection, name, split;
  TaskKind kind = TaskKind::kTile;
  int64_t num_configs = 0;    // configs of the graph
  int64_t num_evaluated = 0;  // configs scored (eval-index list length when restricted)
  bool restricted = false;    // evaluated on an eval-index list
  double kendall_tau = 0, opa = 0;
  std::vector<double> top_k;  // error / slowdown for TopKs(kind), same order
  double kaggle = 0;          // tile: 1 - error@5; layout: kendall_tau
  // The scores and runtimes the metrics came from, per evaluated config in evaluation order
  // (only with EvaluateOptions::keep_scores; empty otherwise).
  std::vector<double> scores, runtimes;
};

struct CollectionMetrics {
  std::string collection;
  TaskKind kind = TaskKind::kTile;
  int64_t num_graphs = 0;
  int64_t num_evaluated = 0;  // configs over all graphs
  double kendall_tau = 0, opa = 0, kaggle = 0;
  std::vector<double> top_k;
  int64_t undefined_tau = 0;     // graphs whose tau is NaN (left out of the mean)
  int64_t undefined_kaggle = 0;  // graphs whose Kaggle value is NaN
};

struct EvaluationReport {
  std::string scorer;
  std::vector<GraphMetrics> graphs;             // dataset order
  std::vector<CollectionMetrics> collections;   // sorted by name
  double kaggle = 0;                            // NaN if nothing to average
  std::vector<std::string> kaggle_collections;  // the collections averaged into `kaggle`
  bool kaggle_complete = false;                 // all five official collections present
  bool kaggle_official = false;  // averaged over official collections (else all present)
};

// Metrics of one graph from its scores and runtimes (runtime / normalizer for tile).
// REQUIRES: scores.size() == runtimes.size(), all finite.
GraphMetrics ComputeGraphMetrics(TaskKind kind, const std::vector<double>& scores,
                                 const std::vector<double>& runtimes);

// Collection means and the Kaggle score from per-graph metrics (collection, kind set).
EvaluationReport Summarize(std::vector<GraphMetrics> graphs, std::string scorer_name);

struct EvaluateOptions {
  io::GraphFilter filter;  // the graphs to evaluate (io/graph_filter.h)
  // Restrict covered layout collections to the listed graphs and their index lists. Listed
  // graphs missing from the dataset are reported on stderr; graphs of a covered collection not
  // listed are skipped.
  const EvalIndices* eval_indices = nullptr;
  int threads = 0;  // metric kernels; 0 = all cores
  bool progress = true;
  bool keep_scores = false;  // fill GraphMetrics::scores and runtimes (for plots)
};

// Scores every selected graph with `scorer` and computes the report. Errors: no graph selected,
// a graph without measured runtimes (all 0, as in the hidden test split), an eval index out of
// range, scorer errors (e.g. missing predictions), and, with a PredictionsScorer, predictions for
// graphs that the dataset does not have (rows of unselected dataset graphs are ignored).
StatusOr<EvaluationReport> Evaluate(const io::DatasetReader& reader, ConfigScorer& scorer,
                                    const EvaluateOptions& options);

// Human-readable tables (one for tile, one for layout collections, then the Kaggle line; with
// per_graph also one row per graph).
std::string FormatReportTable(const EvaluationReport& report, bool per_graph);
// The same as one JSON object (NaN written as null).
std::string FormatReportJson(const EvaluationReport& report, bool per_graph);

}  // namespace tpugraphs::eval

#endif  // TPUGRAPHS_EVAL_EVALUATE_H_
