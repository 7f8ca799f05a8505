#include "tpugraphs/train/train_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cmath>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/proto_fields.h"
#include "tpugraphs/model/cost_model.h"
#include "tpugraphs/model/losses.h"

namespace tpugraphs::train {
namespace {

// Collects the first parse error of a text proto with its line and column.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (message_.empty()) {
      message_ = "line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) +
                 ": " + message;
    }
  }
  void AddWarning(int, int, const std::string&) override {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

}  // namespace

std::string FlagName(const std::string& field) { return FieldFlagName(field); }

StatusOr<TrainConfig> ReadTrainConfigFile(const std::string& path) {
  TPUG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  TrainConfig config;
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &config)) {
    return InvalidArgumentError(path + ": not a valid TrainConfig text proto: " + errors.message());
  }
  return config;
}

Status ValidateTrainConfig(const TrainConfig& c) {
  auto bad = [](const std::string& field, const std::string& rule, double got) {
    return InvalidArgumentError(FlagName(field) + " " + rule + ", got " + Num(got));
  };
  if (c.resume().empty()) {
    if (c.dataset().empty()) return InvalidArgumentError("--dataset is required");
  }
  if (c.output().empty()) return InvalidArgumentError("--output is required");
  if (!(c.holdout_config_fraction() >= 0 && c.holdout_config_fraction() < 1)) {
    return bad("holdout_config_fraction", "must be in [0, 1)", c.holdout_config_fraction());
  }
  if (c.epochs() < 1) return bad("epochs", "must be >= 1", c.epochs());
  if (c.batch_graphs() < 1) return bad("batch_graphs", "must be >= 1", c.batch_graphs());
  if (c.configs_per_graph() < 2) {
    return bad("configs_per_graph", "must be >= 2 (a ranking needs two configs)",
               c.configs_per_graph());
  }
  if (c.patience() < 0) return bad("patience", "must be >= 0", c.patience());
  if (!(c.carve_valid_fraction() >= 0 && c.carve_valid_fraction() < 1)) {
    return bad("carve_valid_fraction", "must be in [0, 1)", c.carve_valid_fraction());
  }
  if (c.carve_patience() < 0) return bad("carve_patience", "must be >= 0", c.carve_patience());
  if (c.steps_per_epoch() < 0) {
    return bad("steps_per_epoch", "must be >= 0 (0 = one pass over the graphs)",
               c.steps_per_epoch());
  }
  if (!(c.min_config_passes() >= 0 && std::isfinite(c.min_config_passes()))) {
    return bad("min_config_passes", "must be >= 0 (0 = off)", c.min_config_passes());
  }
  if (!(c.learning_rate() > 0 && std::isfinite(c.learning_rate()))) {
    return bad("learning_rate", "must be > 0", c.learning_rate());
  }
  if (!(c.beta1() >= 0 && c.beta1() < 1)) return bad("beta1", "must be in [0, 1)", c.beta1());
  if (!(c.beta2() >= 0 && c.beta2() < 1)) return bad("beta2", "must be in [0, 1)", c.beta2());
  if (!(c.adam_epsilon() > 0)) return bad("adam_epsilon", "must be > 0", c.adam_epsilon());
  if (!(c.weight_decay() >= 0 && std::isfinite(c.weight_decay()))) {
    return bad("weight_decay", "must be >= 0", c.weight_decay());
  }
  if (!(c.clip_norm() >= 0 && std::isfinite(c.clip_norm()))) {
    return bad("clip_norm", "must be >= 0 (0 disables clipping)", c.clip_norm());
  }
  if (c.warmup_steps() < 0) return bad("warmup_steps", "must be >= 0", c.warmup_steps());
  if (!(c.min_lr_ratio() >= 0 && c.min_lr_ratio() <= 1)) {
    return bad("min_lr_ratio", "must be in [0, 1]", c.min_lr_ratio());
  }
  if (!(c.ema_decay() >= 0 && c.ema_decay() < 1)) {
    return bad("ema_decay", "must be in [0, 1)", c.ema_decay());
  }
  if (c.valid_every_epochs() < 1) {
    return bad("valid_every_epochs", "must be >= 1 (1 = every epoch)", c.valid_every_epochs());
  }
  if (c.valid_max_configs() < 0) {
    return bad("valid_max_configs", "must be >= 0 (0 = all)", c.valid_max_configs());
  }
  if (c.tile_top_k() < 1) return bad("tile_top_k", "must be >= 1", c.tile_top_k());
  if (c.eval_batch_configs() < 1) {
    return bad("eval_batch_configs", "must be >= 1", c.eval_batch_configs());
  }
  if (c.seed() < -1) return bad("seed", "must be >= 0, or -1 for a clock seed", c.seed());
  if (c.threads() < 0) return bad("threads", "must be >= 0 (0 = all cores)", c.threads());
  if (c.self_test_samples() < 0 || c.self_test_samples() > 16) {
    return bad("self_test_samples", "must be in [0, 16]", c.self_test_samples());
  }
  if (c.stop_after_steps() < 0) {
    return bad("stop_after_steps", "must be >= 0 (0 = no limit)", c.stop_after_steps());
  }
  if (!(c.checkpoint_interval_seconds() >= 0)) {
    return bad("checkpoint_interval_seconds", "must be >= 0", c.checkpoint_interval_seconds());
  }
  if (c.min_configs() < 2) return bad("min_configs", "must be >= 2", c.min_configs());
  if (c.ensemble_members() < 1 || c.ensemble_members() > kMaxEnsembleMembers) {
    return bad("ensemble_members", "must be in [1, " + std::to_string(kMaxEnsembleMembers) + "]",
               c.ensemble_members());
  }
  if (c.members_side_by_side() < 0) {
    return bad("members_side_by_side", "must be >= 0 (0 = automatic)", c.members_side_by_side());
  }
  if (c.ensemble_member_alone() && c.ensemble_members() < 2) {
    return bad("ensemble_member_alone", "needs ensemble_members > 1", c.ensemble_members());
  }
  if (c.ensemble_member_alone() && c.seed() == -1) {
    return bad("ensemble_member_alone",
               "needs a fixed seed (the members of one ensemble share it; -1 draws one per "
               "process)",
               c.seed());
  }
  if (c.ensemble_member() < 0 || c.ensemble_member() >= c.ensemble_members()) {
    return bad("ensemble_member", "must be in [0, ensemble_members - 1]", c.ensemble_member());
  }
  if (!c.collection().empty()) {
    Status s = ValidateCollection(c.collection());
    if (!s.ok()) return InvalidArgumentError("--collection: " + s.message());
  }
  if (Status s = ParseSplitList(c.train_split()); !s.ok()) {
    return InvalidArgumentError("--train-split: " + s.message());
  }
  if (Status s = ValidateSplit(c.valid_split()); !s.ok()) {
    return InvalidArgumentError("--valid-split: " + s.message());
  }
  Status s = model::ValidateModelSpec(c.model());
  if (!s.ok()) return InvalidArgumentError("model options (--hidden-dim, ...): " + s.message());
  s = model::ValidateLossSpec(c.loss());
  if (!s.ok()) return InvalidArgumentError("loss options (--loss-*): " + s.message());
  return Status::Ok();
}

