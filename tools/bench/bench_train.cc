// Training step and inference cost of the cost model against graph size and configurations.
//
// BM_TrainStep/<task>/<nodes>/<configs>: one graph's Forward + loss + Backward for `configs`
// sampled configurations (what the trainer does per graph per step), default ModelSpec.
// BM_Inference/<task>/<nodes>/<configs>: Forward only (what evaluate/predict do), reported as
// configs/s. BM_OptimizerStep/<params>: one AdamW update over the flat buffer.
// Graphs are random DAGs (2 edges per node); layout graphs have one configurable node in ten.
//
// Run: build-*/tools/bench/bench_train --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/model/cost_model.h"
#include "tpugraphs/model/losses.h"
#include "tpugraphs/train/optimizer.h"

namespace {

using namespace tpugraphs;

Graph RandomGraph(TaskKind task, int64_t n, int64_t configs, uint64_t seed) {
  Rng rng(seed);
  Graph g;
  g.name = "bench";
  g.kind = task;
  g.collection = task == TaskKind::kTile ? "tile:bench" : "layout:bench:random";
  for (int64_t i = 0; i < n; ++i) {
    g.node_opcode.push_back(static_cast<uint8_t>(rng.UniformInt(100)));
    for (int f = 0; f < kNodeFeatureCount; ++f) {
      g.node_feat.push_back(f % 5 == 0 ? static_cast<float>(rng.UniformInt(256)) : 0.0f);
    }
  }
  for (int64_t i = 1; i < n; ++i) {
    int64_t a = static_cast<int64_t>(rng.UniformInt(i));
    int64_t b = static_cast<int64_t>(rng.UniformInt(i));
    if (a > b) std::swap(a, b);
    g.edge_index.insert(g.edge_index.end(), {i, a});
    if (b != a) g.edge_index.insert(g.edge_index.end(), {i, b});
  }
  g.num_configs = configs;
  for (int64_t c = 0; c < configs; ++c) g.config_runtime.push_back(1000 + rng.UniformInt(1000));
  if (task == TaskKind::kTile) {
    g.config_runtime_normalizers.assign(configs, 1);
    for (int64_t i = 0; i < configs * kTileConfigFeatureCount; ++i) {
      g.config_feat.push_back(static_cast<float>(rng.UniformInt(8)));
    }
  } else {
    for (int64_t i = 0; i < n; i += 10) g.node_config_ids.push_back(i);
    g.node_splits = {0, n};
    const int64_t nc = g.num_config_nodes();
    for (int64_t i = 0; i < configs * nc * kLayoutConfigFeatureCount; ++i) {
      g.node_config_feat.push_back(static_cast<int8_t>(static_cast<int>(rng.UniformInt(6)) - 1));
    }
  }
  return g;
}

struct Setup {
  std::unique_ptr<model::CostModel> model;
  Graph graph;
  std::unique_ptr<model::PreparedGraph> prepared;
  model::ConfigBatch batch;
  std::vector<double> runtimes;
};

Setup MakeSetup(TaskKind task, int64_t n, int64_t k) {
  Setup s;
  s.model = std::move(model::CostModel::Create(ModelSpec(), task)).value();
  s.graph = RandomGraph(task, n, k, 7);
  s.model->transform().Accumulate(s.graph);
  (void)s.model->transform().Finalize();
  s.model->InitParameters(1);
  s.prepared = std::move(s.model->Prepare(s.graph)).value();
  s.batch.num_configs = k;
  s.batch.tile_feat = s.graph.config_feat;
  s.batch.layout_feat = s.graph.node_config_feat;
  for (int64_t c = 0; c < k; ++c) s.runtimes.push_back(s.graph.NormalizedRuntime(c));
  return s;
}

void TrainStep(benchmark::State& state, TaskKind task) {
  const int64_t n = state.range(0), k = state.range(1);
  Setup s = MakeSetup(task, n, k);
  auto tape = s.model->NewTape();
  std::vector<float> scores(k), dscores(k), grad(s.model->num_parameters());
  LossSpec loss;
  for (auto _ : state) {
    s.model->Forward(*s.prepared, s.batch, scores.data(), tape.get());
    model::ComputeLoss(loss, scores.data(), s.runtimes.data(), k, dscores.data());
    s.model->Backward(*s.prepared, s.batch, *tape, dscores.data(), grad.data());
    benchmark::DoNotOptimize(grad.data());
  }
  state.counters["configs/s"] =
      benchmark::Counter(static_cast<double>(k), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["nodes"] = static_cast<double>(n);
}

void Inference(benchmark::State& state, TaskKind task) {
  const int64_t n = state.range(0), k = state.range(1);
  Setup s = MakeSetup(task, n, k);
  std::vector<float> scores(k);
  for (auto _ : state) {
    s.model->Forward(*s.prepared, s.batch, scores.data(), nullptr);
    benchmark::DoNotOptimize(scores.data());
  }
  state.counters["configs/s"] =
      benchmark::Counter(static_cast<double>(k), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_TrainStep_Tile(benchmark::State& s) { TrainStep(s, TaskKind::kTile); }
void BM_TrainStep_Layout(benchmark::State& s) { TrainStep(s, TaskKind::kLayout); }
void BM_Inference_Tile(benchmark::State& s) { Inference(s, TaskKind::kTile); }
void BM_Inference_Layout(benchmark::State& s) { Inference(s, TaskKind::kLayout); }

void SizeArgs(benchmark::internal::Benchmark* b) {
  for (int64_t n : {100, 1000, 10000}) {
    for (int64_t k : {4, 16, 64}) b->Args({n, k});
  }
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_TrainStep_Tile)->Apply(SizeArgs);
BENCHMARK(BM_TrainStep_Layout)->Apply(SizeArgs);
BENCHMARK(BM_Inference_Tile)->Apply(SizeArgs);
BENCHMARK(BM_Inference_Layout)->Apply(SizeArgs);

void BM_OptimizerStep(benchmark::State& state) {
  const int64_t p = state.range(0);
  train::OptimizerOptions o;
  o.weight_decay = 1e-4;
  o.clip_norm = 1.0;
  train::Optimizer opt(o, p);
  std::vector<float> params(p, 0.1f), grad(p, 0.01f);
  for (auto _ : state) {
    opt.Step(params.data(), grad.data(), 1e-3);
    benchmark::DoNotOptimize(params.data());
  }
  state.SetItemsProcessed(state.iterations() * p);
}
BENCHMARK(BM_OptimizerStep)->Arg(100000)->Arg(1000000);

}  // namespace

BENCHMARK_MAIN();
