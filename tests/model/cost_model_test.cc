// FeatureTransform and the public CostModel (float): fitting, serialisation, initialisation,
// Prepare/Forward/Backward against the double-precision network, bad input, and the real dumps.
#include "tpugraphs/model/cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "model/model_test_util.h"
#include "testing/test_util.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/ingest/hlo_graph.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "tpugraphs/ingest/release_npz.h"
#include "tpugraphs/model/chain_folding.h"
#include "tpugraphs/model/feature_transform.h"
#include "tpugraphs/model/gnn.h"
#include "tpugraphs/model/loop_depth.h"
#include "tpugraphs/model/pruning.h"
#include "tpugraphs/model/repeat_merging.h"
#include "tpugraphs/model/virtual_node.h"
#include "tpugraphs/synth/program_generator.h"

namespace tpugraphs::model {
namespace {

// A random graph in the release form (raw features, raw configs).
Graph MakeGraph(TaskKind task, int64_t n, int64_t nc, int64_t c, uint64_t seed) {
  Rng rng(seed);
  Graph g;
  g.name = "g" + std::to_string(seed);
  g.kind = task;
  g.collection = task == TaskKind::kTile ? "tile:xla" : "layout:xla:random";
  for (int64_t v = 0; v < n; ++v)
    g.node_opcode.push_back(static_cast<uint8_t>(rng.UniformInt(120)));
  for (int64_t v = 0; v < n; ++v) {
    for (int j = 0; j < kNodeFeatureCount; ++j) {
      // Column 5 is constant; others vary over several orders of magnitude.
      g.node_feat.push_back(j == 5 ? 7.0f
                                   : static_cast<float>(std::floor(rng.Uniform() * 2000) - 100));
    }
  }
  for (int64_t u = 1; u < n; ++u) {
    g.edge_index.push_back(u);
    g.edge_index.push_back(static_cast<int64_t>(rng.UniformInt(u)));
  }
  g.num_configs = c;
  for (int64_t i = 0; i < c; ++i) g.config_runtime.push_back(1000 + i);
  if (task == TaskKind::kTile) {
    for (int64_t i = 0; i < c * kTileConfigFeatureCount; ++i) {
      g.config_feat.push_back(static_cast<float>(rng.UniformInt(64)));
    }
    g.config_runtime_normalizers.assign(c, 1000);
  } else {
    g.node_config_ids = rng.SampleWithoutReplacement(n, nc);
    for (int64_t i = 0; i < c * nc * kLayoutConfigFeatureCount; ++i) {
      g.node_config_feat.push_back(static_cast<int8_t>(static_cast<int>(rng.UniformInt(7)) - 1));
    }
  }
  return g;
}

TEST(FeatureTransformTest, StandardisesSignedLogAndDropsConstantColumns) {
  FeatureTransform ft;
  EXPECT_FALSE(ft.Finalize().ok());
  Graph a = MakeGraph(TaskKind::kTile, 40, 0, 5, 1), b = MakeGraph(TaskKind::kTile, 30, 0, 4, 2);
  ft.Accumulate(a);
  ft.Accumulate(b);
  ASSERT_TRUE(ft.Finalize().ok());
  EXPECT_EQ(ft.kept_node_columns(), kNodeFeatureCount - 1);
  for (int c : ft.kept_node_column_ids()) EXPECT_NE(c, 5);
  // Over the training rows, every kept column has mean 0 and std 1 after the transform.
  std::vector<float> all(a.node_feat);
  all.insert(all.end(), b.node_feat.begin(), b.node_feat.end());
  const int64_t n = 70, kept = ft.kept_node_columns();
  std::vector<float> out(n * kept);
  ft.ApplyNodeFeatures(all.data(), n, out.data());
  for (int64_t j = 0; j < kept; ++j) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < n; ++i)
      s += out[i * kept + j], ss += out[i * kept + j] * out[i * kept + j];
    EXPECT_NEAR(s / n, 0.0, 1e-5);
    EXPECT_NEAR(std::sqrt(ss / n), 1.0, 1e-4);
  }
  // One value by hand: signed log then standardise.
  EXPECT_NEAR(SignedLog(-std::expm1(2.0)), -2.0, 1e-12);
  // Tile config features are transformed too.
  EXPECT_EQ(ft.kept_config_columns(), kTileConfigFeatureCount);
}

TEST(FeatureTransformTest, ProtoRoundTripAndValidation) {
  FeatureTransform ft;
  ft.Accumulate(MakeGraph(TaskKind::kTile, 20, 0, 3, 4));
  ASSERT_TRUE(ft.Finalize().ok());
  FeatureTransformProto p;
  ft.ToProto(&p);
  FeatureTransform back;
  ASSERT_TRUE(back.FromProto(p).ok());
  Graph g = MakeGraph(TaskKind::kTile, 10, 0, 2, 5);
  std::vector<float> o1(10 * ft.kept_node_columns()), o2(o1.size());
  ft.ApplyNodeFeatures(g.node_feat.data(), 10, o1.data());
  back.ApplyNodeFeatures(g.node_feat.data(), 10, o2.data());
  EXPECT_EQ(o1, o2);
  FeatureTransformProto bad = p;
  bad.set_node_std(0, 0.0);
  EXPECT_FALSE(FeatureTransform().FromProto(bad).ok());
  bad = p;
  bad.set_kept_node_columns(1, 400);
  EXPECT_FALSE(FeatureTransform().FromProto(bad).ok());
  bad = p;
  bad.add_node_mean(1.0);
  EXPECT_FALSE(FeatureTransform().FromProto(bad).ok());
  bad = p;
  bad.set_node_columns(100);
  EXPECT_FALSE(FeatureTransform().FromProto(bad).ok());
}

std::unique_ptr<CostModel> FittedModel(const ModelSpec& spec, TaskKind task,
                                       const std::vector<Graph>& train) {
  auto m = CostModel::Create(spec, task);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  for (const Graph& g : train) (*m)->transform().Accumulate(g);
  EXPECT_TRUE((*m)->transform().Finalize().ok());
  (*m)->InitParameters(7);
  return std::move(m).value();
}

ConfigBatch BatchOf(const Graph& g, int64_t k) {
  ConfigBatch b;
  b.num_configs = k;
  if (g.is_tile()) {
    b.tile_feat.assign(g.config_feat.begin(), g.config_feat.begin() + k * kTileConfigFeatureCount);
  } else {
    b.layout_feat.assign(g.node_config_feat.begin(),
                         g.node_config_feat.begin() + k * g.num_config_nodes() * 18);
  }
  return b;
}

TEST(CostModelTest, CreateValidatesTheSpec) {
  ModelSpec s;
  s.set_hidden_dim(0);
  auto m = CostModel::Create(s, TaskKind::kTile);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().ToString().find("hidden_dim"), std::string::npos);
  ModelSpec ok;
  auto m2 = CostModel::Create(ok, TaskKind::kLayout);
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ((*m2)->num_parameters(), internal::MakeParamLayout(ok, TaskKind::kLayout).total);
  int64_t covered = 0;
  for (const auto& b : (*m2)->parameter_blocks()) {
    EXPECT_EQ(b.offset, covered) << b.name;
    covered += b.rows * b.cols;
  }
  EXPECT_EQ(covered, (*m2)->num_parameters());
}

// A model trained on features with absent dimensions marked (ingest --mark-absent-dimensions)
// records it, refuses graphs of the other kind with a message naming the graph, and a training
// set may not mix the two.
TEST(CostModelTest, AbsentDimensionMarkingMustMatchTheModel) {
  ModelSpec spec;
  spec.set_prune_hops(1);
  Graph marked = MakeGraph(TaskKind::kLayout, 30, 3, 4, 1);
  marked.absent_dimensions_marked = true;
  Graph official = MakeGraph(TaskKind::kLayout, 30, 3, 4, 2);
  official.name = "official_one";
  auto m = FittedModel(spec, TaskKind::kLayout, {marked});
  EXPECT_TRUE(m->transform().absent_dimensions_marked());
  EXPECT_TRUE(m->Prepare(marked).ok());
  auto refused = m->Prepare(official);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("official_one"), std::string::npos);
  EXPECT_NE(refused.status().message().find("--mark-absent-dimensions"), std::string::npos);
  // The other way round.
  auto o = FittedModel(spec, TaskKind::kLayout, {official});
  EXPECT_FALSE(o->transform().absent_dimensions_marked());
  EXPECT_FALSE(o->Prepare(marked).ok());
  // Saved and restored with the statistics; absent from older files means official.
  FeatureTransformProto p;
  m->transform().ToProto(&p);
  EXPECT_TRUE(p.absent_dimensions_marked());
  FeatureTransform back;
  ASSERT_TRUE(back.FromProto(p).ok());
  EXPECT_TRUE(back.absent_dimensions_marked());
  o->transform().ToProto(&p);
  EXPECT_FALSE(p.has_absent_dimensions_marked());
  // A training set of both kinds is an error naming one graph of each.
  FeatureTransform mixed;
  mixed.Accumulate(marked);
  mixed.Accumulate(official);
  const Status s = mixed.Finalize();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(official.Id()), std::string::npos);
  EXPECT_NE(s.message().find(marked.Id()), std::string::npos);
}

