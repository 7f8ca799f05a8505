// Graph: one TpuGraphs sample in memory: an XLA program graph with its configurations and their
// measured runtimes. This is what ingest produces, what the dataset file stores and what training,
// evaluation and export consume. Array layouts follow the official release (.npz) exactly.
//
// Thread-safety: a plain value type.
#ifndef TPUGRAPHS_COMMON_GRAPH_H_
#define TPUGRAPHS_COMMON_GRAPH_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/status.h"

namespace tpugraphs {

// Feature widths of the official release (ingest-spec sections 3, 5 and 6).
inline constexpr int kNodeFeatureCount = 140;
inline constexpr int kTileConfigFeatureCount = 24;
inline constexpr int kLayoutConfigFeatureCount = 18;

enum class TaskKind { kTile, kLayout };

std::string_view TaskKindName(TaskKind kind);  // "tile" / "layout"

// A collection names where a graph comes from: "<task>:<source>" for tile ("tile:xla") and
// "<task>:<source>:<search>" for layout ("layout:nlp:default"). Sources and searches are free
// lower-case words ([a-z0-9_]+) so synthetic collections ("layout:synth:random") fit too.
Status ValidateCollection(std::string_view collection);
// REQUIRES: ValidateCollection(collection).ok().
TaskKind TaskKindOfCollection(std::string_view collection);

// Splits are "train", "valid", "test", or "" when unknown.
Status ValidateSplit(std::string_view split);
// A comma-separated list of splits ("train,valid"), each as ValidateSplit wants and none twice;
// "" is the empty list. Fills *splits with the names when it is given.
Status ParseSplitList(std::string_view list, std::vector<std::string>* splits = nullptr);

struct Graph {
  std::string name;        // unique within its collection, e.g. "unet3d" or a tile file stem
  std::string collection;  // see ValidateCollection
  std::string split;       // "train" | "valid" | "test" | ""
  TaskKind kind = TaskKind::kTile;

  // --- the program graph ---
  std::vector<uint8_t> node_opcode;  // [n] opcode ids (ingest-spec section 2)
  std::vector<float> node_feat;      // [n, 140] row-major
  std::vector<int64_t> edge_index;   // [m, 2] row-major; row = [consumer u, producer v]
  std::vector<int64_t> node_splits;  // layout: end offsets starting with 0 (may be empty)

  // --- configurations ---
  int64_t num_configs = 0;                          // c
  std::vector<int64_t> config_runtime;              // [c] nanoseconds (0 in hidden test files)
  std::vector<int64_t> config_runtime_normalizers;  // tile: [c]; layout: empty
  std::vector<float> config_feat;                   // tile: [c, 24] row-major
  std::vector<int64_t> node_config_ids;             // layout: [nc] node indices
  // layout: [c, nc, 18] row-major, small integers (-1 = "compiler's choice"). May be left empty
  // by readers that load configurations on demand; then has_layout_configs() is false.
  std::vector<int8_t> node_config_feat;
  // layout: [nc] instruction names of the configurable nodes, or empty when the source does not
  // give them (release .npz files). Not a feature; lets a user map configurations back to the
  // program (predict --explain).
  std::vector<std::string> config_node_names;
  // node_feat holds -1, not the official 0, in the slots beyond each rank-bearing list's length
  // (ingest/absent_dimensions.h). A model is trained and applied on one kind only.
  bool absent_dimensions_marked = false;

  int64_t num_nodes() const { return static_cast<int64_t>(node_opcode.size()); }
  int64_t num_edges() const { return static_cast<int64_t>(edge_index.size() / 2); }
  int64_t num_config_nodes() const { return static_cast<int64_t>(node_config_ids.size()); }
  bool has_layout_configs() const {
    return !node_config_feat.empty() || num_configs == 0 || node_config_ids.empty();
  }
  bool is_tile() const { return kind == TaskKind::kTile; }
  bool is_layout() const { return kind == TaskKind::kLayout; }

  // Runtime of config i as the metrics use it: runtime / normalizer for tile, raw for layout.
  double NormalizedRuntime(int64_t i) const;

  // "<collection>:<name>", the Kaggle ID form.
  std::string Id() const { return collection + ":" + name; }
};

// Checks every shape and range invariant of a graph: array sizes agree with n, m, c and nc;
// edges and node_config_ids index existing nodes; node_splits are non-decreasing within [0, n];
// features are finite; runtimes are non-negative; tile normalizers are positive. `what` (usually
// a file name) prefixes every message.
Status ValidateGraph(const Graph& g, std::string_view what);

}  // namespace tpugraphs

#endif  // TPUGRAPHS_COMMON_GRAPH_H_
