// Choosing graphs by collection, split and name: the one selection rule of every command and of
// the Python module (export, tune, evaluate, predict, sharded scoring, train, report).
//
// An empty list matches everything; a graph is chosen when its collection, split and name are
// each in their list. Finding nothing is an error of code StatusCode::kNoMatchingGraphs (the CLI's
// exit code 3) with one message for every command:
//   "data.tpug: no graph matches collection layout:xla:foo (12 graphs in the dataset;
//    collections: layout:xla:random, tile:xla)"
// A collection named in the filter that has no graph at all is the same error, even when other
// collections matched: a misspelt collection never passes silently.
//
// Thread-safety: immutable after construction; any number of threads may call const methods.
#ifndef TPUGRAPHS_IO_GRAPH_FILTER_H_
#define TPUGRAPHS_IO_GRAPH_FILTER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/status.h"

namespace tpugraphs::io {

class DatasetReader;

struct GraphFilter {
  std::vector<std::string> collections;  // empty: any collection
  std::vector<std::string> splits;       // empty: any split ("" matches graphs without one)
  std::vector<std::string> names;        // empty: any name

  bool Matches(std::string_view collection, std::string_view split, std::string_view name) const;
  // "collection a, b, split test, graph g" (what the filter asks for), or "the selection".
  std::string Describe() const;
};

// One candidate graph of a selection (a dataset's, a predictions file's, a dump's).
struct GraphKey {
  std::string_view collection, split, name;
};

// Indices of the candidates `filter` chooses, in order. `source` names where the candidates come
// from in the error ("data.tpug"); `keep`, when set, is a further condition the caller applies
// (e.g. evaluation indices), counted in the message as "the selection".
StatusOr<std::vector<int64_t>> SelectGraphs(const std::string& source,
                                            const std::vector<GraphKey>& candidates,
                                            const GraphFilter& filter,
                                            const std::function<bool(int64_t)>& keep = nullptr);

// The graphs of a dataset file that `filter` chooses, in file order.
StatusOr<std::vector<int64_t>> SelectGraphs(const DatasetReader& reader, const GraphFilter& filter,
                                            const std::function<bool(int64_t)>& keep = nullptr);

// The error SelectGraphs returns, for callers that select by other means.
Status NoGraphMatchesError(const std::string& source, const GraphFilter& filter,
                           const std::vector<GraphKey>& candidates);

}  // namespace tpugraphs::io

#endif  // TPUGRAPHS_IO_GRAPH_FILTER_H_
