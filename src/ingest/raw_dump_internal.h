// Helpers shared by the two readers of raw dumps: the whole-message path (raw_dump.cc:
// LoadRawDump, DetectAndParse) and the streaming readers (raw_dump_stream.cc: TryStreamLayoutDump,
// TryStreamTileDump). The functions are defined in raw_dump.cc. Private to src/ingest: not part of
// the public headers.
#ifndef TPUGRAPHS_SRC_INGEST_RAW_DUMP_INTERNAL_H_
#define TPUGRAPHS_SRC_INGEST_RAW_DUMP_INTERNAL_H_

#include <google/protobuf/arena.h>
#include <google/protobuf/message.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::ingest::internal {

// protobuf's parser takes at most 2 GiB - 1 bytes, so that is also the cap on what we inflate:
// a larger decompressed dump could not be parsed anyway, and the cap stops decompression bombs.
inline constexpr uint64_t kMaxDumpBytes = (uint64_t{1} << 31) - 1;

// True when `m` (bytes parsed as an HloModuleProto) structurally is one.
bool PlausibleModule(const xla::HloModuleProto& m);

bool HasUnknownFields(const google::protobuf::Message& m);

// Arena options with large blocks, for messages of hundreds of kilobytes.
google::protobuf::ArenaOptions LargeBlockArenaOptions();

std::string FileStem(const std::string& path);

// Sets g->collection (options.collection, else `default_collection`), g->kind and g->split,
// validated; errors carry `path`.
Status ResolveCollection(const RawDumpOptions& options, const std::string& path,
                         std::string_view default_collection, Graph* g);

// What the tile rules (ingest-spec section 6) read of one ConfigProfile. Filled either from a
// parsed message (TileKernelsOfMessages, raw_dump.cc) or straight from the wire (DecodeTileDump,
// raw_dump_stream.cc); the rules (LoadTileKernels) see only this, so both give the same graphs.
struct TileRun {
  bool op_config = false;             // config_case() == kOpConfig
  bool has_tile_size_config = false;  // op_config().has_tile_size_config()
  bool error = false;
  bool is_default = false;
  int64_t compute_time_ns = 0;  // profile().compute_time_ns(); 0 without a profile
};

// One kernel (a ModuleTuningData): its module and a range of TileKernels::runs.
struct TileKernel {
  const xla::HloModuleProto* module = nullptr;  // the default instance when !has_module
  bool has_module = false;
  size_t first_run = 0;
  size_t num_runs = 0;
};

// The kernels of a dump, their runs in file order, and kTileConfigFeatureCount features per run
// (FeaturizeTileConfig of op_config().tile_size_config()).
struct TileKernels {
  std::vector<TileKernel> kernels;
  std::vector<TileRun> runs;
  std::vector<float> run_feat;
};

// The graphs of the tile kernels that pass the kernel filter (ingest-spec section 6). `single`: a
// single kernel's ModuleTuningData, whose graph name leaves out the module name.
StatusOr<std::vector<Graph>> LoadTileKernels(const TileKernels& all, const std::string& path,
                                             const RawDumpOptions& options, bool single);

}  // namespace tpugraphs::ingest::internal

namespace tpugraphs::ingest {
// The two readers (raw_dump.cc, raw_dump_stream.cc; nothing else includes this header) use the
// shared pieces unqualified.
using internal::FileStem;
using internal::HasUnknownFields;
using internal::kMaxDumpBytes;
using internal::LargeBlockArenaOptions;
using internal::LoadTileKernels;
using internal::PlausibleModule;
using internal::ResolveCollection;
using internal::TileKernel;
using internal::TileKernels;
using internal::TileRun;
}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_SRC_INGEST_RAW_DUMP_INTERNAL_H_
