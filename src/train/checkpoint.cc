// Checkpoints of a TrainingRun: the CheckpointState written after an epoch or inside one (the
// EpochSoFar), restored when resuming, and auto_resume's choice of the checkpoint to continue.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/train/train_config.h"
#include "training_run.h"

namespace tpugraphs::train::internal {

using model::CostModel;

StatusOr<bool> TrainingRun::CheckpointDue(bool force) {
  bool write = force;
  if (!write && config_.checkpoint_interval_seconds() > 0) {
    write = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_checkpoint_)
                .count() >= config_.checkpoint_interval_seconds();
  }
  if (comm_->size() > 1) {
    // Wall-clock intervals differ between ranks: rank 0's clock decides.
    std::string decision(1, write ? '1' : '0');
    TPUG_RETURN_IF_ERROR(comm_->Broadcast(&decision, 0));
    write = decision == "1";
  }
  return write;
}

Status TrainingRun::GatherHistory(std::vector<GstHistoryRow>* rows) {
  rows->clear();
  std::string mine;
  history_->ForEach([&](int64_t graph, int64_t segment, const float* row, int64_t step) {
    GstHistoryRow r;
    r.set_graph(graph);
    r.set_segment(segment);
    r.set_step(step);
    r.set_row(FloatsToBytes(row, history_->width()));
    const std::string bytes = r.SerializeAsString();
    const uint64_t size = bytes.size();
    mine.append(reinterpret_cast<const char*>(&size), sizeof(size));
    mine += bytes;
  });
  std::vector<std::string> all;
  if (comm_->size() == 1) {
    all = {std::move(mine)};
  } else {
    TPUG_RETURN_IF_ERROR(comm_->Gather(mine, 0, &all));
  }
  std::map<std::pair<int64_t, int64_t>, GstHistoryRow> merged;
  for (const std::string& b : all) {
    size_t pos = 0;
    while (pos + sizeof(uint64_t) <= b.size()) {
      uint64_t size = 0;
      std::memcpy(&size, b.data() + pos, sizeof(size));
      pos += sizeof(size);
      GstHistoryRow r;
      if (size > b.size() - pos || !r.ParseFromArray(b.data() + pos, static_cast<int>(size))) {
        return InternalError("a GST history row gathered from another rank does not parse");
      }
      pos += size;
      const auto key = std::make_pair(r.graph(), r.segment());
      merged[key] = std::move(r);
    }
  }
  for (auto& [key, r] : merged) rows->push_back(std::move(r));
  return Status::Ok();
}

Status TrainingRun::WriteCheckpoint(int epochs_done, const EpochSoFar* partial) {
  // The GST history is spread over the ranks; rank 0 writes the checkpoint.
  std::vector<GstHistoryRow> rows;
  TPUG_RETURN_IF_ERROR(GatherHistory(&rows));
  if (!root_) return comm_->Agree(Status::Ok());
  ModelFile ckpt;
  StoreModel(*model_, &ckpt);
  *ckpt.mutable_train_config() = config_;
  *ckpt.mutable_data() = fingerprint_;
  CheckpointState* st = ckpt.mutable_checkpoint();
  st->set_epochs_done(epochs_done);
  st->set_optimizer_step(optimizer_->step());
  st->set_first_moment(FloatsToBytes(optimizer_->first_moment().data(), num_params_));
  st->set_second_moment(FloatsToBytes(optimizer_->second_moment().data(), num_params_));
  st->set_best_epoch(best_epoch_);
  st->set_best_metric(best_metric_);
  st->set_best_parameters(FloatsToBytes(best_params_.data(), num_params_));
  if (!ema_.empty()) st->set_ema_parameters(FloatsToBytes(ema_.data(), num_params_));
  st->set_epochs_since_best(since_best_);
  st->set_total_steps(total_steps_);
  for (double v : result_.epoch_loss) st->add_epoch_loss(v);
  for (GstHistoryRow& r : rows) *st->add_gst_history() = std::move(r);
  if (partial != nullptr) {
    st->set_steps_into_epoch(partial->steps);
    st->set_partial_loss_sum(partial->loss_sum);
    st->set_partial_grad_norm_sum(partial->grad_norm_sum);
    st->set_partial_learning_rate(partial->learning_rate);
    st->set_partial_wall_seconds(partial->seconds);
  }
  TrainingSummary* sum = ckpt.mutable_summary();
  sum->set_metric_name(result_.metric_name);
  for (double v : result_.epoch_metric) sum->add_epoch_metric(v);
  for (const EpochRecord& r : epoch_records_) *sum->add_history() = r;
  Status written = KeepPreviousCheckpoint();
  if (written.ok()) written = WriteModelFile(ckpt_path_, ckpt, kFileKindCheckpoint);
  if (written.ok()) {
    // Verified as a resume would read it (length, CRC, decoding) before it counts as good.
    const auto back = ReadModelFile(ckpt_path_, kFileKindCheckpoint);
    if (!back.ok()) {
      written =
          IoError("the checkpoint just written does not read back (" + back.status().message() +
                  "); the one before it is " + PreviousCheckpointPath(ckpt_path_));
    }
  }
  TPUG_RETURN_IF_ERROR(comm_->Agree(written));
  newest_ckpt_good_ = true;
  ++result_.checkpoints_written;
  return Status::Ok();
}

