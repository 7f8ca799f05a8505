// Speed of the synthetic data generator: program generation (instructions/s), layout cost
// evaluation (configurations/s of a large program) and tile cost evaluation.
// Driven by tools/bench/bench-synth.sh, which also runs the binary end to end for peak memory.
#include <benchmark/benchmark.h>

#include "tpugraphs/common/rng.h"
#include "tpugraphs/synth/cost_model.h"
#include "tpugraphs/synth/program_generator.h"

namespace tpugraphs::synth {
namespace {

void BM_GenerateLayoutProgram(benchmark::State& state) {
  const int64_t nodes = state.range(0);
  for (auto _ : state) {
    xla::HloModuleProto m = GenerateLayoutProgram(nodes, 1, "p");
    benchmark::DoNotOptimize(m.computations_size());
  }
  state.SetItemsProcessed(state.iterations() * nodes);  // instructions
}
BENCHMARK(BM_GenerateLayoutProgram)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_LayoutRuntime(benchmark::State& state) {
  const int64_t nodes = state.range(0);
  xla::HloModuleProto m = GenerateLayoutProgram(nodes, 1, "p");
  ModuleAnalysis a = AnalyzeModule(m, "p").value();
  LayoutCostModel model(a, ConfigurableNodes(a));
  // One configuration that sets every tensor (swap of the two minor dims of each output).
  std::vector<NodeLayout> config(model.configurable().size());
  for (size_t i = 0; i < config.size(); ++i) {
    TensorLayout l = model.DefaultOutputLayout(i);
    if (l.size() >= 2) std::swap(l[0], l[1]);
    config[i] = {l, {}, {}};
  }
  for (auto _ : state) benchmark::DoNotOptimize(model.RuntimeNs(config));
  state.SetItemsProcessed(state.iterations());  // configurations
  state.counters["configurable"] = static_cast<double>(model.configurable().size());
}
BENCHMARK(BM_LayoutRuntime)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);

void BM_TileRuntime(benchmark::State& state) {
  xla::HloModuleProto m = GenerateTileKernel(3, "k");
  ModuleAnalysis a = AnalyzeModule(m, "k").value();
  TileCostModel model = TileCostModel::Create(a, "k").value();
  tpu_graphs::TileSizeConfig c;
  for (int64_t d : model.output_dims()) c.add_output_bounds(std::max<int64_t>(1, d / 2));
  for (auto _ : state) benchmark::DoNotOptimize(model.RuntimeNs(c));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TileRuntime);

}  // namespace
}  // namespace tpugraphs::synth

BENCHMARK_MAIN();
