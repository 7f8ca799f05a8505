// Graph Segment Training core (train/gst.h): history table, stale embedding dropout, the
// segment combination and its adjoint (finite differences in double), and the reductions of
// GST to full-graph training.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "tpugraphs/common/rng.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/model/layout_flow.h"
#include "tpugraphs/model/loop_depth.h"
#include "tpugraphs/model/losses.h"
#include "tpugraphs/model/segment.h"
#include "tpugraphs/train/gst.h"

namespace tpugraphs::train {
namespace {

using model::ConfigBatch;
using model::CostModel;

TEST(GstHistoryTableTest, PushPullAgeAndReplace) {
  HistoryTable t(3);
  float row[3] = {0, 0, 0};
  int64_t age = -1;
  EXPECT_FALSE(t.Pull(0, 0, 5, row, &age));
  const float a[3] = {1, 2, 3}, b[3] = {4, 5, 6};
  t.Push(7, 2, a, 10);
  t.Push(7, 3, b, 11);
  ASSERT_TRUE(t.Pull(7, 2, 14, row, &age));
  EXPECT_EQ(age, 4);
  EXPECT_EQ(row[0], 1);
  EXPECT_EQ(row[2], 3);
  EXPECT_FALSE(t.Pull(7, 4, 14, row, &age));
  EXPECT_FALSE(t.Pull(6, 2, 14, row, &age));
  t.Push(7, 2, b, 13);  // a newer push replaces the row and resets its age
  ASSERT_TRUE(t.Pull(7, 2, 14, row, &age));
  EXPECT_EQ(age, 1);
  EXPECT_EQ(row[1], 5);
  EXPECT_EQ(t.entries(), 2);
  EXPECT_EQ(t.bytes(), 2 * 3 * 4);
  t.Clear();
  EXPECT_EQ(t.entries(), 0);
  EXPECT_FALSE(t.Pull(7, 2, 14, row, &age));
}

TEST(GstDropoutTest, KeepProbabilityAndSeeding) {
  for (double p : {0.1, 0.5, 0.9}) {
    const int64_t n = 200000;
    const auto m = StaleDropoutMask(n, p, 42);
    double kept = 0;
    for (uint8_t x : m) kept += x;
    const double sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(kept, n * p, 5 * sd) << "p = " << p;
  }
  EXPECT_EQ(StaleDropoutMask(1000, 0.5, 1), StaleDropoutMask(1000, 0.5, 1));
  EXPECT_NE(StaleDropoutMask(1000, 0.5, 1), StaleDropoutMask(1000, 0.5, 2));
  for (uint8_t x : StaleDropoutMask(1000, 1.0, 3)) EXPECT_EQ(x, 1);
  for (uint8_t x : StaleDropoutMask(1000, 0.0, 3)) EXPECT_EQ(x, 0);
}

// Central finite differences of f = sum(W .* Combine(parts)) w.r.t. the fresh parts' values,
// against SplitSegmentGradient, in double.
TEST(GstCombineTest, AdjointMatchesFiniteDifferences) {
  for (int variant = 0; variant < 3; ++variant) {
    ModelSpec spec;
    spec.set_hidden_dim(5);
    if (variant == 1) spec.set_config_pooling(ModelSpec::CONFIG_POOLING_SUM);
    if (variant == 2) spec.set_pool_mean(false);
    const PoolBlocks pb = PoolBlocksOf(spec);
    const int64_t k = 3, D = pb.width, n = 50, nc = 7;
    Rng rng(11 + variant);
    std::vector<std::vector<double>> vals(4);
    std::vector<SegmentPart<double>> parts(4);
    const int64_t nodes[4] = {10, 20, 15, 5}, cn[4] = {2, 0, 4, 1};
    for (int i = 0; i < 4; ++i) {
      parts[i].rows = i == 3 ? 1 : k;  // part 3 is a table row weighted 1/p
      parts[i].weight = i == 3 ? 2.0 : 1.0;
      parts[i].nodes = nodes[i];
      parts[i].config_nodes = cn[i];
      vals[i].resize(parts[i].rows * D);
      for (double& v : vals[i]) v = rng.Normal();
      parts[i].g = vals[i].data();
    }
    std::vector<double> W(k * D);
    for (double& w : W) w = rng.Normal();
    auto f = [&]() {
      std::vector<double> G(k * D);
      std::vector<int32_t> am;
      CombineSegments(pb, k, n, nc, parts, G.data(), &am);
      double s = 0;
      for (int64_t i = 0; i < k * D; ++i) s += W[i] * G[i];
      return s;
    };
    std::vector<double> G(k * D);
    std::vector<int32_t> am;
    CombineSegments(pb, k, n, nc, parts, G.data(), &am);
    // Direct check of the formula for one entry of each block.
    if (pb.mean >= 0) {
      double want = 0;
      for (int i = 0; i < 4; ++i) {
        want += parts[i].weight * nodes[i] / double(n) * vals[i][(i == 3 ? 0 : 1) * D + pb.mean];
      }
      EXPECT_NEAR(G[1 * D + pb.mean], want, 1e-12);
    }
    for (int i = 0; i < 3; ++i) {
      std::vector<double> dGi(k * D);
      SplitSegmentGradient(pb, k, n, nc, parts, am, i, W.data(), dGi.data());
      for (int64_t j = 0; j < k * D; ++j) {
        const double h = 1e-6, x0 = vals[i][j];
        vals[i][j] = x0 + h;
        const double fp = f();
        vals[i][j] = x0 - h;
        const double fm = f();
        vals[i][j] = x0;
        EXPECT_NEAR(dGi[j], (fp - fm) / (2 * h), 1e-7)
            << "variant " << variant << " part " << i << " entry " << j;
      }
    }
  }
}

// A layout graph with locality (edges to recent nodes), several configurable nodes and
// node_splits.
Graph MakeGraph(int64_t n, int64_t configs, uint64_t seed) {
  Rng rng(seed);
  Graph g;
  g.name = "gst" + std::to_string(seed);
  g.kind = TaskKind::kLayout;
  g.collection = "layout:synth:random";
  g.split = "train";
  for (int64_t v = 0; v < n; ++v) {
    g.node_opcode.push_back(static_cast<uint8_t>(1 + rng.UniformInt(20)));
    for (int f = 0; f < kNodeFeatureCount; ++f) {
      g.node_feat.push_back(f % 5 == 0 ? static_cast<float>(rng.UniformInt(64)) : 0.0f);
    }
  }
  for (int64_t u = 1; u < n; ++u) {
    const int64_t deg = 1 + static_cast<int64_t>(rng.UniformInt(2));
    for (int64_t d = 0; d < deg; ++d) {
      g.edge_index.push_back(u);
      g.edge_index.push_back(std::max<int64_t>(0, u - 1 - static_cast<int64_t>(rng.UniformInt(8))));
    }
  }
  g.node_splits = {0, n / 4, n / 2, (3 * n) / 4, n};
  for (int64_t v = 2; v < n; v += 7) g.node_config_ids.push_back(v);
  const int64_t nc = g.num_config_nodes();
  g.num_configs = configs;
  for (int64_t c = 0; c < configs; ++c) {
    double cost = 0;
    for (int64_t j = 0; j < nc; ++j) {
      for (int f = 0; f < kLayoutConfigFeatureCount; ++f) {
        const int v = f < 6 ? static_cast<int>(rng.UniformInt(5)) - 1 : -1;
        g.node_config_feat.push_back(static_cast<int8_t>(v));
        if (f < 2) cost += (j % 3 + 1) * (v + 1);
      }
    }
    g.config_runtime.push_back(static_cast<int64_t>(1e5 * (10 + cost)));
  }
  return g;
}

std::unique_ptr<CostModel> MakeModel(const Graph& g, int64_t segment_size, int pooling,
                                     bool tensor_features = false, bool loop_depth = false,
                                     bool flow_features = false) {
  ModelSpec spec;
  spec.set_hidden_dim(8);
  spec.set_opcode_embedding_dim(4);
  spec.set_head_hidden_dim(8);
  spec.set_num_layers(2);
  spec.set_segment_size(segment_size);
  spec.set_config_pooling(pooling == 1 ? ModelSpec::CONFIG_POOLING_SUM
                                       : ModelSpec::CONFIG_POOLING_MEAN);
  spec.set_layout_tensor_features(tensor_features);
  spec.set_config_loop_depth(loop_depth);
  spec.set_layout_flow_features(flow_features);
  auto m = CostModel::Create(spec, TaskKind::kLayout);
  EXPECT_TRUE(m.ok());
  (*m)->transform().Accumulate(g);
  EXPECT_TRUE((*m)->transform().Finalize().ok());
  (*m)->InitParameters(5);
  return std::move(m).value();
}

ConfigBatch FullBatch(const Graph& g, int64_t k) {
  ConfigBatch b;
  b.num_configs = k;
  b.layout_feat.assign(g.node_config_feat.begin(),
                       g.node_config_feat.begin() + k * g.num_config_nodes() * 18);
  return b;
}

// Full-graph loss and gradient on CostModel::Prepare(g) (which drops the cut edges).
double FullLoss(const CostModel& m, const Graph& g, const ConfigBatch& b, const double* rt,
                const LossSpec& loss, std::vector<float>* grad) {
  auto pg = m.Prepare(g);
  EXPECT_TRUE(pg.ok()) << pg.status().message();
  std::vector<float> scores(b.num_configs), ds(b.num_configs);
  auto tape = m.NewTape();
  m.Forward(**pg, b, scores.data(), tape.get());
  const double l = model::ComputeLoss(loss, scores.data(), rt, b.num_configs, ds.data());
  grad->assign(m.num_parameters(), 0.0f);
  m.Backward(**pg, b, *tape, ds.data(), grad->data());
  return l;
}

void ExpectGradNear(const std::vector<float>& a, const std::vector<float>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  double scale = 0;
  for (float x : b) scale = std::max(scale, std::abs(double(x)));
  ASSERT_GT(scale, 0);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * std::max(1.0, scale)) << "parameter " << i;
  }
}

