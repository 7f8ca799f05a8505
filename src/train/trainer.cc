// The orchestration of a TrainingRun (training_run.h): the phases in order, the epoch loop, the
// optimizer step and the model file; and Train(), which picks a single run or an ensemble.
#include "tpugraphs/train/trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>

#include "ensemble.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/distributed/communicator.h"
#include "tpugraphs/model/losses.h"
#include "tpugraphs/train/config_sampling.h"
#include "tpugraphs/train/train_config.h"
#include "training_run.h"

namespace tpugraphs::train {
namespace internal {

using model::CostModel;

int64_t ClockSeed() {
  return static_cast<int64_t>(std::chrono::system_clock::now().time_since_epoch().count() &
                              0x7fffffffffffffffLL);
}

uint64_t MemberSeed(uint64_t seed, int member) {
  return member == 0 ? seed : DeriveSeed(seed, "ensemble_member", static_cast<uint64_t>(member));
}

Status CheckWritable(const std::string& path, const std::string& flag) {
  AtomicFileWriter w;
  Status s = w.Open(path);
  if (!s.ok()) return IoError(flag + ": cannot write " + path + ": " + s.message());
  w.Abandon();
  return Status::Ok();
}

StatusOr<TrainResult> TrainingRun::Run(const TrainConfig& given) {
  t_start_ = std::chrono::steady_clock::now();
  root_ = comm_->rank() == 0;
  TPUG_RETURN_IF_ERROR(SetUp(given));
  comm_->ResetCommSeconds();
  if (comm_->size() > 1) {
    // Rank 0's log level decides for all (the others log errors only).
    std::string measure(1, spdlog::should_log(spdlog::level::debug) ? '1' : '0');
    TPUG_RETURN_IF_ERROR(comm_->Broadcast(&measure, 0));
    measure_wait_ = measure == "1";
  }
  const auto t_loop = std::chrono::steady_clock::now();
  TPUG_ASSIGN_OR_RETURN(const int epochs_run, RunEpochs());
  progress_->Finish();
  LogLoop(t_loop);
  result_.steps_run = steps_done_;
  result_.output = config_.output();
  if (stopped_) {
    result_.stopped = true;
    result_.checkpoint = ckpt_path_;
    spdlog::info(
        "stopped after {} steps (--stop-after-steps) with the checkpoint {}; the same command "
        "with --auto-resume true continues",
        steps_done_, ckpt_path_);
    return result_;
  }
  if (root_) {
    // Before the model file, so that a kill after it leaves neither behind: the checkpoint before
    // the last one has nothing left to protect (the last was read back when written).
    if (newest_ckpt_good_) std::remove(PreviousCheckpointPath(ckpt_path_).c_str());
    for (auto* lock : {output_lock_.get(), ckpt_lock_.get()}) {
      if (lock != nullptr) lock->RemoveFile();
    }
  }
  TPUG_RETURN_IF_ERROR(WriteModel(epochs_run));
  if (root_) {
    std::remove(PreviousCheckpointPath(ckpt_path_).c_str());
    // Temporaries of killed earlier runs that were not yet reaped when this one started.
    RemoveStaleTemporaries(ckpt_path_);
    RemoveStaleTemporaries(PreviousCheckpointPath(ckpt_path_));
  }
  if (carve_ && holdout_) TPUG_RETURN_IF_ERROR(ScoreHeldOut());
  return result_;
}

Status TrainingRun::SetUp(const TrainConfig& given) {
  // Every phase ends at a point all ranks reach: a failure on one rank (a file it cannot read)
  // ends every rank's run with that rank's message (distributed::Communicator::Agree).
  TPUG_RETURN_IF_ERROR(comm_->Agree(ResolveConfig(given)));
  if (comm_->size() > 1) {
    // A seed drawn from the clock is rank 0's.
    std::string bytes = std::to_string(config_.seed());
    TPUG_RETURN_IF_ERROR(comm_->Broadcast(&bytes, 0));
    config_.set_seed(std::stoll(bytes));
    seed_ = static_cast<uint64_t>(config_.seed());
    member_seed_ = MemberSeed(seed_, config_.ensemble_member());
  }
  TPUG_RETURN_IF_ERROR(comm_->Agree(SelectData()));
  TrainingPlan plan;
  TPUG_RETURN_IF_ERROR(comm_->Agree(LoadData(&plan)));
  if (config_.dedup_configs()) {
    TPUG_RETURN_IF_ERROR(comm_->AllreduceSum(&deduplicated_, 1));
    spdlog::info("dedup_configs: {} repeated configurations left the training pools",
                 static_cast<int64_t>(deduplicated_));
  }
  TPUG_RETURN_IF_ERROR(InitModel(plan));
  TPUG_RETURN_IF_ERROR(comm_->Agree(InitOptimisation(plan)));
  if (!skip_reference_) {
    // The reference is on the held-out configurations whatever picks the best epoch.
    if (carve_ && holdout_) std::swap(valid_, heldout_);
    const Status reference = ComputeReference();
    if (carve_ && holdout_) std::swap(valid_, heldout_);
    TPUG_RETURN_IF_ERROR(reference);
  }
  return comm_->Agree(PrepareLoop());
}

StatusOr<int> TrainingRun::RunEpochs() {
  // A checkpoint written by the epoch that triggered early stopping: the run is over.
  const bool stopped_before = StopsAfter(start_epoch_);
  int epoch = start_epoch_;
  for (; epoch < config_.epochs() && !stopped_before; ++epoch) {
    TPUG_ASSIGN_OR_RETURN(const bool go_on, RunEpoch(epoch));
    if (!go_on) {
      ++epoch;
      break;
    }
  }
  return epoch;
}

void TrainingRun::LogLoop(std::chrono::steady_clock::time_point t_loop) const {
  // Throughput and the time inside collectives (tools/bench/bench-mpi.sh reads this line).
  const double loop =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_loop).count();
  const int64_t steps = std::max<int64_t>(1, steps_done_);
  const std::string text = fmt::format(
      "training loop: {} steps, {} configs in {:.3f} s ({:.1f} configs/s); {} rank(s), {:.3f} s "
      "in collectives ({:.3f} ms per step){}",
      steps_done_, configs_done_, loop, configs_done_ / std::max(loop, 1e-9), comm_->size(),
      comm_->comm_seconds(), 1e3 * comm_->comm_seconds() / steps,
      measure_wait_ ? fmt::format(", {:.3f} ms per step waiting for the slowest rank",
                                  1e3 * wait_seconds_ / steps)
                    : std::string());
  if (comm_->size() > 1) {
    spdlog::info("{}", text);
  } else {
    spdlog::debug("{}", text);
  }
  // Milliseconds per step by phase (tools/bench/bench-scaling.py reads this line).
  const StepPhases& p = phases_;
  const double ms = 1e3 / static_cast<double>(steps);
  spdlog::debug(
      "step phases (ms per step): prepare={:.3f} shared_forward={:.3f} config_forward={:.3f} "
      "loss={:.3f} config_backward={:.3f} chunk_sum={:.3f} shared_backward={:.3f} "
      "gradient_sum={:.3f} optimizer={:.3f}",
      p.prepare * ms, p.shared_forward * ms, p.config_forward * ms, p.loss * ms,
      p.config_backward * ms, p.chunk_sum * ms, p.shared_backward * ms, p.gradient_sum * ms,
      p.optimizer * ms);
  // Seconds of the validations, summed (tools/bench/bench-scaling.py reads this line).
  const ValidationPhases& v = valid_phases_;
  spdlog::debug(
      "validation phases (s): validations={} load={:.4f} read={:.4f} score={:.4f} metrics={:.4f}",
      v.validations, v.load, v.read, v.score, v.metrics);
}

Status TrainingRun::ResolveConfig(const TrainConfig& given) {
  given_ = given;
  config_ = given;
  resuming_ = !given.resume().empty();
  if (resuming_) {
    TPUG_ASSIGN_OR_RETURN(checkpoint_, ReadModelFile(given.resume(), kFileKindCheckpoint));
    config_ = checkpoint_.train_config();
    if (given.has_epochs()) config_.set_epochs(given.epochs());
    if (given.has_patience()) config_.set_patience(given.patience());
    if (given.has_threads()) config_.set_threads(given.threads());
    config_.set_output(given.output());
    // As given (unset stays unset), so that the model file's config matches an uninterrupted run.
    if (given.has_checkpoint()) {
      config_.set_checkpoint(given.checkpoint());
    } else {
      config_.clear_checkpoint();
    }
    TPUG_RETURN_IF_ERROR(ValidateTrainConfig(config_));
  } else {
    if (config_.seed() == -1) config_.set_seed(ClockSeed());
    if (!config_.init_from().empty()) TPUG_RETURN_IF_ERROR(ReadInitModel());
  }
  config_.clear_resume();
  stop_after_steps_ = given.stop_after_steps();
  config_.clear_stop_after_steps();
  seed_ = static_cast<uint64_t>(config_.seed());
  member_seed_ = MemberSeed(seed_, config_.ensemble_member());
  ckpt_path_ = CheckpointPathOf(config_);
  std::error_code ec;
  newest_ckpt_good_ = resuming_ && std::filesystem::equivalent(given.resume(), ckpt_path_, ec);
  if (!root_ || validate_only_) return Status::Ok();  // rank 0 alone writes
  TPUG_RETURN_IF_ERROR(CheckWritable(config_.output(), "--output"));
  TPUG_RETURN_IF_ERROR(CheckWritable(ckpt_path_, "--checkpoint"));
  // Refused at once when another process writes the same output or checkpoint.
  TPUG_ASSIGN_OR_RETURN(output_lock_, OutputLock::Acquire(config_.output(), "--output"));
  if (ckpt_path_ != config_.output() + ".ckpt") {
    TPUG_ASSIGN_OR_RETURN(ckpt_lock_, OutputLock::Acquire(ckpt_path_, "--checkpoint"));
  }
  RemoveStaleTemporaries(config_.output());  // left by a killed earlier run
  RemoveStaleTemporaries(ckpt_path_);
  RemoveStaleTemporaries(PreviousCheckpointPath(ckpt_path_));
  return Status::Ok();
}

Status TrainingRun::ReadInitModel() {
  const std::string& path = config_.init_from();
  TPUG_ASSIGN_OR_RETURN(init_, ReadModelFile(path, kFileKindModel));
  if (init_.ensemble_size() > 0) {
    // An ensemble fine-tunes member by member: member m starts from the file's member m.
    const int n = init_.ensemble_size() + 1;
    if (config_.ensemble_members() != n) {
      return InvalidArgumentError(path + ": --init-from is an ensemble of " + std::to_string(n) +
                                  " models: fine-tune it with --ensemble-members " +
                                  std::to_string(n) +
                                  " (member m starts from the file's member m)");
    }
    const int m = config_.ensemble_member();
    if (m > 0) {
      ModelFile member = init_.ensemble(m - 1);
      init_ = std::move(member);
    } else {
      init_.clear_ensemble();
    }
  }
  if (!config_.collection().empty() &&
      TaskKindName(TaskKindOfCollection(config_.collection())) != init_.task()) {
    return InvalidArgumentError(path + ": --init-from is a " + init_.task() +
                                " model; collection " + config_.collection() + " is not");
  }
  // The architecture is the file's: its parameters only fit it.
  *config_.mutable_model() = init_.model_spec();
  spdlog::info("fine-tuning {} ({} parameters, trained on {})", path, init_.num_parameters(),
               init_.data().collection());
  return Status::Ok();
}

Status TrainingRun::InitFromModel() {
  const std::string& path = config_.init_from();
  if (TaskKindName(task_) != init_.task()) {
    return InvalidArgumentError(path + ": --init-from is a " + init_.task() +
                                " model; collection " + config_.collection() + " is not");
  }
  TPUG_ASSIGN_OR_RETURN(std::unique_ptr<CostModel> restored, RestoreModel(init_, path));
  Status s = model_->transform().FromProto(init_.feature_transform());
  if (!s.ok()) return s.WithContext(path);
  std::copy(restored->parameters(), restored->parameters() + model_->num_parameters(),
            model_->parameters());
  return Status::Ok();
}

Status TrainingRun::InitModel(const TrainingPlan& plan) {
  const auto t_init = std::chrono::steady_clock::now();
  if (resuming_) {
    // The checkpoint's transform and parameters replace the fit and the initialisation.
    TPUG_RETURN_IF_ERROR(comm_->Agree(RestoreModelState()));
  } else if (!config_.init_from().empty()) {
    // The file's transform and parameters replace the fit and the initialisation.
    TPUG_RETURN_IF_ERROR(comm_->Agree(InitFromModel()));
  } else {
    TPUG_RETURN_IF_ERROR(ShareTransform());
    model_->InitParameters(DeriveSeed(member_seed_, "init"));
  }
  if (validate_only_) return Status::Ok();
  spdlog::info(
      "training {} on {} graphs ({} configs), validating on {} {}; {} parameters; loaded in {}",
      config_.collection(), train_.size(), plan.train_configs, valid_.size(),
      carve_ ? "carved config sets" : (holdout_ ? "held-out config sets" : "graphs"),
      model_->num_parameters(),
      FormatDuration(std::chrono::duration<double>(t_init - t_start_).count()));
  return Status::Ok();
}

Status TrainingRun::ShareTransform() {
  // Rank 0 fitted the transform on every training graph; the others take its statistics.
  TPUG_RETURN_IF_ERROR(comm_->Agree(
      root_ ? model_->transform().Finalize().WithContext(config_.dataset()) : Status::Ok()));
  if (comm_->size() == 1) return Status::Ok();
  std::string bytes;
  if (root_) {
    FeatureTransformProto proto;
    model_->transform().ToProto(&proto);
    bytes = proto.SerializeAsString();
  }
  TPUG_RETURN_IF_ERROR(comm_->Broadcast(&bytes, 0));
  if (root_) return Status::Ok();
  FeatureTransformProto proto;
  if (!proto.ParseFromString(bytes)) {
    return InternalError("the feature transform broadcast by rank 0 does not parse");
  }
  return model_->transform().FromProto(proto);
}

Status TrainingRun::InitOptimisation(const TrainingPlan& plan) {
  num_params_ = model_->num_parameters();
  batch_graphs_ = std::min<int64_t>(config_.batch_graphs(), static_cast<int64_t>(train_.size()));
  steps_per_pass_ = (static_cast<int64_t>(train_.size()) + batch_graphs_ - 1) / batch_graphs_;
  steps_per_epoch_ = config_.steps_per_epoch() > 0 ? config_.steps_per_epoch() : steps_per_pass_;
  RaiseStepsPerEpoch(plan);
  total_steps_ = steps_per_epoch_ * config_.epochs();
  schedule_ = std::make_unique<LrSchedule>(LrScheduleOf(config_, total_steps_));
  optimizer_ = std::make_unique<Optimizer>(OptimizerOptionsOf(config_), num_params_);
  best_params_.assign(model_->parameters(), model_->parameters() + num_params_);
  if (config_.ema_decay() > 0) ema_ = best_params_;
  SetMetricName();
  if (!resuming_) return Status::Ok();
  return RestoreTrainingState();
}

void TrainingRun::RaiseStepsPerEpoch(const TrainingPlan& plan) {
  const double per_step = static_cast<double>(batch_graphs_ * config_.configs_per_graph());
  if (config_.min_config_passes() > 0) {
    const auto need = static_cast<int64_t>(
        std::ceil(config_.min_config_passes() * plan.pool_configs / (per_step * config_.epochs())));
    if (need > steps_per_epoch_) {
      spdlog::info(
          "{} steps per epoch instead of {}, for {} passes over about {:.0f} training "
          "configurations (min_config_passes)",
          need, steps_per_epoch_, config_.min_config_passes(), plan.pool_configs);
      steps_per_epoch_ = need;
    }
  }
  if (carve_) {
    // An epoch samples at least as many training configurations as the carved validation
    // scores.
    const auto need = static_cast<int64_t>(std::ceil(plan.carved_scored_total / per_step));
    if (need > steps_per_epoch_) {
      spdlog::info(
          "{} steps per epoch instead of {}: an epoch samples at least the about {:.0f} carved "
          "validation configurations it is validated on",
          need, steps_per_epoch_, plan.carved_scored_total);
      steps_per_epoch_ = need;
    }
  }
}

Status TrainingRun::PrepareLoop() {
  pool_ = std::make_unique<ThreadPool>(Threads());
  kernel_pool_ = std::make_unique<ThreadPool>(Threads());
  tapes_.resize(batch_graphs_);
  for (auto& t : tapes_) t = model_->NewTape();
  grads_.assign(batch_graphs_, std::vector<float>(num_params_));
  grad_.assign(num_params_, 0.0f);
  history_ = std::make_unique<HistoryTable>(model_->head_input_dim());
  if (resuming_) TPUG_RETURN_IF_ERROR(RestoreHistory());
  gst_options_.segments_per_step = config_.gst_segments_per_step();
  gst_options_.keep_probability = config_.gst_keep_probability();
  gst_options_.fresh_context = config_.gst() == TrainConfig::GST_FRESH;
  head_offset_ = model_->head_parameter_offset();
  const int64_t configs_per_step = batch_graphs_ * config_.configs_per_graph();
  progress_ = std::make_unique<Progress>(
      "train",
      ((config_.epochs() - start_epoch_) * steps_per_epoch_ - resumed_.steps) * configs_per_step,
      "configs");
  PrepareValidation();
  last_checkpoint_ = std::chrono::steady_clock::now();
  return Status::Ok();
}

StatusOr<bool> TrainingRun::RunEpoch(int epoch) {
  const auto t_epoch = std::chrono::steady_clock::now();
  GstOptions epoch_gst = gst_options_;
  epoch_gst.head_only = gst_ && epoch >= config_.epochs() - config_.gst_finetune_epochs();
  if (epoch_gst.head_only &&
      epoch == std::max(start_epoch_, config_.epochs() - config_.gst_finetune_epochs())) {
    spdlog::info("epoch {}: GST fine-tuning of the head on fresh embeddings", epoch + 1);
  }
  // The epoch's steps and sums so far: none, or in the epoch a mid-epoch checkpoint
  // interrupted, the ones it had taken.
  EpochSoFar so_far = epoch == start_epoch_ ? resumed_ : EpochSoFar();
  const double earlier_seconds = so_far.seconds;
  // The run's steps are the batches of consecutive passes; this epoch takes the next
  // steps_per_epoch_ of them (with steps_per_epoch unset, exactly pass `epoch`).
  int64_t pass = -1;
  std::vector<int64_t> order;
  for (int64_t step = so_far.steps; step < steps_per_epoch_; ++step) {
    const int64_t run_step = static_cast<int64_t>(epoch) * steps_per_epoch_ + step;
    if (run_step / steps_per_pass_ != pass) {
      pass = run_step / steps_per_pass_;
      order = PassOrder(pass);
    }
    const int64_t begin = (run_step % steps_per_pass_) * batch_graphs_;
    const int64_t end =
        std::min<int64_t>(begin + batch_graphs_, static_cast<int64_t>(order.size()));
    next_graphs_.clear();
    const int64_t next = run_step + 1;
    if (Threads() != 1 && next < static_cast<int64_t>(config_.epochs()) * steps_per_epoch_) {
      const int64_t next_pass = next / steps_per_pass_;
      const std::vector<int64_t> next_order = next_pass == pass ? order : PassOrder(next_pass);
      const int64_t nb = (next % steps_per_pass_) * batch_graphs_;
      const int64_t ne =
          std::min<int64_t>(nb + batch_graphs_, static_cast<int64_t>(next_order.size()));
      for (int64_t b = nb; b < ne; ++b) {
        if (chunked_ || train_owner_[next_order[b]] == comm_->rank()) {
          next_graphs_.emplace_back(next_pass, next_order[b]);
        }
      }
    }
    TPUG_ASSIGN_OR_RETURN(StepStats s, Step(epoch, pass, step, order, begin, end, epoch_gst));
    so_far.loss_sum += s.loss;
    so_far.grad_norm_sum += s.grad_norm;
    so_far.learning_rate = s.lr;
    ++so_far.steps;
    progress_->SetSuffix("epoch=" + std::to_string(epoch + 1) + "/" +
                         std::to_string(config_.epochs()) +
                         " loss=" + Fmt(so_far.loss_sum / so_far.steps));
    progress_->Add(s.configs);
    ++steps_done_;
    configs_done_ += s.configs;
    if (step + 1 == steps_per_epoch_) break;  // the epoch's end writes its own checkpoint
    const bool stop = stop_after_steps_ > 0 && steps_done_ >= stop_after_steps_;
    TPUG_ASSIGN_OR_RETURN(const bool due, CheckpointDue(stop));
    if (due) {
      so_far.seconds =
          earlier_seconds +
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_epoch).count();
      TPUG_RETURN_IF_ERROR(WriteCheckpoint(epoch, &so_far));
      last_checkpoint_ = std::chrono::steady_clock::now();
    }
    if (stop) {
      stopped_ = true;
      return false;
    }
  }
  const double secs =
      earlier_seconds +
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_epoch).count();
  const int64_t steps = std::max<int64_t>(1, so_far.steps);
  return FinishEpoch(epoch, so_far.loss_sum / steps, so_far.learning_rate,
                     so_far.grad_norm_sum / steps, secs);
}

