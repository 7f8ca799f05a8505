// A configuration's score is bit-identical whichever configurations, and however many, are
// scored with it (docs/model.md, "Scores do not depend on their neighbours"), at any thread
// count: batch sizes 1 to 40 with the configuration at every position, in float, for every
// model variant without cross-configuration attention. Also the row-independent product kernel
// against its reference loop, and the per-configuration gradients of a training step.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "model/model_test_util.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/model/gnn.h"
#include "tpugraphs/model/row_product.h"

namespace tpugraphs::model {
namespace {

using internal::Gnn;
using internal::GnnTape;
using testutil::MakeRandomCase;
using testutil::RandomCase;

// Bitwise equality, reported with the first differing index.
template <typename T>
::testing::AssertionResult BitEqual(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs " << want[i]
                                           << " (diff " << got[i] - want[i] << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(RowProductTest, EqualsTheReferenceLoopBitForBitAtEveryShape) {
  Rng rng(7);
  // Columns around every packet width (4, 8, 16 floats; 2, 4, 8 doubles) and the tile widths.
  const std::vector<int64_t> cols = {1,  2,  3,  4,  5,  7,  8,  9,  15,
                                     16, 17, 31, 32, 33, 63, 64, 65, 96};
  for (int64_t rows : {0, 1, 2, 3, 4, 5, 7, 8, 9, 13}) {
    for (int64_t n : cols) {
      for (int64_t k : {0, 1, 3, 17, 64}) {
        for (bool acc : {false, true}) {
          const int64_t lda = k + 3, ldb = n + 2, ldc = n + 1;
          std::vector<float> a(rows * lda), b(k * ldb), c0(rows * ldc);
          for (float& v : a) v = static_cast<float>(rng.Normal());
          for (float& v : b) v = static_cast<float>(rng.Normal());
          for (float& v : c0) v = static_cast<float>(rng.Normal());
          std::vector<float> fast = c0, ref = c0;
          RowProduct<float>(a.data(), rows, k, lda, b.data(), n, ldb, fast.data(), ldc, acc);
          RowProductReference<float>(a.data(), rows, k, lda, b.data(), n, ldb, ref.data(), ldc,
                                     acc);
          ASSERT_TRUE(BitEqual(fast, ref))
              << rows << "x" << k << " * " << k << "x" << n << (acc ? " +=" : " =");
          std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
          std::vector<double> fd(c0.begin(), c0.end()), rd = fd;
          RowProduct<double>(ad.data(), rows, k, lda, bd.data(), n, ldb, fd.data(), ldc, acc);
          RowProductReference<double>(ad.data(), rows, k, lda, bd.data(), n, ldb, rd.data(), ldc,
                                      acc);
          ASSERT_TRUE(BitEqual(fd, rd)) << "double " << rows << "x" << k << "x" << n;
        }
      }
    }
  }
}

TEST(RowProductTest, MatchesAnExactProductToRounding) {
  // Small integers: every product and sum is exact in float, so the chain equals the true value.
  Rng rng(3);
  const int64_t rows = 11, k = 37, n = 29;
  std::vector<float> a(rows * k), b(k * n), c(rows * n);
  for (float& v : a) v = static_cast<float>(static_cast<int>(rng.UniformInt(9)) - 4);
  for (float& v : b) v = static_cast<float>(static_cast<int>(rng.UniformInt(9)) - 4);
  RowProduct<float>(a.data(), rows, k, k, b.data(), n, n, c.data(), n, false);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t want = 0;
      for (int64_t p = 0; p < k; ++p) {
        want += static_cast<int64_t>(a[r * k + p]) * static_cast<int64_t>(b[p * n + j]);
      }
      ASSERT_EQ(c[r * n + j], static_cast<float>(want)) << r << "," << j;
    }
  }
}

struct IndependenceVariant {
  const char* name;
  TaskKind task;
  std::function<void(ModelSpec&)> edit;
};

// Widths chosen so that rows and columns leave tails at every packet width: hidden 24 (not a
// multiple of 16), 64 (the default); node heads of odd width; 1-3 layers; early and late tile
// joins; the model's row shards (kLayerRowGrain) split configurations in the larger cases.
std::vector<IndependenceVariant> IndependenceVariants() {
  return {
      {"layout_h64_default", TaskKind::kLayout, [](ModelSpec& s) { s.set_hidden_dim(64); }},
      {"layout_h24_node_head_lse_flow", TaskKind::kLayout,
       [](ModelSpec& s) {
         s.set_hidden_dim(24);
         s.set_config_node_head(7);
         s.set_config_node_head_pooling(ModelSpec::NODE_HEAD_POOLING_LOGSUMEXP);
         s.set_layout_tensor_features(true);
         s.set_layout_size_features(true);
         s.set_layout_flow_features(true);
       }},
      {"layout_h20_gelu_sum_l3_head2", TaskKind::kLayout,
       [](ModelSpec& s) {
         s.set_hidden_dim(20);
         s.set_num_layers(3);
         s.set_activation(ModelSpec::ACTIVATION_GELU);
         s.set_aggregation(ModelSpec::AGGREGATION_SUM);
         s.set_head_layers(2);
         s.set_head_hidden_dim(13);
       }},
      {"tile_h64_late", TaskKind::kTile, [](ModelSpec& s) { s.set_hidden_dim(64); }},
      {"tile_h24_early_gelu", TaskKind::kTile,
       [](ModelSpec& s) {
         s.set_hidden_dim(24);
         s.set_tile_join(ModelSpec::TILE_JOIN_EARLY);
         s.set_activation(ModelSpec::ACTIVATION_GELU);
         s.set_head_hidden_dim(19);
       }},
  };
}

struct BatchCase {
  ModelSpec spec;
  RandomCase rc;  // all kMaxK configurations
  internal::GraphStructure gs;
  std::vector<float> params, feat, tile_cfg;
  int64_t kept_cfg = 0;
};

constexpr int64_t kMaxK = 40;

BatchCase MakeBatchCase(const IndependenceVariant& var, uint64_t seed) {
  BatchCase s;
  s.spec = testutil::SmallSpec(8);
  s.spec.set_num_layers(2);
  var.edit(s.spec);
  // 150 nodes: enough rows per configuration for several row shards at 40 configurations.
  s.rc = MakeRandomCase(var.task, 150, 6, kMaxK, seed);
  s.gs = testutil::BuildStructure(s.spec, s.rc, false);
  Gnn<float> gnn(s.spec, var.task);
  std::vector<double> p64 = testutil::RandomParams(gnn.layout(), seed + 1);
  s.params.assign(p64.begin(), p64.end());
  for (float& v : s.params) v *= 0.5f;
  s.feat.assign(s.rc.node_feat.begin(), s.rc.node_feat.end());
  s.tile_cfg.assign(s.rc.tile_cfg.begin(), s.rc.tile_cfg.end());
  s.kept_cfg = static_cast<int64_t>(s.rc.cfg_cols.size());
  return s;
}

// Scores (and, with ds, the per-configuration tile input gradients) of the configurations
// `picks` (indices into the setup's kMaxK), as one batch.
struct BatchResult {
  std::vector<float> scores, dtile;
};
BatchResult RunBatch(const BatchCase& s, const Gnn<float>& gnn, const std::vector<int64_t>& picks,
                     bool inference, const std::vector<float>* ds_all) {
  const int64_t k = static_cast<int64_t>(picks.size());
  const int64_t nc = static_cast<int64_t>(s.rc.config_nodes.size());
  std::vector<float> tcfg;
  std::vector<int8_t> lcfg;
  for (int64_t c : picks) {
    if (s.rc.task == TaskKind::kTile) {
      tcfg.insert(tcfg.end(), s.tile_cfg.begin() + c * s.kept_cfg,
                  s.tile_cfg.begin() + (c + 1) * s.kept_cfg);
    } else {
      const int64_t w = nc * kLayoutConfigFeatureCount;
      lcfg.insert(lcfg.end(), s.rc.layout_cfg.begin() + c * w,
                  s.rc.layout_cfg.begin() + (c + 1) * w);
    }
  }
  internal::GnnInputs<float> in;
  in.node_feat = s.feat.data();
  in.k = k;
  in.tile_cfg = tcfg.data();
  in.layout_cfg = lcfg.data();
  GnnTape<float> tape;
  tape.inference = inference;
  BatchResult out;
  out.scores.resize(k);
  gnn.Forward(s.params.data(), s.gs, in, out.scores.data(), &tape);
  if (ds_all != nullptr) {
    std::vector<float> ds, grad(s.params.size(), 0.0f);
    for (int64_t c : picks) ds.push_back((*ds_all)[c]);
    out.dtile.assign(k * s.kept_cfg, 0.0f);
    gnn.Backward(s.params.data(), s.gs, in, tape, ds.data(), grad.data(), nullptr,
                 s.rc.task == TaskKind::kTile ? out.dtile.data() : nullptr);
  }
  return out;
}

// Every configuration of the case once, in order: the full batch the others are compared with.
std::vector<int64_t> AllConfigs() {
  std::vector<int64_t> all(kMaxK);
  for (int64_t c = 0; c < kMaxK; ++c) all[c] = c;
  return all;
}

// Batches of every size 1..kMaxK; the configuration under test (`target`) sits at every position
// across the sizes (position = size - 1 - (size % size-dependent offset)), the others are drawn
// at random with repeats, as a user's selection may hold.
std::vector<std::vector<int64_t>> Batches(uint64_t seed) {
  Rng rng(seed);
  std::vector<std::vector<int64_t>> out;
  for (int64_t size = 1; size <= kMaxK; ++size) {
    for (int64_t pos : {int64_t{0}, size / 2, size - 1}) {
      std::vector<int64_t> b(size);
      for (int64_t& c : b) c = static_cast<int64_t>(rng.UniformInt(kMaxK));
      b[pos] = kMaxK - 1 - (size % 7);
      out.push_back(b);
      if (size == 1) break;
    }
  }
  return out;
}

TEST(ScoreIndependenceTest, EveryBatchSizeAndPositionGivesTheFullBatchScores) {
  for (const IndependenceVariant& var : IndependenceVariants()) {
    const BatchCase s = MakeBatchCase(var, 11);
    const std::vector<int64_t> all = AllConfigs();
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      Gnn<float> gnn(s.spec, var.task);
      gnn.set_pool(&pool);
      const std::vector<float> full = RunBatch(s, gnn, all, true, nullptr).scores;
      for (bool inference : {true, false}) {
        for (const auto& picks : Batches(5)) {
          std::vector<float> want;
          for (int64_t c : picks) want.push_back(full[c]);
          ASSERT_TRUE(BitEqual(RunBatch(s, gnn, picks, inference, nullptr).scores, want))
              << var.name << ": " << picks.size() << " configurations, -j " << threads
              << (inference ? " (inference)" : " (training forward)");
        }
      }
    }
  }
}

