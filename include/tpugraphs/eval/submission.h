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
  std::vector<std::string> collections;  // only these (empty = all)
  std::string split;                     // only this split ("" = all)
  PredictFormat format = PredictFormat::kKaggle;
  bool progress = true;
};

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
