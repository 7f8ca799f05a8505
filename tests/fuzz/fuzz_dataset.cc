// Fuzzes the .tpug dataset reader (io/dataset.h): header, footer, index, graph records and
// layout config blocks.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/io/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpugraphs;
  fuzz::InitHarness();
  const std::string& path = fuzz::WriteScratchFile(data, size, ".tpug");
  auto opened = io::DatasetReader::Open(path);
  if (!opened.ok()) return 0;
  const io::DatasetReader& reader = **opened;
  const int64_t n = std::min<int64_t>(reader.num_graphs(), 16);
  for (int64_t i = 0; i < n; ++i) {
    const io::GraphInfo& info = reader.info(i);
    if (reader.Find(info.collection, info.name) < 0) fuzz::Fail("indexed graph not found");
    auto graph = reader.ReadGraph(i);
    if (graph.ok()) {
      Status valid = ValidateGraph(*graph, "fuzz.tpug");
      if (!valid.ok()) fuzz::Fail("ReadGraph returned an invalid graph: " + valid.message());
    }
    if (info.kind == TaskKind::kLayout && info.num_configs > 0) {
      (void)reader.ReadLayoutConfigRange(i, 0, std::min<int64_t>(info.num_configs, 4));
      (void)reader.ReadLayoutConfigs(i, {info.num_configs - 1, 0, info.num_configs - 1});
      (void)reader.ReadLayoutConfigs(i, {info.num_configs});  // out of range: an error
    }
  }
  return 0;
}
