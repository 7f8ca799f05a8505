// The closed tuning loop of `tpugraphs tune --measure-cmd CMD --rounds R --measure K`
// (docs/tune.md, "Closing the loop"), as autotuners with a learned cost model run it: measure a
// batch, learn from the measurements, search again.
//
// With a model, each round r = 1..R:
//   1. The scorer: the given model in round 1; later, that model fine-tuned on every
//      configuration this run measured on the graph (train::Train with init_from, `finetune_steps`
//      steps; always from the given model, so a round depends only on the measurements before
//      it).
//   2. A search (tune::RunSearch) seeded with the measured configurations, choosing K never
//      measured ones: the K - round(explore x K) best, the default (round 1), then diverse
//      near-best ones (the search's measurement set).
//   3. The batch is written as an .npz in the release encoding and measured by CMD (a
//      configuration the measurements file already holds is not measured again). The model's
//      Kendall tau-b between its scores of the batch and the runtimes is the loop's learning
//      curve.
// Without a model, the loop is an evolutionary search on measurements alone: RunSearch with the
// measure command as its scorer, K configurations a generation (the first: the default and K - 1
// of its neighbours), R generations.
//
// Everything is deterministic given the measurements, so a run that was killed, or is run again
// with more rounds, replays the rounds the measurements file already covers without measuring
// anything again and continues where it stopped.
//
// Thread-safety: RunLoop is reentrant for different MeasurementLogs.
#ifndef TPUGRAPHS_TUNE_LOOP_H_
#define TPUGRAPHS_TUNE_LOOP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/tune/measurements.h"
#include "tpugraphs/tune/search.h"
#include "tpugraphs/tune/search_space.h"

namespace tpugraphs::tune {

struct LoopOptions {
  std::string measure_cmd;  // run through /bin/sh; "{}" is the batch's .npz (measurements.h)
  int64_t rounds = 3;
  int64_t per_round = 10;  // K
  double explore = 0.3;    // share of a round's set chosen for diversity rather than score
  std::string model;       // model file; "" = evolution on measurements alone
  int64_t finetune_steps = 50;
  double finetune_learning_rate = 0;  // 0: the model's own training rate
  // >= 0: after round 1, new candidates lie within this many changed decisions of one of the
  // `anchors` best measured configurations (a trust region); < 0: anywhere.
  int64_t trust_distance = -1;
  int64_t trust_anchors = 3;
  int threads = 0;
  int64_t memory_per_thread = 256;
  std::string work_dir;  // where batches and fine-tuned models are written (must exist)
};

struct RoundTrace {
  int64_t round = 0;
  int64_t batch = 0;             // configurations the round chose
  int64_t new_measurements = 0;  // of them, measured by the command (not found in the file)
  int64_t measured = 0;          // measured so far, this round's included
  double best_runtime = 0;       // best measured so far
  double default_runtime = 0;    // NaN until the default is measured
  double speedup = 0;            // default_runtime / best_runtime, or NaN
  double batch_kendall = 0;      // the round's model on its batch, before learning from it; NaN
  double model_seconds = 0;      // fine-tuning and search
  double measure_seconds = 0;    // the measure command
};

struct LoopResult {
  std::vector<Measurement> measured;  // every configuration this run measured, best first
  std::vector<RoundTrace> trace;
  int64_t scored = 0;  // configurations scored by the searches
  double seconds = 0;
};

Status ValidateLoopOptions(const LoopOptions& o);

// Runs the loop on graph `g` in `space`. `search` gives the search's options (budget, seed, ...;
// measure and top are set by the loop). Measurements go to and come from `log`.
StatusOr<LoopResult> RunLoop(const SearchSpace& space, const Graph& g, const SearchOptions& search,
                             const LoopOptions& options, MeasurementLog* log);

// The summary `tune --json` prints for a loop (one JSON object, no newline).
std::string LoopJson(const Graph& g, const SearchSpace& space, const LoopResult& r,
                     const LoopOptions& options, const std::string& output);

}  // namespace tpugraphs::tune

#endif  // TPUGRAPHS_TUNE_LOOP_H_
