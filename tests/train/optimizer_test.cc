#include "tpugraphs/train/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tpugraphs::train {
namespace {

// Runs three steps on one parameter starting at 1.0 with lr 0.1 and gradients 0.5, -1, 0.25.
std::vector<float> ThreeSteps(OptimizerKind kind, double weight_decay) {
  OptimizerOptions options;
  options.kind = kind;
  options.weight_decay = weight_decay;
  Optimizer opt(options, 1);
  float p = 1.0f;
  std::vector<float> out;
  for (float g : {0.5f, -1.0f, 0.25f}) {
    opt.Step(&p, &g, 0.1);
    out.push_back(p);
  }
  EXPECT_EQ(opt.step(), 3);
  return out;
}

TEST(OptimizerTest, AdamMatchesHandComputedSteps) {
  // Step 1: m = 0.05, v = 0.00025, m_hat = 0.5, v_hat = 0.25 -> p = 1 - 0.1 * 0.5 / 0.5 = 0.9.
  // Step 2: m = -0.055, v = 0.00124975, bc1 = 0.19, bc2 = 0.001999 -> m_hat = -0.28947,
  //         sqrt(v_hat) = 0.79069 -> p = 0.9 + 0.1 * 0.28947 / 0.79069 = 0.93661.
  std::vector<float> p = ThreeSteps(OptimizerKind::kAdam, 0.0);
  EXPECT_NEAR(p[0], 0.9, 1e-6);
  EXPECT_NEAR(p[1], 0.9366104, 1e-6);
  EXPECT_NEAR(p[2], 0.9502794, 1e-6);
}

TEST(OptimizerTest, AdamWeightDecayIsAddedToTheGradient) {
  // Step 1: g = 0.5 + 0.1 * 1 = 0.6; the first Adam step moves by lr * sign(g) = 0.1.
  std::vector<float> p = ThreeSteps(OptimizerKind::kAdam, 0.1);
  EXPECT_NEAR(p[0], 0.9, 1e-6);
  EXPECT_NEAR(p[1], 0.9252635, 1e-6);
  EXPECT_NEAR(p[2], 0.9247306, 1e-6);
}

TEST(OptimizerTest, AdamWDecaysParametersDirectly) {
  // Step 1: p = 1 * (1 - 0.1 * 0.1) - 0.1 * 0.5 / 0.5 = 0.89.
  std::vector<float> p = ThreeSteps(OptimizerKind::kAdamW, 0.1);
  EXPECT_NEAR(p[0], 0.89, 1e-6);
  EXPECT_NEAR(p[1], 0.9177104, 1e-6);
  EXPECT_NEAR(p[2], 0.9222023, 1e-6);
}

TEST(OptimizerTest, GlobalNormClipping) {
  OptimizerOptions options;
  options.clip_norm = 1.0;
  Optimizer opt(options, 2);
  std::vector<float> p = {0.0f, 0.0f};
  std::vector<float> g = {3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(opt.Step(p.data(), g.data(), 0.1), 5.0);
  EXPECT_NEAR(g[0], 0.6f, 1e-7);
  EXPECT_NEAR(g[1], 0.8f, 1e-7);
  // The first moment saw the clipped gradient: m = 0.1 * g_clipped.
  EXPECT_NEAR(opt.first_moment()[0], 0.06f, 1e-7);
  EXPECT_NEAR(opt.first_moment()[1], 0.08f, 1e-7);

  // A gradient below the threshold is untouched.
  std::vector<float> small = {0.3f, 0.4f};
  EXPECT_NEAR(opt.Step(p.data(), small.data(), 0.1), 0.5, 1e-7);
  EXPECT_EQ(small[0], 0.3f);
  EXPECT_EQ(small[1], 0.4f);
}

TEST(OptimizerTest, RestoreContinuesExactly) {
  OptimizerOptions options;
  Optimizer a(options, 3);
  std::vector<float> pa = {1.0f, -2.0f, 0.5f};
  std::vector<float> grads[4] = {
      {0.1f, 0.2f, -0.3f}, {0.4f, -0.1f, 0.0f}, {1.0f, 1.0f, 1.0f}, {-0.5f, 0.25f, 2.0f}};
  for (int s = 0; s < 2; ++s) a.Step(pa.data(), std::vector<float>(grads[s]).data(), 0.01);
  Optimizer b(options, 3);
  ASSERT_TRUE(b.Restore(a.step(), a.first_moment(), a.second_moment()).ok());
  std::vector<float> pb = pa;
  for (int s = 2; s < 4; ++s) {
    a.Step(pa.data(), std::vector<float>(grads[s]).data(), 0.01);
    b.Step(pb.data(), std::vector<float>(grads[s]).data(), 0.01);
  }
  EXPECT_EQ(pa, pb);
  EXPECT_FALSE(b.Restore(1, {0.0f}, {0.0f}).ok());
}

TEST(LrScheduleTest, ConstantWithWarmup) {
  LrSchedule s;
  s.base_lr = 0.5;
  EXPECT_DOUBLE_EQ(s.LearningRate(0), 0.5);
  EXPECT_DOUBLE_EQ(s.LearningRate(1000), 0.5);
  s.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(s.LearningRate(0), 0.125);
  EXPECT_DOUBLE_EQ(s.LearningRate(3), 0.5);
  EXPECT_DOUBLE_EQ(s.LearningRate(4), 0.5);
}

TEST(LrScheduleTest, CosineWithWarmup) {
  LrSchedule s;
  s.kind = LrScheduleKind::kCosine;
  s.base_lr = 1.0;
  s.warmup_steps = 10;
  s.total_steps = 110;
  s.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(s.LearningRate(0), 0.1);
  EXPECT_DOUBLE_EQ(s.LearningRate(9), 1.0);
  EXPECT_DOUBLE_EQ(s.LearningRate(10), 1.0);
  // Halfway through the decay: floor + (1 - floor) / 2 = 0.55.
  EXPECT_NEAR(s.LearningRate(60), 0.55, 1e-12);
  // A quarter: 0.1 + 0.9 * 0.5 * (1 + cos(pi / 4)).
  EXPECT_NEAR(s.LearningRate(35), 0.1 + 0.45 * (1 + std::sqrt(0.5)), 1e-12);
  EXPECT_NEAR(s.LearningRate(110), 0.1, 1e-12);
  EXPECT_NEAR(s.LearningRate(500), 0.1, 1e-12);
}

}  // namespace
}  // namespace tpugraphs::train
