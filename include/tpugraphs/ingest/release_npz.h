// The official TpuGraphs release .npz files <-> Graph.
//
// A release file is a numpy .npz holding one graph (ingest-spec.md section 7C):
//   all:    node_feat f4 (n, 140), node_opcode u1 (n,), edge_index i8 (m, 2), config_runtime i8
//   (c,) tile:   config_feat f4 (c, 24), config_runtime_normalizers i8 (c,) layout: node_config_ids
//   i8 (nc,), node_config_feat f4 (c, nc, 18), node_splits i8 (1, k)
// The task kind is told from the keys (config_feat -> tile, node_config_feat -> layout) and must
// agree with the collection. Reading accepts other widths and layouts (float64 features, int32
// edges or opcodes, Fortran order, big-endian) through NpzReader's checked conversions; layout
// config values must be integers in [-128, 127] because the dataset stores them one byte each.
// Writing always produces the release dtypes and shapes above.
//
// Thread-safety: the functions are reentrant; distinct files may be handled concurrently.
#ifndef TPUGRAPHS_INGEST_RELEASE_NPZ_H_
#define TPUGRAPHS_INGEST_RELEASE_NPZ_H_

#include <cstdint>
#include <functional>
#include <string>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs::ingest {

// Collection and split read off a path in the release layout:
//   .../npz/tile/<source>/<split>/<name>.npz          -> "tile:<source>", split
//   .../npz/layout/<source>/<search>/<split>/<name>.npz -> "layout:<source>:<search>", split
// The same tree with "pb" in place of "npz" (raw dumps, e.g. written by `tpugraphs synth`) is
// read the same way. Fields are empty when the path does not follow the layout.
struct ReleasePathInfo {
  std::string collection;
  std::string split;
};
ReleasePathInfo InferFromReleasePath(const std::string& path);

// Summary of a release file taken from the npy headers only (nothing is decompressed).
struct ReleaseNpzShape {
  TaskKind kind = TaskKind::kTile;
  int64_t num_nodes = 0;
  int64_t num_edges = 0;
  int64_t num_configs = 0;
  int64_t num_config_nodes = 0;
  // Number of layout config values (c * nc * 18), 0 for tile files.
  int64_t layout_config_values() const {
    return kind == TaskKind::kLayout ? num_configs * num_config_nodes * kLayoutConfigFeatureCount
                                     : 0;
  }
};
StatusOr<ReleaseNpzShape> InspectReleaseNpz(const std::string& path);

// Loads a whole release file. An empty collection means "tile:xla" for tile files and is an
// error for layout files (their collection cannot be guessed). An empty name means the file stem.
// Every error names the file, the key and the problem. With member_threads > 1 and at least two
// members of 1 MiB or more, the members are read (inflated) in parallel on that many threads;
// the graph and the error reported are the same for any thread count.
StatusOr<Graph> LoadReleaseNpz(const std::string& path, const std::string& collection,
                               const std::string& split, const std::string& name,
                               int member_threads = 1);

// Loads a release file straight into `writer` with bounded memory: the graph arrays are read
// whole, node_config_feat chunk by chunk (at most `chunk_values` values at a time) and passed to
// DatasetWriter::AppendLayoutConfigs. On error the partly written graph is dropped from `writer`
// (AbortGraph), which stays usable. Arguments as LoadReleaseNpz; `mark_absent_dimensions`
// derives the -1 slots from the official features (absent_dimensions.h).
Status StreamReleaseNpz(const std::string& path, const std::string& collection,
                        const std::string& split, const std::string& name,
                        io::DatasetWriter* writer, int64_t chunk_values = int64_t{1} << 22,
                        int member_threads = 1, bool mark_absent_dimensions = false);

// Writes `g` as a release .npz (dtypes and shapes as the release; layout node_splits as (1, k)),
// deflated when `compress`. The file appears atomically. REQUIRES: g passes ValidateGraph and,
// for layout graphs with configs, carries node_config_feat. The float32 node_config_feat is
// converted and written 4 MiB at a time (NpzWriter::BeginArray), so memory beyond `g` is a few
// MiB, not 4 bytes per config value.
Status WriteReleaseNpz(const Graph& g, const std::string& path, bool compress);

// Where WriteReleaseNpzStreamed takes a layout graph's config values from: configs [begin, end)
// as int8 [end - begin, nc, 18] in C order. The pointer must stay valid until the next call.
using LayoutConfigSource = std::function<StatusOr<const int8_t*>(int64_t begin, int64_t end)>;

// As WriteReleaseNpz with the same bytes, but a layout graph's node_config_feat comes from
// `source` (g.node_config_feat is not used, normally empty as ReadGraph(i, false) leaves it),
// asked for consecutive ranges of at most `configs_per_read` configs: the configs never exist
// whole in memory, neither as int8 nor as float32. A source error is returned as it is and no
// file appears. Tile graphs are written from `g` alone.
Status WriteReleaseNpzStreamed(const Graph& g, const std::string& path, bool compress,
                               int64_t configs_per_read, const LayoutConfigSource& source);

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_RELEASE_NPZ_H_
