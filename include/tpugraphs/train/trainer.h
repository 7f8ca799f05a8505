// The trainer behind `tpugraphs train` (docs/train.md).
//
// Train() reads the training graphs of one collection from a dataset, fits the feature transform
// on them, and runs epochs of mini-batch training: every step takes `batch_graphs` graphs, samples
// `configs_per_graph` configurations of each (uniformly, without replacement), scores them,
// computes the LossSpec loss and its gradient, sums the graphs' gradients in a fixed order and
// takes an Adam(W) step with global-norm clipping and the LR schedule. After every epoch it
// computes the real metric on the validation configurations (Kendall tau-b for layout, top-K
// error for tile), keeps the best epoch's parameters, writes a checkpoint, and stops early when
// the metric has not improved for `patience` epochs. The model file of the best epoch is written
// at the end (docs/model-file.md).
//
// Reproducibility: every random decision draws from DeriveSeed(seed, purpose, ...) streams
// (initialisation; batch order per epoch; config sampling per epoch and graph; validation
// samples; holdout split), and the graphs of a batch run on worker threads with separate tapes
// and gradient buffers that are summed in graph order. The model file is therefore byte-identical
// whatever the thread count.
//
// Processes: in an MPI job (distributed::World() with several ranks, docs/distributed.md) every
// rank calls Train with the same config. Each trains on its share of the graphs and the per-graph
// gradients are summed in batch order across the ranks, so the model file is the same bytes as
// one process writes; rank 0 alone writes files, and an error on any rank is every rank's error.
//
// Memory: graphs (without layout config values) and their PreparedGraphs are cached while they
// fit in a budget and re-read per use otherwise; layout config values are always read on demand,
// only for the sampled configurations (DatasetReader::ReadLayoutConfigs).
//
// Output: a progress line on stderr (loss, configs/s, ETA) and one log line per epoch:
//   epoch=3 train_loss=0.512 valid_kendall=0.41 lr=0.001 grad_norm=0.8 time=12.3s
//
// Thread-safety: Train() may run concurrently with other Train() calls on different outputs.
#ifndef TPUGRAPHS_TRAIN_TRAINER_H_
#define TPUGRAPHS_TRAIN_TRAINER_H_

#include <limits>
#include <string>
#include <vector>

#include "tpugraphs/common/status.h"
#include "tpugraphs/train_config.pb.h"

namespace tpugraphs::train {

struct TrainResult {
  int epochs_run = 0;
  int best_epoch = 0;       // 1-based
  std::string metric_name;  // "valid_kendall", "valid_top5_err" or "train_loss"
  bool higher_is_better = false;
  double best_metric = 0.0;
  std::vector<double> epoch_metric;  // one per epoch run
  std::vector<double> epoch_loss;    // mean training loss per epoch
  // Reference values on the same validation configurations (holdout mode only, else NaN):
  // layout: ridge regression on one-hot config values (train/ridge_baseline.h), mean tau over
  // graphs; tile: the expected top-K error of a uniformly random ranking (exact).
  double reference_metric = 0.0;
  std::string reference_name;
  // An ensemble (TrainConfig.ensemble_members > 1): best_metric is the ensemble's on the
  // validation configurations, these are its members' on the same configurations; the other
  // fields are member 0's.
  std::vector<double> member_metrics;
  // With TrainConfig.carve_valid_fraction and holdout_config_fraction: the written model's (the
  // ensemble's) metric on the held-out configurations, which picked nothing; NaN otherwise.
  double held_out_metric = std::numeric_limits<double>::quiet_NaN();
  // Optimizer steps this invocation took (steps of a resumed run's earlier invocations aside).
  int64_t steps_run = 0;
  int64_t checkpoints_written = 0;  // by this invocation
  std::string output;               // the model file written (or found finished)
  // TrainConfig.stop_after_steps ended the invocation before the run's end: `checkpoint` holds
  // where it stands and no model was written; the same command with auto_resume continues.
  bool stopped = false;
  std::string checkpoint;
};

// Trains and writes config.output (and the checkpoint). Validates the config before any I/O and
// checks that the outputs are writable before training. With ensemble_members > 1, trains the
// members one after another and writes them into one model file (docs/train.md, "Ensembles").
StatusOr<TrainResult> Train(const TrainConfig& config);

// Expected top-K error of a uniformly random ranking of `runtimes` (exact, no sampling):
// sum over ranks i of P(the best of K random picks has rank i) * (r_(i) / r_(1) - 1).
double RandomRankingTopKError(std::vector<double> runtimes, int64_t k);

}  // namespace tpugraphs::train

#endif  // TPUGRAPHS_TRAIN_TRAINER_H_
