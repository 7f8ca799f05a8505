#include "tpugraphs/synth/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tpugraphs/synth/program_generator.h"

namespace tpugraphs::synth {
namespace {

using Dims = std::vector<int64_t>;

// Builds tiny single-computation modules by hand.
class Builder {
 public:
  explicit Builder(const std::string& name = "entry") {
    comp_ = module_.add_computations();
    comp_->set_name(name);
    comp_->set_id(100);
  }

  int64_t Add(const std::string& opcode, const Dims& dims, std::vector<int64_t> operands,
              Dims m2m = {}, xla::PrimitiveType type = xla::BF16) {
    auto* inst = comp_->add_instructions();
    inst->set_id(next_id_);
    inst->set_name(opcode + std::to_string(next_id_));
    inst->set_opcode(opcode);
    inst->mutable_shape()->set_element_type(type);
    for (int64_t d : dims) inst->mutable_shape()->add_dimensions(d);
    if (m2m.empty()) {
      for (size_t i = 0; i < dims.size(); ++i)
        m2m.push_back(static_cast<int64_t>(dims.size() - 1 - i));
    }
    for (int64_t m : m2m) inst->mutable_shape()->mutable_layout()->add_minor_to_major(m);
    for (int64_t op : operands) inst->add_operand_ids(op);
    comp_->set_root_id(next_id_);
    return next_id_++;
  }
  // NHWC convolution with a [kh, kw, cin, cout] kernel ("same" padding, stride 1).
  int64_t Conv(int64_t x, int64_t kernel, const Dims& out, Dims m2m = {}) {
    const int64_t id = Add("convolution", out, {x, kernel}, m2m);
    auto* inst = comp_->mutable_instructions(comp_->instructions_size() - 1);
    for (int s = 0; s < 2; ++s) {
      auto* w = inst->mutable_window()->add_dimensions();
      w->set_size(3);
      w->set_stride(1);
      w->set_padding_low(1);
      w->set_padding_high(1);
    }
    auto* cdn = inst->mutable_convolution_dimension_numbers();
    cdn->set_input_feature_dimension(3);
    cdn->set_kernel_input_feature_dimension(2);
    cdn->set_kernel_output_feature_dimension(3);
    cdn->set_output_feature_dimension(3);
    for (int s = 0; s < 2; ++s) {
      cdn->add_input_spatial_dimensions(1 + s);
      cdn->add_kernel_spatial_dimensions(s);
      cdn->add_output_spatial_dimensions(1 + s);
    }
    inst->set_feature_group_count(1);
    inst->set_batch_group_count(1);
    return id;
  }
  xla::HloModuleProto Module() { return module_; }