std::vector<int64_t> TrainingRun::PassOrder(int64_t pass) const {
  std::vector<int64_t> order(train_.size());
  for (size_t j = 0; j < order.size(); ++j) order[j] = static_cast<int64_t>(j);
  Rng shuffle(DeriveSeed(member_seed_, "shuffle", static_cast<uint64_t>(pass)));
  shuffle.Shuffle(order);
  return order;
}

StatusOr<StepStats> TrainingRun::Step(int epoch, int64_t pass, int64_t step,
                                      const std::vector<int64_t>& order, int64_t begin, int64_t end,
                                      const GstOptions& gst_options) {
  // Each graph of this rank's share of the batch: its gradient into its own buffer, on the
  // worker threads.
  const int64_t nb = end - begin;
  std::vector<int> owner(nb);
  std::vector<int64_t> mine;  // batch positions of this rank's graphs
  for (int64_t b = 0; b < nb; ++b) {
    owner[b] = train_owner_[order[begin + b]];
    if (owner[b] == comm_->rank()) mine.push_back(b);
  }
  if (chunked_) return ChunkedStep(epoch, pass, step, order, begin, end, gst_options);
  const int64_t nm = static_cast<int64_t>(mine.size());
  std::vector<double> records(2 * nm, 0.0);  // per own graph: loss, configs sampled
  std::vector<Status> statuses(nm);
  {
    // Graph Segment Training and cross-configuration attention: a task per graph. One graph
    // alone is the work: GST's segments are the tasks (GraphGradient), else the model's
    // kernels share the graph's rows.
    const auto t0 = std::chrono::steady_clock::now();
    if (nm == 1) {
      statuses[0] = GraphGradient(order[begin + mine[0]], 0, pass, gst_options, &records[0],
                                  pool_.get(), kernel_pool_.get());
    } else {
      pool_->ParallelFor(nm, 1, [&](int64_t, int64_t sb, int64_t se) {
        for (int64_t x = sb; x < se; ++x) {
          statuses[x] =
              GraphGradient(order[begin + mine[x]], x, pass, gst_options, &records[2 * x]);
        }
      });
    }
    phases_.config_backward +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  Status local = FirstError(statuses);
  if (measure_wait_) {
    // With -v: how long this rank waits for the slowest one (a barrier, outside the collectives'
    // own time), so that the time in collectives can be read as transfer.
    const auto t_wait = std::chrono::steady_clock::now();
    TPUG_RETURN_IF_ERROR(comm_->Barrier());
    wait_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_wait).count();
  }
  TPUG_RETURN_IF_ERROR(comm_->Agree(local));

  // Their mean, summed in batch order whatever the ranks and threads: every rank gets the sum
  // a single process forms (distributed::Communicator::OrderedSum).
  const auto t_sum = std::chrono::steady_clock::now();
  StepStats stats;
  std::vector<int> owner2(2 * nb);
  for (int64_t b = 0; b < nb; ++b) owner2[2 * b] = owner2[2 * b + 1] = owner[b];
  std::vector<double> all;
  TPUG_RETURN_IF_ERROR(comm_->AllGatherItems(owner2, records, &all));
  for (int64_t b = 0; b < nb; ++b) {
    stats.loss += all[2 * b];
    stats.configs += static_cast<int64_t>(all[2 * b + 1]);
  }
  std::vector<const float*> parts;
  for (int64_t x = 0; x < nm; ++x) parts.push_back(grads_[x].data());
  TPUG_RETURN_IF_ERROR(comm_->OrderedSum(owner, parts, num_params_, grad_.data()));
  phases_.gradient_sum +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_sum).count();
  return UpdateWithMean(epoch, step, gst_options, nb, stats);
}

