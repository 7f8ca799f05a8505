// `tpugraphs synth`: synthetic raw autotuning dumps (tpu_graphs.ModuleTuningData for layout,
// tpu_graphs.TuningData for tile) with runtimes from the analytic cost model in cost_model.h.
//
// Output tree (docs/synth.md), mirroring the release's npz/ tree so that `tpugraphs ingest DIR`
// can tell collection and split from the path:
//   OUT/pb/layout/<source>/<search>/<split>/<name>.pb   one ModuleTuningData per program
//   OUT/pb/tile/<source>/<split>/<name>.pb              one TuningData (one kernel) per file
// Every file is written atomically, and a directory output all or nothing (StagedDirectory in
// common/file_util.h: nothing of OUT changes unless every graph was written). Graph g draws only
// from streams derived from (seed, g) (and configuration j from (seed, g, j)), so the bytes do not
// depend on the thread count. Layout files are streamed: the module is serialised once and each run
// is appended as it is produced, so 10k configurations of a 100k-node program never exist in memory
// together.
//
// Thread-safety: the functions are reentrant; the thread pool passed in is used exclusively.
#ifndef TPUGRAPHS_SYNTH_SYNTH_H_
#define TPUGRAPHS_SYNTH_SYNTH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpu_graphs/tuning.pb.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/synth/cost_model.h"
#include "tpugraphs/synth_config.pb.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::synth {

// A SynthConfig with every default filled in (the CLI takes its flag defaults from it).
SynthConfig DefaultSynthConfig();

// Checks every field; messages name the flag ("--configs must be >= 2, got 1"). Resolves the
// task-dependent noise default into `config`.
Status ValidateSynthConfig(SynthConfig* config);

// One written graph, for the summary table.
struct SynthGraphSummary {
  std::string path;
  std::string split;
  std::string name;
  int64_t nodes = 0;
  int64_t configs = 0;  // valid (non-error) runs
  int64_t error_runs = 0;
  int64_t configurable = 0;  // layout: configurable nodes; tile: 0
  int64_t default_ns = 0;
  int64_t best_ns = 0, worst_ns = 0;
  // Every valid run in file order (= the configuration index after ingest): the measured
  // runtime and the cost model's runtime before measurement noise (docs/synth.md, "Noise-free
  // costs"). Tile: the noise factor divided back out of the measured value (within 1 ns).
  std::vector<int64_t> measured_ns, noise_free_ns;
  // Kendall tau-b of noise-free cost against measured runtime over the valid runs: the best
  // tau any model can reach on this graph (NaN with fewer than 2 runs).
  double noise_free_kendall = 0.0;
};

// Writes the noise-free costs of every graph as a TSV (docs/synth.md, "Noise-free costs"),
// atomically: collection, graph, split, config, measured_ns, noise_free_ns.
Status WriteNoiseFreeCosts(const SynthConfig& config,
                           const std::vector<SynthGraphSummary>& summaries,
                           const std::string& path);

// Runs the whole command: generates (or reads `from`), prices and writes. REQUIRES: a config
// that passed ValidateSynthConfig.
StatusOr<std::vector<SynthGraphSummary>> RunSynth(const SynthConfig& config, ThreadPool* pool);

// Options for pricing the runs of one graph.
struct RunOptions {
  int64_t configs = 100;  // including the default
  double noise_sigma = 0.005;
  double error_rate = 0.0;
  bool default_search = false;   // layout: most nodes keep the compiler default
  bool cross_node_terms = true;  // layout: TpuConstants::cross_node_terms of the runtimes
  uint64_t seed = 1;             // master seed
  uint64_t graph_index = 0;      // stream index of this graph
};

// Streams a ModuleTuningData for `module` with options.configs runs (run 0 is the default; error
// runs are extra) to `path` (atomically). `configurable` becomes config_index_to_node.
StatusOr<SynthGraphSummary> WriteLayoutTuningData(const xla::HloModuleProto& module,
                                                  const ModuleAnalysis& analysis,
                                                  const std::vector<int64_t>& configurable,
                                                  const RunOptions& options, ThreadPool* pool,
                                                  const std::string& path);

// The tile runs of one kernel: up to options.configs distinct tile-size configurations (run 0
// the default) priced by TileCostModel, plus error runs.
StatusOr<tpu_graphs::ModuleTuningData> SynthesizeTileRuns(const xla::HloModuleProto& module,
                                                          const RunOptions& options,
                                                          const std::string& what);

// The cost model's noise-free runtimes of the configurations in an .npz, for a program synth
// wrote (`synth --score`, docs/synth.md "Scoring configurations").
struct ConfigScores {
  TaskKind task = TaskKind::kLayout;   // the program's task
  std::vector<int64_t> noise_free_ns;  // one per configuration, in file order, rounded to 1 ns
};

// Prices every configuration of `npz` for `program` (a layout ModuleTuningData whose
// config_index_to_node are the configurable nodes, or a tile TuningData with one kernel).
// `npz` holds node_config_feat [K, nc, 18] (layout; node_config_ids, when present, must be the
// program's configurable nodes) or config_feat [K, 24] (tile). Errors name both files.
StatusOr<ConfigScores> ScoreConfigFile(const std::string& npz, const std::string& program);

// Reads a ModuleTuningData, TuningData, HloModuleProto or HloProto file (kind told from the
// content) and returns its modules; `config_index_to_node` gets the file's own list for a
// ModuleTuningData (else stays empty), `is_tuning_data` whether it held tile kernels.
Status ReadModules(const std::string& path, std::vector<xla::HloModuleProto>* modules,
                   std::vector<int64_t>* config_index_to_node, bool* is_tuning_data);

}  // namespace tpugraphs::synth

#endif  // TPUGRAPHS_SYNTH_SYNTH_H_
