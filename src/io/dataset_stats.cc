#include "tpugraphs/io/dataset_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <unordered_map>

#include "tpugraphs/common/json_util.h"
#include "tpugraphs/common/thread_pool.h"

namespace tpugraphs::io {
namespace {

std::string JsonInt(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : std::string("null");
}
std::string JsonDouble(const std::optional<double>& v) {
  return v ? JsonNumber(*v, 9) : std::string("null");
}
std::string TextInt(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : std::string("-");
}
std::string TextDouble(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g", *v);
  return buf;
}

std::string Fixed3(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", *v);
  return buf;
}

uint64_t Mix(uint64_t x) {  // a 64-bit finaliser (xor-shift-multiply)
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

StatusOr<GraphStats> StatsOfGraph(const DatasetReader& reader, int64_t i,
                                  const GraphStatsHook& hook) {
  const GraphInfo& info = reader.info(i);
  TPUG_ASSIGN_OR_RETURN(Graph g, reader.ReadGraph(i, /*with_layout_configs=*/false));
  GraphStats s;
  s.name = info.name;
  s.collection = info.collection;
  s.split = info.split;
  s.kind = info.kind;
  s.nodes = g.num_nodes();
  s.edges = g.num_edges();
  s.config_nodes = g.num_config_nodes();
  s.configs = g.num_configs;
  for (uint8_t op : g.node_opcode) ++s.opcode_counts[op];
  if (g.num_configs > 0) {
    auto [lo, hi] = std::minmax_element(g.config_runtime.begin(), g.config_runtime.end());
    s.runtime_min = *lo;
    s.runtime_max = *hi;
    if (*lo > 0) s.runtime_spread = static_cast<double>(*hi) / static_cast<double>(*lo) - 1.0;
  }
  std::vector<uint64_t> keys;
  keys.reserve(g.num_configs);
  if (g.is_tile()) {
    for (int64_t k = 0; k < g.num_configs; ++k) {
      keys.push_back(HashBytes(g.config_feat.data() + k * kTileConfigFeatureCount,
                               kTileConfigFeatureCount * sizeof(float)));
    }
  } else if (g.num_configs > 0) {
    const int64_t row = g.num_config_nodes() * kLayoutConfigFeatureCount;
    if (row == 0) {
      keys.assign(g.num_configs, HashBytes(nullptr, 0));  // every config is the empty assignment
    } else {
      const int64_t step = std::max<int64_t>(1, reader.configs_per_block(i));
      for (int64_t b = 0; b < g.num_configs; b += step) {
        const int64_t e = std::min(g.num_configs, b + step);
        TPUG_ASSIGN_OR_RETURN(auto values, reader.ReadLayoutConfigRange(i, b, e));
        for (int64_t k = 0; k < e - b; ++k) keys.push_back(HashBytes(values.data() + k * row, row));
      }
    }
  }
  std::unordered_map<uint64_t, int64_t> count;
  for (uint64_t key : keys) ++count[key];
  s.distinct_configs = static_cast<int64_t>(count.size());
  for (const auto& [key, c] : count) s.repeated_configs += c > 1 ? 1 : 0;
  if (hook && g.num_configs > 0 && static_cast<int64_t>(g.config_runtime.size()) == g.num_configs) {
    hook(g.config_runtime, keys, &s);
  }
  return s;
}

void Accumulate(CollectionStats* c, const GraphStats& g) {
  ++c->graphs;
  c->nodes += g.nodes;
  c->edges += g.edges;
  c->config_nodes += g.config_nodes;
  c->configs += g.configs;
  c->distinct_configs += g.distinct_configs;
  c->repeated_configs += g.repeated_configs;
  if (g.runtime_min)
    c->runtime_min = std::min(c->runtime_min.value_or(*g.runtime_min), *g.runtime_min);
  if (g.runtime_max)
    c->runtime_max = std::max(c->runtime_max.value_or(*g.runtime_max), *g.runtime_max);
  if (g.runtime_spread) {
    const double sp = *g.runtime_spread;
    const double sum = c->mean_spread.value_or(0.0) * c->graphs_with_spread + sp;
    ++c->graphs_with_spread;
    c->mean_spread = sum / c->graphs_with_spread;
    c->min_spread = std::min(c->min_spread.value_or(sp), sp);
    c->max_spread = std::max(c->max_spread.value_or(sp), sp);
  }
  for (int k = 0; k < 256; ++k) c->opcode_counts[k] += g.opcode_counts[k];
}

std::string OpcodeJson(const std::array<int64_t, 256>& counts) {
  std::string out = "{";
  bool first = true;
  for (int k = 0; k < 256; ++k) {
    if (counts[k] == 0) continue;
    out += first ? "\"" : ", \"";
    out += std::to_string(k);
    out += "\": ";
    out += std::to_string(counts[k]);
    first = false;
  }
  return out + "}";
}

std::string TopOpcodes(const std::array<int64_t, 256>& counts, int top) {
  std::vector<std::pair<int64_t, int>> v;
  for (int k = 0; k < 256; ++k) {
    if (counts[k] > 0) v.emplace_back(-counts[k], k);
  }
  std::sort(v.begin(), v.end());
  std::string out;
  for (int i = 0; i < std::min<int>(top, static_cast<int>(v.size())); ++i) {
    if (i > 0) out += ' ';
    out += std::to_string(v[i].second);
    out += ':';
    out += std::to_string(-v[i].first);
  }
  return out.empty() ? "-" : out;
}

std::string CollectionJson(const CollectionStats& c) {
  return "{\"collection\": " + JsonQuote(c.collection) +
         ", \"graphs\": " + std::to_string(c.graphs) + ", \"nodes\": " + std::to_string(c.nodes) +
         ", \"edges\": " + std::to_string(c.edges) +
         ", \"config_nodes\": " + std::to_string(c.config_nodes) +
         ", \"configs\": " + std::to_string(c.configs) +
         ", \"distinct_configs\": " + std::to_string(c.distinct_configs) +
         ", \"duplicate_configs\": " + std::to_string(c.configs - c.distinct_configs) +
         ", \"runtime_min\": " + JsonInt(c.runtime_min) +
         ", \"runtime_max\": " + JsonInt(c.runtime_max) +
         ", \"graphs_with_spread\": " + std::to_string(c.graphs_with_spread) +
         ", \"mean_spread\": " + JsonDouble(c.mean_spread) +
         ", \"min_spread\": " + JsonDouble(c.min_spread) +
         ", \"max_spread\": " + JsonDouble(c.max_spread) +
         ", \"repeated_configs\": " + std::to_string(c.repeated_configs) +
         ", \"graphs_with_noise\": " + std::to_string(c.graphs_with_noise) +
         ", \"median_noise\": " + JsonDouble(c.median_noise) +
         ", \"median_noise_ceiling\": " + JsonDouble(c.median_noise_ceiling) +
         ", \"opcode_histogram\": " + OpcodeJson(c.opcode_counts) + "}";
}

}  // namespace

uint64_t HashBytes(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ (size * 0x100000001b3ULL);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w = 0;
    for (int k = 7; k >= 0; --k) w = (w << 8) | p[i + k];  // little-endian word
    h = Mix(h ^ w) + 0x632be59bd9b4e019ULL;
  }
  uint64_t tail = 0;
  for (size_t k = size; k > i; --k) tail = (tail << 8) | p[k - 1];
  return Mix(h ^ tail ^ (uint64_t{size - i} << 56));
}

namespace {

std::optional<double> Median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

StatusOr<DatasetStats> ComputeDatasetStats(const DatasetReader& reader, int threads,
                                           const GraphStatsHook& hook) {
  DatasetStats out;
  out.path = reader.path();
  const int64_t n = reader.num_graphs();
  std::vector<StatusOr<GraphStats>> per(n, StatusOr<GraphStats>(InternalError("not computed")));
  ThreadPool pool(threads);
  pool.ParallelFor(n, 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) per[i] = StatsOfGraph(reader, i, hook);
  });
  std::map<std::string, CollectionStats> by;
  // Per collection (kTotalKey: all) the graphs' noise and noise ceilings, for the medians.
  const std::string kTotalKey(1, '\0');
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> noise;
  out.total.collection = "total";
  for (int64_t i = 0; i < n; ++i) {
    if (!per[i].ok()) return per[i].status();
    GraphStats& g = *per[i];
    auto& c = by[g.collection];
    c.collection = g.collection;
    Accumulate(&c, g);
    Accumulate(&out.total, g);
    for (const std::string& key : {g.collection, kTotalKey}) {
      if (g.noise) noise[key].first.push_back(*g.noise);
      if (g.noise_ceiling) noise[key].second.push_back(*g.noise_ceiling);
    }
    out.graphs.push_back(std::move(g));
  }
  auto set_noise = [&](CollectionStats* c, const std::string& key) {
    c->graphs_with_noise = static_cast<int64_t>(noise[key].first.size());
    c->median_noise = Median(noise[key].first);
    c->median_noise_ceiling = Median(noise[key].second);
  };
  for (auto& [name, c] : by) {
    set_noise(&c, name);
    out.collections.push_back(std::move(c));
  }
  set_noise(&out.total, kTotalKey);
  return out;
}