StatusOr<StepStats> TrainingRun::UpdateWithMean(int epoch, int64_t step,
                                                const GstOptions& gst_options, int64_t nb,
                                                StepStats stats) {
  const auto t_update = std::chrono::steady_clock::now();
  const float inv = 1.0f / static_cast<float>(nb);
  for (float& x : grad_) x *= inv;
  stats.loss /= nb;
  StatusOr<StepStats> updated = Update(epoch, step, gst_options, stats);
  phases_.optimizer +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_update).count();
  return updated;
}

Status TrainingRun::GraphGradient(int64_t j, int64_t x, int64_t pass, const GstOptions& gst_options,
                                  double* record, ThreadPool* segment_pool, ThreadPool* kernels) {
  const Member& m = train_[j];
  std::vector<float>& gb = grads_[x];
  std::fill(gb.begin(), gb.end(), 0.0f);
  TPUG_ASSIGN_OR_RETURN(std::shared_ptr<const Loaded> l, store_->Get(m));
  const Graph& g = l->graph;
  std::vector<int64_t> picks = SampleConfigs(
      m.pool, config_.configs_per_graph(),
      DeriveSeed(member_seed_, "sample", static_cast<uint64_t>(pass), static_cast<uint64_t>(j)));
  TPUG_ASSIGN_OR_RETURN(model::ConfigBatch batch, MakeBatch(m, g, picks));
  const int64_t k = static_cast<int64_t>(picks.size());
  std::vector<double> rt(k);
  for (int64_t c = 0; c < k; ++c) rt[c] = g.NormalizedRuntime(picks[c]);
  if (gst_) {
    const int64_t now = optimizer_->step();
    TPUG_ASSIGN_OR_RETURN(GstPlan plan,
                          PlanGstStep(*l->segmented, j, gst_options, now,
                                      DeriveSeed(member_seed_, "gst", static_cast<uint64_t>(now),
                                                 static_cast<uint64_t>(j)),
                                      history_.get()));
    // One graph alone is the step's work: its sampled segments' chunks of configurations (and
    // several fresh segments) are the tasks on segment_pool (train/gst.h).
    TPUG_ASSIGN_OR_RETURN(auto st, RunGstStep(*model_, *l->segmented, j, std::move(plan), batch,
                                              rt.data(), config_.loss(), gst_options, now,
                                              history_.get(), gb.data(), segment_pool, kernels));
    record[0] = st.loss;
    record[1] = static_cast<double>(k);
    return Status::Ok();
  }
  std::vector<float> scores(k), dscores(k);
  model_->Forward(*l->prepared, batch, scores.data(), tapes_[x].get(), kernels);
  record[0] = model::ComputeLoss(config_.loss(), scores.data(), rt.data(), k, dscores.data());
  model_->Backward(*l->prepared, batch, *tapes_[x], dscores.data(), gb.data(), kernels);
  record[1] = static_cast<double>(k);
  return Status::Ok();
}

