// Raw-dump ingest throughput (MB/s of raw protobuf) on the two real dumps: protobuf parsing
// alone (the floor any ingest built on protobuf pays), the whole LoadRawDump (read, detect,
// parse, featurize), and many copies loaded in parallel with 1 thread and all cores.
// Run through tools/bench/bench-ingest.sh; TPUGRAPHS_REAL_DATA overrides the data directory.
#include <benchmark/benchmark.h>
#include <google/protobuf/arena.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tpu_graphs/tuning.pb.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/ingest/raw_dump.h"

namespace {

std::string DataPath(const std::string& rel) {
  const char* dir = std::getenv("TPUGRAPHS_REAL_DATA");
  return std::string(dir ? dir : TPUGRAPHS_SOURCE_DIR "/tests/data/real") + "/" + rel;
}

const std::string& DumpPath(int which) {
  static const std::string paths[2] = {DataPath("raw/module_tuning_data_layout.pb"),
                                       DataPath("raw/op_tuning_data.pb")};
  return paths[which];
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* Label(int which) { return which == 0 ? "layout" : "tile"; }

// protobuf parsing of the in-memory bytes with the right message type; arg 1 = on an arena (as
// LoadRawDump does) or on the heap.
template <typename T>
bool Parse(const std::string& bytes, bool arena, int64_t* items) {
  if (arena) {
    google::protobuf::Arena a;
    T* m = google::protobuf::Arena::CreateMessage<T>(&a);
    const bool ok = m->ParseFromString(bytes);
    benchmark::DoNotOptimize(m);
    *items = 1;
    return ok;
  }
  T m;
  const bool ok = m.ParseFromString(bytes);
  benchmark::DoNotOptimize(&m);
  *items = 1;
  return ok;
}

void BM_ProtobufParseOnly(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const bool arena = state.range(1) != 0;
  const std::string bytes = Slurp(DumpPath(which));
  for (auto _ : state) {
    int64_t items = 0;
    const bool ok = which == 0 ? Parse<tpu_graphs::ModuleTuningData>(bytes, arena, &items)
                               : Parse<tpu_graphs::TuningData>(bytes, arena, &items);
    if (!ok) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(items);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes.size()));
  state.SetLabel(std::string(Label(which)) + (arena ? ", arena" : ", heap"));
}
BENCHMARK(BM_ProtobufParseOnly)
    ->Args({0, 0})
    ->Args({0, 1})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Unit(benchmark::kMillisecond);

// The whole ingest of one file: read, detect the kind, parse, build graphs and features.
void BM_LoadRawDump(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const std::string& path = DumpPath(which);
  const int64_t size = static_cast<int64_t>(Slurp(path).size());
  for (auto _ : state) {
    auto graphs = tpugraphs::ingest::LoadRawDump(path, {});
    if (!graphs.ok()) state.SkipWithError(graphs.status().ToString().c_str());
    benchmark::DoNotOptimize(graphs->size());
  }
  state.SetBytesProcessed(state.iterations() * size);
  state.SetLabel(Label(which));
}
BENCHMARK(BM_LoadRawDump)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// 32 copies of a dump (as a directory of many dumps would be) loaded file-parallel.
// Args: dump, threads (0 = all cores).
void BM_LoadRawDumpParallel(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  constexpr int kCopies = 32;
  const std::string& path = DumpPath(which);
  const int64_t size = static_cast<int64_t>(Slurp(path).size());
  tpugraphs::ThreadPool pool(threads);
  for (auto _ : state) {
    std::atomic<int64_t> total{0};
    std::atomic<bool> failed{false};
    pool.ParallelFor(kCopies, 1, [&](int64_t, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        auto graphs = tpugraphs::ingest::LoadRawDump(path, {});
        if (!graphs.ok())
          failed = true;
        else
          total += static_cast<int64_t>(graphs->size());
      }
    });
    if (failed) state.SkipWithError("ingest failed");
    benchmark::DoNotOptimize(total.load());
  }
  state.SetBytesProcessed(state.iterations() * size * kCopies);
  state.SetLabel(std::string(Label(which)) + " x32, threads=" + std::to_string(pool.num_threads()));
}
BENCHMARK(BM_LoadRawDumpParallel)
    ->Args({0, 1})
    ->Args({0, 0})
    ->Args({1, 1})
    ->Args({1, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