TEST(GstReductionTest, OneSegmentEqualsFullGraphTraining) {
  const Graph g = MakeGraph(90, 12, 1);
  for (int pooling = 0; pooling < 2; ++pooling) {
    auto m = MakeModel(g, 0, pooling);  // segment_size 0: one segment = the whole graph
    auto sg = PrepareSegmented(*m, g);
    ASSERT_TRUE(sg.ok()) << sg.status().message();
    ASSERT_EQ(sg->num_segments(), 1);
    const ConfigBatch b = FullBatch(g, 12);
    std::vector<double> rt(g.config_runtime.begin(), g.config_runtime.end());
    LossSpec loss;
    loss.set_listmle_weight(0.5);
    std::vector<float> want;
    const double want_loss = FullLoss(*m, g, b, rt.data(), loss, &want);
    HistoryTable table(m->head_input_dim());
    GstOptions opt;
    opt.keep_probability = 0.5;
    std::vector<float> got(m->num_parameters(), 0.0f);
    auto st = GstStep(*m, *sg, 0, b, rt.data(), loss, opt, 1, 9, &table, got.data());
    ASSERT_TRUE(st.ok()) << st.status().message();
    EXPECT_EQ(st->sampled, 1);
    EXPECT_NEAR(st->loss, want_loss, 1e-6 * std::max(1.0, std::abs(want_loss)));
    // The sampled segment's gradient is formed in parts (its chunks, its shared pass) summed in
    // a fixed order, where Backward accumulates into one buffer: up to ~2e-6 of the largest
    // gradient apart.
    ExpectGradNear(got, want, 1e-5);
  }
}