StatusOr<StepStats> TrainingRun::Update(int epoch, int64_t step, const GstOptions& gst_options,
                                        StepStats stats) {
  stats.lr = schedule_->LearningRate(optimizer_->step());
  if (!std::isfinite(stats.loss)) {
    // Every rank has the same loss and norm: the error is the same everywhere (Agree makes it
    // one report).
    return comm_->Agree(InternalError(
        "training diverged: loss is " + Fmt(stats.loss) + " at epoch " + std::to_string(epoch + 1) +
        ", step " + std::to_string(step + 1) + " (learning rate " + Fmt(stats.lr) +
        "); try a lower --learning-rate or --clip-norm"));
  }
  std::vector<float> frozen;  // GST fine-tuning: everything below the head stays put
  if (gst_options.head_only) {
    frozen.assign(model_->parameters(), model_->parameters() + head_offset_);
  }
  stats.grad_norm = optimizer_->Step(model_->parameters(), grad_.data(), stats.lr);
  if (!frozen.empty()) std::copy(frozen.begin(), frozen.end(), model_->parameters());
  UpdateAverage();
  if (!std::isfinite(stats.grad_norm)) {
    return comm_->Agree(InternalError(
        "training diverged: gradient norm is not finite at epoch " + std::to_string(epoch + 1) +
        ", step " + std::to_string(step + 1) + " (learning rate " + Fmt(stats.lr) + ")"));
  }
  return stats;
}