TEST(CostModelTest, InitIsDeterministicAndZeroesDroppedColumns) {
  std::vector<Graph> train = {MakeGraph(TaskKind::kLayout, 30, 3, 4, 1)};
  ModelSpec spec;
  auto a = FittedModel(spec, TaskKind::kLayout, train);
  auto b = FittedModel(spec, TaskKind::kLayout, train);
  std::vector<float> pa(a->parameters(), a->parameters() + a->num_parameters());
  std::vector<float> pb(b->parameters(), b->parameters() + b->num_parameters());
  EXPECT_EQ(pa, pb);
  b->InitParameters(8);
  EXPECT_NE(pa, std::vector<float>(b->parameters(), b->parameters() + b->num_parameters()));
  const auto pl = internal::MakeParamLayout(spec, TaskKind::kLayout);
  for (int d = 0; d < spec.hidden_dim(); ++d) {
    EXPECT_EQ(pa[pl.w_feat + 5 * spec.hidden_dim() + d], 0.0f);  // column 5 is constant
  }
}

// Inference in blocks of rows (the configuration-independent pass once, then the blocks through
// one reused tape) gives the whole batch's scores bit for bit, on the default network and on the
// layout recipe's (no message passing, a per-configurable-node head, pruning), whether the block
// size or the memory budget sets the blocks.
TEST(CostModelTest, BlockedInferenceScoresAsTheWholeBatch) {
  ModelSpec recipe;
  recipe.set_num_layers(0);
  recipe.set_prune_hops(2);
  recipe.set_config_node_head(16);
  recipe.set_config_node_head_pooling(ModelSpec::NODE_HEAD_POOLING_LOGSUMEXP);
  recipe.set_layout_tensor_features(true);
  recipe.set_config_loop_depth(true);
  for (const ModelSpec& spec : {ModelSpec(), recipe}) {
    const int64_t k = 40;
    std::vector<Graph> train = {MakeGraph(TaskKind::kLayout, 80, 6, k, 11)};
    auto m = FittedModel(spec, TaskKind::kLayout, train);
    auto pg = m->Prepare(train[0]);
    ASSERT_TRUE(pg.ok()) << pg.status().ToString();
    ConfigBatch batch = BatchOf(train[0], k);
    std::vector<float> whole(k);
    auto tape = m->NewTape();
    m->Forward(**pg, batch, whole.data(), tape.get());  // a tape: one pass, never blocked
    float spread = 0;
    for (int64_t c = 1; c < k; ++c) spread = std::max(spread, std::fabs(whole[c] - whole[0]));
    EXPECT_GT(spread, 0.0f) << "the configurations must score differently to tell them apart";
    EXPECT_EQ(m->inference_block_rows(), CostModel::kDefaultInferenceBlockRows);
    m->set_inference_block_rows(0);  // no rows or fewer: one row, i.e. one config per block
    EXPECT_EQ(m->inference_block_rows(), 1);
    m->set_inference_block_rows(-5);
    EXPECT_EQ(m->inference_block_rows(), 1);
    for (int64_t rows : {int64_t{1}, int64_t{7}, int64_t{100}, int64_t{1} << 30}) {
      m->set_inference_block_rows(rows);
      std::vector<float> blocked(k);
      m->Forward(**pg, batch, blocked.data(), nullptr);
      // Bit for bit: every per-configuration product is row-independent (RowProduct).
      EXPECT_EQ(blocked, whole) << "block rows " << rows;
      // The memory budget at the same rows makes the same blocks: the same bits.
      m->set_inference_block_rows(int64_t{1} << 30);
      m->set_inference_chunk_rows(rows);
      std::vector<float> budget(k);
      m->Forward(**pg, batch, budget.data(), nullptr);
      EXPECT_EQ(budget, blocked) << "block rows " << rows;
      m->set_inference_chunk_rows(1 << 20);
    }
  }
}

// The configuration-independent pass once (InferShared), then batches against it from any
// thread (InferConfigs): Forward's scores bit for bit, for tile and layout graphs, in any split
// of the configurations and at any block size.
TEST(CostModelTest, SharedPassOnceThenBatchesScoresAsForward) {
  for (TaskKind task : {TaskKind::kLayout, TaskKind::kTile}) {
    ModelSpec spec;
    spec.set_hidden_dim(16);
    spec.set_num_layers(2);
    const int64_t k = 12;
    std::vector<Graph> train = {MakeGraph(task, 70, 5, k, 21)};
    auto m = FittedModel(spec, task, train);
    auto pg = m->Prepare(train[0]);
    ASSERT_TRUE(pg.ok()) << pg.status().ToString();
    const ConfigBatch batch = BatchOf(train[0], k);
    std::vector<float> whole(k);
    m->Forward(**pg, batch, whole.data(), nullptr);
    auto shared = m->NewTape();
    m->InferShared(**pg, shared.get());
    for (int64_t rows : {int64_t{1}, int64_t{1} << 30}) {
      m->set_inference_block_rows(rows);
      for (int64_t split : {int64_t{1}, int64_t{5}, k}) {
        std::vector<float> parts(k, -1.0f);
        for (int64_t b = 0; b < k; b += split) {
          const int64_t e = std::min(k, b + split);
          ConfigBatch part;
          part.num_configs = e - b;
          const int64_t tile = kTileConfigFeatureCount;
          const int64_t layout = train[0].num_config_nodes() * kLayoutConfigFeatureCount;
          if (task == TaskKind::kTile) {
            part.tile_feat.assign(batch.tile_feat.begin() + b * tile,
                                  batch.tile_feat.begin() + e * tile);
          } else {
            part.layout_feat.assign(batch.layout_feat.begin() + b * layout,
                                    batch.layout_feat.begin() + e * layout);
          }
          m->InferConfigs(**pg, part, *shared, parts.data() + b);
        }
        EXPECT_EQ(parts, whole) << TaskKindName(task) << ", batches of " << split << ", block rows "
                                << rows;
      }
    }
    m->set_inference_block_rows(CostModel::kDefaultInferenceBlockRows);
  }
}

TEST(CostModelTest, FloatForwardBackwardMatchDoubleNetwork) {
  for (TaskKind task : {TaskKind::kLayout, TaskKind::kTile}) {
    std::vector<Graph> train = {MakeGraph(task, 60, 4, 6, 3), MakeGraph(task, 50, 3, 6, 4)};
    ModelSpec spec;
    spec.set_hidden_dim(16);
    spec.set_num_layers(2);
    auto m = FittedModel(spec, task, train);
    const Graph& g = train[0];
    auto pg = m->Prepare(g);
    ASSERT_TRUE(pg.ok()) << pg.status().ToString();
    ConfigBatch batch = BatchOf(g, 6);
    ASSERT_TRUE(m->ValidateBatch(**pg, batch).ok());
    std::vector<float> s(6), s2(6), grad(m->num_parameters(), 0.0f);
    auto tape = m->NewTape();
    m->Forward(**pg, batch, s.data(), tape.get());
    m->Forward(**pg, batch, s2.data(), nullptr);
    EXPECT_EQ(s, s2) << "forward with and without a tape differ";
    m->set_inference_chunk_rows(1);  // one config per chunk
    std::vector<float> s3(6);
    m->Forward(**pg, batch, s3.data(), nullptr);
    // Per-configuration products are row-independent, so chunks give the same bits.
    EXPECT_EQ(s, s3) << "chunked inference";
    m->set_inference_chunk_rows(1 << 20);
    std::vector<float> ds = {1, -1, 0.5, 0.25, -2, 0.1};
    m->Backward(**pg, batch, *tape, ds.data(), grad.data());

    // The same network in double on the same transformed inputs.
    const FeatureTransform& ft = m->transform();
    std::vector<float> tf(g.num_nodes() * ft.kept_node_columns());
    ft.ApplyNodeFeatures(g.node_feat.data(), g.num_nodes(), tf.data());
    std::vector<double> feat(tf.begin(), tf.end());
    std::vector<float> tc(6 * ft.kept_config_columns());
    if (task == TaskKind::kTile) ft.ApplyConfigFeatures(batch.tile_feat.data(), 6, tc.data());
    std::vector<double> cfg(tc.begin(), tc.end());
    auto gs = internal::BuildGraphStructure(spec, task, g.node_opcode, g.edge_index,
                                            g.node_config_ids, ft.kept_node_column_ids(),
                                            ft.kept_config_column_ids(), true, "g");
    ASSERT_TRUE(gs.ok());
    if (task == TaskKind::kLayout) internal::FillLayoutTensorInfo(g.node_feat.data(), &*gs);
    internal::Gnn<double> gnn(spec, task);
    std::vector<double> p(m->parameters(), m->parameters() + m->num_parameters());
    internal::GnnInputs<double> in;
    in.node_feat = feat.data();
    in.k = 6;
    in.tile_cfg = cfg.data();
    in.layout_cfg = batch.layout_feat.data();
    internal::GnnTape<double> t;
    std::vector<double> sd(6), dsd(ds.begin(), ds.end()), gd(p.size(), 0.0);
    gnn.Forward(p.data(), *gs, in, sd.data(), &t);
    gnn.Backward(p.data(), *gs, in, t, dsd.data(), gd.data());
    double smax = 0, gmax = 0, serr = 0, gerr = 0;
    for (int i = 0; i < 6; ++i) smax = std::max(smax, std::fabs(sd[i]));
    for (int i = 0; i < 6; ++i) serr = std::max(serr, std::fabs(sd[i] - s[i]));
    for (size_t i = 0; i < gd.size(); ++i) gmax = std::max(gmax, std::fabs(gd[i]));
    for (size_t i = 0; i < gd.size(); ++i) gerr = std::max(gerr, std::fabs(gd[i] - grad[i]));
    EXPECT_LT(serr, 1e-5 * std::max(smax, 1.0)) << TaskKindName(task);
    EXPECT_LT(gerr, 1e-4 * gmax) << TaskKindName(task);
    EXPECT_GT(gmax, 0.0);
  }
}

