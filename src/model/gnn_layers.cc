// The message-passing layer: gather of neighbour states (CSR segment sums), the row product with
// the layer weight, bias, activation, residual and LayerNorm, and their adjoints.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "gnn_stages.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/model/gnn.h"
#include "tpugraphs/model/row_product.h"

namespace tpugraphs::model::internal {

// Row reductions of the layer kernels. A plain `sum += x[d]` loop does not vectorise (float
// addition is not associative, so the compiler keeps the serial order); these keep 16
// independent partial sums, one per lane, and add them in a fixed tree, so the result depends
// only on n, never on alignment or thread count.
namespace {

constexpr int kReductionLanes = 16;

template <typename T>
T AddLanes(T* acc) {
  for (int w = kReductionLanes / 2; w >= 1; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  }
  return acc[0];
}

template <typename T>
inline T LaneSum(const T* x, int64_t n) {
  T acc[kReductionLanes] = {};
  int64_t d = 0;
  for (; d + kReductionLanes <= n; d += kReductionLanes) {
    for (int j = 0; j < kReductionLanes; ++j) acc[j] += x[d + j];
  }
  for (int j = 0; d + j < n; ++j) acc[j] += x[d + j];
  return AddLanes(acc);
}

template <typename T>
inline T LaneDot(const T* x, const T* y, int64_t n) {
  T acc[kReductionLanes] = {};
  int64_t d = 0;
  for (; d + kReductionLanes <= n; d += kReductionLanes) {
    for (int j = 0; j < kReductionLanes; ++j) acc[j] += x[d + j] * y[d + j];
  }
  for (int j = 0; d + j < n; ++j) acc[j] += x[d + j] * y[d + j];
  return AddLanes(acc);
}

// Adds the per-shard parameter gradients of layer l, partial [shards, 3H * H + 3H] with rows
// [dW (3H x H) | db (H) | dgain (H) | dbias (H)], into grad in shard order (dgain and dbias only
// with LayerNorm).
template <typename T>
void AddLayerPartials(const ParamLayout& pl, int l, bool ln, const MatrixT<T>& partial, T* grad) {
  const int64_t H = pl.hidden;
  const int64_t shards = partial.rows(), width = partial.cols();
  MatrixRefT<T> gW(grad + pl.w_layer[l], 3 * H, H);
  T* gb = grad + pl.b_layer[l];
  for (int64_t s = 0; s < shards; ++s) {
    const T* part = partial.data() + s * width;
    gW += ConstMatrixRefT<T>(part, 3 * H, H);
    const T* db = part + 3 * H * H;
    for (int64_t j = 0; j < H; ++j) gb[j] += db[j];
    if (ln) {
      T* gg = grad + pl.ln_gain[l];
      T* gbias = grad + pl.ln_bias[l];
      for (int64_t j = 0; j < H; ++j) gg[j] += db[H + j], gbias[j] += db[2 * H + j];
    }
  }
}

}  // namespace

// Rows [b, e) of Gather's output z [k * R, 3H] (written from z, which points at row b): per row
// [self | operands | users], each [H], from prev [k * R', H] (refs r >= 0) and base [n, H]
// (refs r < 0).
template <typename T>
void Gnn<T>::GatherRows(const LayerPlan& p, int64_t k, const MatrixT<T>& prev,
                        const MatrixT<T>* base, T* z, int64_t b, int64_t e) const {
  const int64_t H = layout_.hidden;
  const int64_t R = p.rows();
  const int64_t Rp = k > 0 ? prev.rows() / k : 0;
  const bool mean = spec_.aggregation() == ModelSpec::AGGREGATION_MEAN;
  const T* prev_data = prev.data();
  const T* base_data = base != nullptr ? base->data() : nullptr;
  // CSR segment sums: each output row is written once, neighbours are summed in edge order.
  for (int64_t q = b; q < e; ++q) {
    const int64_t c = q / R, i = q % R;
    const T* cfg = prev_data + c * Rp * H;
    auto src = [&](int64_t r) -> const T* {
      return r >= 0 ? cfg + r * H : base_data + (-r - 1) * H;
    };
    T* out = z + (q - b) * 3 * H;
    Eigen::Map<RowVectorT<T>> self(out, H), op(out + H, H), us(out + 2 * H, H);
    self = Eigen::Map<const RowVectorT<T>>(src(p.self_ref[i]), H);
    op.setZero();
    us.setZero();
    for (int64_t x = p.op_ptr[i]; x < p.op_ptr[i + 1]; ++x) {
      op += Eigen::Map<const RowVectorT<T>>(src(p.op_ref[x]), H);
    }
    for (int64_t x = p.us_ptr[i]; x < p.us_ptr[i + 1]; ++x) {
      us += Eigen::Map<const RowVectorT<T>>(src(p.us_ref[x]), H);
    }
    if (mean) {
      const int64_t dop = p.op_ptr[i + 1] - p.op_ptr[i], dus = p.us_ptr[i + 1] - p.us_ptr[i];
      if (dop > 1) op *= T(1) / T(dop);
      if (dus > 1) us *= T(1) / T(dus);
    }
  }
}

// prev [k * R', H], base [n, H] -> z [k * R, 3H] (R = p.rows(), R' = rows of the previous plan).
template <typename T>
void Gnn<T>::Gather(const LayerPlan& p, int64_t k, const MatrixT<T>& prev, const MatrixT<T>* base,
                    MatrixT<T>& z) const {
  const int64_t H = layout_.hidden;
  z.resize(k * p.rows(), 3 * H);
  ForRows(k * p.rows(), kLayerRowGrain, [&](int64_t, int64_t b, int64_t e) {
    GatherRows(p, k, prev, base, z.data() + b * 3 * H, b, e);
  });
}

// dz [k * R, 3H] -> dprev [k * R', H] +=, dbase [n, H] += (the adjoint of Gather).
template <typename T>
void Gnn<T>::Scatter(const LayerPlan& p, int64_t k, const MatrixT<T>& dz, MatrixT<T>& dprev,
                     MatrixT<T>* dbase) const {
  const int64_t H = layout_.hidden;
  const int64_t R = p.rows();
  const int64_t Rp = k > 0 ? dprev.rows() / k : 0;
  const bool mean = spec_.aggregation() == ModelSpec::AGGREGATION_MEAN;
  if (p.whole) {
    // Every ref is local and the adjacency is its own transpose (LayerPlan::whole): each row of
    // dprev gathers what its users and operands send it, rows in parallel, every sum in CSR
    // order whatever the thread count.
    auto inv_degree = [&](const std::vector<int64_t>& ptr, int64_t i) {
      const int64_t d = ptr[i + 1] - ptr[i];
      return mean && d > 1 ? T(1) / T(d) : T(1);
    };
    ForRows(k * R, kLayerRowGrain, [&](int64_t, int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t c = r / R, v = r % R;
        const T* cfg = dz.data() + c * R * 3 * H;
        Eigen::Map<RowVectorT<T>> dst(dprev.data() + (c * Rp + v) * H, H);
        dst += Eigen::Map<const RowVectorT<T>>(cfg + v * 3 * H, H);
        // v is an operand of each of its users u: u's operand part, scaled by u's degree.
        for (int64_t x = p.us_ptr[v]; x < p.us_ptr[v + 1]; ++x) {
          const int64_t u = p.us_ref[x];
          dst += inv_degree(p.op_ptr, u) * Eigen::Map<const RowVectorT<T>>(cfg + u * 3 * H + H, H);
        }
        // v is a user of each of its operands u: u's user part.
        for (int64_t x = p.op_ptr[v]; x < p.op_ptr[v + 1]; ++x) {
          const int64_t u = p.op_ref[x];
          dst +=
              inv_degree(p.us_ptr, u) * Eigen::Map<const RowVectorT<T>>(cfg + u * 3 * H + 2 * H, H);
        }
      }
    });
    return;
  }
  // Configurations write disjoint row ranges of dprev, so they run in parallel; the rows of
  // dbase (shared by all configurations) are added afterwards on one thread in the order
  // (config, row, edge), so every sum is formed in the same order whatever the thread count.
  // pass 0: refs into dprev; pass 1: refs into dbase.
  auto run = [&](int pass, int64_t c) {
    T* cfg = dprev.data() + c * Rp * H;
    for (int64_t i = 0; i < R; ++i) {
      const T* g = dz.data() + (c * R + i) * 3 * H;
      auto add = [&](int64_t r, const T* src, T scale) {
        if ((r >= 0) != (pass == 0)) return;
        T* dst = r >= 0 ? cfg + r * H : dbase->data() + (-r - 1) * H;
        if (scale == T(1)) {
          Eigen::Map<RowVectorT<T>>(dst, H) += Eigen::Map<const RowVectorT<T>>(src, H);
        } else {
          Eigen::Map<RowVectorT<T>>(dst, H) += scale * Eigen::Map<const RowVectorT<T>>(src, H);
        }
      };
      add(p.self_ref[i], g, T(1));
      const int64_t dop = p.op_ptr[i + 1] - p.op_ptr[i], dus = p.us_ptr[i + 1] - p.us_ptr[i];
      const T sop = mean && dop > 1 ? T(1) / T(dop) : T(1);
      const T sus = mean && dus > 1 ? T(1) / T(dus) : T(1);
      for (int64_t x = p.op_ptr[i]; x < p.op_ptr[i + 1]; ++x) add(p.op_ref[x], g + H, sop);
      for (int64_t x = p.us_ptr[i]; x < p.us_ptr[i + 1]; ++x) add(p.us_ref[x], g + 2 * H, sus);
    }
  };
  ForRows(k, 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) run(0, c);
  });
  if (dbase != nullptr) {
    for (int64_t c = 0; c < k; ++c) run(1, c);
  }
}

