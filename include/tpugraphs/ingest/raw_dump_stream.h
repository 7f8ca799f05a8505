// Streaming reader for layout dumps (tpu_graphs.ModuleTuningData with module_config runs).
//
// A whole-message parse of a ModuleTuningData turns every run into protobuf objects at once,
// roughly 15 times the size of the encoded bytes. This reader walks the top-level fields with a
// CodedInputStream, parses the module on its own and then one ConfigProfile at a time (runs may
// come before the module on the wire: only their byte ranges are kept), appending each kept
// run's int8 rows and runtime straight to the graph.
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

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_RAW_DUMP_STREAM_H_