// Training in chunks of configurations (CostModel::ForwardShared ... BackwardShared) gives the
// scores and gradient of the whole batch: in float up to the order of sums, for every kind of
// model a recipe trains (message passing or not, pruned, config-node head, tile).
TEST(CostModelTest, ChunksOfConfigurationsGiveTheWholeBatch) {
  struct Case {
    TaskKind task;
    int layers;
    int prune_hops;
    int node_head;
  };
  for (const Case& c : {Case{TaskKind::kLayout, 2, -1, 0}, Case{TaskKind::kLayout, 3, 1, 8},
                        Case{TaskKind::kLayout, 0, 2, 8}, Case{TaskKind::kTile, 2, -1, 0}}) {
    const std::string what = std::string(TaskKindName(c.task)) + " layers " +
                             std::to_string(c.layers) + " node_head " + std::to_string(c.node_head);
    std::vector<Graph> train = {MakeGraph(c.task, 80, 5, 7, 21)};
    ModelSpec spec;
    spec.set_hidden_dim(16);
    spec.set_num_layers(c.layers);
    spec.set_prune_hops(c.prune_hops);
    spec.set_config_node_head(c.node_head);
    auto m = FittedModel(spec, c.task, train);
    ASSERT_TRUE(m->supports_config_chunks());
    const Graph& g = train[0];
    auto pg = m->Prepare(g);
    ASSERT_TRUE(pg.ok()) << pg.status().ToString();
    const int64_t k = 7;
    ConfigBatch batch = BatchOf(g, k);
    std::vector<float> ds = {1, -1, 0.5, 0.25, -2, 0.1, 0.7};

    std::vector<float> whole(k), gw(m->num_parameters(), 0.0f);
    auto tape = m->NewTape();
    m->Forward(**pg, batch, whole.data(), tape.get());
    m->Backward(**pg, batch, *tape, ds.data(), gw.data());

    const std::vector<int64_t> bounds = {0, 3, 4, 7};
    auto shared = m->NewTape();
    m->ForwardShared(**pg, shared.get());
    std::vector<float> scores(k), gc(m->num_parameters(), 0.0f);
    std::vector<std::unique_ptr<ForwardTape>> tapes;
    std::vector<std::unique_ptr<SharedGradient>> parts;
    std::vector<ConfigBatch> chunks;
    for (size_t i = 0; i + 1 < bounds.size(); ++i) {
      chunks.push_back(SliceBatch(batch, bounds[i], bounds[i + 1], g.num_config_nodes()));
      tapes.push_back(m->NewTape());
      m->ForwardConfigs(**pg, chunks.back(), *shared, scores.data() + bounds[i],
                        tapes.back().get());
    }
    for (int64_t i = 0; i < k; ++i) {
      EXPECT_NEAR(scores[i], whole[i], 1e-5 * std::max(1.0f, std::fabs(whole[i]))) << what;
    }
    for (size_t i = 0; i < chunks.size(); ++i) {
      parts.push_back(std::make_unique<SharedGradient>());
      m->BackwardConfigs(**pg, chunks[i], *tapes[i], ds.data() + bounds[i], gc.data(),
                         parts.back().get());
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      // In two pieces, as the row-parallel sum splits it.
      const int64_t half = parts[0]->rows() / 2;
      parts[0]->AddRows(*parts[i], 0, half);
      parts[0]->AddRows(*parts[i], half, parts[0]->rows());
      parts[0]->AddPooled(*parts[i]);
    }
    m->BackwardShared(**pg, *shared, parts[0].get(), gc.data());
    double gmax = 0, err = 0;
    for (size_t i = 0; i < gw.size(); ++i) {
      gmax = std::max(gmax, std::fabs(double(gw[i])));
      err = std::max(err, std::fabs(double(gw[i]) - gc[i]));
    }
    EXPECT_GT(gmax, 0.0) << what;
    EXPECT_LT(err, 1e-5 * gmax) << what;
    // The comparison can fail: leaving out one chunk's part of the shared gradient shows.
    std::vector<float> gm(m->num_parameters(), 0.0f);
    for (size_t i = 0; i < chunks.size(); ++i) {
      m->BackwardConfigs(**pg, chunks[i], *tapes[i], ds.data() + bounds[i], gm.data(),
                         parts[i].get());
    }
    m->BackwardShared(**pg, *shared, parts[0].get(), gm.data());
    double missing = 0;
    for (size_t i = 0; i < gw.size(); ++i) {
      missing = std::max(missing, std::fabs(double(gw[i]) - gm[i]));
    }
    EXPECT_GT(missing, 1e-3 * gmax) << what;
    // Buffers reused (each Reset zeroes what the last use wrote) give the first sum again.
    std::vector<float> again(m->num_parameters(), 0.0f);
    for (size_t i = 0; i < chunks.size(); ++i) {
      m->BackwardConfigs(**pg, chunks[i], *tapes[i], ds.data() + bounds[i], again.data(),
                         parts[i].get());
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      parts[0]->AddRows(*parts[i], 0, parts[0]->rows());
      parts[0]->AddPooled(*parts[i]);
    }
    m->BackwardShared(**pg, *shared, parts[0].get(), again.data());
    EXPECT_TRUE(again == gc) << what;
  }
  ModelSpec attention;
  attention.set_config_node_head(8);
  attention.set_config_attention(4);
  auto m = CostModel::Create(attention, TaskKind::kLayout);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE((*m)->supports_config_chunks());
  EXPECT_TRUE((*m)->attends_across_configs());
}

// config_attention models train in chunks around a join over the graph's chunks
// (ForwardConfigsToAttention ... BackwardConfigsFromAttention): the scores of the whole batch
// (bit for bit with one chunk), and its gradient up to the order of sums; whatever pool the
// join's nodes are split over, the same bits; a chunk taking part through its rows alone (as
// another rank's) the same bits too.

