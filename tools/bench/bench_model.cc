// Benchmarks of the GNN cost model (docs/model.md): forward (inference) and forward+backward
// (training step without the optimizer) on synthetic program-like graphs, for layout, tile with
// late join and tile with early join, against graph size and configs per call. Also measures the
// machine's dense float GEMM rate with Eigen in the same run, so the model's dense GFLOP/s can be
// read as a fraction of it.
//
// Counters: configs_per_s (items), us_per_config, dense_GFLOPs = FLOPs of the model's matrix
// products per second of wall time (the time also includes gathers, LayerNorm, pooling: a lower
// bound for the kernels themselves), affected_frac = |S_L| / n (share of nodes recomputed per
// config), prepare_ms (one-off Prepare).
//
// Run: tools/bench/bench-model.sh (or the binary with --benchmark_filter=...).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <tuple>

#include "tpugraphs/common/eigen_types.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/model/cost_model.h"
#include "tpugraphs/model/gnn.h"
#include "tpugraphs/model/row_product.h"

namespace tpugraphs::model {
namespace {

enum Mode { kLayout = 0, kTileLate = 1, kTileEarly = 2 };

// A program-like DAG: node u consumes 1-3 producers among the 64 previous nodes.
Graph MakeGraph(Mode mode, int64_t n, int64_t k, uint64_t seed) {
  Rng rng(seed);
  Graph g;
  g.name = "bench";
  g.kind = mode == kLayout ? TaskKind::kLayout : TaskKind::kTile;
  g.node_opcode.resize(n);
  for (auto& o : g.node_opcode) o = static_cast<uint8_t>(rng.UniformInt(121));
  g.node_feat.resize(n * kNodeFeatureCount);
  for (auto& f : g.node_feat) f = static_cast<float>(rng.UniformInt(1000));
  for (int64_t u = 1; u < n; ++u) {
    const int64_t deg = 1 + static_cast<int64_t>(rng.UniformInt(3));
    for (int64_t d = 0; d < deg; ++d) {
      const int64_t lo = std::max<int64_t>(0, u - 64);
      g.edge_index.push_back(u);
      g.edge_index.push_back(lo + static_cast<int64_t>(rng.UniformInt(u - lo)));
    }
  }
  g.num_configs = k;
  if (mode == kLayout) {
    const int64_t nc = std::max<int64_t>(4, n / 200);
    g.node_config_ids = rng.SampleWithoutReplacement(n, nc);
    g.node_config_feat.resize(k * nc * kLayoutConfigFeatureCount);
    for (auto& v : g.node_config_feat) v = static_cast<int8_t>(int(rng.UniformInt(7)) - 1);
  } else {
    g.config_feat.resize(k * kTileConfigFeatureCount);
    for (auto& v : g.config_feat) v = static_cast<float>(rng.UniformInt(128));
  }
  return g;
}

ModelSpec BenchSpec(Mode mode) {
  ModelSpec s;  // defaults: hidden 64, 3 layers, head 64x2
  if (mode == kTileEarly) s.set_tile_join(ModelSpec::TILE_JOIN_EARLY);
  return s;
}

// FLOPs (multiply-add = 2) of the matrix products of one Forward; backward does twice the
// layer/head/config products (dW and dX).
struct Flops {
  double fwd = 0, bwd = 0;
};
Flops DenseFlops(const ModelSpec& s, Mode mode, const PreparedGraphStats& st, int64_t kept,
                 int64_t k) {
  const double H = s.hidden_dim(), n = st.num_nodes;
  const int L = s.num_layers();
  const bool all = mode == kTileEarly;
  Flops f;
  // Input: opcode projection + feature GEMM (config-independent, once per call).
  const double input = 2.0 * s.num_opcodes() * s.opcode_embedding_dim() * H + 2.0 * n * kept * H;
  f.fwd += input;
  f.bwd += input + 2.0 * s.num_opcodes() * s.opcode_embedding_dim() * H * 2;
  double layer_rows = 0;
  for (int l = 1; l <= L; ++l) layer_rows += static_cast<double>(k) * st.affected_per_layer[l];
  if (!all) layer_rows += n * L;  // base pass
  f.fwd += 2.0 * layer_rows * 3 * H * H;
  f.bwd += 4.0 * layer_rows * 3 * H * H;
  double cfg = 0;
  if (mode == kLayout)
    cfg = 2.0 * k * st.num_config_nodes * 18 * s.layout_value_embedding_dim() * H;
  if (mode == kTileEarly) cfg = 2.0 * k * 24 * H;
  f.fwd += cfg;
  f.bwd += 2 * cfg;
  const internal::ParamLayout pl =
      internal::MakeParamLayout(s, mode == kLayout ? TaskKind::kLayout : TaskKind::kTile);
  double head = 0;
  for (size_t t = 0; t + 1 < pl.head_dims.size(); ++t) {
    head += 2.0 * k * pl.head_dims[t] * pl.head_dims[t + 1];
  }
  f.fwd += head;
  f.bwd += 2 * head;
  return f;
}

struct Fixture {
  std::unique_ptr<CostModel> model;
  std::unique_ptr<PreparedGraph> pg;
  ConfigBatch batch;
  PreparedGraphStats stats;
  double prepare_ms = 0;
};

void BM_Model(benchmark::State& state) {
  const Mode mode = static_cast<Mode>(state.range(0));
  const int64_t n = state.range(1), k = state.range(2);
  const bool backward = state.range(3) != 0;
  Graph g = MakeGraph(mode, n, k, 1234 + n);
  ModelSpec spec = BenchSpec(mode);
  Fixture fx;
  fx.model = std::move(CostModel::Create(spec, g.kind)).value();
  fx.model->transform().Accumulate(g);
  if (!fx.model->transform().Finalize().ok()) {
    state.SkipWithError("feature transform failed");
    return;
  }
  fx.model->InitParameters(1);
  const auto t0 = std::chrono::steady_clock::now();
  auto pg = fx.model->Prepare(g);
  fx.prepare_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!pg.ok()) {
    state.SkipWithError(pg.status().ToString().c_str());
    return;
  }
  fx.pg = std::move(pg).value();
  fx.stats = GetPreparedGraphStats(*fx.pg);
  const int64_t rows_last = fx.stats.affected_per_layer.back();
  // Memory budget of the activations: about 6 H floats per recomputed row and layer.
  if (static_cast<double>(k) * rows_last > 2.5e6) {
    state.SkipWithError("skipped: k * |S_L| rows over the 2.5M-row activation budget");
    return;
  }
  fx.batch.num_configs = k;
  fx.batch.tile_feat = g.config_feat;
  fx.batch.layout_feat = g.node_config_feat;
  std::vector<float> scores(k), dscores(k, 1.0f / static_cast<float>(k));
  std::vector<float> grad(fx.model->num_parameters(), 0.0f);
  auto tape = fx.model->NewTape();
  for (auto _ : state) {
    fx.model->Forward(*fx.pg, fx.batch, scores.data(), backward ? tape.get() : nullptr);
    if (backward) fx.model->Backward(*fx.pg, fx.batch, *tape, dscores.data(), grad.data());
    benchmark::DoNotOptimize(scores.data());
    benchmark::ClobberMemory();
  }
  const Flops f = DenseFlops(spec, mode, fx.stats, fx.model->transform().kept_node_columns(), k);
  const double flops = f.fwd + (backward ? f.bwd : 0.0);
  state.SetItemsProcessed(state.iterations() * k);
  state.counters["configs_per_s"] =
      benchmark::Counter(static_cast<double>(k), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["us_per_config"] = benchmark::Counter(
      1e-6 * static_cast<double>(k),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["dense_GFLOPs"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["affected_frac"] = static_cast<double>(rows_last) / static_cast<double>(n);
  state.counters["prepare_ms"] = fx.prepare_ms;
  state.SetLabel(std::string(mode == kLayout     ? "layout"
                             : mode == kTileLate ? "tile-late"
                                                 : "tile-early") +
                 (backward ? " fwd+bwd" : " fwd"));
}

void ModelArgs(benchmark::internal::Benchmark* b) {
  for (int mode : {kLayout, kTileLate, kTileEarly}) {
    for (int64_t n : {1000, 10000, 100000}) {
      for (int64_t k : {16, 64, 256}) {
        for (int bwd : {0, 1}) b->Args({mode, n, k, bwd});
      }
    }
  }
  b->ArgNames({"mode", "nodes", "configs", "backward"});
  b->Unit(benchmark::kMillisecond);
  b->MinTime(0.3);
}
BENCHMARK(BM_Model)->Apply(ModelArgs);

// Inference of the layout recipe's network (tools/configs/layout.textproto: no message passing,
// a per-configurable-node head, pruning, the derived layout columns) in blocks of rows
// (CostModel::set_inference_block_rows): 1,000 configurations of one program, as a validation
// or test graph has, scored in one Forward call. Rows 0 = no blocks (one pass over all the
// configurations, as before blocks). The layout size features need the graph's tensor shapes,
// which these synthetic graphs do not carry, so they are left out.
void BM_InferenceBlocks(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1), block = state.range(2);
  Graph g = MakeGraph(kLayout, n, k, 4321 + n);
  ModelSpec spec;
  spec.set_num_layers(0);
  spec.set_prune_hops(2);
  spec.set_config_node_head(16);
  spec.set_config_node_head_pooling(ModelSpec::NODE_HEAD_POOLING_LOGSUMEXP);
  spec.set_layout_tensor_features(true);
  spec.set_config_loop_depth(true);
  auto model = std::move(CostModel::Create(spec, g.kind)).value();
  model->transform().Accumulate(g);
  if (!model->transform().Finalize().ok()) {
    state.SkipWithError("feature transform failed");
    return;
  }
  model->InitParameters(1);
  model->set_inference_block_rows(block > 0 ? block : int64_t{1} << 40);
  auto pg = model->Prepare(g);
  if (!pg.ok()) {
    state.SkipWithError(pg.status().ToString().c_str());
    return;
  }
  ConfigBatch batch;
  batch.num_configs = k;
  batch.layout_feat = g.node_config_feat;
  std::vector<float> scores(k);
  for (auto _ : state) {
    model->Forward(**pg, batch, scores.data(), nullptr);
    benchmark::DoNotOptimize(scores.data());
    benchmark::ClobberMemory();
  }
  state.counters["us_per_config"] = benchmark::Counter(
      1e-6 * static_cast<double>(k),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["config_nodes"] =
      static_cast<double>(GetPreparedGraphStats(**pg).num_config_nodes);
}
BENCHMARK(BM_InferenceBlocks)
    ->ArgsProduct({{12000, 48000}, {1000}, {0, 1024, 4096, 16384}})
    ->ArgNames({"nodes", "configs", "block_rows"})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

// The machine's dense float rate through Eigen (same compiler flags as the model): a large
// square GEMM, and the model's own layer shape [rows, 3H] x [3H, H] with H = 64.
void BM_EigenGemm(benchmark::State& state) {
  const int64_t m = state.range(0), kk = state.range(1), nn = state.range(2);
  Rng rng(7);
  Matrix a(m, kk), b(kk, nn), c(m, nn);
  for (int64_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>(rng.Uniform());
  for (int64_t i = 0; i < b.size(); ++i) b.data()[i] = static_cast<float>(rng.Uniform());
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * m * kk * nn * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_EigenGemm)
    ->Args({1024, 1024, 1024})
    ->Args({2048, 2048, 2048})
    ->Args({65536, 192, 64})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

// The row-independent product the model uses for every per-configuration product
// (model/row_product.h) against Eigen's GEMM of the same shapes: a layer shard's forward
// [512, 3H] x [3H, H], its input adjoint [512, H] x [H, 3H], a head layer [256, 128] x [128, 64]
// and the model's whole-layer shape. Both run on one thread, as each shard does.
void BM_ProductShapes(benchmark::State& state) {
  const int64_t m = state.range(0), kk = state.range(1), nn = state.range(2);
  const bool row_product = state.range(3) != 0;
  Rng rng(7);
  Matrix a(m, kk), b(kk, nn), c(m, nn);
  for (int64_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>(rng.Uniform());
  for (int64_t i = 0; i < b.size(); ++i) b.data()[i] = static_cast<float>(rng.Uniform());
  for (auto _ : state) {
    if (row_product) {
      RowProduct<float>(a.data(), m, kk, kk, b.data(), nn, nn, c.data(), nn, false);
    } else {
      c.noalias() = a * b;
    }
    benchmark::DoNotOptimize(c.data());
  }
  state.SetLabel(row_product ? "RowProduct" : "Eigen");
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * m * kk * nn * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ProductShapes)
    ->ArgsProduct({{512}, {192}, {64}, {0, 1}})
    ->ArgsProduct({{512}, {64}, {192}, {0, 1}})
    ->ArgsProduct({{256}, {128}, {64}, {0, 1}})
    ->ArgsProduct({{65536}, {192}, {64}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.3);

}  // namespace
}  // namespace tpugraphs::model

BENCHMARK_MAIN();
