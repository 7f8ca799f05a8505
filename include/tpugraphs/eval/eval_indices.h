// The official layout validation subsets (tpu_graphs/baselines/layout/eval_indices/*.json):
// for every validation graph, a list of config indices (1000 in the release) into the graph's
// configs in release order. Indices may repeat; repeats are kept, so metrics see exactly the
// vectors the official evaluator (numpy gather + scipy) sees. docs/metrics.md describes the use.
//
// File format: one JSON object mapping graph names to arrays of non-negative integers, e.g.
//   {"bert_pretraining.4x4.fp16": [4786, 14036, ...], "unet_3d.4x4.bf16": [...]}
// The collection is taken from the file name "<source>_<search>.json" -> "layout:<source>:<search>"
// (xla_random.json -> layout:xla:random). We parse this format with our own small reader (no JSON
// dependency); anything else (other JSON value types, non-integers, duplicate keys, trailing
// text) is an error naming the file, line and column.
//
// Thread-safety: EvalIndices is immutable after loading; concurrent reads are fine.
#ifndef TPUGRAPHS_EVAL_EVAL_INDICES_H_
#define TPUGRAPHS_EVAL_EVAL_INDICES_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/status.h"

namespace tpugraphs::eval {

using IndexLists = std::map<std::string, std::vector<int64_t>, std::less<>>;

// Parses the JSON text of one index file. `what` (the file name) prefixes every error message.
StatusOr<IndexLists> ParseEvalIndexJson(std::string_view text, std::string_view what);

// "xla_random.json" (any directory) -> "layout:xla:random". Error if the name has another form.
StatusOr<std::string> CollectionOfIndexFile(const std::string& path);

class EvalIndices {
 public:
  // Loads one .json file, or every *.json file of a directory (sorted by name). Errors name the
  // offending file. A directory without .json files is an error.
  static StatusOr<EvalIndices> Load(const std::string& dir_or_file);

  // Adds one collection's lists (used by Load and by tests). Error if the collection is present.
  Status Add(std::string collection, std::string source_path, IndexLists lists);

  // Whether the collection has an index file.
  bool Covers(std::string_view collection) const;
  // The index list of a graph, or nullptr if the graph is not listed.
  const std::vector<int64_t>* Find(std::string_view collection, std::string_view name) const;
  // The lists of one collection (nullptr if not covered) and the file they came from.
  const IndexLists* Lists(std::string_view collection) const;
  std::string SourceOf(std::string_view collection) const;
  std::vector<std::string> collections() const;

 private:
  struct Entry {
    std::string source_path;
    IndexLists lists;
  };
  std::map<std::string, Entry, std::less<>> by_collection_;
};

}  // namespace tpugraphs::eval

#endif  // TPUGRAPHS_EVAL_EVAL_INDICES_H_