TEST(CostModelTest, PooledChunksGiveForwardPooledAndItsGradient) {
  // Graph Segment Training's chunk tasks: the passes stopped at the head input.
  for (const auto& [layers, prune_hops] : {std::pair{2, -1}, std::pair{1, 1}, std::pair{0, 2}}) {
    const std::string what = "layers " + std::to_string(layers);
    std::vector<Graph> train = {MakeGraph(TaskKind::kLayout, 80, 5, 7, 21)};
    ModelSpec spec;
    spec.set_hidden_dim(16);
    spec.set_num_layers(layers);
    spec.set_prune_hops(prune_hops);
    auto m = FittedModel(spec, TaskKind::kLayout, train);
    const Graph& g = train[0];
    auto pg = m->Prepare(g);
    ASSERT_TRUE(pg.ok()) << pg.status().ToString();
    const int64_t k = 7, D = m->head_input_dim();
    const ConfigBatch batch = BatchOf(g, k);
    std::vector<float> dG(k * D);
    Rng rng(3);
    for (float& x : dG) x = static_cast<float>(rng.Uniform() - 0.5);

    std::vector<float> whole(k * D), gw(m->num_parameters(), 0.0f);
    auto tape = m->NewTape();
    m->ForwardPooled(**pg, batch, whole.data(), tape.get());
    m->BackwardPooled(**pg, batch, *tape, dG.data(), gw.data());

    const std::vector<int64_t> bounds = {0, 2, 3, 7};
    auto shared = m->NewTape();
    m->ForwardShared(**pg, shared.get());
    std::vector<float> G(k * D, -1.0f);
    std::vector<std::unique_ptr<ForwardTape>> tapes;
    std::vector<ConfigBatch> chunks;
    for (size_t i = 0; i + 1 < bounds.size(); ++i) {
      chunks.push_back(SliceBatch(batch, bounds[i], bounds[i + 1], g.num_config_nodes()));
      tapes.push_back(m->NewTape());
      m->ForwardConfigsPooled(**pg, chunks.back(), *shared, G.data() + bounds[i] * D,
                              tapes.back().get());
    }
    EXPECT_TRUE(G == whole) << what;  // bit for bit
    // The chunks' gradients and shared parts, summed in chunk order, then the shared pass.
    auto gradient = [&](size_t leave_out) {
      std::vector<float> gc(m->num_parameters(), 0.0f);
      SharedGradient acc;
      m->ZeroSharedGradient(**pg, &acc);
      for (size_t i = 0; i < chunks.size(); ++i) {
        SharedGradient part;
        m->BackwardConfigsPooled(**pg, chunks[i], *tapes[i], dG.data() + bounds[i] * D, gc.data(),
                                 &part);
        if (i == leave_out) continue;
        std::vector<float> flat(part.flat_size());
        part.Flatten(flat.data());
        acc.AddFlat(flat.data());
      }
      m->BackwardShared(**pg, *shared, &acc, gc.data());
      return gc;
    };
    const std::vector<float> gc = gradient(chunks.size());
    double gmax = 0, err = 0;
    for (size_t i = 0; i < gw.size(); ++i) {
      gmax = std::max(gmax, std::fabs(double(gw[i])));
      err = std::max(err, std::fabs(double(gw[i]) - gc[i]));
    }
    EXPECT_GT(gmax, 0.0) << what;
    EXPECT_LT(err, 1e-5 * gmax) << what;
    // The comparison can fail: leaving out one chunk's shared part shows (with message passing
    // or a graph-wide pool the shared pass reads it).
    const std::vector<float> gm = gradient(1);
    double missing = 0;
    for (size_t i = 0; i < gw.size(); ++i) {
      missing = std::max(missing, std::fabs(double(gw[i]) - gm[i]));
    }
    EXPECT_GT(missing, 1e-3 * gmax) << what;
  }
}
TEST(CostModelTest, AttentionChunksAroundAJoinGiveTheWholeBatch) {
  for (int layers : {0, 2}) {
    const std::string what = "layers " + std::to_string(layers);
    std::vector<Graph> train = {MakeGraph(TaskKind::kLayout, 80, 5, 7, 21)};
    ModelSpec spec;
    spec.set_hidden_dim(16);
    spec.set_num_layers(layers);
    spec.set_config_node_head(8);
    spec.set_config_attention(4);
    spec.set_config_node_head_linear(true);
    auto m = FittedModel(spec, TaskKind::kLayout, train);
    ASSERT_TRUE(m->attends_across_configs());
    const Graph& g = train[0];
    auto pg = m->Prepare(g);
    ASSERT_TRUE(pg.ok()) << pg.status().ToString();
    const int64_t k = 7;
    ConfigBatch batch = BatchOf(g, k);
    std::vector<float> ds = {1, -1, 0.5, 0.25, -2, 0.1, 0.7};
    std::vector<float> whole(k), gw(m->num_parameters(), 0.0f);
    auto tape = m->NewTape();
    m->Forward(**pg, batch, whole.data(), tape.get());
    m->Backward(**pg, batch, *tape, ds.data(), gw.data());

    // The chunked passes. `ranks`: every chunk as another rank's, that joins with its own tape
    // and the other chunks' rows alone (copied into fresh tapes), its own join tape too.
    ThreadPool pool(3);
    auto run = [&](const std::vector<int64_t>& bounds, ThreadPool* kernels, bool ranks,
                   std::vector<float>* scores, std::vector<float>* grad) {
      auto shared = m->NewTape();
      m->ForwardShared(**pg, shared.get());
      const size_t n = bounds.size() - 1;
      std::vector<std::unique_ptr<ForwardTape>> tapes, joins;
      std::vector<ConfigBatch> chunks;
      for (size_t i = 0; i < n; ++i) {
        chunks.push_back(SliceBatch(batch, bounds[i], bounds[i + 1], g.num_config_nodes()));
        tapes.push_back(m->NewTape());
        m->ForwardConfigsToAttention(**pg, chunks[i], *shared, tapes[i].get());
      }
      // The join as rank r sees it: its own chunk's tape, the others' rows in stand-ins.
      std::vector<std::vector<std::unique_ptr<ForwardTape>>> stand_in(n);
      auto lists = [&](bool backward) {
        std::vector<std::vector<ForwardTape*>> out;
        for (size_t r = 0; r < (ranks ? n : 1); ++r) {
          std::vector<ForwardTape*> list;
          for (size_t i = 0; i < n; ++i) {
            if (!ranks || i == r) {
              list.push_back(tapes[i].get());
              continue;
            }
            if (stand_in[r].size() < n) stand_in[r].resize(n);
            if (!stand_in[r][i]) stand_in[r][i] = m->NewTape();
            const int64_t kc = bounds[i + 1] - bounds[i];
            const float* own = m->AttentionRows(**pg, kc, backward, tapes[i].get());
            float* theirs = m->AttentionRows(**pg, kc, backward, stand_in[r][i].get());
            std::copy_n(own, m->attention_row_floats(**pg, kc, backward), theirs);
            list.push_back(stand_in[r][i].get());
          }
          out.push_back(list);
        }
        return out;
      };
      for (const auto& list : lists(false)) {
        joins.push_back(m->NewTape());
        m->AttendForward(**pg, list, ranks ? joins.back().get() : shared.get(), kernels);
      }
      scores->assign(k, 0.0f);
      grad->assign(m->num_parameters(), 0.0f);
      for (size_t i = 0; i < n; ++i) {
        m->ForwardConfigsFromAttention(**pg, chunks[i], tapes[i].get(), scores->data() + bounds[i]);
      }
      for (size_t i = 0; i < n; ++i) {
        m->BackwardConfigsToAttention(**pg, chunks[i], *tapes[i], ds.data() + bounds[i],
                                      grad->data());
      }
      size_t r = 0;
      for (const auto& list : lists(true)) {
        const std::vector<const ForwardTape*> back(list.begin(), list.end());
        m->AttendBackward(**pg, back, ranks ? *joins[r++] : *shared, kernels);
      }
      std::vector<std::unique_ptr<SharedGradient>> parts;
      for (size_t i = 0; i < n; ++i) {
        parts.push_back(std::make_unique<SharedGradient>());
        m->BackwardConfigsFromAttention(**pg, chunks[i], *tapes[i], grad->data(),
                                        parts.back().get());
      }
      for (size_t i = 1; i < n; ++i) {
        parts[0]->AddRows(*parts[i], 0, parts[0]->rows());
        parts[0]->AddPooled(*parts[i]);
      }
      m->BackwardShared(**pg, *shared, parts[0].get(), grad->data());
    };
    std::vector<float> one_s, one_g, s3, g3, s3p, g3p, s3r, g3r;
    run({0, k}, nullptr, false, &one_s, &one_g);
    EXPECT_TRUE(one_s == whole) << what;  // one chunk: Forward's scores, bit for bit
    run({0, 3, 4, 7}, nullptr, false, &s3, &g3);
    double gmax = 0, err = 0, err1 = 0;
    for (size_t i = 0; i < gw.size(); ++i) {
      gmax = std::max(gmax, std::fabs(double(gw[i])));
      err = std::max(err, std::fabs(double(gw[i]) - g3[i]));
      err1 = std::max(err1, std::fabs(double(gw[i]) - one_g[i]));
    }
    for (int64_t i = 0; i < k; ++i) {
      EXPECT_NEAR(s3[i], whole[i], 1e-5 * std::max(1.0f, std::fabs(whole[i]))) << what;
    }
    EXPECT_GT(gmax, 0.0) << what;
    EXPECT_LT(err, 1e-5 * gmax) << what;
    EXPECT_LT(err1, 1e-5 * gmax) << what;
    run({0, 3, 4, 7}, &pool, false, &s3p, &g3p);
    EXPECT_TRUE(s3p == s3 && g3p == g3) << what << ": the join's pool changed the bits";
    run({0, 3, 4, 7}, nullptr, true, &s3r, &g3r);
    EXPECT_TRUE(s3r == s3 && g3r == g3) << what << ": chunks joined by their rows differ";
    // The comparison can fail: scoring each chunk's attention over itself alone differs.
    std::vector<float> alone(k);
    for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 3}, {3, 4}, {4, 7}}) {
      ConfigBatch c = SliceBatch(batch, b, e, g.num_config_nodes());
      auto t = m->NewTape();
      m->Forward(**pg, c, alone.data() + b, t.get());
    }
    double apart = 0;
    for (int64_t i = 0; i < k; ++i) apart = std::max(apart, std::fabs(double(alone[i]) - s3[i]));
    EXPECT_GT(apart, 1e-4) << what;
  }
}

