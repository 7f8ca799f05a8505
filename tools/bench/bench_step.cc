// One layout training step on one real graph, timed: what tools/bench/bench-train.sh compares
// against the PyTorch reference (tools/reference/torch_reference_step.py).
//
//   bench_step DATASET.tpug [--graph I] [--configs K] [--steps N] [--warmup W] [--threads T]
//              [--gemm 0|1]   (0: skip the GEMM reference, e.g. under a profiler)
//
// Loads graph I (default 0) of the dataset, fits the feature transform on it, initialises the
// default ModelSpec (hidden 64, 3 layers) and runs W untimed then N timed steps of: sample K
// configurations, Forward, pairwise hinge loss, Backward, AdamW update. Start-up (reading,
// Prepare) is excluded. Prints one line of key=value pairs on stdout:
//   nodes edges config_nodes configs steps ms_per_step configs_per_s layer_gflop_per_step
//   gemm_gflops (a plain Eigen GEMM of the layer products' shapes, same thread count)
// layer_gflop_per_step counts the message-passing products (forward z W, backward z^T da and
// da W^T) of the per-config and the base pass; --threads sets the model's thread count (1 =
// the calling thread only).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tpugraphs/common/eigen_types.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/model/cost_model.h"
#include "tpugraphs/model/losses.h"
#include "tpugraphs/train/config_sampling.h"
#include "tpugraphs/train/optimizer.h"

namespace {

using namespace tpugraphs;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// GFLOP/s of Eigen's float GEMM on the three shapes of one layer's products.
double GemmRate(int64_t rows, int64_t H) {
  Matrix z = Matrix::Random(rows, 3 * H), w = Matrix::Random(3 * H, H);
  Matrix a(rows, H), dw(3 * H, H), dz(rows, 3 * H);
  const double flop = 3.0 * 2.0 * rows * 3 * H * H;
  int reps = 0;
  const auto t0 = Clock::now();
  double t = 0;
  while (t < 0.5 || reps < 3) {
    a.noalias() = z * w;
    dw.noalias() = z.transpose() * a;
    dz.noalias() = a * w.transpose();
    ++reps;
    t = Seconds(t0, Clock::now());
  }
  volatile float sink = a(0, 0) + dw(0, 0) + dz(0, 0);
  (void)sink;
  return flop * reps / t / 1e9;
}

int Run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: bench_step DATASET.tpug [--graph I] [--configs K] [--steps N] "
                 "[--warmup W] [--threads T]\n");
    return 2;
  }
  const std::string path = argv[1];
  int64_t graph = 0, k = 16, steps = 20, warmup = 3;
  int threads = 1;
  bool gemm_on = true;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (f == "--graph")
      graph = v;
    else if (f == "--configs")
      k = v;
    else if (f == "--steps")
      steps = v;
    else if (f == "--warmup")
      warmup = v;
    else if (f == "--threads")
      threads = static_cast<int>(v);
    else if (f == "--gemm")
      gemm_on = v != 0;
    else {
      std::fprintf(stderr, "bench_step: unknown flag %s\n", f.c_str());
      return 2;
    }
  }
  auto reader = io::DatasetReader::Open(path);
  if (!reader.ok()) {
    std::fprintf(stderr, "bench_step: %s\n", reader.status().ToString().c_str());
    return 1;
  }
  auto g = (*reader)->ReadGraph(graph);
  if (!g.ok()) {
    std::fprintf(stderr, "bench_step: %s\n", g.status().ToString().c_str());
    return 1;
  }
  if (g->kind != TaskKind::kLayout) {
    std::fprintf(stderr, "bench_step: %s: graph %lld is not a layout graph\n", path.c_str(),
                 static_cast<long long>(graph));
    return 1;
  }
  ModelSpec spec;
  auto model = std::move(model::CostModel::Create(spec, TaskKind::kLayout)).value();
  model->transform().Accumulate(*g);
  if (!model->transform().Finalize().ok()) return 1;
  model->InitParameters(1);

  ThreadPool pool(threads);
  ThreadPool* const kernels = threads > 1 ? &pool : nullptr;
  auto pg = std::move(model->Prepare(*g)).value();
  const model::PreparedGraphStats st = model::GetPreparedGraphStats(*pg);
  const int64_t nc = g->num_config_nodes();
  const int64_t row = nc * kLayoutConfigFeatureCount;
  std::vector<int64_t> all(g->num_configs);
  for (int64_t c = 0; c < g->num_configs; ++c) all[c] = c;

  auto tape = model->NewTape();
  train::OptimizerOptions oo;
  train::Optimizer opt(oo, model->num_parameters());
  LossSpec loss;
  std::vector<float> grad(model->num_parameters()), scores(k), dscores(k);
  std::vector<double> runtimes(k);
  model::ConfigBatch batch;
  double timed = 0;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    const auto t0 = Clock::now();
    const std::vector<int64_t> pick = train::SampleConfigs(all, k, 1000 + s);
    const int64_t kk = static_cast<int64_t>(pick.size());
    batch.num_configs = kk;
    batch.layout_feat.resize(kk * row);
    for (int64_t i = 0; i < kk; ++i) {
      std::memcpy(batch.layout_feat.data() + i * row, g->node_config_feat.data() + pick[i] * row,
                  row);
      runtimes[i] = static_cast<double>(g->config_runtime[pick[i]]);
    }
    std::fill(grad.begin(), grad.end(), 0.0f);
    model->Forward(*pg, batch, scores.data(), tape.get(), kernels);
    model::ComputeLoss(loss, scores.data(), runtimes.data(), kk, dscores.data());
    model->Backward(*pg, batch, *tape, dscores.data(), grad.data(), kernels);
    opt.Step(model->parameters(), grad.data(), 1e-3);
    if (s >= warmup) timed += Seconds(t0, Clock::now());
  }
  const int64_t H = spec.hidden_dim();
  double rows = 0;
  for (size_t l = 1; l < st.affected_per_layer.size(); ++l) {
    rows += static_cast<double>(k) * st.affected_per_layer[l];
    if (st.affected_per_layer[0] < st.num_nodes) rows += static_cast<double>(st.num_nodes);
  }
  const double layer_gflop = 3.0 * 2.0 * rows * 3 * H * H / 1e9;
  const int64_t gemm_rows = k * st.affected_per_layer.back();
  Eigen::setNbThreads(1);
  const double gemm = gemm_on ? GemmRate(gemm_rows, H) : 0.0;
  std::printf(
      "nodes=%lld edges=%lld config_nodes=%lld configs=%lld steps=%lld ms_per_step=%.3f "
      "configs_per_s=%.1f layer_gflop_per_step=%.4f gemm_rows=%lld gemm_gflops=%.2f\n",
      static_cast<long long>(st.num_nodes), static_cast<long long>(st.num_edges),
      static_cast<long long>(nc), static_cast<long long>(k), static_cast<long long>(steps),
      1e3 * timed / steps, k * steps / timed, layer_gflop, static_cast<long long>(gemm_rows), gemm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
