// `tpugraphs tune` as one library call: load the graphs a TuneConfig names, search each one's
// configuration space with a model (or the synthetic oracle) and write the best configurations
// (docs/tune.md). The CLI and the Python module call Tune and only print its result.
//
// Thread-safety: reentrant; Tune uses config.threads() worker threads.
#ifndef TPUGRAPHS_TUNE_TUNE_H_
#define TPUGRAPHS_TUNE_TUNE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/status.h"
#include "tpugraphs/tune/loop.h"
#include "tpugraphs/tune/search.h"
#include "tpugraphs/tune_config.pb.h"

namespace tpugraphs::tune {

// Checks every option and the required ones before any I/O; messages name the flag.
Status ValidateTuneConfig(const TuneConfig& config);

// The search options a config describes.
SearchOptions SearchOptionsOf(const TuneConfig& config);
// The closed loop's options (config.measure_cmd set); work_dir is left empty.
LoopOptions LoopOptionsOf(const TuneConfig& config);

// One tuned graph.
struct TunedGraph {
  std::string id;  // collection:name
  int64_t nodes = 0, decisions = 0, scored = 0;
  double default_score = 0, best_score = 0, seconds = 0;
  std::string output;  // the .npz written
  std::string json;    // TunedJson or LoopJson: the summary `tune --json` prints
  // The closed loop (--measure-cmd): one entry per round; best_score is then the best measured
  // runtime and default_score the default's (NaN if not measured).
  std::vector<RoundTrace> trace;
};

struct TuneResult {
  std::vector<TunedGraph> graphs;
};

// Tunes every graph the config selects. Outputs appear only when every graph succeeded: a
// directory output and --emit-hlo are staged and committed together at the end.
StatusOr<TuneResult> Tune(const TuneConfig& config, bool progress = true);

// The TSV `tune` prints without --json: a header and one row per graph; for a closed loop, one
// row per graph and round: graph, round, measured, new, best_runtime, default_runtime, speedup,
// batch_kendall, seconds (fine-tuning, search and measuring), output (what `report --tune-trace`
// reads).
std::string FormatTuneTable(const TuneResult& result);

}  // namespace tpugraphs::tune

#endif  // TPUGRAPHS_TUNE_TUNE_H_
