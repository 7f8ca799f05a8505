// Benchmarks of the ranking metrics (docs/metrics.md):
//   - Kendall tau-b on n configs (O(n log n)) and the O(n^2) reference at small n;
//   - ComputeGraphMetrics (tau-b + OPA + top-K) of one 100k-config layout graph;
//   - the whole evaluation of a layout collection of 20 graphs x 100k configs held in memory
//     (per-graph metrics on a thread pool + collection means), at 1 and 2 threads.
// After the Google Benchmark runs, a comparison section times scipy.stats.kendalltau and the
// official evaluator's per-graph loop (layout_evaluate.py: kendalltau + top-K slowdowns) with
// Debian's /usr/bin/python3 on the same data, checks that the values agree, and prints ratios.
// Run through tools/bench/bench-metrics.sh. Pass --no_python to skip the comparison.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tpugraphs/common/rng.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/eval/evaluate.h"
#include "tpugraphs/eval/metrics.h"

namespace tpugraphs::eval {
namespace {

// Scores: a noisy copy of the runtimes rounded to 1e-3 (some ties); runtimes: integers in a
// range of n/4 values (many ties), as measured runtimes in ns with repeats.
struct Data {
  std::vector<double> scores, runtimes;
};
Data MakeData(int64_t n, uint64_t seed) {
  Rng rng(seed);
  Data d;
  d.scores.resize(n);
  d.runtimes.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    d.runtimes[i] = 1e6 + static_cast<double>(rng.UniformInt(std::max<int64_t>(1, n / 4)));
    d.scores[i] = std::round((d.runtimes[i] / 1e6 + 0.05 * rng.Normal()) * 1e3) / 1e3;
  }
  return d;
}

void BM_KendallTauB(benchmark::State& state) {
  const Data d = MakeData(state.range(0), 1);
  for (auto _ : state) benchmark::DoNotOptimize(KendallTauB(d.scores, d.runtimes));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_KendallTauB)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_ReferenceKendallTauB(benchmark::State& state) {
  const Data d = MakeData(state.range(0), 1);
  for (auto _ : state) benchmark::DoNotOptimize(reference::KendallTauB(d.scores, d.runtimes));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ReferenceKendallTauB)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

void BM_GraphMetrics100k(benchmark::State& state) {
  const Data d = MakeData(100000, 2);
  for (auto _ : state) {
    benchmark::DoNotOptimize(ComputeGraphMetrics(TaskKind::kLayout, d.scores, d.runtimes));
  }
  state.SetItemsProcessed(state.iterations() * 100000);
}
BENCHMARK(BM_GraphMetrics100k)->Unit(benchmark::kMillisecond);

// Evaluation of one in-memory collection: what Evaluate does after reading and scoring.
EvaluationReport EvaluateCollection(const std::vector<Data>& graphs, ThreadPool& pool) {
  std::vector<GraphMetrics> metrics(graphs.size());
  pool.ParallelFor(static_cast<int64_t>(graphs.size()), 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      metrics[i] = ComputeGraphMetrics(TaskKind::kLayout, graphs[i].scores, graphs[i].runtimes);
      metrics[i].collection = "layout:nlp:random";
      metrics[i].name = std::to_string(i);
      metrics[i].name.insert(metrics[i].name.begin(), 'g');
    }
  });
  return Summarize(std::move(metrics), "bench");
}

const std::vector<Data>& Collection() {
  static const std::vector<Data> graphs = [] {
    std::vector<Data> v;
    for (int i = 0; i < 20; ++i) v.push_back(MakeData(100000, 100 + i));
    return v;
  }();
  return graphs;
}

void BM_EvaluateCollection20x100k(benchmark::State& state) {
  const auto& graphs = Collection();
  ThreadPool pool(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(EvaluateCollection(graphs, pool).kaggle);
  state.SetItemsProcessed(state.iterations() * 20 * 100000);
}
BENCHMARK(BM_EvaluateCollection20x100k)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ----------------------------------------------------------------------------------------------

double Seconds(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string RunCapture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) out = "ERROR " + out;
  return out;
}

void WriteDoubles(const std::string& path, const std::vector<double>& v) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 8));
}