// A training step's per-configuration gradients: the gradient reaching configuration c's own
// inputs (the tile config features; for late join also through the head) is a function of c's
// rows and its own d loss / d score alone. Parameter gradients are sums over the batch: they
// are the same at any thread count (trainer tests), and their rounding follows the batch.
TEST(ScoreIndependenceTest, PerConfigurationInputGradientsIgnoreTheRestOfTheBatch) {
  for (const IndependenceVariant& var : IndependenceVariants()) {
    if (var.task != TaskKind::kTile) continue;
    const BatchCase s = MakeBatchCase(var, 23);
    Rng rng(4);
    std::vector<float> ds(kMaxK);
    for (float& v : ds) v = static_cast<float>(rng.Normal());
    const std::vector<int64_t> all = AllConfigs();
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      Gnn<float> gnn(s.spec, var.task);
      gnn.set_pool(&pool);
      const BatchResult full = RunBatch(s, gnn, all, false, &ds);
      for (const auto& picks : Batches(9)) {
        const BatchResult got = RunBatch(s, gnn, picks, false, &ds);
        std::vector<float> want;
        for (int64_t c : picks) {
          want.insert(want.end(), full.dtile.begin() + c * s.kept_cfg,
                      full.dtile.begin() + (c + 1) * s.kept_cfg);
        }
        ASSERT_TRUE(BitEqual(got.dtile, want))
            << var.name << ": " << picks.size() << " configurations, -j " << threads;
      }
    }
  }
}

}  // namespace
}  // namespace tpugraphs::model