TEST(CostModelTest, PrepareAndBatchRejectBadInput) {
  std::vector<Graph> train = {MakeGraph(TaskKind::kLayout, 20, 2, 3, 1)};
  auto m = FittedModel(ModelSpec(), TaskKind::kLayout, train);
  Graph tile = MakeGraph(TaskKind::kTile, 10, 0, 2, 2);
  auto r = m->Prepare(tile);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find(tile.name), std::string::npos);
  Graph g = train[0];
  g.node_feat.pop_back();
  EXPECT_FALSE(m->Prepare(g).ok());
  g = train[0];
  g.edge_index[3] = 999;
  EXPECT_FALSE(m->Prepare(g).ok());
  g = train[0];
  g.node_config_ids[1] = g.node_config_ids[0];
  EXPECT_FALSE(m->Prepare(g).ok());
  g = train[0];
  g.node_feat[17] = std::nanf("");
  EXPECT_FALSE(m->Prepare(g).ok());
  auto pg = m->Prepare(train[0]);
  ASSERT_TRUE(pg.ok());
  ConfigBatch b = BatchOf(train[0], 2);
  b.layout_feat.pop_back();
  EXPECT_FALSE(m->ValidateBatch(**pg, b).ok());
  auto unfitted = CostModel::Create(ModelSpec(), TaskKind::kLayout);
  EXPECT_FALSE((*unfitted)->Prepare(train[0]).ok());
}

TEST(CostModelTest, RealDumpsSharedEqualsNaiveAndScoresAreFinite) {
  auto layout = ingest::LoadRawDump(testing::RealDataPath("raw/module_tuning_data_layout.pb"),
                                    ingest::RawDumpOptions());
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout->size(), 1u);
  const Graph& g = (*layout)[0];
  ModelSpec spec;
  spec.set_num_layers(3);
  auto m = FittedModel(spec, TaskKind::kLayout, *layout);
  auto pg = m->Prepare(g);
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  PreparedGraphStats st = GetPreparedGraphStats(**pg);
  EXPECT_EQ(st.num_nodes, g.num_nodes());
  EXPECT_EQ(st.affected_per_layer[0], g.num_config_nodes());
  const int64_t k = std::min<int64_t>(16, g.num_configs);
  ConfigBatch batch = BatchOf(g, k);
  std::vector<float> s(k);
  m->Forward(**pg, batch, s.data(), nullptr);
  for (float v : s) EXPECT_TRUE(std::isfinite(v));
  // Naive path in float on the same inputs.
  const FeatureTransform& ft = m->transform();
  std::vector<float> tf(g.num_nodes() * ft.kept_node_columns());
  ft.ApplyNodeFeatures(g.node_feat.data(), g.num_nodes(), tf.data());
  auto gs = internal::BuildGraphStructure(spec, TaskKind::kLayout, g.node_opcode, g.edge_index,
                                          g.node_config_ids, ft.kept_node_column_ids(), {}, true,
                                          "naive");
  ASSERT_TRUE(gs.ok());
  internal::FillLayoutTensorInfo(g.node_feat.data(), &*gs);
  internal::Gnn<float> gnn(spec, TaskKind::kLayout);
  internal::GnnInputs<float> in;
  in.node_feat = tf.data();
  in.k = k;
  in.layout_cfg = batch.layout_feat.data();
  std::vector<float> sn(k);
  gnn.Forward(m->parameters(), *gs, in, sn.data(), nullptr);
  float scale = 1e-6f;
  for (float v : sn) scale = std::max(scale, std::fabs(v));
  for (int64_t c = 0; c < k; ++c) EXPECT_NEAR(s[c], sn[c], 1e-5 * scale) << "config " << c;
  // Different configurations get different scores.
  EXPECT_NE(*std::min_element(s.begin(), s.end()), *std::max_element(s.begin(), s.end()));

  auto tile =
      ingest::LoadRawDump(testing::RealDataPath("raw/op_tuning_data.pb"), ingest::RawDumpOptions());
  ASSERT_TRUE(tile.ok()) << tile.status().ToString();
  auto mt = FittedModel(ModelSpec(), TaskKind::kTile, *tile);
  for (const Graph& tg : *tile) {
    auto tpg = mt->Prepare(tg);
    ASSERT_TRUE(tpg.ok()) << tpg.status().ToString();
    ConfigBatch tb = BatchOf(tg, tg.num_configs);
    std::vector<float> ts(tg.num_configs);
    mt->Forward(**tpg, tb, ts.data(), nullptr);
    for (float v : ts) EXPECT_TRUE(std::isfinite(v)) << tg.name;
  }
}

// config_loop_depth: Prepare takes the loop depths from the whole graph, so pruning (which cuts
// a configurable node off from the while node around it) does not lose them.
TEST(CostModelTest, LoopDepthSurvivesPruning) {
  Graph g;
  g.name = "looped";
  g.kind = TaskKind::kLayout;
  g.collection = "layout:synth:random";
  const xla::HloModuleProto m = synth::GenerateLayoutProgram(1500, 3, "looped");
  ASSERT_TRUE(ingest::BuildProgramGraph(m, "looped", &g).ok());
  // Every convolution, dot and reshape with an operand is configurable (any choice works here).
  for (int64_t v = 0; v < g.num_nodes(); ++v) {
    const int op = g.node_opcode[v];
    if (op == 26 || op == 34 || op == 75) g.node_config_ids.push_back(v);
  }
  const std::vector<int32_t> depth = ConfigNodeLoopDepths(g);
  ASSERT_GT(*std::max_element(depth.begin(), depth.end()), 0) << "the program needs a loop";
  const int64_t nc = g.num_config_nodes(), k = 6;
  g.num_configs = k;
  g.config_runtime.assign(k, 1000);
  Rng rng(5);
  for (int64_t i = 0; i < k * nc * kLayoutConfigFeatureCount; ++i) {
    g.node_config_feat.push_back(static_cast<int8_t>(static_cast<int>(rng.UniformInt(7)) - 1));
  }
  ModelSpec spec;
  spec.set_prune_hops(1);
  spec.set_config_loop_depth(true);
  spec.set_config_node_head(4);
  auto model = FittedModel(spec, TaskKind::kLayout, {g});
  auto pruned = PruneToConfigNeighbourhood(g, 1, nullptr);
  ASSERT_TRUE(pruned.ok());
  ASSERT_LT(pruned->num_nodes(), g.num_nodes());
  const ConfigBatch batch = BatchOf(g, k);
  auto scores = [&](StatusOr<std::unique_ptr<PreparedGraph>> pg) {
    EXPECT_TRUE(pg.ok()) << pg.status().ToString();
    std::vector<float> s(k);
    model->Forward(**pg, batch, s.data(), nullptr);
    return s;
  };
  const std::vector<float> via_prepare = scores(model->Prepare(g));
  WholeGraphContext context;
  context.loop_depth = depth;
  const std::vector<float> given = scores(model->PrepareExact(*pruned, &context));
  const std::vector<float> from_pruned = scores(model->PrepareExact(*pruned));
  EXPECT_EQ(via_prepare, given);
  // The pruned graph alone has lost (some of) its loops: its own depths differ, and so do scores.
  EXPECT_NE(ConfigNodeLoopDepths(*pruned), depth);
  EXPECT_NE(via_prepare, from_pruned);
  // A depth list of the wrong length is refused.
  WholeGraphContext short_context;
  short_context.loop_depth.assign(depth.begin(), depth.end() - 1);
  EXPECT_FALSE(model->PrepareExact(*pruned, &short_context).ok());
}

// config_random_walk: the return probabilities come from the graph the model sees. Without
// message passing a node's state reads only its own features, so an edge that keeps the pruned
// node set changes the scores only through the walks: an edge at a configurable node changes
// them, an edge that pruning removes does not, and without the option neither does.
TEST(CostModelTest, RandomWalkColumnsReadThePrunedGraph) {
  const int64_t n = 300, nc = 2, k = 5;
  Graph g = MakeGraph(TaskKind::kLayout, n, nc, k, 17);
  // Undirected hop distances from the configurable nodes.
  std::vector<std::vector<int64_t>> nb(n);
  for (size_t e = 0; e + 1 < g.edge_index.size(); e += 2) {
    nb[g.edge_index[e]].push_back(g.edge_index[e + 1]);
    nb[g.edge_index[e + 1]].push_back(g.edge_index[e]);
  }
  std::vector<int64_t> dist(n, -1), queue(g.node_config_ids.begin(), g.node_config_ids.end());
  for (int64_t v : queue) dist[v] = 0;
  for (size_t q = 0; q < queue.size(); ++q) {
    for (int64_t w : nb[queue[q]]) {
      if (dist[w] < 0) {
        dist[w] = dist[queue[q]] + 1;
        queue.push_back(w);
      }
    }
  }
  std::vector<int64_t> far;
  for (int64_t v = 0; v < n; ++v) {
    if (dist[v] >= 4) far.push_back(v);
  }
  ASSERT_GE(far.size(), 2u) << "the graph needs nodes 4 hops from every configurable node";
  // An edge from a configurable node to a node 1 hop from the configurable nodes keeps the set
  // of nodes within 2 hops, and with it the pooled states.
  const int64_t c0 = g.node_config_ids[0];
  int64_t w1 = -1;
  for (int64_t v = 0; v < n && w1 < 0; ++v) {
    if (dist[v] == 1) w1 = v;
  }
  ASSERT_GE(w1, 0);
  auto with_edge = [&](int64_t consumer, int64_t producer) {
    Graph h = g;
    h.edge_index.push_back(std::max(consumer, producer));
    h.edge_index.push_back(std::min(consumer, producer));
    return h;
  };
  const Graph near = with_edge(c0, w1);
  const Graph away = with_edge(far[0], far[1]);
  auto scores = [&](const ModelSpec& spec, const Graph& graph) {
    auto model = FittedModel(spec, TaskKind::kLayout, {g});
    auto pg = model->Prepare(graph);
    EXPECT_TRUE(pg.ok()) << pg.status().ToString();
    std::vector<float> s(k);
    model->Forward(**pg, BatchOf(graph, k), s.data(), nullptr);
    return s;
  };
  ModelSpec spec;
  spec.set_num_layers(0);
  spec.set_prune_hops(2);
  spec.set_config_node_head(4);
  const std::vector<float> plain = scores(spec, g);
  EXPECT_EQ(scores(spec, near), plain);
  spec.set_config_random_walk(4);
  const std::vector<float> walk = scores(spec, g);
  EXPECT_NE(walk, plain);
  EXPECT_NE(scores(spec, near), walk);
  EXPECT_EQ(scores(spec, away), walk);
}