TEST(GstReductionTest, AllSegmentsSampledEqualsFullGraphOnTheCutGraph) {
  const Graph plain = MakeGraph(160, 10, 2);
  // The same graph with two nested while loops: node 100 runs the computation rooted at 60,
  // node 130 the one rooted at 30, so loop depths vary across segments. Segments must take
  // them from the whole graph, as Prepare does.
  Graph looped = plain;
  for (auto [w, root] : {std::pair<int64_t, int64_t>{100, 60}, {130, 30}}) {
    looped.node_opcode[w] = model::kWhileOpcodeId;
    looped.node_feat[root * kNodeFeatureCount] = 1.0f;
    looped.edge_index.push_back(w);
    looped.edge_index.push_back(root);
  }
  const std::vector<int32_t> depth = model::ConfigNodeLoopDepths(looped);
  ASSERT_EQ(*std::max_element(depth.begin(), depth.end()), 2);
  ASSERT_EQ(*std::min_element(depth.begin(), depth.end()), 0);
  // The same graph with every array [8, 128] in layout {1, 0}: layouts flow through the
  // elementwise opcodes, and configurable nodes read others' layouts within a segment and across
  // segments (the cut graph and the segments both drop the latter).
  Graph flowing = plain;
  for (int64_t v = 0; v < flowing.num_nodes(); ++v) {
    float* f = flowing.node_feat.data() + v * kNodeFeatureCount;
    for (int i = 0; i < 6; ++i) {
      f[21 + i] = i == 0 ? 8.0f : (i == 1 ? 128.0f : 0.0f);
      f[134 + i] = i < 2 ? static_cast<float>(1 - i) : -1.0f;
    }
  }
  // MakeGraph sets only output layouts; here inputs get {1, 0}, {0, 1} or the default as well.
  Rng input_rng(17);
  for (size_t q = 0; q < flowing.node_config_feat.size(); q += kLayoutConfigFeatureCount) {
    const int pick = static_cast<int>(input_rng.UniformInt(3));
    flowing.node_config_feat[q + 6] = static_cast<int8_t>(pick == 0 ? -1 : pick - 1);
    flowing.node_config_feat[q + 7] = static_cast<int8_t>(pick == 0 ? -1 : 2 - pick);
  }
  const model::LayoutFlow flow = model::ConfigLayoutFlow(flowing);
  int sources = 0;
  for (int32_t s : flow.source) sources += s >= 0;
  ASSERT_GE(sources, 10);
  for (int pooling = 0; pooling < 5; ++pooling) {
    // pooling 2: config mean with the layout tensor features; 3: with the loop depth; 4: with
    // the layout flow features
    const Graph& g = pooling == 3 ? looped : (pooling == 4 ? flowing : plain);
    auto m = MakeModel(g, 25, pooling == 1 ? 1 : 0, pooling == 2, pooling == 3, pooling == 4);
    auto sg = PrepareSegmented(*m, g);
    ASSERT_TRUE(sg.ok());
    const int64_t S = sg->num_segments();
    ASSERT_GE(S, 7);
    const ConfigBatch b = FullBatch(g, 10);
    std::vector<double> rt(g.config_runtime.begin(), g.config_runtime.end());
    LossSpec loss;
    std::vector<float> want;
    const double want_loss = FullLoss(*m, g, b, rt.data(), loss, &want);
    std::vector<int64_t> all(S);
    for (int64_t s = 0; s < S; ++s) all[s] = s;
    GstOptions opt;
    opt.fresh_context = true;
    std::vector<float> got(m->num_parameters(), 0.0f);
    auto st = GstStep(*m, *sg, 0, b, rt.data(), loss, opt, 1, 3, nullptr, got.data(), &all);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->sampled, S);
    EXPECT_NEAR(st->loss, want_loss, 1e-5 * std::max(1.0, std::abs(want_loss)));
    // Float sums over ~S segments against one pass: with FMA (-march=native) and the kernels'
    // per-row LayerNorm sums the two orders differ by up to ~2e-5 of the largest gradient.
    ExpectGradNear(got, want, 5e-5);
    // Inference: segment by segment in chunks equals the whole (cut) graph's scores.
    auto pg = m->Prepare(g);
    std::vector<float> s_full(10), s_gst(10);
    m->Forward(**pg, b, s_full.data(), nullptr);
    GstScore(*m, *sg, b, 3, s_gst.data());
    for (int c = 0; c < 10; ++c) EXPECT_NEAR(s_gst[c], s_full[c], 1e-5) << c;
  }
}

