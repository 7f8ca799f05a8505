// Fuzzes the raw dump loader `ingest` uses (ingest/raw_dump.h): kind detection, gzip/zlib
// inflation, ModuleTuningData (streamed run by run and as a whole message), TuningData,
// HloModuleProto and HloProto, and the graph built from them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/ingest/raw_dump.h"

namespace {
void Load(const std::string& path, bool stream) {
  using namespace tpugraphs;
  ingest::RawDumpOptions options;
  options.collection = "";
  // The production cap is 2 GiB; a smaller one keeps decompression bombs within the fuzzer's
  // memory limit and still exercises the check.
  options.max_decompressed_bytes = uint64_t{64} << 20;
  options.stream_layout_runs = stream;
  auto graphs = ingest::LoadRawDump(path, options);
  if (!graphs.ok()) return;
  for (const Graph& g : *graphs) {
    Status valid = ValidateGraph(g, "fuzz.pb");
    if (!valid.ok()) fuzz::Fail("LoadRawDump returned an invalid graph: " + valid.message());
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpugraphs::fuzz::InitHarness();
  const std::string& path = tpugraphs::fuzz::WriteScratchFile(data, size, ".pb");
  Load(path, /*stream=*/true);
  Load(path, /*stream=*/false);
  return 0;
}
