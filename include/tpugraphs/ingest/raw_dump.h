// Raw XLA autotuning dumps -> Graphs with exactly the official TpuGraphs features.
//
// Accepts tpu_graphs.ModuleTuningData (layout), tpu_graphs.TuningData (tile kernels), a bare
// xla.HloModuleProto, an xla.HloProto wrapper and an HLO text module (hlo_text.h; named after
// the module), each optionally gzip- or zlib-compressed. These graph-only dumps carry no runs:
// in a layout collection their configurations are the layouts the dump states plus optional
// alternatives (layout_candidates.h), with runtimes 0. The kind is told from the content, never
// from the file name. The exact rules are in the ingest spec (docs/raw-dumps.md); docs/features.md
// lists the features.
//
// Thread-safety: the functions are reentrant; distinct files may be loaded concurrently.
#ifndef TPUGRAPHS_INGEST_RAW_DUMP_H_
#define TPUGRAPHS_INGEST_RAW_DUMP_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"

namespace tpugraphs::ingest {

enum class RawDumpKind { kModuleTuningData, kTuningData, kHloModule, kHloProto, kHloText };

std::string_view RawDumpKindName(RawDumpKind kind);

struct RawDumpOptions {
  // Collection and split recorded on every produced graph. Empty collection: "tile:xla" for
  // TuningData, "layout:xla:custom" for layout and graph-only dumps.
  std::string collection;
  std::string split;
  // Graph name (layout and graph-only dumps) or name prefix (tile kernels). Empty: the file stem
  // (the module name for HLO text).
  std::string name;
  // Cap on the size of a gzip/zlib dump after inflating (decompression-bomb guard). protobuf
  // cannot parse more than 2 GiB - 1 bytes, which is also the effective maximum.
  uint64_t max_decompressed_bytes = (uint64_t{1} << 31) - 1;
  // Stream the runs of a layout dump one at a time (raw_dump_stream.h) instead of parsing the
  // whole message; the outputs are the same. false forces the whole-message parse (tests).
  bool stream_layout_runs = true;
  // Decode the runs of a tile dump (TuningData) from the wire instead of parsing the whole
  // message; the outputs are the same. false forces the whole-message parse (tests).
  bool stream_tile_runs = true;
  // Graph-only dumps (HLO text, HloModuleProto, HloProto) in a layout collection get the layout
  // configuration they carry as configuration 0 and this many seeded alternatives
  // (layout_candidates.h); their runtimes are 0 (not measured).
  int64_t layout_candidates = 0;
  uint64_t layout_seed = 1;
  // Node features with -1 in the slots beyond each rank-bearing list (absent_dimensions.h).
  bool mark_absent_dimensions = false;
};

// Tells the kind of a raw dump from its (already decompressed) bytes. InvalidArgument naming
// `path` if the bytes are none of the five kinds.
StatusOr<RawDumpKind> DetectRawDumpKind(std::string_view bytes, const std::string& path);

// Reads, decompresses, detects and featurizes one raw dump file. A ModuleTuningData or graph-only
// dump gives one graph, a TuningData one graph per kept kernel. Every error names `path`.
StatusOr<std::vector<Graph>> LoadRawDump(const std::string& path, const RawDumpOptions& options);

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_RAW_DUMP_H_
