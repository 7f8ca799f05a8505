// Streaming readers for layout dumps (tpu_graphs.ModuleTuningData with module_config runs) and
// tile dumps (tpu_graphs.TuningData).
//
// A whole-message parse of a ModuleTuningData turns every run into protobuf objects at once,
// roughly 15 times the size of the encoded bytes. This reader walks the top-level fields with a
// CodedInputStream, parses the module on its own and then one ConfigProfile at a time (runs may
// come before the module on the wire: only their byte ranges are kept), appending each kept
// run's int8 rows and runtime straight to the graph. The tile reader likewise parses only the
// kernels' modules and decodes the runs from the wire.
#ifndef TPUGRAPHS_INGEST_RAW_DUMP_STREAM_H_
#define TPUGRAPHS_INGEST_RAW_DUMP_STREAM_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/ingest/raw_dump.h"

namespace tpugraphs::ingest {

// Builds the layout graph of decompressed dump `bytes` by streaming its runs. Returns
// std::nullopt whenever the bytes are not unambiguously a layout ModuleTuningData with at least
// one run, or anything about them is wrong: the caller then takes the whole-message path, which
// decides the kind and words every error exactly as before. A returned value holds graphs
// identical to the whole-message path's.
std::optional<std::vector<Graph>> TryStreamLayoutDump(std::string_view bytes,
                                                      const std::string& path,
                                                      const RawDumpOptions& options);

// Loads a tile dump (tpu_graphs.TuningData) whose runs are decoded straight from the wire:
// only each kernel's module is parsed with protobuf. Returns std::nullopt whenever the bytes are
// not unambiguously a TuningData the whole-message path would detect as one, or have anything
// the wire decoder does not take (unknown fields, a module_config run, malformed bytes): the
// caller then takes the whole-message path. A returned value, graphs or error, is exactly the
// whole-message path's: the kernel filter, normalizers and graphs come from the same code.
std::optional<StatusOr<std::vector<Graph>>> TryStreamTileDump(std::string_view bytes,
                                                              const std::string& path,
                                                              const RawDumpOptions& options);

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_RAW_DUMP_STREAM_H_
