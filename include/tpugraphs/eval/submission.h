// Writing rankings: Kaggle submission CSVs and score files (docs/predict.md).
//
// Kaggle submission ("Google - Fast or Slow? Predict AI Model Runtime"): header "ID,TopConfigs",
// one row per graph, ID = "<collection>:<name>" (tile:xla:<id>, layout:nlp:default:<id>),
// TopConfigs = config indices best first joined by ';'.
//   tile rows:   the 10 best configs; a graph with fewer than 10 configs is padded with 0s to 10
//                entries, as the official writer does (tiles/train_lib.py); Kaggle's tile metric
//                reads the first 5, and index 0 is already among the real entries, so padding
//                never changes the score.
//   layout rows: the full permutation of all configs.
// Ties in scores are broken by the lower config index (metrics.h).
//
// Thread-safety: free functions on values; Predict uses the scorer from the calling thread.
#ifndef TPUGRAPHS_EVAL_SUBMISSION_H_
#define TPUGRAPHS_EVAL_SUBMISSION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/eval/predictions.h"
#include "tpugraphs/eval/scorer.h"
#include "tpugraphs/io/graph_filter.h"

namespace tpugraphs::io {
class DatasetReader;
}

namespace tpugraphs::eval {

inline constexpr std::string_view kSubmissionHeader = "ID,TopConfigs";
inline constexpr int64_t kTileTopConfigs = 10;

// "i0;i1;..." for a ranking (best first) as described above.
std::string FormatTopConfigs(TaskKind kind, const std::vector<int64_t>& ranking);

struct SubmissionRow {
  std::string id, top_configs;
  int64_t line = 0;  // in its source file
};

struct Submission {
  std::string source;
  std::vector<SubmissionRow> rows;
};

// Reads a submission CSV ("-" = stdin). Errors name the file and line: bad header, a row without
// exactly one comma, an ID that is not "<collection>:<name>", TopConfigs that is not a
// ';'-separated list of non-negative integers, a duplicate ID.
StatusOr<Submission> ReadSubmission(const std::string& path);
StatusOr<Submission> ParseSubmission(std::string_view text, std::string what);

// Concatenates the rows in argument order. A duplicate ID is an error naming both files/lines.
StatusOr<std::vector<SubmissionRow>> MergeSubmissions(const std::vector<Submission>& parts);

// IDs of `rows` against those of `expected`: OK if equal as sets, else an error listing the
// missing and extra IDs (the first 20 of each, and the counts).
Status CheckIds(const std::vector<SubmissionRow>& rows, const Submission& expected);

// "ID,TopConfigs\n" + rows.
std::string FormatSubmission(const std::vector<SubmissionRow>& rows);

enum class PredictFormat { kScores, kKaggle };

struct PredictOptions {
  io::GraphFilter filter;  // the graphs to rank (io/graph_filter.h; splits need a dataset)
  PredictFormat format = PredictFormat::kKaggle;
  bool progress = true;
  // If set (needs a reader): the layouts of every ranked layout configuration, best first
  // (kExplainHeader / AppendExplainRows); tile graphs have none and are left out.
  AtomicFileWriter* explain = nullptr;
  // Explain every configurable node of every configuration, not only where it differs from
  // configuration 0.
  bool explain_all = false;
};

// The layout explanation file of `predict --explain` (docs/predict.md, "Which layout is which"):
// a version line, "# scorer: NAME", then a tab-separated header and rows for ranked
// (configuration, configurable node) pairs: all nodes of configuration 0; of every other
// configuration, the nodes whose layouts differ from configuration 0's (the others have
// configuration 0's layouts), or, if none differs, its first node; with `all_nodes`, every node of
// every configuration. Columns:
//   collection graph rank config score node instruction changed output input kernel
// rank 0 = best; node = node index; instruction = the configurable node's instruction name ("-"
// if the dataset has none); changed = 1 if the node's layouts differ from configuration 0;
// output/input/kernel = the minor_to_major the configuration gives that tensor, "{1,0}", or "*"
// when it gives none (the compiler chooses, or the node has no such tensor).
inline constexpr std::string_view kExplainVersionLine = "# tpugraphs layout explanation v1";
inline constexpr std::string_view kExplainHeader =
    "collection\tgraph\trank\tconfig\tscore\tnode\tinstruction\tchanged\toutput\tinput\tkernel";
// "{a,b,...}" of a 6-value feature block up to its first -1, or "*" if it starts with -1.
std::string FormatLayoutBlock(const int8_t* block);
// Rows for ranks first_rank, first_rank + 1, ... of graph `g`: configs[j] (values [k, nc, 18]
// in `values`, row j; score scores[j]) has rank first_rank + j. `config0` is configuration 0's
// [nc, 18] values.
void AppendExplainRows(const Graph& g, int64_t first_rank, const std::vector<int64_t>& configs,
                       const std::vector<int8_t>& values, const std::vector<double>& scores,
                       const std::vector<int8_t>& config0, bool all_nodes, std::string* out);

// Scores all configs of every selected graph and appends the output to `out`:
//   kKaggle: FormatSubmission rows;  kScores: a predictions v1 file (predictions.h).
// Graphs come from `reader` if given; otherwise from `predictions_only` (the graphs of a
// predictions file, each of which must then score exactly configs 0..n-1). Returns the IDs
// ("<collection>:<name>") of the graphs written, in order. With out == nullptr nothing is written
// (every graph is still scored: a dry run, as the ranks of a distributed predict use it).
StatusOr<std::vector<std::string>> Predict(const io::DatasetReader* reader,
                                           const Predictions* predictions_only,
                                           ConfigScorer& scorer, const PredictOptions& options,
                                           AtomicFileWriter* out);

}  // namespace tpugraphs::eval

#endif  // TPUGRAPHS_EVAL_SUBMISSION_H_