std::string FormatStatsTable(const DatasetStats& s, bool per_graph) {
  std::string out;
  char buf[1024];
  out += "dataset: " + s.path + "\n";
  std::snprintf(buf, sizeof(buf), "%-22s %7s %10s %10s %9s %10s %10s %12s %12s %9s %8s %9s  %s\n",
                "collection", "graphs", "nodes", "edges", "cfg_nodes", "configs", "distinct",
                "runtime_min", "runtime_max", "spread", "repeated", "noise",
                "top opcodes (id:count)");
  out += buf;
  auto row = [&](const CollectionStats& c) {
    std::snprintf(buf, sizeof(buf),
                  "%-22s %7lld %10lld %10lld %9lld %10lld %10lld %12s %12s %9s %8lld %9s  %s\n",
                  c.collection.c_str(), static_cast<long long>(c.graphs),
                  static_cast<long long>(c.nodes), static_cast<long long>(c.edges),
                  static_cast<long long>(c.config_nodes), static_cast<long long>(c.configs),
                  static_cast<long long>(c.distinct_configs), TextInt(c.runtime_min).c_str(),
                  TextInt(c.runtime_max).c_str(), TextDouble(c.mean_spread).c_str(),
                  static_cast<long long>(c.repeated_configs), TextDouble(c.median_noise).c_str(),
                  TopOpcodes(c.opcode_counts, 5).c_str());
    out += buf;
  };
  for (const auto& c : s.collections) row(c);
  row(s.total);
  out +=
      "(spread = mean over graphs of max/min - 1 of config_runtime; repeated = distinct "
      "configs measured more than once; noise = median over graphs of the relative deviation "
      "of one measurement; '-' = undefined)\n";
  if (per_graph) {
    out += "\n";
    std::snprintf(buf, sizeof(buf),
                  "%-22s %-34s %-6s %8s %9s %9s %9s %9s %12s %12s %9s %8s %9s %7s %7s %7s\n",
                  "collection", "graph", "split", "nodes", "edges", "cfg_nodes", "configs",
                  "distinct", "runtime_min", "runtime_max", "spread", "repeated", "noise", "retest",
                  "ceil_up", "ceiling");
    out += buf;
    for (const auto& g : s.graphs) {
      std::snprintf(buf, sizeof(buf),
                    "%-22s %-34s %-6s %8lld %9lld %9lld %9lld %9lld %12s %12s %9s %8lld %9s %7s "
                    "%7s %7s\n",
                    g.collection.c_str(), g.name.c_str(), g.split.empty() ? "-" : g.split.c_str(),
                    static_cast<long long>(g.nodes), static_cast<long long>(g.edges),
                    static_cast<long long>(g.config_nodes), static_cast<long long>(g.configs),
                    static_cast<long long>(g.distinct_configs), TextInt(g.runtime_min).c_str(),
                    TextInt(g.runtime_max).c_str(), TextDouble(g.runtime_spread).c_str(),
                    static_cast<long long>(g.repeated_configs), TextDouble(g.noise).c_str(),
                    Fixed3(g.retest_kendall).c_str(), Fixed3(g.noise_ceiling_upper).c_str(),
                    Fixed3(g.noise_ceiling).c_str());
      out += buf;
    }
  }
  return out;
}

