// First-order optimisers over one flat parameter buffer: Adam (Kingma & Ba, 2015) with optional
// coupled L2 weight decay, and AdamW (Loshchilov & Hutter, 2019) with decoupled weight decay;
// global-norm gradient clipping; and the learning-rate schedule (constant, or linear warmup then
// cosine decay).
//
// The whole model lives in one contiguous float array (CostModel::parameters()), so the update is
// a single loop. Moments are kept in float (as the parameters); the clipping norm is accumulated
// in double in index order, so a step is a pure function of (state, params, grad, lr).
//
// Thread-safety: an Optimizer is used by one thread at a time.
#ifndef TPUGRAPHS_TRAIN_OPTIMIZER_H_
#define TPUGRAPHS_TRAIN_OPTIMIZER_H_

#include <cstdint>
#include <vector>

#include "tpugraphs/common/status.h"

namespace tpugraphs::train {

enum class OptimizerKind {
  kAdam,   // weight decay (if any) is added to the gradient: g += wd * p (L2 regularisation)
  kAdamW,  // weight decay is applied to the parameters directly: p -= lr * wd * p
};

// Ranges are checked by ValidateTrainConfig (train/train_config.h), which names the flags.
struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kAdamW;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0.0;
  // Rescale the gradient so that its global L2 norm is at most this; <= 0 disables clipping.
  double clip_norm = 0.0;
};

enum class LrScheduleKind {
  kConstant,  // base_lr throughout (after warmup, if any)
  kCosine,    // linear warmup to base_lr, then cosine decay to base_lr * min_lr_ratio
};

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  double base_lr = 1e-3;
  int64_t warmup_steps = 0;   // linear ramp (step+1)/warmup_steps * base_lr over the first steps
  int64_t total_steps = 1;    // length of the run; the cosine reaches its floor here
  double min_lr_ratio = 0.0;  // cosine floor as a fraction of base_lr

  // Learning rate for the optimiser step with 0-based index `step`.
  double LearningRate(int64_t step) const;
};

class Optimizer {
 public:
  Optimizer(const OptimizerOptions& options, int64_t num_parameters);

  // One update. Clips `grad` in place (if clip_norm > 0) and updates `params` (both of
  // num_parameters() floats). Returns the gradient's global L2 norm before clipping.
  double Step(float* params, float* grad, double lr);

  int64_t num_parameters() const { return static_cast<int64_t>(m_.size()); }
  const OptimizerOptions& options() const { return options_; }
  // Number of Step() calls so far (the bias correction uses step() after the increment).
  int64_t step() const { return step_; }

  // State for checkpoints.
  const std::vector<float>& first_moment() const { return m_; }
  const std::vector<float>& second_moment() const { return v_; }
  // Restores a saved state. FailedPrecondition if the sizes do not match num_parameters().
  Status Restore(int64_t step, std::vector<float> first_moment, std::vector<float> second_moment);

 private:
  OptimizerOptions options_;
  int64_t step_ = 0;
  std::vector<float> m_, v_;
};

// Global L2 norm of a buffer, accumulated in double in index order.
double GlobalNorm(const float* x, int64_t n);

}  // namespace tpugraphs::train

#endif  // TPUGRAPHS_TRAIN_OPTIMIZER_H_