TEST(GstReductionTest, FreshContextForwardIsExactWithOneSampledSegment) {
  // With fresh (no-tape) context the loss equals the full graph's whatever segment is sampled;
  // only the gradient is partial.
  const Graph g = MakeGraph(120, 8, 3);
  auto m = MakeModel(g, 30, 0);
  auto sg = PrepareSegmented(*m, g);
  ASSERT_TRUE(sg.ok());
  const ConfigBatch b = FullBatch(g, 8);
  std::vector<double> rt(g.config_runtime.begin(), g.config_runtime.end());
  LossSpec loss;
  std::vector<float> full;
  const double want_loss = FullLoss(*m, g, b, rt.data(), loss, &full);
  GstOptions opt;
  opt.fresh_context = true;
  std::vector<float> sum(m->num_parameters(), 0.0f);
  for (int64_t s = 0; s < sg->num_segments(); ++s) {
    std::vector<int64_t> one = {s};
    std::vector<float> grad(m->num_parameters(), 0.0f);
    auto st = GstStep(*m, *sg, 0, b, rt.data(), loss, opt, 1, 3, nullptr, grad.data(), &one);
    ASSERT_TRUE(st.ok());
    EXPECT_NEAR(st->loss, want_loss, 1e-5);
    EXPECT_EQ(st->fresh, sg->num_segments() - 1);
    // The segments' gradients below the head add up to the full gradient; the head's gradient
    // is counted once per step.
    for (int64_t p = 0; p < m->head_parameter_offset(); ++p) sum[p] += grad[p];
    if (s == 0) {
      for (int64_t p = m->head_parameter_offset(); p < m->num_parameters(); ++p) sum[p] = grad[p];
    }
  }
  ExpectGradNear(sum, full, 1e-5);
}

