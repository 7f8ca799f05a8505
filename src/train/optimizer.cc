#include "tpugraphs/train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace tpugraphs::train {

double LrSchedule::LearningRate(int64_t step) const {
  if (step < 0) step = 0;
  if (warmup_steps > 0 && step < warmup_steps) {
    return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  if (kind == LrScheduleKind::kConstant) return base_lr;
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  const double t =
      std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  const double floor = base_lr * min_lr_ratio;
  return floor + (base_lr - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
}

double GlobalNorm(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return std::sqrt(sum);
}

Optimizer::Optimizer(const OptimizerOptions& options, int64_t num_parameters)
    : options_(options), m_(num_parameters, 0.0f), v_(num_parameters, 0.0f) {}

double Optimizer::Step(float* params, float* grad, double lr) {
  const int64_t n = num_parameters();
  const double norm = GlobalNorm(grad, n);
  if (options_.clip_norm > 0 && norm > options_.clip_norm) {
    const float scale = static_cast<float>(options_.clip_norm / norm);
    for (int64_t i = 0; i < n; ++i) grad[i] *= scale;
  }
  ++step_;
  const double b1 = options_.beta1, b2 = options_.beta2;
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(step_));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(step_));
  // p -= lr * m_hat / (sqrt(v_hat) + eps) with m_hat = m / bc1 and v_hat = v / bc2, computed as
  // (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps).
  const float step_size = static_cast<float>(lr / bc1);
  const float sqrt_bc2 = static_cast<float>(std::sqrt(bc2));
  const float eps = static_cast<float>(options_.epsilon);
  const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
  const float wd = static_cast<float>(options_.weight_decay);
  const bool decoupled = options_.kind == OptimizerKind::kAdamW;
  const float decay = static_cast<float>(1.0 - lr * options_.weight_decay);
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i];
    if (!decoupled && wd != 0.0f) g += wd * params[i];
    m_[i] = fb1 * m_[i] + (1.0f - fb1) * g;
    v_[i] = fb2 * v_[i] + (1.0f - fb2) * g * g;
    if (decoupled && wd != 0.0f) params[i] *= decay;
    params[i] -= step_size * m_[i] / (std::sqrt(v_[i]) / sqrt_bc2 + eps);
  }
  return norm;
}

Status Optimizer::Restore(int64_t step, std::vector<float> first_moment,
                          std::vector<float> second_moment) {
  if (step < 0) return FailedPreconditionError("optimizer state has a negative step count");
  if (static_cast<int64_t>(first_moment.size()) != num_parameters() ||
      static_cast<int64_t>(second_moment.size()) != num_parameters()) {
    return FailedPreconditionError("optimizer state holds " + std::to_string(first_moment.size()) +
                                   "/" + std::to_string(second_moment.size()) +
                                   " moments but the model has " +
                                   std::to_string(num_parameters()) + " parameters");
  }
  step_ = step;
  m_ = std::move(first_moment);
  v_ = std::move(second_moment);
  return Status::Ok();
}

}  // namespace tpugraphs::train