int CompareWithScipy() {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string dir = std::string(tmpdir ? tmpdir : "/tmp") + "/tpugraphs-bench-metrics-" +
                          std::to_string(::getpid());
  std::string mk = "mkdir -p '" + dir + "'";
  if (std::system(mk.c_str()) != 0) return 1;

  // 1) Kendall tau-b on 100k configs.
  const Data d = MakeData(100000, 1);
  WriteDoubles(dir + "/x.bin", d.scores);
  WriteDoubles(dir + "/y.bin", d.runtimes);
  double ours = 1e30, tau = 0;
  for (int rep = 0; rep < 7; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    tau = KendallTauB(d.scores, d.runtimes);
    ours = std::min(ours, Seconds(t0));
  }
  const std::string py1 =
      "import sys, time, numpy as np\n"
      "from scipy.stats import kendalltau\n"
      "x = np.fromfile(sys.argv[1] + '/x.bin'); y = np.fromfile(sys.argv[1] + '/y.bin')\n"
      "best = 1e30\n"
      "for _ in range(5):\n"
      "    t0 = time.perf_counter(); r = kendalltau(x, y).correlation\n"
      "    best = min(best, time.perf_counter() - t0)\n"
      "print(repr(float(r)), best)\n";
  std::ofstream(dir + "/kt.py") << py1;
  const std::string out1 = RunCapture("/usr/bin/python3 '" + dir + "/kt.py' '" + dir + "'");
  double scipy_tau = 0, scipy_s = 0;
  if (std::sscanf(out1.c_str(), "%lf %lf", &scipy_tau, &scipy_s) != 2) {
    std::fprintf(stderr, "bench_metrics: python failed: %s\n", out1.c_str());
    return 1;
  }
  std::printf("\n== Kendall tau-b, n = 100000 (best of 7 / best of 5) ==\n");
  std::printf("ours  %.3f ms  tau = %.17g\n", ours * 1e3, tau);
  std::printf("scipy %.3f ms  tau = %.17g  (scipy.stats.kendalltau)\n", scipy_s * 1e3, scipy_tau);
  std::printf("|difference| = %.3g; speed-up ours vs scipy: %.1fx\n", std::abs(tau - scipy_tau),
              scipy_s / ours);

  // 2) Whole evaluation of a layout collection, 20 graphs x 100k configs.
  const auto& graphs = Collection();
  for (size_t i = 0; i < graphs.size(); ++i) {
    WriteDoubles(dir + "/s" + std::to_string(i) + ".bin", graphs[i].scores);
    WriteDoubles(dir + "/r" + std::to_string(i) + ".bin", graphs[i].runtimes);
  }
  double t1 = 1e30, t2 = 1e30;
  EvaluationReport report;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      report = EvaluateCollection(graphs, pool);
      (threads == 1 ? t1 : t2) = std::min(threads == 1 ? t1 : t2, Seconds(t0));
    }
  }
  // The official evaluator's per-graph work (layout_evaluate.py): kendalltau + top-K slowdowns
  // for K = 1, 10, 100, averaged over graphs; one thread.
  const std::string py2 =
      "import sys, time, numpy as np\n"
      "from scipy.stats import kendalltau\n"
      "d = sys.argv[1]\n"
      "data = [(np.fromfile(f'{d}/s{i}.bin'), np.fromfile(f'{d}/r{i}.bin')) for i in range(20)]\n"
      "t0 = time.perf_counter()\n"
      "taus, slow = [], {1: [], 10: [], 100: []}\n"
      "for s, r in data:\n"
      "    taus.append(kendalltau(s, r).correlation)\n"
      "    order = np.argsort(s, kind='stable'); best = r.min()\n"
      "    for k in (1, 10, 100): slow[k].append(r[order[:k]].min() / best - 1)\n"
      "el = time.perf_counter() - t0\n"
      "print(repr(float(np.mean(taus))), repr(float(np.mean(slow[100]))), el)\n";
  std::ofstream(dir + "/ev.py") << py2;
  const std::string out2 = RunCapture("/usr/bin/python3 '" + dir + "/ev.py' '" + dir + "'");
  double py_tau = 0, py_slow100 = 0, py_s = 0;
  if (std::sscanf(out2.c_str(), "%lf %lf %lf", &py_tau, &py_slow100, &py_s) != 3) {
    std::fprintf(stderr, "bench_metrics: python failed: %s\n", out2.c_str());
    return 1;
  }
  const CollectionMetrics& c = report.collections.at(0);
  std::printf("\n== Evaluation of a layout collection: 20 graphs x 100000 configs ==\n");
  std::printf("ours, 1 thread   %.1f ms (tau-b + OPA + slowdown@1,10,100 + means)\n", t1 * 1e3);
  std::printf("ours, 2 threads  %.1f ms\n", t2 * 1e3);
  std::printf("python (scipy kendalltau + numpy slowdowns, 1 thread) %.1f ms\n", py_s * 1e3);
  std::printf("mean tau ours %.17g  python %.17g  |diff| %.3g\n", c.kendall_tau, py_tau,
              std::abs(c.kendall_tau - py_tau));
  std::printf("mean slowdown@100 ours %.17g  python %.17g\n", c.top_k[2], py_slow100);
  std::printf("speed-up vs python: %.1fx (1 thread), %.1fx (2 threads)\n", py_s / t1, py_s / t2);
  std::printf("hardware threads: %d\n", ThreadPool::HardwareThreads());
  const std::string rm = "rm -rf '" + dir + "'";
  if (std::system(rm.c_str()) != 0) return 1;
  return 0;
}

}  // namespace
}  // namespace tpugraphs::eval

int main(int argc, char** argv) {
  bool python = true;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no_python") == 0) {
      python = false;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return python ? tpugraphs::eval::CompareWithScipy() : 0;
}