TEST(GstStepTest, TableRowsAreUsedStaleAndDropped) {
  const Graph g = MakeGraph(200, 6, 4);
  auto m = MakeModel(g, 40, 0);
  auto sg = PrepareSegmented(*m, g);
  ASSERT_TRUE(sg.ok());
  // node_splits {0, 50, 100, 150, 200} with cap 40: every quarter is cut in two.
  ASSERT_EQ(sg->num_segments(), 8);
  const ConfigBatch b = FullBatch(g, 6);
  std::vector<double> rt(g.config_runtime.begin(), g.config_runtime.end());
  LossSpec loss;
  HistoryTable table(m->head_input_dim());
  GstOptions opt;
  opt.segments_per_step = 2;
  opt.keep_probability = 1.0;
  std::vector<float> grad(m->num_parameters(), 0.0f);
  auto s1 = GstStep(*m, *sg, 3, b, rt.data(), loss, opt, 1, 100, &table, grad.data());
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(s1->sampled, 2);
  EXPECT_EQ(s1->fresh, 6);  // empty table: computed without a tape, then pushed
  EXPECT_EQ(s1->stale, 0);
  EXPECT_EQ(table.entries(), 8);
  auto s2 = GstStep(*m, *sg, 3, b, rt.data(), loss, opt, 3, 101, &table, grad.data());
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(s2->sampled, 2);
  EXPECT_EQ(s2->fresh, 0);
  EXPECT_EQ(s2->stale, 6);
  EXPECT_EQ(s2->dropped, 0);
  EXPECT_EQ(s2->staleness_sum, 6 * 2);  // every row was pushed at step 1, pulled at step 3
  // Stale embedding dropout: seeded, about half dropped, same outcome for the same seed.
  opt.keep_probability = 0.5;
  int64_t dropped = 0, stale = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    std::vector<float> g1(m->num_parameters(), 0.0f), g2(m->num_parameters(), 0.0f);
    auto a = GstStep(*m, *sg, 3, b, rt.data(), loss, opt, 4, 200 + seed, &table, g1.data());
    auto c = GstStep(*m, *sg, 3, b, rt.data(), loss, opt, 4, 200 + seed, &table, g2.data());
    ASSERT_TRUE(a.ok() && c.ok());
    EXPECT_EQ(a->stale + a->dropped, 6);
    EXPECT_EQ(a->dropped, c->dropped);
    EXPECT_EQ(a->loss, c->loss);
    EXPECT_EQ(g1, g2);
    dropped += a->dropped;
    stale += a->stale;
  }
  EXPECT_GT(dropped, 40 * 6 / 4);
  EXPECT_GT(stale, 40 * 6 / 4);
}