// The scores of graph's first six configurations under a layout model of `spec` (feature
// transform fitted on `train`, parameters from seed 7), and the gradient of a fixed weighting of
// them into *grad.
std::vector<float> ScoresAndGradient(const ModelSpec& spec, const Graph& train, const Graph& graph,
                                     std::vector<float>* grad) {
  const int64_t k = 6;
  auto m = FittedModel(spec, TaskKind::kLayout, {train});
  auto pg = m->Prepare(graph);
  EXPECT_TRUE(pg.ok()) << pg.status().ToString();
  std::vector<float> s(k);
  auto tape = m->NewTape();
  const ConfigBatch batch = BatchOf(graph, k);
  m->Forward(**pg, batch, s.data(), tape.get());
  const std::vector<float> ds = {1, -1, 0.5, 0.25, -2, 0.1};
  grad->assign(m->num_parameters(), 0.0f);
  m->Backward(**pg, batch, *tape, ds.data(), grad->data());
  return s;
}

// The virtual node's surgery on a hand-made graph: 0 <- 1 <- {2, 3}, 3 <- 4 (edges are
// [consumer, producer]), configurable nodes 4 and 1.
TEST(VirtualNodeTest, JoinsTheOutputsOrTheConfigurableNodes) {
  Graph g;
  g.name = "five";
  g.kind = TaskKind::kLayout;
  g.collection = "layout:xla:random";
  g.node_opcode = {1, 2, 3, 4, 5};
  for (int v = 0; v < 5; ++v) g.node_feat.insert(g.node_feat.end(), kNodeFeatureCount, v + 1.0f);
  g.edge_index = {1, 0, 2, 1, 3, 1, 4, 3};
  g.node_config_ids = {4, 1};
  g.node_splits = {0, 5};
  g.num_configs = 1;
  g.node_config_feat.assign(2 * kLayoutConfigFeatureCount, 1);

  Graph out = GraphStructureOf(g);
  EXPECT_TRUE(out.node_config_feat.empty());
  ASSERT_TRUE(AddVirtualNode(ModelSpec::VIRTUAL_NODE_OUTPUTS, 127, &out).ok());
  EXPECT_EQ(out.num_nodes(), 6);
  EXPECT_EQ(out.node_opcode.back(), 127);
  EXPECT_EQ(out.node_feat.size(), 6u * kNodeFeatureCount);
  EXPECT_TRUE(std::all_of(out.node_feat.begin() + 5 * kNodeFeatureCount, out.node_feat.end(),
                          [](float x) { return x == 0.0f; }));
  // Nodes 2 and 4 are read by no edge: the outputs.
  EXPECT_EQ(out.edge_index, (std::vector<int64_t>{1, 0, 2, 1, 3, 1, 4, 3, 5, 2, 5, 4}));
  EXPECT_EQ(out.node_config_ids, g.node_config_ids);
  EXPECT_EQ(out.node_splits, g.node_splits);

  Graph conf = g;
  conf.node_config_ids = {4, 1, 4};  // a repeat is joined once
  ASSERT_TRUE(AddVirtualNode(ModelSpec::VIRTUAL_NODE_CONFIGURABLE, 127, &conf).ok());
  EXPECT_EQ(conf.edge_index, (std::vector<int64_t>{1, 0, 2, 1, 3, 1, 4, 3, 5, 4, 5, 1}));
  EXPECT_EQ(conf.node_config_feat, g.node_config_feat);

  Graph same = g;
  ASSERT_TRUE(AddVirtualNode(ModelSpec::VIRTUAL_NODE_NONE, 127, &same).ok());
  EXPECT_EQ(same.edge_index, g.edge_index);
  same.kind = TaskKind::kTile;
  ASSERT_TRUE(AddVirtualNode(ModelSpec::VIRTUAL_NODE_OUTPUTS, 127, &same).ok());
  EXPECT_EQ(same.num_nodes(), 5);

  Graph bad = g;
  bad.edge_index.push_back(0);
  bad.edge_index.push_back(9);
  const Status st = AddVirtualNode(ModelSpec::VIRTUAL_NODE_OUTPUTS, 127, &bad);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("five"), std::string::npos) << st.ToString();
  bad = g;
  bad.node_config_ids.push_back(7);
  EXPECT_FALSE(AddVirtualNode(ModelSpec::VIRTUAL_NODE_CONFIGURABLE, 127, &bad).ok());
  EXPECT_FALSE(AddVirtualNode(ModelSpec::VIRTUAL_NODE_OUTPUTS, 256, &bad).ok());
}

// A model with virtual_node is the model without it on the pruned graph with the node added by
// hand: the same parameters (the node adds none), the same scores and gradient, bit for bit. So
// the option's gradients are the message-passing layers' own, checked by finite differences in
// gnn_test.cc. Its opcode row (num_opcodes - 1) is trained, and two layers carry it back.
TEST(CostModelTest, VirtualNodeIsTheNodeAddedToThePrunedGraph) {
  const int64_t k = 6;
  const Graph g = MakeGraph(TaskKind::kLayout, 120, 4, k, 31);
  for (auto mode : {ModelSpec::VIRTUAL_NODE_OUTPUTS, ModelSpec::VIRTUAL_NODE_CONFIGURABLE}) {
    ModelSpec with;
    with.set_hidden_dim(8);
    with.set_num_layers(2);
    with.set_prune_hops(1);
    with.set_config_node_head(4);
    with.set_virtual_node(mode);
    ModelSpec without = with;
    without.set_virtual_node(ModelSpec::VIRTUAL_NODE_NONE);
    ModelSpec by_hand = without;
    by_hand.set_prune_hops(-1);
    auto pruned = PruneToConfigNeighbourhood(g, 1, nullptr);
    ASSERT_TRUE(pruned.ok());
    ASSERT_TRUE(AddVirtualNode(mode, with.num_opcodes() - 1, &*pruned).ok());

    auto run = [&](const ModelSpec& spec, const Graph& graph, std::vector<float>* grad) {
      return ScoresAndGradient(spec, g, graph, grad);
    };
    std::vector<float> g_with, g_hand, g_without;
    const std::vector<float> s_with = run(with, g, &g_with);
    EXPECT_EQ(s_with, run(by_hand, *pruned, &g_hand)) << mode;
    EXPECT_EQ(g_with, g_hand) << mode;
    EXPECT_NE(s_with, run(without, g, &g_without)) << mode;
    // The virtual node's embedding row has a gradient; without the node it has none.
    const int64_t row = with.num_opcodes() - 1, D = with.opcode_embedding_dim();
    auto m = FittedModel(with, TaskKind::kLayout, {g});
    int64_t table = -1;
    for (const auto& b : m->parameter_blocks()) {
      if (b.name == "opcode_embedding") table = b.offset;
    }
    ASSERT_GE(table, 0);
    auto norm = [&](const std::vector<float>& grad) {
      double a = 0;
      for (int64_t d = 0; d < D; ++d) a += std::fabs(grad[table + row * D + d]);
      return a;
    };
    EXPECT_GT(norm(g_with), 0.0) << mode;
    EXPECT_EQ(norm(g_without), 0.0) << mode;
  }
  // The spec: no segments, and a row above the release's opcodes.
  ModelSpec spec;
  spec.set_virtual_node(ModelSpec::VIRTUAL_NODE_OUTPUTS);
  EXPECT_TRUE(CostModel::Create(spec, TaskKind::kLayout).ok());
  spec.set_segment_size(100);
  EXPECT_FALSE(CostModel::Create(spec, TaskKind::kLayout).ok());
  spec.set_segment_size(0);
  spec.set_num_opcodes(121);
  EXPECT_FALSE(CostModel::Create(spec, TaskKind::kLayout).ok());
}

