#include "ensemble.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "tpugraphs/common/file_lock.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/train/model_file.h"
#include "tpugraphs/train/train_config.h"
#include "training_run.h"

namespace tpugraphs::train::internal {
namespace {

using model::CostModel;

// The config of ensemble member m's own run: its streams, and its files beside the ensemble's.
TrainConfig MemberConfig(const TrainConfig& ensemble, int m) {
  TrainConfig c = ensemble;
  c.set_ensemble_member(m);
  c.set_output(EnsembleMemberPathOf(ensemble.output(), m));
  if (!ensemble.checkpoint().empty()) {
    c.set_checkpoint(EnsembleMemberPathOf(ensemble.checkpoint(), m));
  }
  return c;
}

// The models of the file already at the ensemble's output, model m at index m (member 0 is
// the file itself, less its members): what an earlier run of the same command with another
// --ensemble-members, or the seed's single model, left there. Empty when there is no file, it
// is not a model file (it is overwritten at the end, as any output is), or the dataset was
// written after it (re-ingested at the same path: the options match but the data may not).
struct EarlierMembers {
  std::string path;
  std::vector<ModelFile> models;
};
EarlierMembers ReadEarlierMembers(const TrainConfig& config) {
  EarlierMembers out{config.output(), {}};
  if (!FileSize(config.output()).ok()) return out;
  StatusOr<ModelFile> stored = ReadModelFile(config.output(), kFileKindModel);
  if (!stored.ok()) return out;
  std::error_code model_error, data_error;
  const auto model_time = std::filesystem::last_write_time(config.output(), model_error);
  const auto data_time = std::filesystem::last_write_time(config.dataset(), data_error);
  if (model_error || data_error || model_time < data_time) {
    spdlog::warn("ensemble: {} is not newer than --dataset {}: its members are not reused",
                 config.output(), config.dataset());
    return out;
  }
  out.models.push_back(*stored);
  out.models.front().clear_ensemble();
  for (const ModelFile& member : stored->ensemble()) out.models.push_back(member);
  return out;
}

// Member m (of n) finished by an earlier run of the same command: read back from its own file
// `mc.output()`, or else taken from `earlier` (ReadEarlierMembers: an ensemble of another size, so
// that an ensemble grows or shrinks without retraining the members it shares). nullopt when
// there is none (a file of another run, or an unreadable one, is retrained, with a warning).
// Every rank reads it, as every rank reads a checkpoint.
std::optional<ModelFile> FinishedMember(const TrainConfig& mc, int m, int n,
                                        const EarlierMembers* earlier = nullptr) {
  if (!FileSize(mc.output()).ok()) {
    if (earlier == nullptr || m >= static_cast<int>(earlier->models.size()) ||
        !SameMemberRun(earlier->models[m].train_config(), mc)) {
      return std::nullopt;
    }
    ModelFile found = earlier->models[m];
    const TrainingSummary& s = found.summary();
    spdlog::info("ensemble member {}/{}: reusing model {} of the {} in {} (best epoch {}, {}={})",
                 m + 1, n, m + 1, earlier->models.size(), earlier->path, s.best_epoch(),
                 s.metric_name(), Fmt(s.best_metric()));
    // As this run's member would have recorded it.
    found.mutable_train_config()->set_output(mc.output());
    found.mutable_train_config()->set_ensemble_members(n);
    found.mutable_train_config()->set_ensemble_member(m);
    found.mutable_train_config()->clear_checkpoint();
    if (!mc.checkpoint().empty()) found.mutable_train_config()->set_checkpoint(mc.checkpoint());
    return found;
  }
  auto stored = ReadModelFile(mc.output(), kFileKindModel);
  if (stored.ok() && SameMemberRun(stored->train_config(), mc)) {
    const TrainingSummary& s = stored->summary();
    spdlog::info("ensemble member {}/{}: reusing {} (finished earlier; best epoch {}, {}={})",
                 m + 1, n, mc.output(), s.best_epoch(), s.metric_name(), Fmt(s.best_metric()));
    return std::move(stored).value();
  }
  spdlog::warn("ensemble member {}/{}: retraining; {} is {}", m + 1, n, mc.output(),
               stored.ok() ? "from another run" : stored.status().message());
  return std::nullopt;
}

// The ensemble's config as its members share it: one clock seed for all (rank 0's under MPI);
// an error for --resume, or when the output cannot be written.
StatusOr<TrainConfig> EnsembleConfig(const TrainConfig& given) {
  const int n = given.ensemble_members();
  if (!given.resume().empty()) {
    return InvalidArgumentError(
        "--resume continues one model's checkpoint; an ensemble (--ensemble-members " +
        std::to_string(n) +
        ") resumes by running the same command again: its finished members, kept as " +
        EnsembleMemberPathOf(given.output(), 0) + " ..., are reused");
  }
  TrainConfig config = given;
  if (config.seed() == -1) {
    std::string bytes = std::to_string(ClockSeed());
    distributed::Communicator& comm = distributed::World();
    if (comm.size() > 1) TPUG_RETURN_IF_ERROR(comm.Broadcast(&bytes, 0));
    config.set_seed(std::stoll(bytes));
  }
  TPUG_RETURN_IF_ERROR(CheckWritable(config.output(), "--output"));
  return config;
}

// The members of an ensemble, trained by this invocation or found finished.
struct Members {
  std::vector<ModelFile> files;  // one per member, read back from its file
  TrainResult first;             // member 0's run: epochs and best epoch
  int64_t steps_run = 0;         // by the members this invocation trains (stop_after_steps)
  // stop_after_steps ended the invocation before the last member finished: what Train returns.
  std::optional<TrainResult> stopped;
};

// How many members train at once (TrainConfig.members_side_by_side), with `todo` unfinished:
// 1 under MPI or stop_after_steps. With more than 1, `*threads` gets each member's share.
StatusOr<int> SideBySide(const TrainConfig& config, int todo, int* threads) {
  const int total = ThreadPool::ResolveThreads(config.threads());
  if (todo < 2 || distributed::World().size() > 1 || config.stop_after_steps() > 0) return 1;
  int k = config.members_side_by_side();
  if (k == 0) {
    if (total < 2) return 1;
    // One training graph: its step holds too few tasks for the threads (docs/train.md,
    // "Ensembles"), where members side by side keep every thread busy.
    TrainingRun probe;
    TPUG_ASSIGN_OR_RETURN(const int64_t graphs, probe.CountTrainingGraphs(config));
    k = graphs == 1 ? total : 1;
  }
  k = std::min(k, todo);
  *threads = std::max(1, total / k);
  return k;
}

// Trains the members `todo` of the ensemble `config` describes, `k` at a time on `threads`
// threads each, into out->files (read back from their files); the first error in member order.
Status TrainSideBySide(const TrainConfig& config, const std::vector<int>& todo, int k, int threads,
                       Members* out) {
  const int n = config.ensemble_members();
  std::vector<Status> status(todo.size(), Status::Ok());
  std::vector<TrainResult> results(todo.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (size_t i = next++; i < todo.size() && !failed; i = next++) {
      const int m = todo[i];
      ScopedLogContext context("member " + std::to_string(m + 1) + "/" + std::to_string(n) + ": ");
      spdlog::info("training ({} members at a time, {} threads each)", k, threads);
      TrainingRun run;
      run.SkipReference();
      run.RunSideBySide(threads);
      StatusOr<TrainResult> r = run.Run(ResumeIfInterrupted(MemberConfig(config, m)));
      if (r.ok()) {
        results[i] = std::move(r).value();
      } else {
        status[i] = r.status();
        failed = true;
      }
    }
  };
  std::vector<std::thread> side;
  for (int t = 1; t < k; ++t) side.emplace_back(work);
  work();
  for (std::thread& t : side) t.join();
  // After a failure the members not yet started stay untrained; the run returns the error.
  for (const Status& s : status) TPUG_RETURN_IF_ERROR(s);
  for (size_t i = 0; i < todo.size(); ++i) {
    const int m = todo[i];
    out->steps_run += results[i].steps_run;
    if (m == 0) out->first = results[i];
    TPUG_ASSIGN_OR_RETURN(out->files[m],
                          ReadModelFile(MemberConfig(config, m).output(), kFileKindModel));
  }
  return Status::Ok();
}

// Trains (or reuses) the members of the ensemble `config` describes: one after another, or
// side by side (TrainConfig.members_side_by_side).
StatusOr<Members> TrainMembers(const TrainConfig& config) {
  const int n = config.ensemble_members();
  Members out;
  out.files.resize(n);
  std::vector<int> todo;
  const EarlierMembers earlier = ReadEarlierMembers(config);
  for (int m = 0; m < n; ++m) {
    // A member finished by an earlier run of the same command is read back, not retrained.
    if (std::optional<ModelFile> done = FinishedMember(MemberConfig(config, m), m, n, &earlier)) {
      out.files[m] = std::move(*done);
      const TrainingSummary& s = out.files[m].summary();
      if (m == 0) {
        out.first.epochs_run = s.epochs_run();
        out.first.best_epoch = s.best_epoch();
        out.first.best_metric = s.best_metric();
      }
    } else {
      todo.push_back(m);
    }
  }
  int threads = 0;
  TPUG_ASSIGN_OR_RETURN(const int k, SideBySide(config, static_cast<int>(todo.size()), &threads));
  if (k > 1) {
    TPUG_RETURN_IF_ERROR(TrainSideBySide(config, todo, k, threads, &out));
    return out;
  }
  for (int m : todo) {
    TrainConfig mc = MemberConfig(config, m);
    if (config.stop_after_steps() > 0) {
      if (out.steps_run >= config.stop_after_steps()) {
        // The step budget ended with the previous member: this one starts next time.
        TrainResult stopped;
        stopped.stopped = true;
        stopped.steps_run = out.steps_run;
        stopped.checkpoint = CheckpointPathOf(mc);
        spdlog::info("stopped after {} steps (--stop-after-steps) before ensemble member {}/{}",
                     out.steps_run, m + 1, n);
        out.stopped = std::move(stopped);
        return out;
      }
      mc.set_stop_after_steps(config.stop_after_steps() - out.steps_run);
    }
    spdlog::info("ensemble member {}/{}: training", m + 1, n);
    TrainingRun run;
    run.SkipReference();
    TPUG_ASSIGN_OR_RETURN(TrainResult r, run.Run(ResumeIfInterrupted(mc)));
    out.steps_run += r.steps_run;
    if (r.stopped) {
      r.steps_run = out.steps_run;
      out.stopped = std::move(r);
      return out;
    }
    if (m == 0) out.first = r;
    TPUG_RETURN_IF_ERROR(distributed::World().Barrier());
    TPUG_ASSIGN_OR_RETURN(out.files[m], ReadModelFile(mc.output(), kFileKindModel));
  }
  return out;
}

// The members on the validation configurations, alone and together: the ensemble's result, its
// metric in *ensemble_metric (NaN without validation configurations).
StatusOr<TrainResult> ValidateMembers(const TrainConfig& config, const Members& members,
                                      double* ensemble_metric) {
  const int n = config.ensemble_members();
  std::vector<std::unique_ptr<CostModel>> models;
  std::vector<const CostModel*> views;
  for (int m = 0; m < n; ++m) {
    TPUG_ASSIGN_OR_RETURN(models.emplace_back(),
                          RestoreModel(members.files[m], EnsembleMemberPathOf(config.output(), m)));
    views.push_back(models.back().get());
  }
  TrainingRun validation;
  TPUG_ASSIGN_OR_RETURN(TrainResult result, validation.ValidateModels(config, views));
  result.epochs_run = members.first.epochs_run;
  result.best_epoch = members.first.best_epoch;
  result.steps_run = members.steps_run;
  result.output = config.output();
  *ensemble_metric = std::numeric_limits<double>::quiet_NaN();
  if (result.metric_name == "train_loss") {
    // No validation graphs: nothing to compare the members on; stdout keeps member 0's loss.
    spdlog::warn("ensemble of {}: no validation configurations, so no validation metric", n);
    result.member_metrics.clear();
    result.best_metric = members.first.best_metric;
    return result;
  }
  *ensemble_metric = result.member_metrics.back();
  result.member_metrics.pop_back();
  result.best_metric = *ensemble_metric;
  std::string list;
  for (int m = 0; m < n; ++m) {
    if (m > 0) list += " ";
    list += Fmt(result.member_metrics[m]);
  }
  spdlog::info("ensemble of {}: {}={} on the {} configurations (members: {})", n,
               result.metric_name, Fmt(*ensemble_metric),
               std::isnan(result.held_out_metric) ? "validation" : "held-out", list);
  return result;
}

// One file: member 0's with the others inside it (rank 0 writes; the members' own files and
// checkpoints go once it is written).
Status WriteEnsemble(const TrainConfig& config, const Members& members, double ensemble_metric) {
  distributed::Communicator& comm = distributed::World();
  Status written = Status::Ok();
  if (comm.rank() == 0) {
    ModelFile out = members.files[0];
    out.set_format_version(kModelFormatVersion);
    out.mutable_train_config()->set_output(config.output());
    if (config.checkpoint().empty()) {
      out.mutable_train_config()->clear_checkpoint();
    } else {
      out.mutable_train_config()->set_checkpoint(config.checkpoint());
    }
    if (!std::isnan(ensemble_metric)) out.mutable_summary()->set_ensemble_metric(ensemble_metric);
    const int n = config.ensemble_members();
    for (int m = 1; m < n; ++m) {
      ModelFile* member = out.add_ensemble();
      *member = members.files[m];
      member->clear_checkpoint();
    }
    written = WriteModelFile(config.output(), out, kFileKindModel);
    if (written.ok()) {
      // The members live on in the ensemble file; their own files and checkpoints go.
      for (int m = 0; m < n; ++m) {
        const TrainConfig mc = MemberConfig(config, m);
        const std::string ckpt = CheckpointPathOf(mc);
        for (const std::string& p : {mc.output(), ckpt, PreviousCheckpointPath(ckpt)}) {
          std::remove(p.c_str());
          RemoveStaleTemporaries(p);  // of killed member runs
        }
        RemoveStaleOutputLock(mc.output());  // a member run killed after its model was written
      }
    }
  }
  return comm.Agree(written);
}

}  // namespace

StatusOr<TrainResult> TrainEnsemble(const TrainConfig& given) {
  TPUG_ASSIGN_OR_RETURN(const TrainConfig config, EnsembleConfig(given));
  const auto t_start = std::chrono::steady_clock::now();
  TPUG_ASSIGN_OR_RETURN(Members members, TrainMembers(config));
  if (members.stopped) return std::move(*members.stopped);
  double ensemble_metric = std::numeric_limits<double>::quiet_NaN();
  TPUG_ASSIGN_OR_RETURN(TrainResult result, ValidateMembers(config, members, &ensemble_metric));
  TPUG_RETURN_IF_ERROR(WriteEnsemble(config, members, ensemble_metric));
  // Without validation configurations there is no ensemble figure (ValidateMembers warned).
  const std::string figure = std::isnan(ensemble_metric)
                                 ? std::string("no validation metric")
                                 : result.metric_name + "=" + Fmt(ensemble_metric);
  spdlog::info(
      "wrote {} (ensemble of {}, {}) in {}", config.output(), config.ensemble_members(), figure,
      FormatDuration(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count()));
  return result;
}

StatusOr<TrainResult> TrainMemberAlone(const TrainConfig& config) {
  TrainConfig ensemble = config;
  ensemble.clear_ensemble_member_alone();
  ensemble.clear_ensemble_member();
  const int m = config.ensemble_member();
  const int n = config.ensemble_members();
  const TrainConfig mc = MemberConfig(ensemble, m);
  if (std::optional<ModelFile> done = FinishedMember(mc, m, n)) {
    const TrainingSummary& s = done->summary();
    TrainResult r;
    r.epochs_run = s.epochs_run();
    r.best_epoch = s.best_epoch();
    r.metric_name = s.metric_name();
    r.best_metric = s.best_metric();
    for (double v : s.epoch_metric()) r.epoch_metric.push_back(v);
    r.output = mc.output();
    return r;
  }
  spdlog::info("ensemble member {}/{} alone, into {}", m + 1, n, mc.output());
  TrainingRun run;
  run.SkipReference();
  return run.Run(ResumeIfInterrupted(mc));
}

}  // namespace tpugraphs::train::internal