OptimizerOptions OptimizerOptionsOf(const TrainConfig& c) {
  OptimizerOptions o;
  o.kind =
      c.optimizer() == TrainConfig::OPTIMIZER_ADAM ? OptimizerKind::kAdam : OptimizerKind::kAdamW;
  o.beta1 = c.beta1();
  o.beta2 = c.beta2();
  o.epsilon = c.adam_epsilon();
  o.weight_decay = c.weight_decay();
  o.clip_norm = c.clip_norm();
  return o;
}

LrSchedule LrScheduleOf(const TrainConfig& c, int64_t total_steps) {
  LrSchedule s;
  s.kind = c.lr_schedule() == TrainConfig::LR_SCHEDULE_CONSTANT ? LrScheduleKind::kConstant
                                                                : LrScheduleKind::kCosine;
  s.base_lr = c.learning_rate();
  s.warmup_steps = c.warmup_steps();
  s.total_steps = std::max<int64_t>(1, total_steps);
  s.min_lr_ratio = c.min_lr_ratio();
  return s;
}

std::string CheckpointPathOf(const TrainConfig& c) {
  return c.checkpoint().empty() ? c.output() + ".ckpt" : c.checkpoint();
}

std::string PreviousCheckpointPath(const std::string& checkpoint) {
  return checkpoint + ".prev";
}

std::string EnsembleMemberPathOf(const std::string& output, int member) {
  return output + ".member-" + std::to_string(member);
}

}  // namespace tpugraphs::train