// Message-passing layer l on plan p for k configurations: prev [k * R', H] (per-config states of
// layer l - 1), base [n, H] (base states of layer l - 1, null when every ref is local) ->
// t.h [k * R, H] = LayerNorm(act(z W_l + b_l) + self), z = Gather [k * R, 3H], W_l [3H, H];
// with keep also t.z [k * R, 3H], t.a [k * R, H] (pre-activation), t.xhat [k * R, H]
// (normalised, or the pre-norm sum without LayerNorm); t.rstd [k * R] with LayerNorm.
template <typename T>
void Gnn<T>::LayerForward(const T* params, int l, const LayerPlan& p, int64_t k,
                          const MatrixT<T>& prev, const MatrixT<T>* base, LayerTape<T>& t,
                          bool keep) const {
  const int64_t H = layout_.hidden;
  const int64_t rows = k * p.rows();
  ConstMatrixRefT<T> W(params + layout_.w_layer[l], 3 * H, H);
  const T* b = params + layout_.b_layer[l];
  const bool ln = spec_.layer_norm(), residual = spec_.residual();
  const bool gelu = spec_.activation() == ModelSpec::ACTIVATION_GELU;
  const T slope = T(spec_.leaky_relu_slope());
  const T eps = T(spec_.layer_norm_epsilon());
  const T* gain = ln ? params + layout_.ln_gain[l] : nullptr;
  const T* bias = ln ? params + layout_.ln_bias[l] : nullptr;
  // Inference keeps only h; z, a and xhat live per shard in per-thread scratch.
  const int64_t kept_rows = keep ? rows : 0;
  t.z.resize(kept_rows, 3 * H);
  t.a.resize(kept_rows, H);
  t.xhat.resize(kept_rows, H);
  t.h.resize(rows, H);
  t.rstd.resize(ln ? rows : 0);
  // Per shard of rows: gather (segment sums) -> product -> one pass of bias, activation,
  // residual, LayerNorm, gain and bias per row, while the shard is still in cache.
  ForRows(rows, kLayerRowGrain, [&, b, gain, bias, slope, eps, H](int64_t, int64_t r0, int64_t r1) {
    // Scalars and pointers are captured by value and the rows are __restrict: otherwise the
    // compiler must assume a store to a row may change them and keeps the row loops scalar.
    const int64_t nr = r1 - r0;
    thread_local MatrixT<T> zs, as, xs;
    T *zp, *ap, *xp;
    if (keep) {
      zp = t.z.data() + r0 * 3 * H, ap = t.a.data() + r0 * H, xp = t.xhat.data() + r0 * H;
    } else {
      zs.resize(kLayerRowGrain, 3 * H);
      as.resize(kLayerRowGrain, H);
      xs.resize(kLayerRowGrain, H);
      zp = zs.data(), ap = as.data(), xp = xs.data();
    }
    GatherRows(p, k, prev, base, zp, r0, r1);
    // Row-independent product (model/row_product.h): a row's result never depends on the shard
    // it falls in, so neither does a configuration's.
    RowProduct<T>(zp, nr, 3 * H, 3 * H, W.data(), H, H, ap, H, /*accumulate=*/false);
    // Every loop below is branch-free over d, so it vectorises; the two means are lane sums
    // (LaneSum), whose order depends only on H.
    const T leak = slope;  // a local: the closure's copy could alias the rows for the compiler
    for (int64_t r = r0; r < r1; ++r) {
      T* __restrict a = ap + (r - r0) * H;
      T* __restrict x = xp + (r - r0) * H;
      T* __restrict h = t.h.data() + r * H;
      const T* __restrict self = zp + (r - r0) * 3 * H;
      for (int64_t d = 0; d < H; ++d) a[d] += b[d];
      if (gelu) {
        for (int64_t d = 0; d < H; ++d) x[d] = Act(a[d]);
      } else {
        for (int64_t d = 0; d < H; ++d) x[d] = a[d] > T(0) ? a[d] : leak * a[d];
      }
      if (residual) {
        for (int64_t d = 0; d < H; ++d) x[d] += self[d];
      }
      if (!ln) {
        std::copy(x, x + H, h);
        continue;
      }
      const T mu = LaneSum(x, H) / T(H);
      for (int64_t d = 0; d < H; ++d) x[d] -= mu;
      const T rstd = T(1) / std::sqrt(LaneDot(x, x, H) / T(H) + eps);
      t.rstd[r] = rstd;
      for (int64_t d = 0; d < H; ++d) {
        x[d] *= rstd;
        h[d] = x[d] * gain[d] + bias[d];
      }
    }
  });
  TPUG_CHECK_FINITE(t.h);
}

