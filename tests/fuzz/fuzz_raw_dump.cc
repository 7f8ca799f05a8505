// Fuzzes the raw dump loader `ingest` uses (ingest/raw_dump.h): kind detection, gzip/zlib
// inflation, ModuleTuningData (streamed run by run and as a whole message), TuningData (runs
// decoded from the wire and as a whole message), HloModuleProto and HloProto, and the graph built
// from them. The wire decoder of tile dumps must give exactly the whole-message outcome.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/ingest/raw_dump.h"

namespace {
using tpugraphs::Graph;
using tpugraphs::StatusOr;

StatusOr<std::vector<Graph>> Load(const std::string& path, bool stream_layout, bool stream_tile) {
  using namespace tpugraphs;
  ingest::RawDumpOptions options;
  options.collection = "";
  // The production cap is 2 GiB; a smaller one keeps decompression bombs within the fuzzer's
  // memory limit and still exercises the check.
  options.max_decompressed_bytes = uint64_t{64} << 20;
  options.stream_layout_runs = stream_layout;
  options.stream_tile_runs = stream_tile;
  auto graphs = ingest::LoadRawDump(path, options);
  if (!graphs.ok()) return graphs;
  for (const Graph& g : *graphs) {
    Status valid = ValidateGraph(g, "fuzz.pb");
    if (!valid.ok()) fuzz::Fail("LoadRawDump returned an invalid graph: " + valid.message());
  }
  return graphs;
}

bool SameGraph(const Graph& a, const Graph& b) {
  return a.name == b.name && a.collection == b.collection && a.split == b.split &&
         a.kind == b.kind && a.node_opcode == b.node_opcode && a.node_feat == b.node_feat &&
         a.edge_index == b.edge_index && a.node_splits == b.node_splits &&
         a.num_configs == b.num_configs && a.config_runtime == b.config_runtime &&
         a.config_runtime_normalizers == b.config_runtime_normalizers &&
         a.config_feat == b.config_feat && a.node_config_ids == b.node_config_ids &&
         a.node_config_feat == b.node_config_feat && a.config_node_names == b.config_node_names;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpugraphs::fuzz::InitHarness();
  const std::string& path = tpugraphs::fuzz::WriteScratchFile(data, size, ".pb");
  static_cast<void>(Load(path, /*stream_layout=*/true, /*stream_tile=*/true));
  const auto whole = Load(path, false, false);
  const auto tile = Load(path, false, true);
  if (whole.ok() != tile.ok() ||
      (!whole.ok() && whole.status().ToString() != tile.status().ToString())) {
    tpugraphs::fuzz::Fail("tile wire decoder and whole-message parse disagree: " +
                          (whole.ok() ? tile : whole).status().ToString());
  }
  if (whole.ok()) {
    bool same = whole->size() == tile->size();
    for (size_t i = 0; same && i < whole->size(); ++i) same = SameGraph((*whole)[i], (*tile)[i]);
    if (!same) tpugraphs::fuzz::Fail("tile wire decoder and whole-message parse give other graphs");
  }
  return 0;
}
