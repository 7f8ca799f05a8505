// Pooling of the last layer's node states into the head input G (mean, max and the sum or mean
// over the configurable nodes), the tile config columns of late join, and the adjoint.
#include <cstdint>
#include <limits>
#include <vector>

#include "gnn_stages.h"
#include "tpugraphs/model/gnn.h"

namespace tpugraphs::model::internal {

template <typename T>
void BaseMax(const GraphStructure& gs, const MatrixT<T>& base_last, int64_t H,
             RowVectorT<T>* base_max, std::vector<int64_t>* base_arg) {
  *base_max = RowVectorT<T>::Constant(H, -std::numeric_limits<T>::infinity());
  base_arg->assign(H, -1);
  if (gs.all_affected) return;
  for (int64_t v : gs.unaffected_last) {
    for (int64_t d = 0; d < H; ++d) {
      if (base_last(v, d) > (*base_max)[d]) (*base_max)[d] = base_last(v, d), (*base_arg)[d] = v;
    }
  }
}

template <typename T>
void BasePools(const GraphStructure& gs, const MatrixT<T>& base_last, int64_t H,
               GnnTape<T>* shared) {
  shared->base_sum = RowVectorT<T>::Zero(H);
  if (!gs.all_affected) {
    for (int64_t v : gs.unaffected_last) shared->base_sum += base_last.row(v);
  }
  BaseMax(gs, base_last, H, &shared->base_max, &shared->base_arg);
}

template void BaseMax<float>(const GraphStructure&, const MatrixT<float>&, int64_t,
                             RowVectorT<float>*, std::vector<int64_t>*);
template void BaseMax<double>(const GraphStructure&, const MatrixT<double>&, int64_t,
                              RowVectorT<double>*, std::vector<int64_t>*);
template void BasePools<float>(const GraphStructure&, const MatrixT<float>&, int64_t,
                               GnnTape<float>*);
template void BasePools<double>(const GraphStructure&, const MatrixT<double>&, int64_t,
                                GnnTape<double>*);

namespace {

// Mean over all n nodes: hl [k * RL, H], the base states' sum -> G [k, *] columns
// [off, off + H).
template <typename T>
void PoolMean(const StageContext<T>& s, const GraphStructure& gs, const MatrixT<T>& hl,
              const GnnTape<T>& shared, int64_t off, MatrixT<T>* G) {
  const int64_t n = gs.n, k = G->rows();
  const int64_t H = s.layout.hidden;
  const int64_t RL = gs.plan(s.layout.num_layers).rows();
  for (int64_t c = 0; c < k; ++c) {
    RowVectorT<T> sum = shared.base_sum;
    // Row by row in order (an Eigen column sum peels by the block's address, so a
    // configuration's last bits followed its position in the batch).
    T* __restrict acc = sum.data();
    for (int64_t i = 0; i < RL; ++i) {
      const T* __restrict row = hl.data() + (c * RL + i) * H;
      for (int64_t d = 0; d < H; ++d) acc[d] += row[d];
    }
    G->row(c).segment(off, H) = sum / T(n);
  }
}

// Max over all n nodes: hl [k * RL, H], the base states' max -> G [k, *] columns
// [off, off + H); max_ref [k * H]: the argmax, a row in S_L or -(v + 1) for base node v.
template <typename T>
void PoolMax(const StageContext<T>& s, const GraphStructure& gs, const MatrixT<T>& hl,
             const GnnTape<T>& shared, int64_t off, std::vector<int64_t>* max_ref, MatrixT<T>* G) {
  const int64_t H = s.layout.hidden, k = G->rows();
  const int64_t RL = gs.plan(s.layout.num_layers).rows();
  const RowVectorT<T>& base_max = shared.base_max;
  std::vector<int64_t> base_arg = shared.base_arg;
  for (int64_t& a : base_arg) a = a >= 0 ? -(a + 1) : 0;
  max_ref->resize(k * H);
  for (int64_t c = 0; c < k; ++c) {
    // Row-major walk over the S_L rows of config c (contiguous), keeping the running max.
    T* best = G->row(c).data() + off;
    int64_t* arg = max_ref->data() + c * H;
    for (int64_t d = 0; d < H; ++d) best[d] = base_max[d], arg[d] = base_arg[d];
    for (int64_t i = 0; i < RL; ++i) {
      const T* row = hl.data() + (c * RL + i) * H;
      for (int64_t d = 0; d < H; ++d) {
        if (row[d] > best[d]) best[d] = row[d], arg[d] = i;
      }
    }
  }
}

// The scale of the configurable-node pool: 1 / nc for the mean, 1 for the sum.
template <typename T>
T ConfigPoolScale(const StageContext<T>& s, int64_t nc) {
  return s.spec.config_pooling() == ModelSpec::CONFIG_POOLING_MEAN && nc > 0 ? T(1) / T(nc) : T(1);
}

// Sum or mean over the configurable nodes: hl [k * RL, H] -> G [k, *] columns [off, off + H).
template <typename T>
void PoolConfigNodes(const StageContext<T>& s, const GraphStructure& gs, const MatrixT<T>& hl,
                     int64_t off, MatrixT<T>* G) {
  const int64_t H = s.layout.hidden, k = G->rows();
  const int64_t RL = gs.plan(s.layout.num_layers).rows();
  const int64_t nc = static_cast<int64_t>(gs.config_nodes.size());
  const T scale = ConfigPoolScale(s, nc);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t j = 0; j < nc; ++j) {
      G->row(c).segment(off, H) += scale * hl.row(c * RL + gs.config_rows_last[j]);
    }
  }
}

}  // namespace