// Adjoint of LayerForward: dh [k * R, H] (gradient of t.h) -> adds the grads of W_l, b_l and the
// LayerNorm gain and bias; dprev [k * R', H] +=, dbase [n, H] += through Scatter. Scratch:
// t.dpre [k * R, H] (gradient of the pre-activation), t.dz [k * R, 3H], t.partial
// [shards, 3H * H + 3H].
template <typename T>
void Gnn<T>::LayerBackward(const T* params, int l, const LayerPlan& p, int64_t k,
                           const LayerTape<T>& t, const MatrixT<T>& dh, T* grad, MatrixT<T>& dprev,
                           MatrixT<T>* dbase) const {
  const int64_t H = layout_.hidden;
  const int64_t rows = dh.rows();
  const bool ln = spec_.layer_norm(), residual = spec_.residual();
  const bool gelu = spec_.activation() == ModelSpec::ACTIVATION_GELU;
  const T slope = T(spec_.leaky_relu_slope());
  const T* gain = ln ? params + layout_.ln_gain[l] : nullptr;
  ConstMatrixRefT<T> W(params + layout_.w_layer[l], 3 * H, H);
  const MatrixT<T> Wt = W.transpose();  // [H, 3H] for the row-independent dz product
  // Per shard: [dW (3H x H) | db (H) | dgain (H) | dbias (H)], added in shard order below.
  const int64_t width = 3 * H * H + 3 * H;
  // The configuration-independent pass (one configuration over the whole graph) runs while
  // other threads wait: finer shards there, coarser ones (fewer partials to add) elsewhere.
  const int64_t grain = p.whole && k == 1 ? kLayerRowGrain : 4 * kLayerRowGrain;
  const int64_t shards = ThreadPool::NumShards(rows, grain);
  t.dpre.resize(rows, H);
  t.dz.resize(rows, 3 * H);
  t.partial.resize(shards, width);
  // Captures by value, local copies and __restrict rows: as in LayerForward.
  ForRows(rows, grain, [&, gain, slope, H](int64_t s, int64_t r0, int64_t r1) {
    const T leak = slope;
    T* part = t.partial.data() + s * width;
    T* __restrict db = part + 3 * H * H;
    T* __restrict dgain = db + H;
    T* __restrict dbias = dgain + H;
    std::fill(db, db + 3 * H, T(0));
    for (int64_t r = r0; r < r1; ++r) {
      const T* __restrict g = dh.data() + r * H;
      const T* __restrict xh = t.xhat.data() + r * H;
      const T* __restrict a = t.a.data() + r * H;
      T* __restrict d = t.dpre.data() + r * H;
      if (ln) {
        for (int64_t j = 0; j < H; ++j) {
          dgain[j] += g[j] * xh[j];
          dbias[j] += g[j];
          d[j] = g[j] * gain[j];
        }
        const T m1 = LaneSum(d, H) / T(H);
        const T m2 = LaneDot(d, xh, H) / T(H);
        const T rstd = t.rstd[r];
        for (int64_t j = 0; j < H; ++j) d[j] = rstd * (d[j] - m1 - xh[j] * m2);
      } else {
        std::copy(g, g + H, d);
      }
      // dz = [residual ? d xhat : 0, 0, 0]; the product below is added to it.
      T* dzr = t.dz.data() + r * 3 * H;
      std::fill(dzr + H, dzr + 3 * H, T(0));
      if (residual) {
        std::copy(d, d + H, dzr);
      } else {
        std::fill(dzr, dzr + H, T(0));
      }
      // d becomes the gradient of the pre-activation.
      if (gelu) {
        for (int64_t j = 0; j < H; ++j) d[j] *= ActGrad(a[j]);
      } else {
        for (int64_t j = 0; j < H; ++j) d[j] *= a[j] > T(0) ? T(1) : leak;
      }
      for (int64_t j = 0; j < H; ++j) db[j] += d[j];
    }
    const int64_t nr = r1 - r0;
    auto da = t.dpre.middleRows(r0, nr);
    MatrixRefT<T>(part, 3 * H, H).noalias() = t.z.middleRows(r0, nr).transpose() * da;
    RowProduct<T>(da.data(), nr, H, H, Wt.data(), 3 * H, 3 * H, t.dz.data() + r0 * 3 * H, 3 * H,
                  /*accumulate=*/true);
  });
  AddLayerPartials(layout_, l, ln, t.partial, grad);
  TPUG_CHECK_FINITE(t.dz);
  Scatter(p, k, t.dz, dprev, dbase);
}