void TrainingRun::UpdateAverage() {
  if (ema_.empty()) return;
  // TensorFlow's ExponentialMovingAverage with num_updates: the decay grows to ema_decay, so
  // the average forgets the initial weights within the first steps.
  const double t = static_cast<double>(optimizer_->step());
  const float d = static_cast<float>(std::min(config_.ema_decay(), (1.0 + t) / (10.0 + t)));
  const float* p = model_->parameters();
  for (int64_t i = 0; i < num_params_; ++i) ema_[i] = d * ema_[i] + (1.0f - d) * p[i];
}

void TrainingRun::SwapAverage() {
  if (ema_.empty()) return;
  std::swap_ranges(ema_.begin(), ema_.end(), model_->parameters());
}

StatusOr<bool> TrainingRun::FinishEpoch(int epoch, double train_loss, double lr, double grad_norm,
                                        double seconds) {
  result_.epoch_loss.push_back(train_loss);
  double metric = train_loss;
  // valid_every_epochs: an epoch between two validations is neither validated nor a candidate
  // for the best one; patience counts it all the same (epochs since the best one, checked at
  // validations). The last epoch is always validated.
  const bool skip = !Validates(epoch + 1);
  // With parameter averaging, the average is what is validated and kept.
  SwapAverage();
  const Status validated = valid_.empty() || skip ? Status::Ok() : Validate(&metric);
  if (!validated.ok()) {
    SwapAverage();
    return validated;
  }
  if (skip) metric = std::numeric_limits<double>::quiet_NaN();
  result_.epoch_metric.push_back(metric);
  const bool improved = !skip && Improves(metric);
  if (improved) {
    best_metric_ = metric;
    best_epoch_ = epoch + 1;
    since_best_ = 0;
    best_params_.assign(model_->parameters(), model_->parameters() + num_params_);
  } else {
    ++since_best_;
  }
  SwapAverage();
  std::string text = "epoch=" + std::to_string(epoch + 1) + " train_loss=" + Fmt(train_loss);
  if (skip) {
    text += " (not validated)";
  } else if (!valid_.empty()) {
    text += " " + result_.metric_name + "=" + Fmt(metric);
  }
  char tail[160];
  std::snprintf(tail, sizeof(tail), " lr=%.6g grad_norm=%.4g time=%.2fs%s", lr, grad_norm, seconds,
                improved ? " best" : "");
  text += tail;
  spdlog::info("{}", text);
  EpochRecord& record = epoch_records_.emplace_back();
  record.set_epoch(epoch + 1);
  record.set_train_loss(train_loss);
  record.set_valid_metric(metric);
  record.set_learning_rate(lr);
  record.set_grad_norm(grad_norm);
  record.set_wall_seconds(seconds);

  const bool stop = StopsAfter(epoch + 1);
  const bool last = stop || epoch + 1 == config_.epochs();
  // stop_after_steps reached at an epoch's end: the run goes on from the next epoch.
  const bool pause = !last && stop_after_steps_ > 0 && steps_done_ >= stop_after_steps_;
  // After every epoch when the interval is 0.
  bool write = last || pause || config_.checkpoint_interval_seconds() == 0;
  if (!write) {
    TPUG_ASSIGN_OR_RETURN(write, CheckpointDue(false));
  }
  if (write) {
    TPUG_RETURN_IF_ERROR(WriteCheckpoint(epoch + 1, nullptr));
    last_checkpoint_ = std::chrono::steady_clock::now();
  }
  if (stop) {
    spdlog::info("early stop: {} did not improve for {} epochs (best {} at epoch {})",
                 result_.metric_name, since_best_, Fmt(best_metric_), best_epoch_);
  }
  if (pause) stopped_ = true;
  return !stop && !pause;
}

