// Helpers shared by the model tests: random graphs for the double-precision GNN, a central
// finite-difference gradient checker with a readable report, and an independent loop-based
// reference forward pass of the documented architecture (docs/model.md).
#ifndef TPUGRAPHS_TESTS_MODEL_MODEL_TEST_UTIL_H_
#define TPUGRAPHS_TESTS_MODEL_MODEL_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "tpugraphs/common/rng.h"
#include "tpugraphs/model/gnn.h"

namespace tpugraphs::model::testutil {

// A random program-like DAG with features and configs, in the GNN's input form.
struct RandomCase {
  TaskKind task = TaskKind::kLayout;
  std::vector<uint8_t> opcodes;
  std::vector<int64_t> edges;         // [m, 2] rows [consumer, producer]
  std::vector<int64_t> config_nodes;  // layout
  std::vector<int> node_cols, cfg_cols;
  std::vector<double> node_feat;  // [n, kept]
  int64_t k = 0;
  std::vector<double> tile_cfg;          // [k, kept_cfg]
  std::vector<int8_t> layout_cfg;        // [k, nc, 18]
  std::vector<float> config_loop_depth;  // layout: [nc] (read when the spec asks for it)
  // layout: [nc, kMaxRandomWalk]; a spec's config_random_walk K reads the first K of each row.
  std::vector<float> config_random_walk;
  static constexpr int kMaxRandomWalk = 8;
  internal::GnnInputs<double> Inputs() const {
    internal::GnnInputs<double> in;
    in.node_feat = node_feat.data();
    in.k = k;
    in.tile_cfg = tile_cfg.data();
    in.layout_cfg = layout_cfg.data();
    return in;
  }
};

// A tiny model for gradient checks: hidden width `hidden`, 2 layers, 8 opcodes, one head layer
// of 4.
inline ModelSpec SmallSpec(int hidden) {
  ModelSpec s;
  s.set_hidden_dim(hidden);
  s.set_num_layers(2);
  s.set_opcode_embedding_dim(3);
  s.set_num_opcodes(8);
  s.set_layout_value_embedding_dim(2);
  s.set_layout_value_max(5);
  s.set_head_hidden_dim(4);
  s.set_head_layers(1);
  return s;
}

inline RandomCase MakeRandomCase(TaskKind task, int64_t n, int64_t nc, int64_t k, uint64_t seed,
                                 int num_opcodes = 8) {
  Rng rng(seed);
  RandomCase rc;
  rc.task = task;
  for (int64_t v = 0; v < n; ++v)
    rc.opcodes.push_back(static_cast<uint8_t>(rng.UniformInt(num_opcodes + 2)));
  for (int64_t u = 1; u < n; ++u) {
    const int64_t deg = 1 + static_cast<int64_t>(rng.UniformInt(3));
    for (int64_t d = 0; d < deg; ++d) {
      const int64_t v = static_cast<int64_t>(rng.UniformInt(u));
      rc.edges.push_back(u);
      rc.edges.push_back(v);
    }
  }
  rc.node_cols = {0, 3, 7, 20, 64, 134, 139};
  rc.cfg_cols = {0, 5, 6, 13, 23};
  for (int64_t i = 0; i < n * static_cast<int64_t>(rc.node_cols.size()); ++i) {
    rc.node_feat.push_back(rng.Normal());
  }
  rc.k = k;
  if (task == TaskKind::kLayout) {
    std::vector<int64_t> perm = rng.SampleWithoutReplacement(n, nc);
    rc.config_nodes = perm;
    for (int64_t i = 0; i < k * nc * 18; ++i) {
      // Mostly -1..5; a few out-of-range values exercise the reserved embedding row.
      const uint64_t r = rng.UniformInt(20);
      rc.layout_cfg.push_back(
          static_cast<int8_t>(r < 18 ? static_cast<int>(r % 7) - 1 : (r == 18 ? 9 : -4)));
    }
    for (int64_t j = 0; j < nc; ++j) rc.config_loop_depth.push_back(static_cast<float>(j % 3));
    for (int64_t i = 0; i < nc * RandomCase::kMaxRandomWalk; ++i) {
      rc.config_random_walk.push_back(static_cast<float>(rng.Uniform()));
    }
  } else {
    for (int64_t i = 0; i < k * static_cast<int64_t>(rc.cfg_cols.size()); ++i) {
      rc.tile_cfg.push_back(rng.Normal());
    }
  }
  return rc;
}

inline internal::GraphStructure BuildStructure(const ModelSpec& spec, const RandomCase& rc,
                                               bool naive) {
  auto gs = internal::BuildGraphStructure(spec, rc.task, rc.opcodes, rc.edges, rc.config_nodes,
                                          rc.node_cols, rc.cfg_cols, naive, "test");
  internal::GraphStructure out = std::move(gs).value();
  out.config_loop_depth = rc.config_loop_depth;
  const int K = spec.config_random_walk();
  for (size_t j = 0; K > 0 && j < rc.config_nodes.size(); ++j) {
    const float* row = rc.config_random_walk.data() + j * RandomCase::kMaxRandomWalk;
    out.config_random_walk.insert(out.config_random_walk.end(), row, row + K);
  }
  return out;
}

inline std::vector<double> RandomParams(const internal::ParamLayout& pl, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> p(pl.total);
  for (double& v : p) v = rng.Uniform() - 0.5;
  for (const auto& b : pl.blocks) {
    if (b.name.find("norm_gain") != std::string::npos) {
      for (int64_t i = 0; i < b.rows * b.cols; ++i) p[b.offset + i] += 1.0;
    }
  }
  return p;
}

// Largest |a_i - b_i| relative to the largest |b_i|.
inline double MaxRelDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0, scale = 1e-12;
  for (double v : b) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]) / scale);
  return worst;
}

