// HLO text ingest throughput (MB/s of text per core): a synthetic layout program of about 100k
// instructions (tpugraphs synth's generator) printed as HLO text in the current and the older
// style (tests/testing/hlo_text_printer.h), then parsed alone (heap messages), parsed +
// featurized (arena messages, as ingest does), and loaded
// from a file with LoadRawDump (read, detect, parse, featurize). Single-threaded.
// Run through tools/bench/bench-hlo-text.sh.
#include <benchmark/benchmark.h>
#include <google/protobuf/arena.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "testing/hlo_text_printer.h"
#include "tpugraphs/ingest/hlo_graph.h"
#include "tpugraphs/ingest/hlo_text.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "tpugraphs/synth/program_generator.h"

namespace {

using tpugraphs::testing::HloTextStyle;

constexpr int64_t kNodes = 100000;

const xla::HloModuleProto& Program() {
  static const auto* m = new xla::HloModuleProto(
      tpugraphs::synth::GenerateLayoutProgram(kNodes, /*seed=*/7, "synth_100k"));
  return *m;
}

const std::string& Text(int style) {
  static const std::string texts[2] = {
      tpugraphs::testing::PrintHloText(Program(), HloTextStyle::kCurrent),
      tpugraphs::testing::PrintHloText(Program(), HloTextStyle::kOlder)};
  return texts[style];
}

const char* StyleName(int style) { return style == 0 ? "current" : "older"; }

void Count(benchmark::State& state, const std::string& text) {
  int64_t n = 0;
  for (const auto& c : Program().computations()) n += c.instructions_size();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(text.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n);
  state.counters["text_MB"] = static_cast<double>(text.size()) / 1e6;
  state.counters["nodes"] = static_cast<double>(n);
  state.SetLabel(StyleName(static_cast<int>(state.range(0))));
}

void BM_ParseOnly(benchmark::State& state) {
  const std::string& text = Text(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    xla::HloModuleProto m;
    tpugraphs::Status s = tpugraphs::ingest::ParseHloText(text, "bench", &m);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    benchmark::DoNotOptimize(m);
  }
  Count(state, text);
}

void BM_ParseAndFeaturize(benchmark::State& state) {
  const std::string& text = Text(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    google::protobuf::Arena arena;  // as LoadRawDump does
    auto& m = *google::protobuf::Arena::CreateMessage<xla::HloModuleProto>(&arena);
    tpugraphs::Status s = tpugraphs::ingest::ParseHloText(text, "bench", &m);
    tpugraphs::Graph g;
    if (s.ok()) s = tpugraphs::ingest::BuildProgramGraph(m, "bench", &g);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    benchmark::DoNotOptimize(g);
  }
  Count(state, text);
}

void BM_LoadRawDumpFile(benchmark::State& state) {
  const std::string& text = Text(static_cast<int>(state.range(0)));
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("bench_hlo_text_" + std::to_string(state.range(0)) + ".txt"))
                               .string();
  {
    std::ofstream out(path, std::ios::binary);
    out << text;
  }
  for (auto _ : state) {
    auto graphs = tpugraphs::ingest::LoadRawDump(path, tpugraphs::ingest::RawDumpOptions());
    if (!graphs.ok()) state.SkipWithError(graphs.status().ToString().c_str());
    benchmark::DoNotOptimize(graphs);
  }
  std::remove(path.c_str());
  Count(state, text);
}

BENCHMARK(BM_ParseOnly)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ParseAndFeaturize)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LoadRawDumpFile)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