// The good checkpoint about to be replaced stays as <ckpt>.prev: a hard link to it (a copy where
// the file system has none), put in place by a rename, so that both paths hold a complete
// checkpoint at every moment. Skipped while the newest checkpoint is not known to be good (a run
// that started afresh over another command's, or resumed from the previous one).
Status TrainingRun::KeepPreviousCheckpoint() {
  if (!newest_ckpt_good_) return Status::Ok();
  const std::string prev = PreviousCheckpointPath(ckpt_path_);
  const std::string tmp = prev + ".tmp-" + std::to_string(::getpid()) + "-0";
  std::remove(tmp.c_str());
  if (::link(ckpt_path_.c_str(), tmp.c_str()) != 0) {
    TPUG_ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(ckpt_path_));
    return WriteFileAtomically(prev, bytes);
  }
  const bool renamed = std::rename(tmp.c_str(), prev.c_str()) == 0;
  const std::string why = std::strerror(errno);
  // rename() leaves both names when they are links to one file already (a run killed between
  // keeping the previous checkpoint and writing the next one).
  std::remove(tmp.c_str());
  if (!renamed) return IoError(prev + ": cannot keep the previous checkpoint: " + why);
  return Status::Ok();
}

Status TrainingRun::RestoreModelState() {
  TPUG_ASSIGN_OR_RETURN(std::unique_ptr<CostModel> restored,
                        RestoreModel(checkpoint_, given_.resume()));
  Status s = model_->transform().FromProto(checkpoint_.feature_transform());
  if (!s.ok()) return s.WithContext(given_.resume());
  std::copy(restored->parameters(), restored->parameters() + model_->num_parameters(),
            model_->parameters());
  return Status::Ok();
}

Status TrainingRun::RestoreTrainingState() {
  const std::string& path = given_.resume();
  const CheckpointState& st = checkpoint_.checkpoint();
  TPUG_ASSIGN_OR_RETURN(std::vector<float> m1, BytesToFloats(st.first_moment(), num_params_, path));
  TPUG_ASSIGN_OR_RETURN(std::vector<float> m2,
                        BytesToFloats(st.second_moment(), num_params_, path));
  TPUG_RETURN_IF_ERROR(
      optimizer_->Restore(st.optimizer_step(), std::move(m1), std::move(m2)).WithContext(path));
  if (st.best_epoch() > 0) {
    TPUG_ASSIGN_OR_RETURN(best_params_, BytesToFloats(st.best_parameters(), num_params_, path));
  }
  if (config_.ema_decay() > 0) {
    if (st.has_ema_parameters()) {
      TPUG_ASSIGN_OR_RETURN(ema_, BytesToFloats(st.ema_parameters(), num_params_, path));
    } else {
      spdlog::warn("{} holds no parameter average; it starts from the checkpoint's parameters",
                   path);
    }
  }
  start_epoch_ = st.epochs_done();
  if (st.best_epoch() < 0 || st.best_epoch() > st.epochs_done()) {
    return FailedPreconditionError(path + ": its best epoch (" + std::to_string(st.best_epoch()) +
                                   ") is not one of the " + std::to_string(st.epochs_done()) +
                                   " epochs it holds");
  }
  resumed_.steps = st.steps_into_epoch();
  if (resumed_.steps < 0 || resumed_.steps >= steps_per_epoch_) {
    return FailedPreconditionError(path + ": was written after step " +
                                   std::to_string(resumed_.steps) + " of an epoch of " +
                                   std::to_string(steps_per_epoch_) + " steps");
  }
  resumed_.loss_sum = st.partial_loss_sum();
  resumed_.grad_norm_sum = st.partial_grad_norm_sum();
  resumed_.learning_rate = st.partial_learning_rate();
  resumed_.seconds = st.partial_wall_seconds();
  best_epoch_ = st.best_epoch();
  best_metric_ = st.best_metric();
  // Epochs since the best one, whatever the file says: files written before patience counted
  // epochs (not validations) under valid_every_epochs hold the count of validations there.
  since_best_ = st.epochs_done() - st.best_epoch();
  for (double v : checkpoint_.summary().epoch_metric()) result_.epoch_metric.push_back(v);
  epoch_records_.assign(checkpoint_.summary().history().begin(),
                        checkpoint_.summary().history().end());
  for (double v : st.epoch_loss()) result_.epoch_loss.push_back(v);
  if (resumed_.steps > 0) {
    spdlog::info("resuming {} inside epoch {}, after step {} of {} (best epoch {}, {}={})", path,
                 start_epoch_ + 1, resumed_.steps, steps_per_epoch_, best_epoch_,
                 result_.metric_name, Fmt(best_metric_));
  } else {
    spdlog::info("resuming {} after epoch {} (best epoch {}, {}={})", path, start_epoch_,
                 best_epoch_, result_.metric_name, Fmt(best_metric_));
  }
  if (fingerprint_.graph_names_hash() != checkpoint_.data().graph_names_hash()) {
    return FailedPreconditionError(path + ": was trained on other graphs than " +
                                   config_.dataset() + " now holds");
  }
  return Status::Ok();
}