// Central differences with steps h and h/2 per coordinate. A coordinate whose two estimates
// disagree (a kink or a max-pooling switch inside the step) is skipped and counted.
struct GradCheckReport {
  double max_rel = 0.0;
  int64_t where = -1;
  double analytic = 0, numeric = 0;
  int64_t checked = 0, skipped = 0;
  std::string Describe(const std::function<std::string(int64_t)>& name) const {
    std::ostringstream os;
    os << "max relative error " << max_rel << " at " << (where >= 0 ? name(where) : "-")
       << " (analytic " << analytic << ", numeric " << numeric << "); checked " << checked
       << ", skipped " << skipped;
    return os.str();
  }
};

// The relative error's denominator is floored at floor_rel * max |analytic| so that entries
// whose gradient is tiny compared to the rest are judged by their absolute error.
inline GradCheckReport CheckGradient(std::vector<double>& x, const std::vector<double>& analytic,
                                     const std::function<double()>& f, double h = 1e-5,
                                     double floor_rel = 1e-3) {
  GradCheckReport r;
  double amax = 0;
  for (double a : analytic) amax = std::max(amax, std::fabs(a));
  const double floor = std::max(floor_rel * amax, 1e-10);
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    auto fd = [&](double step) {
      x[i] = x0 + step;
      const double fp = f();
      x[i] = x0 - step;
      const double fm = f();
      x[i] = x0;
      return (fp - fm) / (2 * step);
    };
    const double n1 = fd(h), n2 = fd(h / 2);
    const double scale = std::max({std::fabs(n1), std::fabs(analytic[i]), floor});
    if (std::fabs(n1 - n2) > 1e-6 * std::max(scale, 1.0)) {
      ++r.skipped;
      continue;
    }
    ++r.checked;
    const double rel =
        std::fabs(analytic[i] - n2) / std::max(std::fabs(analytic[i]) + std::fabs(n2), floor);
    if (rel > r.max_rel) {
      r.max_rel = rel;
      r.where = static_cast<int64_t>(i);
      r.analytic = analytic[i];
      r.numeric = n2;
    }
  }
  return r;
}

inline std::string ParamName(const internal::ParamLayout& pl, int64_t i) {
  for (const auto& b : pl.blocks) {
    if (i >= b.offset && i < b.offset + b.rows * b.cols) {
      const int64_t j = i - b.offset;
      return b.name + "[" + std::to_string(j / b.cols) + "," + std::to_string(j % b.cols) + "]";
    }
  }
  return "param " + std::to_string(i);
}

