#include "tpugraphs/train/ridge_baseline.h"

#include <gtest/gtest.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "testing/test_util.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "tpugraphs/train/config_sampling.h"

namespace tpugraphs::train {
namespace {

// A layout graph whose log runtime is a sum of per-(node, slot, value) effects plus noise.
Graph AdditiveLayoutGraph(int64_t configs, int64_t nc, double noise, uint64_t seed) {
  Graph g;
  g.name = "additive";
  g.collection = "layout:synth:random";
  g.kind = TaskKind::kLayout;
  g.num_configs = configs;
  for (int64_t j = 0; j < nc; ++j) g.node_config_ids.push_back(j);
  Rng rng(seed);
  std::vector<double> effect(nc * 18 * 4);
  for (double& e : effect) e = 0.3 * rng.Normal();
  for (int64_t i = 0; i < configs; ++i) {
    double log_rt = 10.0;
    for (int64_t s = 0; s < nc * 18; ++s) {
      // Only the first 6 slots of each node vary (values -1..2), the rest stay -1, as in real
      // layout configs where most dims are unused.
      int v = (s % 18) < 6 ? static_cast<int>(rng.UniformInt(4)) - 1 : -1;
      g.node_config_feat.push_back(static_cast<int8_t>(v));
      if ((s % 18) < 6) log_rt += effect[s * 4 + v + 1];
    }
    g.config_runtime.push_back(static_cast<int64_t>(std::exp(log_rt + noise * rng.Normal())));
  }
  return g;
}

TEST(LayoutRidgeTest, MatchesNumpyRidge) {
  Graph g = AdditiveLayoutGraph(40, 3, 0.1, 7);
  const int64_t row = 3 * 18;
  std::vector<double> y;
  for (int64_t i = 0; i < 30; ++i) y.push_back(std::log(g.NormalizedRuntime(i)));
  auto ridge = LayoutRidge::Fit(g.node_config_feat.data(), 30, 3, y.data(), 0.5);
  ASSERT_TRUE(ridge.ok()) << ridge.status().ToString();
  std::vector<double> pred = ridge->Predict(g.node_config_feat.data() + 30 * row, 10);

  ::tpugraphs::testing::TempDir dir;
  {
    std::ofstream f(dir.File("x.bin"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(g.node_config_feat.data()), 40 * row);
    std::ofstream t(dir.File("y.bin"), std::ios::binary);
    t.write(reinterpret_cast<const char*>(y.data()), y.size() * sizeof(double));
  }
  // Independent one-hot ridge in numpy: one column per (slot, value) seen in training with the
  // slot not constant, centred, solved with the primal normal equations.
  const std::string code = R"(
import sys, numpy as np
x = np.fromfile(sys.argv[1], dtype=np.int8).reshape(40, 54)
y = np.fromfile(sys.argv[2], dtype=np.float64)
tr, te = x[:30], x[30:]
cols = []
for s in range(54):
    vals = np.unique(tr[:, s])
    if len(vals) > 1:
        cols += [(s, v) for v in vals]
X = np.array([[1.0 if r[s] == v else 0.0 for (s, v) in cols] for r in tr])
T = np.array([[1.0 if r[s] == v else 0.0 for (s, v) in cols] for r in te])
mu = X.mean(0); ym = y.mean()
Xc = X - mu
w = np.linalg.solve(Xc.T @ Xc + 0.5 * np.eye(len(cols)), Xc.T @ (y - ym))
print(' '.join(repr(v) for v in (T - mu) @ w + ym))
)";
  ::tpugraphs::testing::CommandResult r =
      ::tpugraphs::testing::RunPython(code, {dir.File("x.bin"), dir.File("y.bin")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  for (int i = 0; i < 10; ++i) {
    double v;
    ASSERT_TRUE(in >> v);
    EXPECT_NEAR(pred[i], v, 1e-8) << i;
  }
}

TEST(LayoutRidgeTest, DualFormEqualsPrimalForm) {
  // With 12 training rows and 2 nodes the one-hot design is wider than tall (dual form); the
  // same rows duplicated 10 times make it taller than wide (primal form). The ridge solutions
  // then differ only by the scaling of lambda, so compare with lambda scaled by 10.
  Graph g = AdditiveLayoutGraph(12, 2, 0.0, 3);
  std::vector<double> y;
  for (int64_t i = 0; i < 12; ++i) y.push_back(std::log(g.NormalizedRuntime(i)));
  auto narrow = LayoutRidge::Fit(g.node_config_feat.data(), 12, 2, y.data(), 0.1);
  std::vector<int8_t> rep;
  std::vector<double> yrep;
  for (int r = 0; r < 10; ++r) {
    rep.insert(rep.end(), g.node_config_feat.begin(), g.node_config_feat.end());
    yrep.insert(yrep.end(), y.begin(), y.end());
  }
  auto tall = LayoutRidge::Fit(rep.data(), 120, 2, yrep.data(), 1.0);
  ASSERT_TRUE(narrow.ok() && tall.ok());
  ASSERT_GT(narrow->num_columns(), 12);
  ASSERT_LT(tall->num_columns(), 120);
  auto a = narrow->Predict(g.node_config_feat.data(), 12);
  auto b = tall->Predict(g.node_config_feat.data(), 12);
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(a[i], b[i], 1e-9);
}

TEST(LayoutRidgeTest, BlockedNormalEquationsEqualTheDenseSolve) {
  // 1300 rows cross the 512-row accumulation blocks twice; the reference builds the whole
  // centred one-hot design and solves (Xc^T Xc + lambda I) w = Xc^T yc directly.
  const int64_t k = 1300, nc = 3, slots = nc * 18;
  Rng rng(17);
  std::vector<int8_t> x(k * slots);
  std::vector<double> y(k);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t s = 0; s < slots; ++s) {
      x[i * slots + s] = s % 5 == 4 ? 0 : static_cast<int8_t>(rng.UniformInt(s % 3 + 2)) - 1;
    }
    y[i] = rng.Uniform();
  }
  auto ridge = LayoutRidge::Fit(x.data(), k, nc, y.data(), 0.5);
  ASSERT_TRUE(ridge.ok()) << ridge.status().ToString();
  // Columns in the order Fit numbers them: per slot, its distinct values ascending.
  std::vector<std::pair<int64_t, int8_t>> cols;
  for (int64_t s = 0; s < slots; ++s) {
    std::vector<int8_t> vals;
    for (int64_t i = 0; i < k; ++i) vals.push_back(x[i * slots + s]);
    std::sort(vals.begin(), vals.end());
    vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
    if (vals.size() > 1) {
      for (int8_t v : vals) cols.push_back({s, v});
    }
  }
  ASSERT_EQ(ridge->num_columns(), static_cast<int64_t>(cols.size()));
  Eigen::MatrixXd design(k, cols.size());
  for (int64_t i = 0; i < k; ++i) {
    for (size_t c = 0; c < cols.size(); ++c) {
      design(i, c) = x[i * slots + cols[c].first] == cols[c].second ? 1.0 : 0.0;
    }
  }
  Eigen::VectorXd yv = Eigen::Map<Eigen::VectorXd>(y.data(), k);
  const double ymean = yv.mean();
  Eigen::RowVectorXd mu = design.colwise().mean();
  Eigen::MatrixXd xc = design.rowwise() - mu;
  Eigen::MatrixXd a = xc.transpose() * xc;
  a.diagonal().array() += 0.5;
  Eigen::VectorXd w = a.ldlt().solve(xc.transpose() * (yv.array() - ymean).matrix());
  Eigen::VectorXd want = (xc * w).array() + ymean;
  std::vector<double> got = ridge->Predict(x.data(), k);
  for (int64_t i = 0; i < k; ++i) ASSERT_NEAR(got[i], want[i], 1e-9) << i;
}

TEST(LayoutRidgeTest, TooManyColumnsIsAnErrorThatSaysSo) {
  // 460 configurable nodes x 18 slots with two values each: 16560 columns > kMaxRidgeColumns.
  const int64_t k = 2, nc = 460;
  std::vector<int8_t> x(k * nc * 18);
  for (size_t i = 0; i < x.size() / 2; ++i) x[i] = 1;
  double y[2] = {0.0, 1.0};
  auto ridge = LayoutRidge::Fit(x.data(), k, nc, y, 1.0);
  ASSERT_FALSE(ridge.ok());
  EXPECT_EQ(ridge.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(ridge.status().message().find("16560 one-hot columns"), std::string::npos)
      << ridge.status().message();
}

TEST(LayoutRidgeTest, RejectsBadInput) {
  int8_t v[18] = {};
  double nan = std::nan("");
  EXPECT_FALSE(LayoutRidge::Fit(v, 1, 1, &nan, 1.0).ok());
  double one = 1.0;
  EXPECT_FALSE(LayoutRidge::Fit(v, 1, 1, &one, 0.0).ok());
  EXPECT_FALSE(LayoutRidge::Fit(v, 0, 1, &one, 1.0).ok());
}

TEST(RidgeBaselineTest, LearnsAnAdditiveCostOnHeldOutConfigs) {
  Graph g = AdditiveLayoutGraph(300, 4, 0.05, 11);
  RidgeBaselineOptions options;
  auto r = RunLayoutRidgeBaseline(g, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->kendall_tau.size(), 5u);
  EXPECT_GT(r->mean, 0.8);
  EXPECT_LT(r->mean, 1.0);
  // Pure noise: tau near 0.
  Graph noise = AdditiveLayoutGraph(300, 4, 0.0, 12);
  Rng rng(5);
  for (auto& rt : noise.config_runtime) rt = 1000 + static_cast<int64_t>(rng.UniformInt(100000));
  auto n = RunLayoutRidgeBaseline(noise, options);
  ASSERT_TRUE(n.ok());
  EXPECT_LT(std::fabs(n->mean), 0.15);
}

}  // namespace
}  // namespace tpugraphs::train

namespace tpugraphs::train {
namespace {

// The reference figure of design.md: on held-out configurations of the real layout dump (70/30 by
// distinct configuration, 5 seeds) ridge on one-hot config values reaches Kendall tau about 0.36.
TEST(RidgeBaselineTest, RealLayoutDumpIsInTheExpectedBand) {
  auto graphs = ingest::LoadRawDump(
      ::tpugraphs::testing::RealDataPath("raw/module_tuning_data_layout.pb"), {});
  ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
  ASSERT_EQ(graphs->size(), 1u);
  const Graph& g = (*graphs)[0];
  auto hashes = HashGraphConfigs(g);
  ASSERT_TRUE(hashes.ok());
  RidgeBaselineOptions options;
  auto r = RunLayoutRidgeBaseline(g, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string taus;
  for (double t : r->kendall_tau) taus.append(" ").append(std::to_string(t));
  std::printf("real layout dump: %lld configs, ridge tau per seed:%s; mean %.3f sd %.3f\n",
              static_cast<long long>(g.num_configs), taus.c_str(), r->mean, r->stddev);
  EXPECT_GT(r->mean, 0.2);
  EXPECT_LT(r->mean, 0.55);
}

}  // namespace
}  // namespace tpugraphs::train