// Chain folding on a hand-made graph (edges [consumer, producer]): 0 -> 1 -> 2 -> 3 -> 4 with 3
// configurable, 4 also reading 0, and 5 reading 2 twice.
//   links: 1 (reads 0 once, read by 2 once); 2 is read three times, 3 is configurable, 0 reads
//   nothing, 4 reads two, 5 reads two edges.
TEST(ChainFoldingTest, RemovesLinksAndReadsUpTheChain) {
  Graph g;
  g.name = "chain";
  g.kind = TaskKind::kLayout;
  g.collection = "layout:xla:random";
  g.node_opcode = {10, 11, 12, 13, 14, 15};
  for (int v = 0; v < 6; ++v) g.node_feat.insert(g.node_feat.end(), kNodeFeatureCount, v + 0.5f);
  g.edge_index = {1, 0, 2, 1, 3, 2, 4, 3, 4, 0, 5, 2, 5, 2};
  g.node_config_ids = {3};
  g.node_splits = {0, 2, 6};
  g.num_configs = 2;
  g.node_config_feat.assign(2 * kLayoutConfigFeatureCount, 1);
  std::vector<int64_t> kept;
  auto out = FoldChains(g, &kept);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(kept, (std::vector<int64_t>{0, 2, 3, 4, 5}));
  EXPECT_EQ(out->node_opcode, (std::vector<uint8_t>{10, 12, 13, 14, 15}));
  EXPECT_EQ(out->node_feat[kNodeFeatureCount], 2.5f);
  // 2 now reads 0 (through 1); the other edges are renumbered.
  EXPECT_EQ(out->edge_index, (std::vector<int64_t>{1, 0, 2, 1, 3, 2, 3, 0, 4, 1, 4, 1}));
  EXPECT_EQ(out->node_config_ids, (std::vector<int64_t>{2}));
  EXPECT_EQ(out->node_splits, (std::vector<int64_t>{0, 1, 5}));
  EXPECT_TRUE(out->node_config_feat.empty());

  // A longer chain folds in one go, and a configurable link stays.
  Graph c = g;
  c.edge_index = {1, 0, 2, 1, 3, 2, 4, 3, 5, 4};
  auto folded = FoldChains(c, nullptr);
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(folded->edge_index, (std::vector<int64_t>{1, 0, 2, 1}));  // 3 reads 0, 5 reads 3
  EXPECT_EQ(folded->num_nodes(), 3);
  EXPECT_EQ(folded->node_config_ids, (std::vector<int64_t>{1}));

  Graph bad = g;
  bad.edge_index.push_back(9);
  bad.edge_index.push_back(0);
  const auto st = FoldChains(bad, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().ToString().find("chain"), std::string::npos);
  bad = g;
  bad.node_config_ids = {6};
  EXPECT_FALSE(FoldChains(bad, nullptr).ok());
  Graph tile = MakeGraph(TaskKind::kTile, 20, 0, 2, 3);
  auto same = FoldChains(tile, nullptr);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->edge_index, tile.edge_index);
}

// fold_chains is the model without it on the folded graph: the same scores and gradient, bit for
// bit, pruned after folding; and folding changes what a pruned model sees.
TEST(CostModelTest, FoldedChainsAreTheFoldedGraph) {
  const int64_t k = 6;
  const Graph g = MakeGraph(TaskKind::kLayout, 150, 4, k, 41);
  auto folded = FoldChains(g, nullptr);
  ASSERT_TRUE(folded.ok());
  ASSERT_LT(folded->num_nodes(), g.num_nodes()) << "the test graph needs chain links";
  folded->num_configs = g.num_configs;
  folded->node_config_feat = g.node_config_feat;
  ModelSpec with;
  with.set_hidden_dim(8);
  with.set_num_layers(2);
  with.set_prune_hops(1);
  with.set_config_node_head(4);
  with.set_fold_chains(true);
  ModelSpec without = with;
  without.set_fold_chains(false);
  auto run = [&](const ModelSpec& spec, const Graph& graph, std::vector<float>* grad) {
    return ScoresAndGradient(spec, g, graph, grad);
  };
  std::vector<float> g_with, g_hand, g_without;
  const std::vector<float> s_with = run(with, g, &g_with);
  EXPECT_EQ(s_with, run(without, *folded, &g_hand));
  EXPECT_EQ(g_with, g_hand);
  EXPECT_NE(s_with, run(without, g, &g_without));
}

TEST(RepeatMergingTest, MergesRepeatsBottomUpAndKeepsTheEdges) {
  // 0, 1: the same parameter twice; 2 = f(0) and 3 = f(1), the same op of each; 4 reads 2 and 3;
  // 5 = f(0) but configurable; 6 has 2's opcode and operand but other features; 7 reads 3.
  Graph g;
  g.name = "repeats";
  g.kind = TaskKind::kLayout;
  g.collection = "layout:xla:random";
  g.node_opcode = {1, 1, 2, 2, 3, 2, 2, 4};
  const float feat[8] = {0.5f, 0.5f, 2.5f, 2.5f, 4.5f, 2.5f, 6.5f, 7.5f};
  for (float f : feat) g.node_feat.insert(g.node_feat.end(), kNodeFeatureCount, f);
  g.edge_index = {2, 0, 3, 1, 4, 2, 4, 3, 5, 0, 6, 0, 7, 3};
  g.node_config_ids = {4, 5};
  g.node_splits = {0, 4, 8};
  g.num_configs = 2;
  g.node_config_feat.assign(2 * 2 * kLayoutConfigFeatureCount, 1);
  std::vector<int64_t> kept;
  auto out = MergeRepeated(g, &kept);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // 1 merges into 0; 3 then reads the kept 0 as 2 does and merges into 2 (in the same pass: 1
  // comes before 3).
  EXPECT_EQ(kept, (std::vector<int64_t>{0, 2, 4, 5, 6, 7}));
  EXPECT_EQ(out->node_opcode, (std::vector<uint8_t>{1, 2, 3, 2, 2, 4}));
  EXPECT_EQ(out->node_feat[3 * kNodeFeatureCount], 2.5f);
  // 4 reads the kept 2 twice; 7 reads 2 for 3; the configurable 5 and the other 6 stay.
  EXPECT_EQ(out->edge_index, (std::vector<int64_t>{1, 0, 2, 1, 2, 1, 3, 0, 4, 0, 5, 1}));
  EXPECT_EQ(out->node_config_ids, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out->node_splits, (std::vector<int64_t>{0, 2, 6}));
  EXPECT_TRUE(out->node_config_feat.empty());

  // Operands in another order are another computation: 2 = f(0, 1) and 3 = f(1, 0) stay.
  Graph order = g;
  order.node_opcode = {1, 1, 2, 2, 3};
  order.node_feat.clear();
  for (float f : {0.5f, 1.5f, 2.5f, 2.5f, 4.5f}) {
    order.node_feat.insert(order.node_feat.end(), kNodeFeatureCount, f);
  }
  order.edge_index = {2, 0, 2, 1, 3, 1, 3, 0, 4, 2, 4, 3};
  order.node_config_ids = {4};
  order.node_splits = {0, 5};
  auto other = MergeRepeated(order, nullptr);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(other->num_nodes(), 5);
  EXPECT_EQ(other->edge_index, order.edge_index);

  // Readers before their operands: 0 = f(3) and 1 = f(2) merge only once 3 has merged into 2,
  // in a second pass; the configurable 4 reads both.
  Graph later = order;
  later.node_opcode = {2, 2, 1, 1, 3};
  later.node_feat.clear();
  for (float f : {2.5f, 2.5f, 0.5f, 0.5f, 4.5f}) {
    later.node_feat.insert(later.node_feat.end(), kNodeFeatureCount, f);
  }
  later.edge_index = {0, 3, 1, 2, 4, 0, 4, 1};
  auto passes = MergeRepeated(later, &kept);
  ASSERT_TRUE(passes.ok()) << passes.status().ToString();
  EXPECT_EQ(kept, (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(passes->edge_index, (std::vector<int64_t>{0, 1, 2, 0, 2, 0}));

  Graph bad = g;
  bad.edge_index.push_back(9);
  bad.edge_index.push_back(0);
  const auto st = MergeRepeated(bad, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().ToString().find("repeats"), std::string::npos);
  bad = g;
  bad.node_config_ids = {8};
  EXPECT_FALSE(MergeRepeated(bad, nullptr).ok());
  bad = g;
  bad.node_feat.pop_back();
  EXPECT_FALSE(MergeRepeated(bad, nullptr).ok());
  Graph tile = MakeGraph(TaskKind::kTile, 20, 0, 2, 3);
  auto same = MergeRepeated(tile, nullptr);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->edge_index, tile.edge_index);
}

// The release's two layout programs in tests/data: the nodes and edges kept and the 1- and 3-hop
// neighbourhoods of the configurable nodes after merging, as an independent numpy loop over the
// .npz arrays counted them (docs/model.md, "Merged repeats").
TEST(RepeatMergingTest, ReleaseProgramsMergeAsNumpyCounts) {
  struct Case {
    const char* path;
    int64_t nodes, kept, kept_edges, hop1, hop3;
  };
  const Case cases[] = {
      {"npz/release/layout/xla/random/train/openai_v0_rnn_optimized.npz", 1277, 847, 1701, 184,
       617},
      {"npz/release/layout/xla/default/valid/unet_3d.4x4.bf16.npz", 3163, 2234, 4243, 218, 752}};
  for (const Case& c : cases) {
    auto g =
        ingest::LoadReleaseNpz(testing::RealDataPath(c.path), "layout:xla:random", "train", "real");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_EQ(g->num_nodes(), c.nodes) << c.path;
    auto merged = MergeRepeated(*g, nullptr);
    ASSERT_TRUE(merged.ok()) << merged.status().ToString();
    EXPECT_EQ(merged->num_nodes(), c.kept) << c.path;
    EXPECT_EQ(merged->num_edges(), c.kept_edges) << c.path;
    EXPECT_EQ(merged->node_config_ids.size(), g->node_config_ids.size()) << c.path;
    for (auto [hops, want] : {std::pair<int, int64_t>{1, c.hop1}, {3, c.hop3}}) {
      auto pruned = PruneToConfigNeighbourhood(*merged, hops, nullptr);
      ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
      EXPECT_EQ(pruned->num_nodes(), want) << c.path << " at " << hops << " hops";
    }
  }
}

// merge_repeated is the model without it on the graph without the repeats: a graph with two of
// its nodes built twice (a node with no operand and a reader of it), some readers reading the
// copies, scores and gradient bit for bit as the graph without the copies; and the copies change
// what the model without merging sees.
TEST(CostModelTest, MergedRepeatsAreTheGraphWithoutThem) {
  const int64_t k = 6;
  const Graph g = MakeGraph(TaskKind::kLayout, 150, 4, k, 43);
  const int64_t n = g.num_nodes();
  // MakeGraph's node u > 0 reads one earlier node: node 0 reads none. Find a reader r of 0 that
  // is not configurable.
  std::vector<uint8_t> configurable(n, 0);
  for (int64_t v : g.node_config_ids) configurable[v] = 1;
  int64_t r = -1;
  for (int64_t e = 0; e < g.num_edges() && r < 0; ++e) {
    if (g.edge_index[2 * e + 1] == 0 && !configurable[g.edge_index[2 * e]]) {
      r = g.edge_index[2 * e];
    }
  }
  ASSERT_GT(r, 0);
  Graph copies = g;
  copies.node_opcode.push_back(g.node_opcode[0]);  // n: a copy of 0
  copies.node_opcode.push_back(g.node_opcode[r]);  // n + 1: a copy of r, reading n
  for (int64_t v : {int64_t{0}, r}) {
    copies.node_feat.insert(copies.node_feat.end(), g.node_feat.begin() + v * kNodeFeatureCount,
                            g.node_feat.begin() + (v + 1) * kNodeFeatureCount);
  }
  int64_t moved = 0;
  for (int64_t e = 0; e < g.num_edges(); ++e) {
    int64_t& operand = copies.edge_index[2 * e + 1];
    if (operand == r && copies.edge_index[2 * e] % 2 == 1) operand = n + 1, ++moved;
    if (operand == 0 && copies.edge_index[2 * e] != r && e % 2 == 0) operand = n, ++moved;
  }
  ASSERT_GT(moved, 0);
  copies.edge_index.push_back(n + 1);
  copies.edge_index.push_back(n);
  if (!copies.node_splits.empty()) copies.node_splits.back() = n + 2;
  auto merged = MergeRepeated(copies, nullptr);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->edge_index, g.edge_index);
  EXPECT_EQ(merged->num_nodes(), n);
  ModelSpec with;
  with.set_hidden_dim(8);
  with.set_num_layers(2);
  with.set_prune_hops(3);
  with.set_config_node_head(4);
  with.set_merge_repeated(true);
  ModelSpec without = with;
  without.set_merge_repeated(false);
  std::vector<float> g_with, g_hand, g_without;
  const std::vector<float> s_with = ScoresAndGradient(with, copies, copies, &g_with);
  EXPECT_EQ(s_with, ScoresAndGradient(without, copies, g, &g_hand));
  EXPECT_EQ(g_with, g_hand);
  ModelSpec whole = without;
  whole.set_prune_hops(-1);
  EXPECT_NE(ScoresAndGradient(whole, copies, copies, &g_without),
            ScoresAndGradient(whole, copies, g, &g_hand));
}