// The test loss L = sum_c (0.5 + 0.25 c) s_c + s_c^2 / 2 over the scores of one forward pass,
// its gradient by Backward, and the finite-difference check of that gradient for every
// parameter (params is restored after each probe).
struct QuadraticLossCheck {
  std::vector<double> scores, grad;
  GradCheckReport report;
};
inline QuadraticLossCheck CheckQuadraticLossGradient(const internal::Gnn<double>& gnn,
                                                     std::vector<double>& params,
                                                     const internal::GraphStructure& gs,
                                                     const internal::GnnInputs<double>& in) {
  QuadraticLossCheck out;
  const int64_t k = in.k;
  out.scores.assign(k, 0.0);
  out.grad.assign(gnn.layout().total, 0.0);
  internal::GnnTape<double> tape;
  gnn.Forward(params.data(), gs, in, out.scores.data(), &tape);
  std::vector<double> ds(k);
  for (int64_t c = 0; c < k; ++c) ds[c] = 0.5 + 0.25 * c + out.scores[c];
  gnn.Backward(params.data(), gs, in, tape, ds.data(), out.grad.data());
  auto loss = [&]() {
    std::vector<double> s(k);
    gnn.Forward(params.data(), gs, in, s.data(), nullptr);
    double l = 0;
    for (int64_t c = 0; c < k; ++c) l += (0.5 + 0.25 * c) * s[c] + 0.5 * s[c] * s[c];
    return l;
  };
  out.report = CheckGradient(params, out.grad, loss);
  return out;
}