bool TrainingRun::Validates(int epochs_done) const {
  const int every = std::max(1, config_.valid_every_epochs());
  return valid_.empty() || every == 1 || epochs_done % every == 0 ||
         epochs_done == config_.epochs();
}

bool TrainingRun::StopsAfter(int epochs_done) const {
  // Patience counts epochs, validated or not, since the best one; a run stops only at a
  // validation, so that --valid-every-epochs changes what a validation costs, not how long
  // a run waits for an improvement.
  return Patience() > 0 && Validates(epochs_done) && since_best_ >= Patience();
}

bool TrainingRun::Improves(double metric) const {
  return std::isfinite(metric) &&
         (best_epoch_ == 0 || !std::isfinite(best_metric_) ||
          (result_.higher_is_better ? metric > best_metric_ : metric < best_metric_));
}

Status TrainingRun::WriteModel(int epochs_run) {
  if (best_epoch_ == 0) {
    // The metric was undefined in every epoch (e.g. all validation graphs tie): keep the last.
    spdlog::warn("{} was undefined in every epoch; writing the last epoch's parameters",
                 result_.metric_name);
    if (!ema_.empty()) {
      best_params_ = ema_;
    } else {
      best_params_.assign(model_->parameters(), model_->parameters() + num_params_);
    }
    best_epoch_ = epochs_run;
  }
  std::copy(best_params_.begin(), best_params_.end(), model_->parameters());
  result_.epochs_run = epochs_run;
  result_.best_epoch = best_epoch_;
  result_.best_metric = best_metric_;
  // Rank 0 writes the model file; the others learn whether it worked.
  if (!root_) return comm_->Agree(Status::Ok());
  Status written = [&]() -> Status {
    ModelFile out;
    StoreModel(*model_, &out);
    *out.mutable_train_config() = config_;
    *out.mutable_data() = fingerprint_;
    TPUG_RETURN_IF_ERROR(AddSelfTests(*model_, config_.self_test_samples(),
                                      DeriveSeed(member_seed_, "self_test"), &out));
    TrainingSummary* summary = out.mutable_summary();
    summary->set_epochs_run(epochs_run);
    summary->set_best_epoch(best_epoch_);
    summary->set_metric_name(result_.metric_name);
    summary->set_best_metric(best_metric_);
    for (double v : result_.epoch_metric) summary->add_epoch_metric(v);
    for (const EpochRecord& r : epoch_records_) *summary->add_history() = r;
    return WriteModelFile(config_.output(), out, kFileKindModel);
  }();
  TPUG_RETURN_IF_ERROR(comm_->Agree(written));
  spdlog::info(
      "wrote {} (best epoch {}, {}={}) in {}", config_.output(), best_epoch_, result_.metric_name,
      Fmt(best_metric_),
      FormatDuration(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start_).count()));
  return Status::Ok();
}

}  // namespace internal

StatusOr<TrainResult> Train(const TrainConfig& config) {
  TPUG_RETURN_IF_ERROR(ValidateTrainConfig(config));
  if (config.ensemble_member_alone()) return internal::TrainMemberAlone(config);
  // ensemble_member > 0 trains that member alone (member 0 alone is the single model).
  if (config.ensemble_members() > 1 && config.ensemble_member() == 0) {
    return internal::TrainEnsemble(config);
  }
  internal::TrainingRun run;
  return run.Run(internal::ResumeIfInterrupted(config));
}

}  // namespace tpugraphs::train