template <typename T>
void PoolForward(const StageContext<T>& s, const GraphStructure& gs, const GnnInputs<T>& in,
                 const MatrixT<T>& hl, const GnnTape<T>& shared, GnnTape<T>* tp, MatrixT<T>* G) {
  const int64_t H = s.layout.hidden, k = in.k;
  const int64_t kc = static_cast<int64_t>(gs.cfg_cols.size());
  int64_t off = 0;
  if (s.spec.pool_mean()) {
    PoolMean(s, gs, hl, shared, off, G);
    off += H;
  }
  if (s.spec.pool_max()) {
    PoolMax(s, gs, hl, shared, off, &tp->max_ref, G);
    off += H;
  }
  if (s.is_layout && s.spec.config_pooling() != ModelSpec::CONFIG_POOLING_NONE) {
    PoolConfigNodes(s, gs, hl, off, G);
    off += H;
  }
  if (!s.is_layout && !s.tile_early) {
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < kc; ++j) (*G)(c, off + gs.cfg_cols[j]) = in.tile_cfg[c * kc + j];
    }
  }
}

template <typename T>
void PoolBackward(const StageContext<T>& s, const GraphStructure& gs, int64_t k,
                  const GnnTape<T>& tp, const MatrixT<T>& dG, MatrixT<T>* dh,
                  PooledBaseGrad<T>* dlast, T* dtile_cfg) {
  const int64_t H = s.layout.hidden, n = gs.n;
  const int64_t RL = gs.plan(s.layout.num_layers).rows();
  const int64_t kc = static_cast<int64_t>(gs.cfg_cols.size());
  const int64_t nc = static_cast<int64_t>(gs.config_nodes.size());
  int64_t off = 0;
  if (s.spec.pool_mean()) {
    RowVectorT<T> total = RowVectorT<T>::Zero(H);
    for (int64_t c = 0; c < k; ++c) {
      const RowVectorT<T> g = dG.row(c).segment(off, H) / T(n);
      dh->middleRows(c * RL, RL).rowwise() += g;
      total += g;
    }
    if (!gs.all_affected) dlast->mean += total;
    off += H;
  }
  if (s.spec.pool_max()) {
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t d = 0; d < H; ++d) {
        const int64_t r = tp.max_ref[c * H + d];
        if (r >= 0) {
          (*dh)(c * RL + r, d) += dG(c, off + d);
        } else {
          dlast->max[d] += dG(c, off + d);  // node -r - 1, the base argmax of column d
        }
      }
    }
    off += H;
  }
  if (s.is_layout && s.spec.config_pooling() != ModelSpec::CONFIG_POOLING_NONE) {
    const T scale = ConfigPoolScale(s, nc);
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < nc; ++j) {
        dh->row(c * RL + gs.config_rows_last[j]) += scale * dG.row(c).segment(off, H);
      }
    }
    off += H;
  }
  if (!s.is_layout && !s.tile_early && dtile_cfg != nullptr) {
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < kc; ++j) dtile_cfg[c * kc + j] += dG(c, off + gs.cfg_cols[j]);
    }
  }
}

template void PoolForward<float>(const StageContext<float>&, const GraphStructure&,
                                 const GnnInputs<float>&, const MatrixT<float>&,
                                 const GnnTape<float>&, GnnTape<float>*, MatrixT<float>*);
template void PoolForward<double>(const StageContext<double>&, const GraphStructure&,
                                  const GnnInputs<double>&, const MatrixT<double>&,
                                  const GnnTape<double>&, GnnTape<double>*, MatrixT<double>*);
template void PoolBackward<float>(const StageContext<float>&, const GraphStructure&, int64_t,
                                  const GnnTape<float>&, const MatrixT<float>&, MatrixT<float>*,
                                  PooledBaseGrad<float>*, float*);
template void PoolBackward<double>(const StageContext<double>&, const GraphStructure&, int64_t,
                                   const GnnTape<double>&, const MatrixT<double>&, MatrixT<double>*,
                                   PooledBaseGrad<double>*, double*);

}  // namespace tpugraphs::model::internal
