// Graphs from any input `tpugraphs` reads, loaded whole into memory: a dataset file (.tpug), a
// release .npz or a raw dump (HLO text, HloModuleProto, ModuleTuningData, TuningData), ingested
// on the fly with the same features `tpugraphs ingest` writes. For commands that work on a few
// graphs at a time (tune), not on collections (use io::DatasetReader for those).
//
// Thread-safety: free functions; reentrant.
#ifndef TPUGRAPHS_INGEST_LOAD_GRAPHS_H_
#define TPUGRAPHS_INGEST_LOAD_GRAPHS_H_

#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/ingest/hlo_text.h"
#include "tpugraphs/io/graph_filter.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::ingest {

struct LoadedGraphs {
  std::vector<Graph> graphs;  // the chosen graphs, in the input's order
  // An HLO text dump also keeps its text, parsed module and where the text states the
  // instructions' shapes (to write layouts back into it).
  bool hlo_text = false;
  std::string text;
  xla::HloModuleProto module;
  HloTextShapeSpans spans;
};

// The graphs of `path` that `filter` chooses (io/graph_filter.h: none is a kNoMatchingGraphs
// error). A release .npz or raw dump has no collection of its own beyond what its path and
// contents tell: a filter naming exactly one collection gives its graphs that collection.
// `mark_absent_dimensions`: a release .npz or raw dump is ingested as `ingest
// --mark-absent-dimensions` would (a dataset's graphs stay as they were written).
StatusOr<LoadedGraphs> LoadGraphs(const std::string& path, const io::GraphFilter& filter,
                                  bool mark_absent_dimensions = false);

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_LOAD_GRAPHS_H_
