#include "tpugraphs/io/graph_filter.h"

#include <algorithm>
#include <set>

#include "tpugraphs/io/dataset.h"

namespace tpugraphs::io {
namespace {

bool In(const std::vector<std::string>& list, std::string_view value) {
  return list.empty() || std::find(list.begin(), list.end(), value) != list.end();
}

std::string Join(const std::vector<std::string>& list) {
  std::string out;
  for (const auto& x : list) out += (out.empty() ? "" : ", ") + (x.empty() ? "\"\"" : x);
  return out;
}

}  // namespace

bool GraphFilter::Matches(std::string_view collection, std::string_view split,
                          std::string_view name) const {
  return In(collections, collection) && In(splits, split) && In(names, name);
}

std::string GraphFilter::Describe() const {
  std::string out;
  auto add = [&](const char* what, const std::vector<std::string>& list) {
    if (list.empty()) return;
    if (!out.empty()) out += "; ";
    out += what + std::string(" ") + Join(list);
  };
  add("collection", collections);
  add("split", splits);
  add("graph", names);
  return out.empty() ? "the selection" : out;
}

Status NoGraphMatchesError(const std::string& source, const GraphFilter& filter,
                           const std::vector<GraphKey>& candidates) {
  std::set<std::string_view> present;
  for (const GraphKey& k : candidates) present.insert(k.collection);
  std::string message = source + ": no graph matches " + filter.Describe() + " (" +
                        std::to_string(candidates.size()) + " graph" +
                        (candidates.size() == 1 ? "" : "s");
  if (!present.empty()) {
    message += "; collections:";
    bool first = true;
    for (std::string_view c : present) {
      message += (first ? " " : ", ") + std::string(c);
      first = false;
    }
  }
  return NoMatchingGraphsError(message + ")");
}

StatusOr<std::vector<int64_t>> SelectGraphs(const std::string& source,
                                            const std::vector<GraphKey>& candidates,
                                            const GraphFilter& filter,
                                            const std::function<bool(int64_t)>& keep) {
  std::vector<int64_t> chosen;
  std::set<std::string_view> present;
  for (int64_t i = 0; i < static_cast<int64_t>(candidates.size()); ++i) {
    const GraphKey& k = candidates[i];
    present.insert(k.collection);
    if (!filter.Matches(k.collection, k.split, k.name)) continue;
    if (keep && !keep(i)) continue;
    chosen.push_back(i);
  }
  for (const std::string& c : filter.collections) {
    if (present.count(c) == 0) {
      GraphFilter only;
      only.collections = {c};
      return NoGraphMatchesError(source, only, candidates);
    }
  }
  if (chosen.empty()) return NoGraphMatchesError(source, filter, candidates);
  return chosen;
}

StatusOr<std::vector<int64_t>> SelectGraphs(const DatasetReader& reader, const GraphFilter& filter,
                                            const std::function<bool(int64_t)>& keep) {
  std::vector<GraphKey> candidates;
  candidates.reserve(static_cast<size_t>(reader.num_graphs()));
  for (int64_t i = 0; i < reader.num_graphs(); ++i) {
    const GraphInfo& info = reader.info(i);
    candidates.push_back({info.collection, info.split, info.name});
  }
  return SelectGraphs(reader.path(), candidates, filter, keep);
}

}  // namespace tpugraphs::io