// The documented architecture, written directly from the edge list with plain loops, one
// configuration at a time over the whole graph. Independent of the GNN's plans and stage kernels
// (src/model/gnn_*.cc).
inline std::vector<double> ReferenceForward(const ModelSpec& spec, const RandomCase& rc,
                                            const std::vector<double>& params) {
  const internal::ParamLayout pl = internal::MakeParamLayout(spec, rc.task);
  const int H = spec.hidden_dim();
  const int64_t n = static_cast<int64_t>(rc.opcodes.size());
  const int64_t m = static_cast<int64_t>(rc.edges.size() / 2);
  const int64_t nc = static_cast<int64_t>(rc.config_nodes.size());
  const int64_t kept = static_cast<int64_t>(rc.node_cols.size());
  const int64_t kc = static_cast<int64_t>(rc.cfg_cols.size());
  const bool layout = rc.task == TaskKind::kLayout;
  const bool early = !layout && spec.tile_join() == ModelSpec::TILE_JOIN_EARLY;
  auto P = [&](int64_t off, int64_t cols, int64_t r, int64_t c) {
    return params[off + r * cols + c];
  };
  auto act = [&](double x) {
    if (spec.activation() == ModelSpec::ACTIVATION_GELU)
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    return x > 0 ? x : spec.leaky_relu_slope() * x;
  };
  std::vector<double> scores;
  std::vector<std::vector<std::vector<double>>> node_inputs;  // [k][nc] node head inputs
  for (int64_t c = 0; c < rc.k; ++c) {
    std::vector<std::vector<double>> h(n, std::vector<double>(H));
    for (int64_t v = 0; v < n; ++v) {
      const int op = rc.opcodes[v] < spec.num_opcodes() ? rc.opcodes[v] : 0;
      for (int d = 0; d < H; ++d) {
        double a = P(pl.b_in, H, 0, d);
        for (int e = 0; e < spec.opcode_embedding_dim(); ++e) {
          a += P(pl.op_table, spec.opcode_embedding_dim(), op, e) * P(pl.w_op, H, e, d);
        }
        for (int64_t j = 0; j < kept; ++j)
          a += rc.node_feat[v * kept + j] * P(pl.w_feat, H, rc.node_cols[j], d);
        if (early) {
          for (int64_t j = 0; j < kc; ++j)
            a += rc.tile_cfg[c * kc + j] * P(pl.w_cfg, H, rc.cfg_cols[j], d);
        }
        if (layout) {
          for (int64_t j = 0; j < nc; ++j) {
            if (rc.config_nodes[j] != v) continue;
            const int de = spec.layout_value_embedding_dim();
            for (int s = 0; s < 18; ++s) {
              const int val = rc.layout_cfg[(c * nc + j) * 18 + s];
              const int row = val >= -1 && val <= spec.layout_value_max()
                                  ? val + 1
                                  : spec.layout_value_max() + 2;
              for (int e = 0; e < de; ++e)
                a += P(pl.layout_table, de, row, e) * P(pl.w_cfg, H, s * de + e, d);
            }
            // config_loop_depth, then the K random-walk columns: the last config input columns
            // (tensor features are 0 here).
            const int K = spec.config_random_walk();
            if (spec.config_loop_depth()) {
              a += rc.config_loop_depth[j] * P(pl.w_cfg, H, pl.cfg_in - 1 - K, d);
            }
            for (int r = 0; r < K; ++r) {
              a += rc.config_random_walk[j * RandomCase::kMaxRandomWalk + r] *
                   P(pl.w_cfg, H, pl.cfg_in - K + r, d);
            }
          }
        }
        h[v][d] = act(a);
      }
    }
    for (int l = 1; l <= spec.num_layers(); ++l) {
      std::vector<std::vector<double>> nh(n, std::vector<double>(H));
      for (int64_t v = 0; v < n; ++v) {
        std::vector<double> z(3 * H, 0.0);
        int64_t dop = 0, dus = 0;
        for (int d = 0; d < H; ++d) z[d] = h[v][d];
        for (int64_t e = 0; e < m; ++e) {
          if (rc.edges[2 * e] == v) {  // v consumes edges[2e+1]: an operand
            ++dop;
            for (int d = 0; d < H; ++d) z[H + d] += h[rc.edges[2 * e + 1]][d];
          }
          if (rc.edges[2 * e + 1] == v) {  // edges[2e] uses v
            ++dus;
            for (int d = 0; d < H; ++d) z[2 * H + d] += h[rc.edges[2 * e]][d];
          }
        }
        if (spec.aggregation() == ModelSpec::AGGREGATION_MEAN) {
          for (int d = 0; d < H; ++d) {
            if (dop > 0) z[H + d] /= dop;
            if (dus > 0) z[2 * H + d] /= dus;
          }
        }
        std::vector<double> pre(H);
        for (int d = 0; d < H; ++d) {
          double a = P(pl.b_layer[l], H, 0, d);
          for (int q = 0; q < 3 * H; ++q) a += z[q] * P(pl.w_layer[l], H, q, d);
          pre[d] = act(a) + (spec.residual() ? h[v][d] : 0.0);
        }
        if (spec.layer_norm()) {
          double mu = 0, var = 0;
          for (double x : pre) mu += x;
          mu /= H;
          for (double x : pre) var += (x - mu) * (x - mu);
          var /= H;
          for (int d = 0; d < H; ++d) {
            nh[v][d] = (pre[d] - mu) / std::sqrt(var + spec.layer_norm_epsilon()) *
                           P(pl.ln_gain[l], H, 0, d) +
                       P(pl.ln_bias[l], H, 0, d);
          }
        } else {
          nh[v] = pre;
        }
      }
      h = nh;
    }
    std::vector<double> g;
    if (spec.pool_mean()) {
      for (int d = 0; d < H; ++d) {
        double s = 0;
        for (int64_t v = 0; v < n; ++v) s += h[v][d];
        g.push_back(s / n);
      }
    }
    if (spec.pool_max()) {
      for (int d = 0; d < H; ++d) {
        double s = -1e300;
        for (int64_t v = 0; v < n; ++v) s = std::max(s, h[v][d]);
        g.push_back(s);
      }
    }
    if (layout && spec.config_pooling() != ModelSpec::CONFIG_POOLING_NONE) {
      for (int d = 0; d < H; ++d) {
        double s = 0;
        for (int64_t v : rc.config_nodes) s += h[v][d];
        if (spec.config_pooling() == ModelSpec::CONFIG_POOLING_MEAN && nc > 0) s /= nc;
        g.push_back(s);
      }
    }
    if (!layout && !early) {
      std::vector<double> raw(24, 0.0);
      for (int64_t j = 0; j < kc; ++j) raw[rc.cfg_cols[j]] = rc.tile_cfg[c * kc + j];
      g.insert(g.end(), raw.begin(), raw.end());
    }
    for (size_t t = 0; t < pl.w_head.size(); ++t) {
      const int din = pl.head_dims[t], dout = pl.head_dims[t + 1];
      std::vector<double> o(dout);
      for (int d = 0; d < dout; ++d) {
        double a = P(pl.b_head[t], dout, 0, d);
        for (int q = 0; q < din; ++q) a += g[q] * P(pl.w_head[t], dout, q, d);
        o[d] = t + 1 < pl.w_head.size() ? act(a) : a;
      }
      g = o;
    }
    // config_node_head inputs x = [h_v ; e_v] of every configurable node in this config.
    if (pl.node_head > 0) {
      const int de = spec.layout_value_embedding_dim();
      std::vector<std::vector<double>> xc;
      for (int64_t j = 0; j < nc; ++j) {
        std::vector<double> x(h[rc.config_nodes[j]]);
        for (int s = 0; s < 18; ++s) {
          const int val = rc.layout_cfg[(c * nc + j) * 18 + s];
          const int row =
              val >= -1 && val <= spec.layout_value_max() ? val + 1 : spec.layout_value_max() + 2;
          for (int e = 0; e < de; ++e) x.push_back(P(pl.layout_table, de, row, e));
        }
        // Tensor-feature rows (0 here) lie between the embeddings and the loop column, which
        // the K random-walk columns follow.
        const int K = spec.config_random_walk();
        const int tail = (spec.config_loop_depth() ? 1 : 0) + K;
        x.resize(H + pl.cfg_in - tail, 0.0);
        if (spec.config_loop_depth()) x.push_back(rc.config_loop_depth[j]);
        for (int r = 0; r < K; ++r) {
          x.push_back(rc.config_random_walk[j * RandomCase::kMaxRandomWalk + r]);
        }
        xc.push_back(x);
      }
      node_inputs.push_back(xc);
    }
    scores.push_back(g[0]);
  }
  // config_node_head: s_v = w2 . act(W1 [x_v ; o_v] + b1), pooled by sum or log-sum-exp, where
  // o_v (config_attention) is softmax attention over the k configs of the same node.
  if (pl.node_head > 0) {
    const int W = pl.node_head, A = pl.attention;
    const int64_t din = H + pl.cfg_in;
    for (int64_t c = 0; c < rc.k; ++c) {
      std::vector<double> node_terms;
      for (int64_t j = 0; j < nc; ++j) {
        std::vector<double> x = node_inputs[c][j];
        if (A > 0) {
          auto proj = [&](int64_t cc, int part, int a) {
            double r = 0;
            for (int64_t q = 0; q < din; ++q) {
              r += node_inputs[cc][j][q] * P(pl.w_att, 3 * A, q, part * A + a);
            }
            return r;
          };
          std::vector<double> logits(rc.k);
          double top = -1e300;
          for (int64_t c2 = 0; c2 < rc.k; ++c2) {
            double dot = 0;
            for (int a = 0; a < A; ++a) dot += proj(c, 0, a) * proj(c2, 1, a);
            logits[c2] = dot / std::sqrt(double(A));
            top = std::max(top, logits[c2]);
          }
          double z = 0;
          for (double& l : logits) z += (l = std::exp(l - top));
          for (int a = 0; a < A; ++a) {
            double o = 0;
            for (int64_t c2 = 0; c2 < rc.k; ++c2) o += logits[c2] / z * proj(c2, 2, a);
            x.push_back(o);
          }
        }
        double sv = 0;
        for (int u = 0; u < W; ++u) {
          double a = P(pl.b_node1, W, 0, u);
          for (size_t q = 0; q < x.size(); ++q) a += x[q] * P(pl.w_node1, W, q, u);
          sv += act(a) * P(pl.w_node2, 1, u, 0);
        }
        if (pl.w_node_linear >= 0) {  // config_node_head_linear: + u . [h_v ; e_v]
          for (int q = 0; q < pl.hidden + pl.cfg_in; ++q) sv += x[q] * P(pl.w_node_linear, 1, q, 0);
        }
        node_terms.push_back(sv);
      }
      double node_sum = 0;
      if (spec.config_node_head_pooling() == ModelSpec::NODE_HEAD_POOLING_LOGSUMEXP) {
        // Unshifted on purpose: the test parameters keep every term small.
        double total = 0;
        for (double sv : node_terms) total += std::exp(sv);
        node_sum = node_terms.empty() ? 0.0 : std::log(total);
      } else {
        for (double sv : node_terms) node_sum += sv;
      }
      scores[c] += node_sum;
    }
  }
  return scores;
}

}  // namespace tpugraphs::model::testutil

#endif  // TPUGRAPHS_TESTS_MODEL_MODEL_TEST_UTIL_H_
