// Dataset container speed: writing a large layout graph, reading a random sample of its configs
// (the training access pattern) against reading all of them, and reading the graph arrays alone.
//
// Usage: bench_dataset [--configs C] [--config-nodes NC] [benchmark flags]
//   defaults C = 10000, NC = 300 (54 MB of int8 config values). The dataset is written once to a
//   temporary file, removed at exit. Bytes/s counters are decoded config bytes.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tpugraphs/common/rng.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs::io {
namespace {

int64_t g_configs = 10000, g_config_nodes = 300;
std::string g_path;

Graph MakeLayoutHead() {
  Graph g;
  g.name = "bench";
  g.collection = "layout:nlp:random";
  g.kind = TaskKind::kLayout;
  const int64_t n = 20000;
  uint64_t x = 12345;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int64_t i = 0; i < n; ++i) g.node_opcode.push_back(next() % 200);
  for (int64_t i = 0; i < n * kNodeFeatureCount; ++i) g.node_feat.push_back((next() % 1000) / 7.f);
  for (int64_t i = 0; i < 3 * n; ++i) {
    g.edge_index.push_back(next() % n);
    g.edge_index.push_back(next() % n);
  }
  g.node_splits = {0, n / 2, n};
  g.num_configs = g_configs;
  for (int64_t i = 0; i < g_configs; ++i) g.config_runtime.push_back(100000 + next() % 1000000);
  for (int64_t i = 0; i < g_config_nodes; ++i)
    g.node_config_ids.push_back(i * (n / g_config_nodes));
  return g;
}

std::vector<int8_t> MakeConfigs(int64_t count, uint64_t seed) {
  std::vector<int8_t> v(count * g_config_nodes * kLayoutConfigFeatureCount);
  uint64_t x = seed | 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<int8_t>(x % 7) - 1;
  }
  return v;
}

Status WriteBench(const std::string& path) {
  TPUG_ASSIGN_OR_RETURN(auto w, DatasetWriter::Create(path));
  TPUG_RETURN_IF_ERROR(w->BeginGraph(MakeLayoutHead()));
  const int64_t piece = 1000;
  for (int64_t done = 0; done < g_configs; done += piece) {
    const int64_t k = std::min(piece, g_configs - done);
    auto v = MakeConfigs(k, done + 1);
    TPUG_RETURN_IF_ERROR(w->AppendLayoutConfigs(v.data(), k));
  }
  return w->Finish();
}

int64_t RowBytes() { return g_config_nodes * kLayoutConfigFeatureCount; }

void BM_WriteLayoutGraph(benchmark::State& state) {
  const std::string path = g_path + ".w";
  for (auto _ : state) {
    Status s = WriteBench(path);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  }
  std::remove(path.c_str());
  state.SetBytesProcessed(state.iterations() * g_configs * RowBytes());
}

void BM_ReadSampledConfigs(benchmark::State& state) {
  auto r = DatasetReader::Open(g_path);
  if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
  Rng rng(7);
  const int64_t k = state.range(0);
  for (auto _ : state) {
    std::vector<int64_t> idx(k);
    for (auto& i : idx) i = static_cast<int64_t>(rng.UniformInt(g_configs));
    auto rows = (*r)->ReadLayoutConfigs(0, idx);
    if (!rows.ok()) return state.SkipWithError(rows.status().ToString().c_str());
    benchmark::DoNotOptimize(rows->data());
  }
  state.SetBytesProcessed(state.iterations() * k * RowBytes());
}

void BM_ReadAllConfigs(benchmark::State& state) {
  auto r = DatasetReader::Open(g_path);
  if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
  for (auto _ : state) {
    auto rows = (*r)->ReadLayoutConfigRange(0, 0, g_configs);
    if (!rows.ok()) return state.SkipWithError(rows.status().ToString().c_str());
    benchmark::DoNotOptimize(rows->data());
  }
  state.SetBytesProcessed(state.iterations() * g_configs * RowBytes());
}

void BM_ReadGraphWithoutConfigs(benchmark::State& state) {
  auto r = DatasetReader::Open(g_path);
  if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
  for (auto _ : state) {
    auto g = (*r)->ReadGraph(0, /*with_layout_configs=*/false);
    if (!g.ok()) return state.SkipWithError(g.status().ToString().c_str());
    benchmark::DoNotOptimize(g->node_feat.data());
  }
}

BENCHMARK(BM_WriteLayoutGraph)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_ReadSampledConfigs)->Arg(1)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadAllConfigs)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadGraphWithoutConfigs)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tpugraphs::io

int main(int argc, char** argv) {
  using namespace tpugraphs::io;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--configs") == 0 && i + 1 < argc) {
      g_configs = std::atoll(argv[++i]);
    } else if (std::strcmp(argv[i], "--config-nodes") == 0 && i + 1 < argc) {
      g_config_nodes = std::atoll(argv[++i]);
    } else {
      rest.push_back(argv[i]);
    }
  }
  g_path = "/tmp/bench_dataset_" + std::to_string(::getpid()) + ".tpug";
  tpugraphs::Status s = WriteBench(g_path);
  if (!s.ok()) {
    std::fprintf(stderr, "bench_dataset: %s\n", s.ToString().c_str());
    return 1;
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::remove(g_path.c_str());
  return 0;
}
