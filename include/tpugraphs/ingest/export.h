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

namespace tpugraphs::ingest {

struct ExportOptions {
  std::string dataset;                   // input dataset file
  std::string output_dir;                // root of the release tree (created if missing)
  std::vector<std::string> collections;  // only these collections (empty: all)
  std::vector<std::string> splits;       // only these splits (empty: all)
  std::vector<std::string> graphs;       // only these graph names (empty: all)
  bool compress = true;                  // deflate members (np.savez_compressed)
  int threads = 0;                       // 0 = all cores; files do not depend on it
};

// Release-tree path of a graph relative to the output root.
std::string ReleaseRelativePath(const Graph& g);
std::string ReleaseRelativePath(const std::string& collection, const std::string& split,
                                const std::string& name);

struct ExportSummary {
  int64_t graphs = 0;
  std::vector<std::string> files;  // written, in dataset order
};

// Writes every selected graph. Fails (with the file and reason) on the first error; files
// already written stay (each is complete), nothing half-written is left.
StatusOr<ExportSummary> ExportDataset(const ExportOptions& options);

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_EXPORT_H_
