// Predictions files (docs/predictions-format.md): a score per graph and config, lower = predicted
// faster. Text, tab-separated, version line first:
//
//   # tpugraphs predictions v1
//   collection	graph	config_index	score
//   tile:xla	0a1c5dcfa9f1f4ebcc1282a1d1ca8ecb	0	1.25
//   layout:xla:random	unet_3d.4x4.bf16	17	-0.5
//
// Further lines starting with '#' and blank lines are ignored; rows may come in any order.
// Parse errors (bad version or header, wrong field count, bad collection, non-integer or
// negative index, non-numeric / NaN / infinite score, duplicate (graph, config)) name the file
// and line. Checks against a dataset (unknown graph, index out of range, missing configs) are
// done by ScoresFor / the evaluators and also name the file and line.
//
// Thread-safety: a Predictions object is immutable after Read/Parse.
#ifndef TPUGRAPHS_EVAL_PREDICTIONS_H_
#define TPUGRAPHS_EVAL_PREDICTIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/status.h"

namespace tpugraphs::eval {

inline constexpr std::string_view kPredictionsVersionLine = "# tpugraphs predictions v1";
inline constexpr std::string_view kPredictionsHeader = "collection\tgraph\tconfig_index\tscore";

struct GraphPredictions {
  struct Entry {
    int64_t config_index;
    double score;
    int64_t line;  // 1-based line in the file
  };
  std::string collection, name;
  int64_t first_line = 0;      // line of the graph's first row
  std::vector<Entry> entries;  // sorted by config_index, no duplicates

  std::string Id() const { return collection + ":" + name; }
  int64_t max_index() const { return entries.empty() ? -1 : entries.back().config_index; }
};

class Predictions {
 public:
  // Reads a predictions file; "-" reads stdin (named "<stdin>" in messages).
  static StatusOr<Predictions> Read(const std::string& path);
  // Parses text; `what` names it in error messages.
  static StatusOr<Predictions> Parse(std::string_view text, std::string what);

  const std::string& source() const { return source_; }
  const std::vector<GraphPredictions>& graphs() const { return graphs_; }
  // The graph's predictions, or nullptr.
  const GraphPredictions* Find(std::string_view collection, std::string_view name) const;
  int64_t num_rows() const { return num_rows_; }

  // Scores of `config_indices` (in that order; repeats allowed) for a graph with `num_configs`
  // configs. Errors (naming the file and line): the graph has no rows, an entry's index is
  // >= num_configs, or a requested config has no score.
  StatusOr<std::vector<double>> ScoresFor(std::string_view collection, std::string_view name,
                                          int64_t num_configs,
                                          const std::vector<int64_t>& config_indices) const;

  // Error naming the first graph of the file (by line) that is not in `known` (ids
  // "<collection>:<name>", normally every graph of the dataset), if any.
  Status CheckAllKnown(const std::vector<std::string>& known_ids) const;

 private:
  std::string source_;
  std::vector<GraphPredictions> graphs_;
  std::map<std::string, size_t, std::less<>> by_id_;  // Id() -> graphs_ index
  int64_t num_rows_ = 0;
};

// Appends predictions rows for one graph (score per config index 0..n-1) in v1 format, with
// enough digits that reading them back gives the same doubles.
void AppendPredictionRows(std::string_view collection, std::string_view name,
                          const std::vector<double>& scores, std::string* out);

}  // namespace tpugraphs::eval

#endif  // TPUGRAPHS_EVAL_PREDICTIONS_H_