std::string FormatStatsJson(const DatasetStats& s, bool per_graph) {
  std::string out = "{\"dataset\": " + JsonQuote(s.path) + ", \"collections\": [";
  for (size_t i = 0; i < s.collections.size(); ++i) {
    if (i > 0) out += ", ";
    out += CollectionJson(s.collections[i]);
  }
  out += "], \"total\": " + CollectionJson(s.total);
  if (per_graph) {
    out += ", \"graphs\": [";
    for (size_t i = 0; i < s.graphs.size(); ++i) {
      const auto& g = s.graphs[i];
      if (i > 0) out += ", ";
      out += "{\"name\": " + JsonQuote(g.name) + ", \"collection\": " + JsonQuote(g.collection) +
             ", \"split\": " + JsonQuote(g.split) + ", \"nodes\": " + std::to_string(g.nodes) +
             ", \"edges\": " + std::to_string(g.edges) +
             ", \"config_nodes\": " + std::to_string(g.config_nodes) +
             ", \"configs\": " + std::to_string(g.configs) +
             ", \"distinct_configs\": " + std::to_string(g.distinct_configs) +
             ", \"runtime_min\": " + JsonInt(g.runtime_min) +
             ", \"runtime_max\": " + JsonInt(g.runtime_max) +
             ", \"runtime_spread\": " + JsonDouble(g.runtime_spread) +
             ", \"repeated_configs\": " + std::to_string(g.repeated_configs) +
             ", \"noise\": " + JsonDouble(g.noise) +
             ", \"retest_kendall\": " + JsonDouble(g.retest_kendall) +
             ", \"noise_ceiling_upper\": " + JsonDouble(g.noise_ceiling_upper) +
             ", \"noise_ceiling\": " + JsonDouble(g.noise_ceiling) +
             ", \"opcode_histogram\": " + OpcodeJson(g.opcode_counts) + "}";
    }
    out += "]";
  }
  return out + "}\n";
}

}  // namespace tpugraphs::io