 private:
  xla::HloModuleProto module_;
  xla::HloComputationProto* comp_;
  int64_t next_id_ = 1;
};

ModuleAnalysis Analyze(const xla::HloModuleProto& m) {
  auto a = AnalyzeModule(m, "test");
  EXPECT_TRUE(a.ok()) << a.status().message();
  return std::move(a).value();
}

// param -> conv1 -> negate -> conv2 -> tuple (two configurable convolutions in a chain).
xla::HloModuleProto ConvChain(const Dims& act) {
  Builder b;
  const int64_t x = b.Add("parameter", act, {});
  const int64_t k1 = b.Add("parameter", {3, 3, act[3], act[3]}, {});
  const int64_t c1 = b.Conv(x, k1, act);
  const int64_t e = b.Add("negate", act, {c1});
  const int64_t k2 = b.Add("parameter", {3, 3, act[3], act[3]}, {});
  const int64_t c2 = b.Conv(e, k2, act);
  b.Add("tuple", {}, {c2}, {}, xla::TUPLE);
  return b.Module();
}

TEST(CostModelTest, PaddedBytesRoundsTheTwoMinorDimsToTiles) {
  TpuConstants k;
  EXPECT_DOUBLE_EQ(PaddedBytes({8, 128}, {1, 0}, 2, k), 8 * 128 * 2);
  EXPECT_DOUBLE_EQ(PaddedBytes({8, 3}, {1, 0}, 4, k), 8 * 128 * 4);    // minor 3 -> 128
  EXPECT_DOUBLE_EQ(PaddedBytes({3, 128}, {1, 0}, 4, k), 8 * 128 * 4);  // second-minor 3 -> 8
  EXPECT_DOUBLE_EQ(PaddedBytes({5, 3, 128}, {2, 1, 0}, 1, k), 5 * 8 * 128);
  EXPECT_DOUBLE_EQ(PaddedBytes({5, 3, 128}, {1, 2, 0}, 1, k), 5 * 128 * 128);
  EXPECT_DOUBLE_EQ(PaddedBytes({}, {}, 4, k), 4);
}

TEST(CostModelTest, ConfigurableNodesAreConvDotReshapeInNodeOrder) {
  Builder b;
  const int64_t x = b.Add("parameter", {4, 64}, {});
  const int64_t r = b.Add("reshape", {4, 8, 8}, {x});
  const int64_t y = b.Add("reshape", {4, 64}, {r});
  const int64_t w = b.Add("parameter", {64, 32}, {});
  b.Add("dot", {4, 32}, {y, w});
  ModuleAnalysis a = Analyze(b.Module());
  EXPECT_EQ(ConfigurableNodes(a), (std::vector<int64_t>{1, 2, 4}));
}

TEST(CostModelTest, SmallMinorDimensionIsSlowerThanLaneSizedOne) {
  // Activation [16, 64, 3, 128]: putting the size-3 dim minor wastes 125 of 128 lanes.
  const Dims act = {16, 64, 3, 128};
  ModuleAnalysis a = Analyze(ConvChain(act));
  LayoutCostModel model(a, ConfigurableNodes(a));
  ASSERT_EQ(model.configurable().size(), 2u);
  std::vector<NodeLayout> good(2), bad(2);
  good[0] = {{3, 2, 1, 0}, {}, {}};  // feature (128) minor
  bad[0] = {{2, 3, 1, 0}, {}, {}};   // the size-3 dim minor
  const double t_good = model.RuntimeNs(good), t_bad = model.RuntimeNs(bad);
  EXPECT_DOUBLE_EQ(t_good, model.RuntimeNs({}));  // equal to the proto layout
  EXPECT_GT(t_bad, 1.5 * t_good);
}

TEST(CostModelTest, LayoutMismatchBetweenProducerAndConsumerCostsACopy) {
  const Dims act = {8, 32, 32, 128};
  ModuleAnalysis a = Analyze(ConvChain(act));
  // Only conv2 is configurable: its input comes from `negate` in the proto layout.
  LayoutCostModel model(a, {5});
  const double base = model.RuntimeNs({});
  const Dims other = {3, 1, 2, 0};  // H and W swapped: same padding, different layout
  const double mismatch = model.RuntimeNs({{{}, other, {}}});
  TpuConstants k;
  const double copy_ns =
      (PaddedBytes(act, {3, 2, 1, 0}, 2, k) + PaddedBytes(act, other, 2, k)) / k.hbm_bytes_per_ns +
      k.copy_overhead_ns;
  EXPECT_GE(mismatch - base, copy_ns);
  // With both convolutions configurable, conv1 can produce the layout conv2 reads: no copy, so
  // matching layouts are cheaper than the mismatch.
  LayoutCostModel both(a, ConfigurableNodes(a));
  const double matched = both.RuntimeNs({{other, {}, {}}, {{}, other, {}}});
  const double mismatched = both.RuntimeNs({{{3, 2, 1, 0}, {}, {}}, {{}, other, {}}});
  EXPECT_LT(matched, mismatched);
}

TEST(CostModelTest, WithoutCrossNodeTermsANodesCostIgnoresItsProducersConfiguration) {
  const Dims act = {8, 32, 32, 128};
  ModuleAnalysis a = Analyze(ConvChain(act));
  TpuConstants local;
  local.cross_node_terms = false;
  LayoutCostModel model(a, ConfigurableNodes(a), local);
  const Dims other = {3, 1, 2, 0};
  const Dims proto = {3, 2, 1, 0};
  // conv2 reads `other`: with cross-node terms off it pays the copy from the proto layout
  // whatever conv1 chose (conv1's own cost is the same for both layouts: same padding, the
  // region ends at conv2's input), so conv1's choice changes nothing.
  const double after_other = model.RuntimeNs({{other, {}, {}}, {{}, other, {}}});
  const double after_proto = model.RuntimeNs({{proto, {}, {}}, {{}, other, {}}});
  EXPECT_DOUBLE_EQ(after_other, after_proto);
  // With them on (the default) the matching producer saves the copy.
  LayoutCostModel cross(a, ConfigurableNodes(a));
  EXPECT_LT(cross.RuntimeNs({{other, {}, {}}, {{}, other, {}}}),
            cross.RuntimeNs({{proto, {}, {}}, {{}, other, {}}}));
  // A configuration of one node alone costs the same under both models.
  EXPECT_DOUBLE_EQ(model.RuntimeNs({{}, {{}, other, {}}}), cross.RuntimeNs({{}, {{}, other, {}}}));
}

TEST(CostModelTest, MoreWorkIsSlower) {
  ModuleAnalysis small = Analyze(ConvChain({8, 32, 32, 128}));
  ModuleAnalysis big = Analyze(ConvChain({32, 32, 32, 128}));
  LayoutCostModel ms(small, ConfigurableNodes(small)), mb(big, ConfigurableNodes(big));
  EXPECT_GT(mb.RuntimeNs({}), 3.0 * ms.RuntimeNs({}));
}

TEST(CostModelTest, WhileBodiesCountTripCountTimes) {
  xla::HloModuleProto m = GenerateLayoutProgram(600, 21, "p");
  ModuleAnalysis a = Analyze(m);
  int bodies = 0;
  for (const auto& c : a.computations) {
    if (c.name.find("while_body") != std::string::npos) {
      ++bodies;
      EXPECT_EQ(c.executions, TpuConstants{}.while_trip_count);
    }
    if (c.fused) {
      EXPECT_EQ(c.executions, 0);
    }
  }
  EXPECT_EQ(a.computations.back().executions, 1);
  (void)bodies;
}

TEST(CostModelTest, RealUnetAnalysesAndConfigsDiffer) {
  // The runtime depends on the graph: the same "swap the two minor dims of every output"
  // configuration changes two different programs by different factors.
  xla::HloModuleProto p1 = GenerateLayoutProgram(1500, 1, "a");
  xla::HloModuleProto p2 = GenerateLayoutProgram(1500, 2, "b");
  std::vector<double> ratios;
  for (const auto* m : {&p1, &p2}) {
    ModuleAnalysis a = Analyze(*m);
    LayoutCostModel model(a, ConfigurableNodes(a));
    std::vector<NodeLayout> swap(model.configurable().size());
    for (size_t i = 0; i < swap.size(); ++i) {
      TensorLayout l = model.DefaultOutputLayout(i);
      if (l.size() >= 2) std::swap(l[0], l[1]);
      swap[i] = {l};
    }
    ratios.push_back(model.RuntimeNs(swap) / model.RuntimeNs({}));
    EXPECT_NE(ratios.back(), 1.0);
  }
  EXPECT_GT(std::abs(ratios[0] - ratios[1]), 1e-3);
}

// Elementwise tile kernel: entry parameter -> fusion(exp) of `dims`.
xla::HloModuleProto ElementwiseKernel(const Dims& dims) {
  xla::HloModuleProto m;
  auto* fused = m.add_computations();
  fused->set_name("fused_computation");
  fused->set_id(1);
  auto add = [](xla::HloComputationProto* c, int64_t id, const std::string& op, const Dims& d,
                std::vector<int64_t> ops) {
    auto* i = c->add_instructions();
    i->set_id(id);
    i->set_opcode(op);
    i->set_name(op + std::to_string(id));
    i->mutable_shape()->set_element_type(xla::F32);
    for (int64_t x : d) i->mutable_shape()->add_dimensions(x);
    for (size_t k = 0; k < d.size(); ++k)
      i->mutable_shape()->mutable_layout()->add_minor_to_major(d.size() - 1 - k);
    for (int64_t o : ops) i->add_operand_ids(o);
    c->set_root_id(id);
    return i;
  };
  add(fused, 1, "parameter", dims, {});
  add(fused, 2, "exponential", dims, {1});
  auto* entry = m.add_computations();
  entry->set_name("entry");
  entry->set_id(2);
  add(entry, 3, "parameter", dims, {});
  add(entry, 4, "fusion", dims, {3})->add_called_computation_ids(1);
  return m;
}

tpu_graphs::TileSizeConfig Tile(const Dims& out) {
  tpu_graphs::TileSizeConfig c;
  for (int64_t v : out) c.add_output_bounds(v);
  return c;
}

TEST(TileCostModelTest, OverflowingFastMemoryIsSlow) {
  const Dims dims = {4096, 4096};
  ModuleAnalysis a = Analyze(ElementwiseKernel(dims));
  auto model = TileCostModel::Create(a, "k");
  ASSERT_TRUE(model.ok());
  TpuConstants k;
  const auto fits_small = Tile({256, 1024});
  const auto overflows = Tile({2048, 4096});
  ASSERT_LE(model->WorkingSetBytes(fits_small), k.fast_memory_bytes);
  ASSERT_GT(model->WorkingSetBytes(overflows), k.fast_memory_bytes);
  // Fewer, bigger tiles would be cheaper, but overflowing fast memory makes them slow.
  EXPECT_GT(model->RuntimeNs(overflows), 2.0 * model->RuntimeNs(fits_small));
}

TEST(TileCostModelTest, PaddingWastePerTileOverheadAndWork) {
  ModuleAnalysis a = Analyze(ElementwiseKernel({1000, 1000}));
  auto model = TileCostModel::Create(a, "k").value();
  // A minor tile that covers the 1000 columns once against 384-column tiles that cover 1152.
  const double dividing = model.RuntimeNs(Tile({8, 1000}));
  const double wasteful = model.RuntimeNs(Tile({8, 384}));
  EXPECT_GT(wasteful, dividing);
  // Tiny tiles pay the per-tile overhead many times.
  EXPECT_GT(model.RuntimeNs(Tile({1, 128})), 3.0 * model.RuntimeNs(Tile({64, 1000})));
  // More work is slower under the same configuration.
  ModuleAnalysis big = Analyze(ElementwiseKernel({4000, 1000}));
  auto big_model = TileCostModel::Create(big, "k").value();
  EXPECT_GT(big_model.RuntimeNs(Tile({64, 1000})), 2.0 * model.RuntimeNs(Tile({64, 1000})));
}

TEST(NoiseTest, BoundedSeededAndCentred) {
  const double sigma = 0.05;
  double sum_log = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double f = NoiseFactor(1000 + i, sigma);
    EXPECT_GE(f, std::exp(-3 * sigma));
    EXPECT_LE(f, std::exp(3 * sigma));
    sum_log += std::log(f);
  }
  EXPECT_NEAR(sum_log / n, 0.0, 0.002);
  EXPECT_EQ(NoiseFactor(42, sigma), NoiseFactor(42, sigma));
  EXPECT_NE(NoiseFactor(42, sigma), NoiseFactor(43, sigma));
  EXPECT_EQ(NoiseFactor(42, 0.0), 1.0);
}

TEST(CostModelTest, AnalyzeRejectsBrokenModules) {
  Builder b;
  const int64_t x = b.Add("parameter", {4}, {});
  b.Add("negate", {4}, {x + 100});
  auto a = AnalyzeModule(b.Module(), "broken.pb");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("broken.pb"), std::string::npos);
  xla::HloModuleProto m = b.Module();
  m.mutable_computations(0)->set_root_id(999);
  EXPECT_FALSE(AnalyzeModule(m, "x").ok());
  EXPECT_FALSE(AnalyzeModule(xla::HloModuleProto(), "x").ok());
}

}  // namespace
}  // namespace tpugraphs::synth
