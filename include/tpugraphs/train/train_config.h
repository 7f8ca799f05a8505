// TrainConfig helpers: reading a `--config` text proto and validating a config before any I/O.
//
// Thread-safety: free functions; reentrant.
#ifndef TPUGRAPHS_TRAIN_TRAIN_CONFIG_H_
#define TPUGRAPHS_TRAIN_TRAIN_CONFIG_H_

#include <string>

#include "tpugraphs/common/status.h"
#include "tpugraphs/train/optimizer.h"
#include "tpugraphs/train_config.pb.h"

namespace tpugraphs::train {

// Parses a TrainConfig text proto (e.g. `epochs: 20  model { hidden_dim: 128 }`). A missing file
// or a parse error is an error naming the file and the line.
StatusOr<TrainConfig> ReadTrainConfigFile(const std::string& path);

// Checks every option's range and the required ones; messages name the command-line flag
// (e.g. "--learning-rate must be > 0, got -1"). Does no I/O.
Status ValidateTrainConfig(const TrainConfig& config);

// The flag that sets a TrainConfig field: "learning_rate" -> "--learning-rate".
std::string FlagName(const std::string& field);

// Optimizer settings and LR schedule of a config. total_steps: the run's length in steps.
OptimizerOptions OptimizerOptionsOf(const TrainConfig& config);
LrSchedule LrScheduleOf(const TrainConfig& config, int64_t total_steps);

// The checkpoint path of a config ("<output>.ckpt" unless set).
std::string CheckpointPathOf(const TrainConfig& config);

// "<checkpoint>.prev": the checkpoint before the newest, kept while a run writes checkpoints
// (docs/train.md, "Interrupted runs"); removed when the model file is written.
std::string PreviousCheckpointPath(const std::string& checkpoint);

// Largest TrainConfig.ensemble_members.
inline constexpr int kMaxEnsembleMembers = 64;

// Where an ensemble keeps member m until the ensemble file is written: "<output>.member-<m>".
std::string EnsembleMemberPathOf(const std::string& output, int member);

}  // namespace tpugraphs::train

#endif  // TPUGRAPHS_TRAIN_TRAIN_CONFIG_H_