// Four GST steps on graph key 3 (the first fills the table, the rest use it), seeds
// seed_base + step, the gradients added up: what a pool or the chunking must not change.
struct FourStepRun {
  std::vector<float> grad;
  std::vector<double> losses;
  std::vector<int64_t> counts;  // per step: sampled, fresh, stale, dropped
  std::vector<float> table;
};
FourStepRun FourSteps(const CostModel& m, const SegmentedGraph& sg, const ConfigBatch& b,
                      const std::vector<double>& rt, const GstOptions& opt, uint64_t seed_base,
                      ThreadPool* pool) {
  FourStepRun r;
  r.grad.assign(m.num_parameters(), 0.0f);
  HistoryTable table(m.head_input_dim());
  for (int64_t step = 1; step <= 4; ++step) {
    auto st = GstStep(m, sg, 3, b, rt.data(), LossSpec(), opt, step, seed_base + step, &table,
                      r.grad.data(), nullptr, pool);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    if (!st.ok()) return r;
    r.losses.push_back(st->loss);
    r.counts.insert(r.counts.end(), {st->sampled, st->fresh, st->stale, st->dropped});
  }
  table.ForEach([&](int64_t, int64_t, const float* row, int64_t) {
    r.table.insert(r.table.end(), row, row + table.width());
  });
  return r;
}

// The segments as tasks on a pool: the same loss, statistics, table rows and gradient, to the
// bit, as on the calling thread, whatever the pool's size (fresh, stale and sampled segments).
TEST(GstStepTest, SegmentTasksOnAPoolGiveTheSameStepToTheBit) {
  const Graph g = MakeGraph(200, 6, 4);
  auto m = MakeModel(g, 40, 0);
  auto sg = PrepareSegmented(*m, g);
  ASSERT_TRUE(sg.ok());
  ASSERT_EQ(sg->num_segments(), 8);
  const ConfigBatch b = FullBatch(g, 6);
  std::vector<double> rt(g.config_runtime.begin(), g.config_runtime.end());
  GstOptions opt;
  opt.segments_per_step = 3;
  opt.keep_probability = 0.6;
  auto run = [&](ThreadPool* pool) { return FourSteps(*m, *sg, b, rt, opt, 50, pool); };
  const FourStepRun serial = run(nullptr);
  EXPECT_EQ(serial.counts[1], 5);  // step 1: 3 sampled, 5 fresh
  int64_t stale = 0;
  for (size_t i = 2; i < serial.counts.size(); i += 4) stale += serial.counts[i];
  EXPECT_GT(stale, 0);
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    const FourStepRun r = run(&pool);
    EXPECT_EQ(r.losses, serial.losses) << threads;
    EXPECT_EQ(r.counts, serial.counts) << threads;
    EXPECT_EQ(r.table, serial.table) << threads;
    EXPECT_EQ(r.grad, serial.grad) << threads;
  }
}

TEST(GstStepTest, ChunkTasksFollowTheDataNotThePool) {
  const Graph g = MakeGraph(200, 6, 4);
  auto m = MakeModel(g, 40, 0);
  auto sg = PrepareSegmented(*m, g);
  ASSERT_TRUE(sg.ok());
  const int64_t k = 6;
  const ConfigBatch b = FullBatch(g, k);
  std::vector<double> rt(g.config_runtime.begin(), g.config_runtime.end());
  // The chunks: per sampled fresh segment, in segment order, covering its configurations.
  GstPlan plan;
  plan.sampled.assign(sg->num_segments(), 0);
  plan.source.assign(sg->num_segments(), GstPlan::Source::kFresh);
  plan.sampled[1] = plan.sampled[5] = 1;
  plan.source[3] = GstPlan::Source::kStale;
  const std::vector<GstChunk> ones = PlanGstChunks(*m, *sg, plan, k, 1);
  ASSERT_EQ(ones.size(), 2u * k);
  for (int64_t i = 0; i < 2 * k; ++i) {
    EXPECT_EQ(ones[i].segment, i < k ? 1 : 5);
    EXPECT_EQ(ones[i].begin, i % k);
    EXPECT_EQ(ones[i].end, i % k + 1);
  }
  // Segment 1's work in chunks of two configurations' rows: three chunks (segment 5's count
  // follows its own rows).
  const int64_t rows = m->config_rows(*sg->segments[1]);
  const std::vector<GstChunk> pairs = PlanGstChunks(*m, *sg, plan, k, 2 * rows);
  std::vector<std::pair<int64_t, int64_t>> first;
  for (const GstChunk& c : pairs) {
    if (c.segment == 1) first.emplace_back(c.begin, c.end);
  }
  EXPECT_EQ(first, (std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 4}, {4, 6}}));
  const int64_t rows5 = m->config_rows(*sg->segments[5]);
  EXPECT_EQ(static_cast<int64_t>(pairs.size()),
            3 + std::min<int64_t>(k, (k * rows5 + 2 * rows - 1) / (2 * rows)));
  EXPECT_EQ(PlanGstChunks(*m, *sg, plan, k, int64_t{1} << 40).size(), 2u);

  auto run = [&](ThreadPool* pool, int64_t chunk_rows) {
    GstOptions opt;
    opt.segments_per_step = 3;
    opt.keep_probability = 0.6;
    opt.chunk_rows = chunk_rows;
    return FourSteps(*m, *sg, b, rt, opt, 70, pool);
  };
  for (int64_t chunk_rows : {int64_t{1}, 2 * rows}) {
    const FourStepRun serial = run(nullptr, chunk_rows);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      const FourStepRun r = run(&pool, chunk_rows);
      EXPECT_EQ(r.losses, serial.losses) << threads << " threads, chunk rows " << chunk_rows;
      EXPECT_EQ(r.table, serial.table) << threads << " threads, chunk rows " << chunk_rows;
      EXPECT_TRUE(r.grad == serial.grad) << threads << " threads, chunk rows " << chunk_rows;
    }
  }
  // Against each segment whole: the forward rows are the same bits, the gradient the same up to
  // the order of its sums, and it does differ in the last bits (the chunks are really summed).
  const FourStepRun whole = run(nullptr, int64_t{1} << 40);
  const FourStepRun chunked = run(nullptr, 1);
  EXPECT_EQ(chunked.losses, whole.losses);
  EXPECT_EQ(chunked.table, whole.table);
  ExpectGradNear(chunked.grad, whole.grad, 1e-5);
  EXPECT_FALSE(chunked.grad == whole.grad);
}

