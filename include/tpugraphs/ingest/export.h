// `tpugraphs export`: a dataset -> release-format .npz files in the release tree layout
// (docs/export.md):
//   <dir>/npz/tile/<source>/<split>/<name>.npz
//   <dir>/npz/layout/<source>/<search>/<split>/<name>.npz
// Graphs without a split go to a "nosplit" directory. Each file is written atomically.
//
// Thread-safety: ExportDataset may run concurrently for different output directories.
#ifndef TPUGRAPHS_INGEST_EXPORT_H_
#define TPUGRAPHS_INGEST_EXPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/io/graph_filter.h"

namespace tpugraphs::ingest {

struct ExportOptions {
  std::string dataset;      // input dataset file
  std::string output_dir;   // root of the release tree (created if missing)
  io::GraphFilter filter;   // the graphs to export (empty lists: all)
  bool compress = true;     // deflate members (np.savez_compressed)
  int threads = 0;          // 0 = all cores; files do not depend on it
  bool keep_going = false;  // skip graphs that cannot be exported (see below)
};

// Release-tree path of a graph relative to the output root.
std::string ReleaseRelativePath(const Graph& g);
std::string ReleaseRelativePath(const std::string& collection, const std::string& split,
                                const std::string& name);

struct ExportSkipped {
  std::string collection, split, name;
  std::string reason;
};

struct ExportSummary {
  int64_t graphs = 0;                  // written
  std::vector<std::string> files;      // written, in dataset order
  std::vector<ExportSkipped> skipped;  // keep_going only: graphs not written, in dataset order
};

// Writes every selected graph, all or nothing: the files are written into a staging directory
// beside output_dir and moved into place only when every graph succeeded (StagedDirectory in
// common/file_util.h). On the first error (a corrupt record, an unwritable path) nothing of
// output_dir changes and the error names the dataset and the problem. With keep_going, graphs
// that fail are listed in `skipped` and the others are written. Memory: layout configs are read
// from the dataset and written a few MiB at a time (WriteReleaseNpzStreamed), so no graph's
// configs are ever held whole; the peak is the other arrays of the graphs in flight (at most
// `threads`) plus about 10 MiB per thread (docs/export.md, "Memory").
StatusOr<ExportSummary> ExportDataset(const ExportOptions& options);

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_EXPORT_H_
