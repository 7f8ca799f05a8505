#include "tpugraphs/common/graph.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace tpugraphs {
namespace {

bool IsWord(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

std::vector<std::string_view> SplitColon(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(':', start);
    if (pos == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string Str(int64_t v) { return std::to_string(v); }

// Index of the first value of p[0, n) that is NaN or infinite, or n. A float is not finite
// exactly when its exponent bits are all ones; blocks are tested on the bits with integer
// operations only, which the compiler vectorises, and only a block holding a bad value is
// searched element by element.
size_t FirstNonFinite(const float* p, size_t n) {
  constexpr size_t kBlock = 1024;
  constexpr uint32_t kExponent = 0x7f800000u;
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t end = std::min(n, begin + kBlock);
    uint32_t bad = 0;
    for (size_t i = begin; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, p + i, sizeof(bits));
      bad |= static_cast<uint32_t>((bits & kExponent) == kExponent);
    }
    if (bad == 0) continue;
    for (size_t i = begin; i < end; ++i) {
      if (!std::isfinite(p[i])) return i;
    }
  }
  return n;
}

}  // namespace

std::string_view TaskKindName(TaskKind kind) { return kind == TaskKind::kTile ? "tile" : "layout"; }

Status ValidateCollection(std::string_view collection) {
  auto parts = SplitColon(collection);
  for (auto p : parts) {
    if (!IsWord(p)) {
      return InvalidArgumentError("collection '" + std::string(collection) +
                                  "' is not of the form tile:<source> or "
                                  "layout:<source>:<search> with lower-case words");
    }
  }
  if (parts[0] == "tile" && parts.size() == 2) return Status::Ok();
  if (parts[0] == "layout" && parts.size() == 3) return Status::Ok();
  return InvalidArgumentError("collection '" + std::string(collection) +
                              "' must be tile:<source> (e.g. tile:xla) or "
                              "layout:<source>:<search> (e.g. layout:nlp:default)");
}

TaskKind TaskKindOfCollection(std::string_view collection) {
  return collection.rfind("layout:", 0) == 0 ? TaskKind::kLayout : TaskKind::kTile;
}

Status ValidateSplit(std::string_view split) {
  if (split.empty() || split == "train" || split == "valid" || split == "test") {
    return Status::Ok();
  }
  return InvalidArgumentError("split '" + std::string(split) +
                              "' must be one of train, valid, test");
}

Status ParseSplitList(std::string_view list, std::vector<std::string>* splits) {
  std::vector<std::string> names;
  size_t start = 0;
  while (!list.empty()) {
    const size_t comma = list.find(',', start);
    const std::string name(
        list.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (name.empty()) {
      return InvalidArgumentError("split list '" + std::string(list) +
                                  "' has an empty name (write e.g. train,valid)");
    }
    TPUG_RETURN_IF_ERROR(ValidateSplit(name));
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return InvalidArgumentError("split list '" + std::string(list) + "' names '" + name +
                                  "' twice");
    }
    names.push_back(name);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (splits != nullptr) *splits = std::move(names);
  return Status::Ok();
}

double Graph::NormalizedRuntime(int64_t i) const {
  double r = static_cast<double>(config_runtime[i]);
  if (is_tile() && !config_runtime_normalizers.empty()) {
    r /= static_cast<double>(config_runtime_normalizers[i]);
  }
  return r;
}

Status ValidateGraph(const Graph& g, std::string_view what) {
  auto fail = [&](const std::string& msg) {
    return InvalidArgumentError(std::string(what) + ": " + msg);
  };
  const int64_t n = g.num_nodes();
  const int64_t c = g.num_configs;
  if (!g.collection.empty()) {
    Status s = ValidateCollection(g.collection);
    if (!s.ok()) return s.WithContext(what);
    if (TaskKindOfCollection(g.collection) != g.kind) {
      return fail("collection '" + g.collection + "' does not match the graph's task kind " +
                  std::string(TaskKindName(g.kind)));
    }
  }
  if (n == 0) return fail("graph has no nodes");
  if (static_cast<int64_t>(g.node_feat.size()) != n * kNodeFeatureCount) {
    return fail("node_feat has " + Str(g.node_feat.size()) + " values, expected " + Str(n) +
                " nodes x " + Str(kNodeFeatureCount) + " features");
  }
  if (const size_t i = FirstNonFinite(g.node_feat.data(), g.node_feat.size());
      i < g.node_feat.size()) {
    return fail("node_feat[" + Str(i / kNodeFeatureCount) + ", " + Str(i % kNodeFeatureCount) +
                "] is not finite");
  }
  if (g.edge_index.size() % 2 != 0) return fail("edge_index does not have 2 columns");
  // One unsigned comparison per value (negative values wrap to huge ones), without branches.
  bool edge_out_of_range = false;
  for (const int64_t v : g.edge_index) {
    edge_out_of_range |= static_cast<uint64_t>(v) >= static_cast<uint64_t>(n);
  }
  for (size_t i = 0; edge_out_of_range && i < g.edge_index.size(); ++i) {
    if (g.edge_index[i] < 0 || g.edge_index[i] >= n) {
      return fail("edge_index[" + Str(i / 2) + ", " + Str(i % 2) + "] = " + Str(g.edge_index[i]) +
                  " is out of range for " + Str(n) + " nodes");
    }
  }
  int64_t prev = 0;
  for (size_t i = 0; i < g.node_splits.size(); ++i) {
    int64_t s = g.node_splits[i];
    if (s < prev || s > n) {
      return fail("node_splits[" + Str(i) + "] = " + Str(s) +
                  " is not a non-decreasing offset within [0, " + Str(n) + "]");
    }
    prev = s;
  }
  if (c < 0) return fail("negative number of configs");
  if (static_cast<int64_t>(g.config_runtime.size()) != c) {
    return fail("config_runtime has " + Str(g.config_runtime.size()) + " values, expected " +
                Str(c) + " (one per config)");
  }
  for (int64_t i = 0; i < c; ++i) {
    if (g.config_runtime[i] < 0) {
      return fail("config_runtime[" + Str(i) + "] = " + Str(g.config_runtime[i]) + " is negative");
    }
  }
  if (g.is_tile()) {
    if (!g.node_config_ids.empty() || !g.node_config_feat.empty()) {
      return fail("a tile graph cannot have node_config_ids or node_config_feat");
    }
    if (!g.config_node_names.empty()) return fail("a tile graph cannot have config_node_names");
    if (static_cast<int64_t>(g.config_feat.size()) != c * kTileConfigFeatureCount) {
      return fail("config_feat has " + Str(g.config_feat.size()) + " values, expected " + Str(c) +
                  " configs x " + Str(kTileConfigFeatureCount) + " features");
    }
    if (const size_t i = FirstNonFinite(g.config_feat.data(), g.config_feat.size());
        i < g.config_feat.size()) {
      return fail("config_feat[" + Str(i / kTileConfigFeatureCount) + ", " +
                  Str(i % kTileConfigFeatureCount) + "] is not finite");
    }
    if (static_cast<int64_t>(g.config_runtime_normalizers.size()) != c) {
      return fail("config_runtime_normalizers has " + Str(g.config_runtime_normalizers.size()) +
                  " values, expected " + Str(c));
    }
    for (int64_t i = 0; i < c; ++i) {
      if (g.config_runtime_normalizers[i] <= 0) {
        return fail("config_runtime_normalizers[" + Str(i) +
                    "] = " + Str(g.config_runtime_normalizers[i]) + " is not positive");
      }
    }
  } else {
    if (!g.config_feat.empty()) return fail("a layout graph cannot have config_feat");
    const int64_t nc = g.num_config_nodes();
    if (c > 0 && nc == 0) return fail("layout graph has configs but no node_config_ids");
    for (int64_t i = 0; i < nc; ++i) {
      if (g.node_config_ids[i] < 0 || g.node_config_ids[i] >= n) {
        return fail("node_config_ids[" + Str(i) + "] = " + Str(g.node_config_ids[i]) +
                    " is out of range for " + Str(n) + " nodes");
      }
    }
    if (!g.config_node_names.empty() && static_cast<int64_t>(g.config_node_names.size()) != nc) {
      return fail("config_node_names has " + Str(g.config_node_names.size()) +
                  " names, expected one per configurable node (" + Str(nc) + ")");
    }
    if (!g.node_config_feat.empty() &&
        static_cast<int64_t>(g.node_config_feat.size()) != c * nc * kLayoutConfigFeatureCount) {
      return fail("node_config_feat has " + Str(g.node_config_feat.size()) + " values, expected " +
                  Str(c) + " configs x " + Str(nc) + " configurable nodes x " +
                  Str(kLayoutConfigFeatureCount));
    }
  }
  return Status::Ok();
}

}  // namespace tpugraphs
