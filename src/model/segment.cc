#include "tpugraphs/model/segment.h"

#include <algorithm>

namespace tpugraphs::model {

StatusOr<std::vector<int64_t>> PartitionSegments(int64_t n, const std::vector<int64_t>& node_splits,
                                                 int64_t max_size, const std::string& what) {
  if (max_size < 1) {
    return InvalidArgumentError(what + ": segment size must be >= 1, got " +
                                std::to_string(max_size));
  }
  if (n < 0) return InvalidArgumentError(what + ": negative node count");
  std::vector<int64_t> cuts = {0};
  for (size_t i = 0; i < node_splits.size(); ++i) {
    const int64_t v = node_splits[i];
    if (v < 0 || v > n || (i > 0 && v < node_splits[i - 1])) {
      return InvalidArgumentError(what + ": node_splits[" + std::to_string(i) +
                                  "] = " + std::to_string(v) + " is not increasing within [0, " +
                                  std::to_string(n) + "]");
    }
    if (v > cuts.back()) cuts.push_back(v);
  }
  if (cuts.back() < n) cuts.push_back(n);
  std::vector<int64_t> bounds = {0};
  int64_t cur_begin = 0, cur_end = 0;  // the open (not yet emitted) segment
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const int64_t a = cuts[i], b = cuts[i + 1], len = b - a;
    if (len > max_size) {
      if (cur_end > cur_begin) bounds.push_back(cur_end);
      const int64_t pieces = (len + max_size - 1) / max_size;
      for (int64_t p = 1; p <= pieces; ++p) bounds.push_back(a + (len * p) / pieces);
      cur_begin = cur_end = b;
    } else if (cur_end - cur_begin + len <= max_size) {
      cur_end = b;
    } else {
      bounds.push_back(cur_end);
      cur_begin = a;
      cur_end = b;
    }
  }
  if (bounds.back() < n) bounds.push_back(n);
  return bounds;
}

std::vector<int32_t> SegmentOfNodes(const std::vector<int64_t>& bounds) {
  std::vector<int32_t> out(bounds.empty() ? 0 : bounds.back());
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    std::fill(out.begin() + bounds[s], out.begin() + bounds[s + 1], static_cast<int32_t>(s));
  }
  return out;
}

int64_t DropCutEdges(const std::vector<int64_t>& bounds, std::vector<int64_t>* edge_index) {
  const std::vector<int32_t> seg = SegmentOfNodes(bounds);
  const int64_t n = static_cast<int64_t>(seg.size());
  std::vector<int64_t>& e = *edge_index;
  const size_t m = e.size() / 2;
  size_t w = 0;
  for (size_t i = 0; i < m; ++i) {
    const int64_t u = e[2 * i], v = e[2 * i + 1];
    // Out-of-range edges are kept so that Prepare reports them.
    const bool inside = u >= 0 && u < n && v >= 0 && v < n;
    if (inside && seg[u] != seg[v]) continue;
    e[2 * w] = u;
    e[2 * w + 1] = v;
    ++w;
  }
  e.resize(2 * w);
  return static_cast<int64_t>(m - w);
}

Graph ExtractSegment(const Graph& g, int64_t begin, int64_t end,
                     std::vector<int64_t>* config_slots) {
  Graph s;
  s.name = g.name + "#" + std::to_string(begin) + "-" + std::to_string(end);
  s.collection = g.collection;
  s.split = g.split;
  s.kind = g.kind;
  s.absent_dimensions_marked = g.absent_dimensions_marked;
  s.node_opcode.assign(g.node_opcode.begin() + begin, g.node_opcode.begin() + end);
  s.node_feat.assign(g.node_feat.begin() + begin * kNodeFeatureCount,
                     g.node_feat.begin() + end * kNodeFeatureCount);
  for (size_t i = 0; i + 1 < g.edge_index.size(); i += 2) {
    const int64_t u = g.edge_index[i], v = g.edge_index[i + 1];
    if (u >= begin && u < end && v >= begin && v < end) {
      s.edge_index.push_back(u - begin);
      s.edge_index.push_back(v - begin);
    }
  }
  for (int64_t b : g.node_splits) {
    if (b > begin && b < end) s.node_splits.push_back(b - begin);
  }
  s.num_configs = g.num_configs;
  s.config_runtime = g.config_runtime;
  s.config_runtime_normalizers = g.config_runtime_normalizers;
  s.config_feat = g.config_feat;
  if (config_slots != nullptr) config_slots->clear();
  for (size_t j = 0; j < g.node_config_ids.size(); ++j) {
    const int64_t v = g.node_config_ids[j];
    if (v >= begin && v < end) {
      s.node_config_ids.push_back(v - begin);
      if (config_slots != nullptr) config_slots->push_back(static_cast<int64_t>(j));
    }
  }
  return s;
}

}  // namespace tpugraphs::model