TEST(GstStepTest, FreshTableRowsOfOneConfigGiveTheExactLoss) {
  // With one configuration the table row of a segment is exactly its G_s; with unchanged
  // parameters and keep probability 1 the stale path then reproduces the full-graph loss.
  const Graph g = MakeGraph(150, 1, 5);
  auto m = MakeModel(g, 40, 0);
  auto sg = PrepareSegmented(*m, g);
  ASSERT_TRUE(sg.ok());
  const ConfigBatch b = FullBatch(g, 1);
  std::vector<double> rt = {double(g.config_runtime[0])};
  LossSpec loss;
  loss.set_pairwise_hinge_weight(0);
  loss.set_mse_weight(1);
  loss.set_mse_target(LossSpec::MSE_TARGET_SCALED);
  loss.set_mse_scale(1e-6);
  std::vector<float> full;
  const double want = FullLoss(*m, g, b, rt.data(), loss, &full);
  HistoryTable table(m->head_input_dim());
  GstOptions opt;
  opt.keep_probability = 1.0;
  std::vector<float> grad(m->num_parameters(), 0.0f);
  ASSERT_TRUE(GstStep(*m, *sg, 0, b, rt.data(), loss, opt, 1, 1, &table, grad.data()).ok());
  auto st = GstStep(*m, *sg, 0, b, rt.data(), loss, opt, 2, 2, &table, grad.data());
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->stale, sg->num_segments() - 1);
  EXPECT_NEAR(st->loss, want, 1e-5 * std::max(1.0, want));
}

TEST(GstStepTest, RejectsTileGraphsAndBadBatches) {
  Graph t;
  t.name = "tile1";
  t.kind = TaskKind::kTile;
  ModelSpec spec;
  auto m = CostModel::Create(spec, TaskKind::kTile);
  ASSERT_TRUE(m.ok());
  auto sg = PrepareSegmented(**m, t);
  ASSERT_FALSE(sg.ok());
  EXPECT_NE(sg.status().message().find("tile1"), std::string::npos);
  const Graph g = MakeGraph(60, 3, 6);
  auto lm = MakeModel(g, 20, 0);
  auto lsg = PrepareSegmented(*lm, g);
  ASSERT_TRUE(lsg.ok());
  ConfigBatch bad;
  bad.num_configs = 3;
  bad.layout_feat.resize(5);
  std::vector<double> rt = {1, 2, 3};
  std::vector<float> grad(lm->num_parameters());
  EXPECT_FALSE(
      GstStep(*lm, *lsg, 0, bad, rt.data(), LossSpec(), GstOptions(), 1, 1, nullptr, grad.data())
          .ok());
}

}  // namespace
}  // namespace tpugraphs::train