Status TrainingRun::RestoreHistory() {
  for (const GstHistoryRow& r : checkpoint_.checkpoint().gst_history()) {
    // Each rank keeps the rows of its own graphs (the checkpoint may come from another number
    // of ranks); rank 0 keeps any row of a graph the run does not have, as one process does.
    const bool known = r.graph() >= 0 && r.graph() < static_cast<int64_t>(train_owner_.size());
    if (known ? train_owner_[r.graph()] != comm_->rank() : !root_) continue;
    TPUG_ASSIGN_OR_RETURN(std::vector<float> row,
                          BytesToFloats(r.row(), history_->width(), given_.resume()));
    history_->Push(r.graph(), r.segment(), row.data(), r.step());
  }
  return Status::Ok();
}

bool SameMemberRun(TrainConfig stored, TrainConfig want) {
  for (TrainConfig* c : {&stored, &want}) {
    c->clear_threads();
    c->clear_output();
    c->clear_checkpoint();
    c->clear_resume();
    c->clear_stop_after_steps();
    c->clear_ensemble_member_alone();
    c->clear_members_side_by_side();
    // Member m's run depends on the seed and m, not on how many members there are; but a
    // fine-tuning ensemble's size is its --init-from file's.
    if (want.init_from().empty()) c->clear_ensemble_members();
    if (c->ensemble_member() == 0) c->clear_ensemble_member();  // set or not: member 0
  }
  if (want.collection().empty()) stored.clear_collection();
  if (!want.init_from().empty()) {
    // A fine-tuning run's architecture is its --init-from file's, whatever the flags said.
    stored.clear_model();
    want.clear_model();
  }
  return stored.SerializeAsString() == want.SerializeAsString();
}

TrainConfig ResumeIfInterrupted(const TrainConfig& config) {
  if (!config.auto_resume() || !config.resume().empty()) return config;
  std::string path = CheckpointPathOf(config);
  if (!FileSize(path).ok()) return config;
  auto stored = ReadModelFile(path, kFileKindCheckpoint);
  if (!stored.ok()) {
    // A damaged newest checkpoint: the one before it (WriteCheckpoint keeps it) loses one
    // checkpoint interval instead of the whole run.
    const std::string prev = PreviousCheckpointPath(path);
    auto before = FileSize(prev).ok() ? ReadModelFile(prev, kFileKindCheckpoint)
                                      : StatusOr<ModelFile>(NotFoundError(prev + ": not found"));
    if (!before.ok()) {
      spdlog::warn("--auto-resume: starting afresh; {} (and no readable checkpoint before it: {})",
                   stored.status().message(), before.status().message());
      return config;
    }
    spdlog::warn("--auto-resume: {}; resuming from the checkpoint before it, {}",
                 stored.status().message(), prev);
    path = prev;
    stored = std::move(before);
  }
  // The checkpoint's config is the resolved one: a clock seed (-1) never matches, and the run
  // starts afresh.
  if (!SameMemberRun(stored->train_config(), config)) {
    spdlog::warn("--auto-resume: starting afresh; {} was written by another command", path);
    return config;
  }
  spdlog::info("--auto-resume: {} is this command's; resuming the interrupted run", path);
  TrainConfig resumed = config;
  resumed.set_resume(path);
  return resumed;
}

}  // namespace tpugraphs::train::internal
