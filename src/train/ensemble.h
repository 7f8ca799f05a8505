// Ensembles (TrainConfig.ensemble_members > 1, docs/train.md, "Ensembles"): the members trained
// one after another as runs of their own, and one member alone. Private to src/train: Train()
// (include/tpugraphs/train/trainer.h) calls these.
#ifndef TPUGRAPHS_SRC_TRAIN_ENSEMBLE_H_
#define TPUGRAPHS_SRC_TRAIN_ENSEMBLE_H_

#include "tpugraphs/common/status.h"
#include "tpugraphs/train/trainer.h"
#include "tpugraphs/train_config.pb.h"

namespace tpugraphs::train::internal {

// TrainConfig.ensemble_members > 1: trains (or reuses) each member as its own run into
// "<output>.member-<m>", validates the members and their ensemble on the same validation
// configurations (and computes the reference once), and writes one model file holding them all
// (format version 2), removing the members' own files and checkpoints. With stop_after_steps the
// budget counts the steps of every member this invocation trains. `given` is validated.
StatusOr<TrainResult> TrainEnsemble(const TrainConfig& given);

// TrainConfig.ensemble_member_alone: member `ensemble_member` of the ensemble `config` describes,
// trained (or found finished) into its member file as TrainEnsemble would. `config` is
// validated.
StatusOr<TrainResult> TrainMemberAlone(const TrainConfig& config);

}  // namespace tpugraphs::train::internal

#endif  // TPUGRAPHS_SRC_TRAIN_ENSEMBLE_H_