template void Gnn<float>::GatherRows(const LayerPlan&, int64_t, const MatrixT<float>&,
                                     const MatrixT<float>*, float*, int64_t, int64_t) const;
template void Gnn<double>::GatherRows(const LayerPlan&, int64_t, const MatrixT<double>&,
                                      const MatrixT<double>*, double*, int64_t, int64_t) const;
template void Gnn<float>::Gather(const LayerPlan&, int64_t, const MatrixT<float>&,
                                 const MatrixT<float>*, MatrixT<float>&) const;
template void Gnn<double>::Gather(const LayerPlan&, int64_t, const MatrixT<double>&,
                                  const MatrixT<double>*, MatrixT<double>&) const;
template void Gnn<float>::Scatter(const LayerPlan&, int64_t, const MatrixT<float>&, MatrixT<float>&,
                                  MatrixT<float>*) const;
template void Gnn<double>::Scatter(const LayerPlan&, int64_t, const MatrixT<double>&,
                                   MatrixT<double>&, MatrixT<double>*) const;
template void Gnn<float>::LayerForward(const float*, int, const LayerPlan&, int64_t,
                                       const MatrixT<float>&, const MatrixT<float>*,
                                       LayerTape<float>&, bool) const;
template void Gnn<double>::LayerForward(const double*, int, const LayerPlan&, int64_t,
                                        const MatrixT<double>&, const MatrixT<double>*,
                                        LayerTape<double>&, bool) const;
template void Gnn<float>::LayerBackward(const float*, int, const LayerPlan&, int64_t,
                                        const LayerTape<float>&, const MatrixT<float>&, float*,
                                        MatrixT<float>&, MatrixT<float>*) const;
template void Gnn<double>::LayerBackward(const double*, int, const LayerPlan&, int64_t,
                                         const LayerTape<double>&, const MatrixT<double>&, double*,
                                         MatrixT<double>&, MatrixT<double>*) const;

}  // namespace tpugraphs::model::internal