// Cross-configuration attention: scores depend on the batch. With a tape the whole batch attends;
// without one, inference is defined as the mean over permutations of batches of
// config_attention_batch, the last batch filled up with the order's first configurations.
TEST(CostModelTest, AttentionInferenceAveragesFixedSizeBatchesOverPermutations) {
  const int64_t k = 11, nc = 4, B = 4;
  Graph g = MakeGraph(TaskKind::kLayout, 40, nc, k, 3);
  ModelSpec spec;
  spec.set_hidden_dim(8);
  spec.set_config_node_head(5);
  spec.set_config_node_head_pooling(ModelSpec::NODE_HEAD_POOLING_LOGSUMEXP);
  spec.set_config_attention(3);
  spec.set_config_attention_batch(B);
  spec.set_config_attention_permutations(3);
  auto model = FittedModel(spec, TaskKind::kLayout, {g});
  auto pg = model->Prepare(g);
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  const ConfigBatch all = BatchOf(g, k);
  const int64_t per = nc * kLayoutConfigFeatureCount;
  // Scores of the configurations `ids`, attending over exactly them (training mode: a tape).
  auto batch_scores = [&](const std::vector<int64_t>& ids) {
    ConfigBatch b;
    b.num_configs = static_cast<int64_t>(ids.size());
    for (int64_t c : ids) {
      b.layout_feat.insert(b.layout_feat.end(), all.layout_feat.begin() + c * per,
                           all.layout_feat.begin() + (c + 1) * per);
    }
    std::vector<float> s(ids.size());
    auto tape = model->NewTape();
    model->Forward(**pg, b, s.data(), tape.get());
    return s;
  };
  // The training forward is permutation-equivariant, and a config's score depends on the others.
  const std::vector<float> first = batch_scores({0, 1, 2, 3});
  const std::vector<float> reversed = batch_scores({3, 2, 1, 0});
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(first[i], reversed[3 - i], 1e-5f) << i;
  EXPECT_GT(std::fabs(batch_scores({0, 4, 5, 6})[0] - first[0]), 1e-6f);

  // Inference by hand: permutation 0 is the given order, the others seeded shuffles.
  std::vector<double> want(k, 0.0);
  for (int r = 0; r < 3; ++r) {
    std::vector<int64_t> order(k);
    std::iota(order.begin(), order.end(), int64_t{0});
    if (r > 0) {
      Rng rng(DeriveSeed(0, "config_attention_order", static_cast<uint64_t>(r)));
      rng.Shuffle(order);
    }
    for (int64_t b0 = 0; b0 < k; b0 += B) {
      std::vector<int64_t> ids;
      for (int64_t i = 0; i < B; ++i) ids.push_back(order[(b0 + i) % k]);
      const std::vector<float> s = batch_scores(ids);
      for (int64_t i = 0; i < B && b0 + i < k; ++i) want[ids[i]] += s[i] / 3.0;
    }
  }
  std::vector<float> got(k);
  model->Forward(**pg, all, got.data(), nullptr);
  for (int64_t c = 0; c < k; ++c) EXPECT_NEAR(got[c], want[c], 1e-5 * (1 + std::fabs(want[c])));
  // Inference is deterministic: the same call twice gives the same scores.
  std::vector<float> again(k);
  model->Forward(**pg, all, again.data(), nullptr);
  EXPECT_EQ(got, again);

  // Attention lives in the per-node term: without config_node_head it is refused.
  ModelSpec bad;
  bad.set_config_attention(4);
  auto m = CostModel::Create(bad, TaskKind::kLayout);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().ToString().find("config_node_head"), std::string::npos);
  // Batch size and permutation count out of range are refused, naming the field.
  for (auto edit : {+[](ModelSpec& x) { x.set_config_attention_batch(0); },
                    +[](ModelSpec& x) { x.set_config_attention_permutations(0); },
                    +[](ModelSpec& x) { x.set_config_attention_permutations(65); }}) {
    ModelSpec out_of_range = spec;
    edit(out_of_range);
    auto r = CostModel::Create(out_of_range, TaskKind::kLayout);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().ToString().find("config_attention_"), std::string::npos);
  }
  // Attention with Graph Segment Training is refused: its scorer has no permutation batches.
  ModelSpec gst = spec;
  gst.set_segment_size(100);
  auto m2 = CostModel::Create(gst, TaskKind::kLayout);
  ASSERT_FALSE(m2.ok());
  EXPECT_NE(m2.status().ToString().find("segment_size"), std::string::npos);
}

}  // namespace
}  // namespace tpugraphs::model
