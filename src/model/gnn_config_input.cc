// Layer 0 of the per-configuration pass: the rows of S_0 for every configuration, with the
// configuration's own input (tile early join: the tile config; layout: the value embeddings and
// derived features of each configurable node) projected by W_cfg and added; and the adjoint.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "gnn_stages.h"
#include "tpugraphs/model/gnn.h"
#include "tpugraphs/model/row_product.h"

namespace tpugraphs::model::internal {

namespace {

// Tile early join: in.tile_cfg [k, kc] -> tp->cfg_in [k, cfg_in] (the kept columns at
// gs.cfg_cols, zeros elsewhere); a0 [k * R0, H] += cfg_in[c] W_cfg on every row of config c.
template <typename T>
void TileConfigForward(const StageContext<T>& s, const GraphStructure& gs, const GnnInputs<T>& in,
                       GnnTape<T>* tp) {
  const int64_t H = s.layout.hidden, k = in.k, R0 = gs.plan(0).rows();
  const int64_t kc = static_cast<int64_t>(gs.cfg_cols.size());
  tp->cfg_in = MatrixT<T>::Zero(k, s.layout.cfg_in);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t j = 0; j < kc; ++j) tp->cfg_in(c, gs.cfg_cols[j]) = in.tile_cfg[c * kc + j];
  }
  ConstMatrixRefT<T> w_cfg(s.params + s.layout.w_cfg, s.layout.cfg_in, H);
  MatrixT<T> cfg_h;  // [k, H]
  RowProductInto<T>(tp->cfg_in, w_cfg, &cfg_h);
  for (int64_t c = 0; c < k; ++c) tp->a0.middleRows(c * R0, R0).rowwise() += cfg_h.row(c);
}

// Layout: in.layout_cfg [k, nc, 18] raw values -> tp->layout_rows [k * nc * 18] (table rows:
// value + 1, or the reserved row vmax + 2 for values outside [-1, vmax]) and the first 18 * d_e
// columns of tp->cfg_in [k * nc, cfg_in] (row c * nc + j: the embeddings of node j's values in
// configuration c).
template <typename T>
void LayoutValueEmbeddings(const StageContext<T>& s, const GnnInputs<T>& in, int64_t nc,
                           GnnTape<T>* tp) {
  const int64_t k = in.k;
  const int de = s.spec.layout_value_embedding_dim();
  const int vmax = s.spec.layout_value_max();
  const int reserved = vmax + 2;
  ConstMatrixRefT<T> table(s.params + s.layout.layout_table, vmax + 3, de);
  const int64_t nv = k * nc * kLayoutConfigFeatureCount;
  tp->layout_rows.resize(nv);
  tp->cfg_in.resize(k * nc, s.layout.cfg_in);  // [k nc, 18 de]
  // Plain copies of de floats per value (row-major rows; the table's rows are contiguous): the
  // index arithmetic of a row and segment per value cost more than the copies themselves.
  const T* tab = table.data();
  const int64_t stride = tp->cfg_in.cols();
  for (int64_t r = 0; r < k * nc; ++r) {
    T* dst = tp->cfg_in.data() + r * stride;
    const int8_t* vals = in.layout_cfg + r * kLayoutConfigFeatureCount;
    int32_t* rows = tp->layout_rows.data() + r * kLayoutConfigFeatureCount;
    for (int f = 0; f < kLayoutConfigFeatureCount; ++f) {
      const int v = vals[f];
      const int row = v >= -1 && v <= vmax ? v + 1 : reserved;
      rows[f] = row;
      const T* src = tab + static_cast<int64_t>(row) * de;
      T* out = dst + f * de;
      if (de == 4) {  // the default width: one fixed-size copy instead of a call to memmove
        std::copy_n(src, 4, out);
      } else {
        std::copy_n(src, de, out);
      }
    }
  }
}

// Layout: the derived columns of tp->cfg_in [k * nc, cfg_in] after the value embeddings, in this
// order (MakeParamLayout's cfg_in): tensor features [18], size features [9], flow features [4],
// dimension-split features [12], loop depth [1], random-walk return probabilities [K], each when
// the spec enables it (the dimension tokens' 3 E columns after them are
// LayoutDimensionEncoderForward's).
template <typename T>
void LayoutDerivedColumns(const StageContext<T>& s, const GraphStructure& gs,
                          const GnnInputs<T>& in, int64_t nc, GnnTape<T>* tp) {
  const int64_t k = in.k;
  // fill writes `count` columns from `off` of every row r = c * nc + j with feature(r, out), or
  // zeros when the graph lacks what the feature needs.
  int64_t off = kLayoutConfigFeatureCount * s.spec.layout_value_embedding_dim();
  auto fill = [&](int count, bool have, const auto& feature) {
    for (int64_t r = 0; r < k * nc; ++r) {
      T* out = tp->cfg_in.row(r).data() + off;
      if (have) {
        feature(r, out);
      } else {
        std::fill(out, out + count, T(0));
      }
    }
    off += count;
  };
  const bool have_info = static_cast<int64_t>(gs.tensor_info.size()) == nc * kLayoutTensorInfoWidth;
  const auto info_of = [&](int64_t r) {
    return gs.tensor_info.data() + (r % nc) * kLayoutTensorInfoWidth;
  };
  // The logarithms of each tensor's dims, looked up when FillLayoutTensorInfo computed them.
  const bool have_logs =
      static_cast<int64_t>(gs.tensor_logs.size()) == nc * 3 * kLayoutTensorLogWidth;
  const auto logs_of = [&](int64_t r) {
    return gs.tensor_logs.data() + (r % nc) * 3 * kLayoutTensorLogWidth;
  };
  if (s.spec.layout_tensor_features()) {
    fill(kLayoutTensorFeatureCount, have_info, [&](int64_t r, T* out) {
      const int8_t* vals = in.layout_cfg + r * kLayoutConfigFeatureCount;
      if (have_logs) {
        LayoutTensorFeaturesLookup<T>(info_of(r), logs_of(r), vals, out);
      } else {
        LayoutTensorFeatures<T>(info_of(r), vals, out);
      }
    });
  }
  if (s.spec.layout_size_features()) {
    fill(kLayoutSizeFeatureCount, have_info, [&](int64_t r, T* out) {
      const int8_t* vals = in.layout_cfg + r * kLayoutConfigFeatureCount;
      if (have_logs) {
        LayoutSizeFeaturesLookup<T>(info_of(r), logs_of(r), vals, out);
      } else {
        LayoutSizeFeatures<T>(info_of(r), vals, out);
      }
    });
  }
  if (s.spec.layout_flow_features()) {
    // Flow features read the whole configuration (the layouts chosen upstream).
    fill(kLayoutFlowFeatureCount, have_info && gs.flow.size() == nc, [&](int64_t r, T* out) {
      LayoutFlowFeatures<T>(gs, r % nc, in.layout_cfg + (r / nc) * nc * kLayoutConfigFeatureCount,
                            out);
    });
  }
  if (s.spec.layout_dim_split_features()) {
    fill(kLayoutDimSplitFeatureCount, have_info, [&](int64_t r, T* out) {
      LayoutDimSplitFeatures<T>(info_of(r), in.layout_cfg + r * kLayoutConfigFeatureCount, out);
    });
  }
  if (s.spec.config_loop_depth()) {
    // While loops around the node, the same for every configuration.
    fill(1, static_cast<int64_t>(gs.config_loop_depth.size()) == nc,
         [&](int64_t r, T* out) { *out = T(gs.config_loop_depth[r % nc]); });
  }
  if (const int K = s.spec.config_random_walk(); K > 0) {
    // Random-walk return probabilities, the same for every configuration.
    fill(K, static_cast<int64_t>(gs.config_random_walk.size()) == nc * K, [&](int64_t r, T* out) {
      const float* p = gs.config_random_walk.data() + (r % nc) * K;
      for (int s = 0; s < K; ++s) out[s] = T(p[s]);
    });
  }
}

// Layout, ModelSpec.layout_dimension_tokens = E: the last 3 E columns of tp->cfg_in [k * nc,
// cfg_in], per row r and tensor t the sum over the tensor's dimension tokens x of act(x U + b)
// (zeros when the graph lacks tensor info); keeps the tokens, their pre-activations and blocks in
// tp->dim_tokens, dim_pre and dim_slot for the adjoint.
template <typename T>
void LayoutDimensionEncoderForward(const StageContext<T>& s, const GraphStructure& gs,
                                   const GnnInputs<T>& in, int64_t nc, GnnTape<T>* tp) {
  const int64_t E = s.layout.dim_tokens, rows = in.k * nc;
  const int64_t off = s.layout.cfg_in - 3 * E;
  tp->cfg_in.middleCols(off, 3 * E).setZero();
  const bool have_info = static_cast<int64_t>(gs.tensor_info.size()) == nc * kLayoutTensorInfoWidth;
  // Token counts depend on the tensors' ranks only, not on the configuration.
  std::vector<int64_t> first(nc + 1, 0);
  for (int64_t j = 0; have_info && j < nc; ++j) {
    first[j + 1] =
        first[j] + LayoutDimensionTokenCount(gs.tensor_info.data() + j * kLayoutTensorInfoWidth);
  }
  const int64_t per_config = first[nc];
  tp->dim_tokens.resize(in.k * per_config, kDimensionTokenWidth);
  tp->dim_slot.resize(in.k * per_config);
  int8_t tensor[18];
  for (int64_t r = 0; r < rows && per_config > 0; ++r) {
    const int64_t j = r % nc, q0 = (r / nc) * per_config + first[j];
    const int count = LayoutDimensionTokens<T>(gs.tensor_info.data() + j * kLayoutTensorInfoWidth,
                                               in.layout_cfg + r * kLayoutConfigFeatureCount,
                                               tp->dim_tokens.row(q0).data(), tensor);
    for (int i = 0; i < count; ++i) tp->dim_slot[q0 + i] = r * 3 + tensor[i];
  }
  ConstMatrixRefT<T> w_dim(s.params + s.layout.w_dim, kDimensionTokenWidth, E);
  Eigen::Map<const RowVectorT<T>> b_dim(s.params + s.layout.b_dim, E);
  RowProductInto<T>(tp->dim_tokens, w_dim, &tp->dim_pre);
  tp->dim_pre.rowwise() += b_dim;
  const MatrixT<T> act = s.gnn.ActMat(tp->dim_pre);
  for (int64_t q = 0; q < act.rows(); ++q) {
    const int64_t r = tp->dim_slot[q] / 3, t = tp->dim_slot[q] % 3;
    tp->cfg_in.row(r).segment(off + t * E, E) += act.row(q);
  }
}

// Adjoint of LayoutDimensionEncoderForward: dcfg [k * nc, cfg_in], the gradient of tp.cfg_in ->
// grads of the encoder's U and b.
template <typename T>
void LayoutDimensionEncoderBackward(const StageContext<T>& s, const GnnTape<T>& tp,
                                    const MatrixT<T>& dcfg, T* grad) {
  const int64_t E = s.layout.dim_tokens, Q = tp.dim_pre.rows();
  const int64_t off = s.layout.cfg_in - 3 * E;
  MatrixT<T> dpre = s.gnn.ActGradMat(tp.dim_pre);  // [Q, E]
  for (int64_t q = 0; q < Q; ++q) {
    const int64_t r = tp.dim_slot[q] / 3, t = tp.dim_slot[q] % 3;
    dpre.row(q).array() *= dcfg.row(r).segment(off + t * E, E).array();
  }
  MatrixRefT<T>(grad + s.layout.w_dim, kDimensionTokenWidth, E).noalias() +=
      tp.dim_tokens.transpose() * dpre;
  Eigen::Map<RowVectorT<T>>(grad + s.layout.b_dim, E) += dpre.colwise().sum();
}

// Layout: tp->cfg_in [k * nc, cfg_in] -> a0 [k * R0, H] += cfg_in[c * nc + j] W_cfg on the row
// of configurable node j in configuration c.
template <typename T>
void LayoutConfigProjection(const StageContext<T>& s, const GraphStructure& gs, int64_t k,
                            int64_t nc, GnnTape<T>* tp) {
  const int64_t H = s.layout.hidden, R0 = gs.plan(0).rows();
  ConstMatrixRefT<T> w_cfg(s.params + s.layout.w_cfg, s.layout.cfg_in, H);
  MatrixT<T> cfg_h;  // [k nc, H]
  RowProductInto<T>(tp->cfg_in, w_cfg, &cfg_h);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t j = 0; j < nc; ++j) {
      tp->a0.row(c * R0 + gs.config_rows_first[j]) += cfg_h.row(c * nc + j);
    }
  }
}

// Adjoint of TileConfigForward: da0 [k * R0, H] -> grad of W_cfg; dtile_cfg [k, kc] += when not
// null.
template <typename T>
void TileConfigBackward(const StageContext<T>& s, const GraphStructure& gs, int64_t k,
                        const GnnTape<T>& tp, const MatrixT<T>& da0, T* grad, T* dtile_cfg) {
  const int64_t H = s.layout.hidden, R0 = gs.plan(0).rows();
  const int64_t kc = static_cast<int64_t>(gs.cfg_cols.size());
  MatrixT<T> dcfg_h(k, H);  // [k, H]
  dcfg_h.setZero();
  // Row by row in order: a configuration's sum never depends on where its rows sit.
  for (int64_t c = 0; c < k; ++c) {
    T* __restrict out = dcfg_h.row(c).data();
    for (int64_t i = 0; i < R0; ++i) {
      const T* __restrict row = da0.row(c * R0 + i).data();
      for (int64_t d = 0; d < H; ++d) out[d] += row[d];
    }
  }
  ConstMatrixRefT<T> w_cfg(s.params + s.layout.w_cfg, s.layout.cfg_in, H);
  MatrixRefT<T>(grad + s.layout.w_cfg, s.layout.cfg_in, H).noalias() +=
      tp.cfg_in.transpose() * dcfg_h;
  if (dtile_cfg != nullptr) {
    MatrixT<T> dcfg;  // [k, cfg_in]
    RowProductTransposedInto<T>(dcfg_h, w_cfg, &dcfg);
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < kc; ++j) dtile_cfg[c * kc + j] += dcfg(c, gs.cfg_cols[j]);
    }
  }
}

// Adjoint of the layout config input: da0 [k * R0, H], dnode_cfg [k * nc, cfg_in] (empty
// without the config-node head) -> grads of W_cfg and of the layout value table.
template <typename T>
void LayoutConfigBackward(const StageContext<T>& s, const GraphStructure& gs, int64_t k,
                          const GnnTape<T>& tp, const MatrixT<T>& da0, const MatrixT<T>& dnode_cfg,
                          T* grad) {
  const int64_t H = s.layout.hidden, R0 = gs.plan(0).rows();
  const int64_t nc = static_cast<int64_t>(gs.config_nodes.size());
  const int de = s.spec.layout_value_embedding_dim();
  MatrixT<T> dcfg_h(k * nc, H);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t j = 0; j < nc; ++j) {
      dcfg_h.row(c * nc + j) = da0.row(c * R0 + gs.config_rows_first[j]);
    }
  }
  ConstMatrixRefT<T> w_cfg(s.params + s.layout.w_cfg, s.layout.cfg_in, H);
  MatrixRefT<T>(grad + s.layout.w_cfg, s.layout.cfg_in, H).noalias() +=
      tp.cfg_in.transpose() * dcfg_h;
  MatrixT<T> dcfg;  // [k nc, 18 de]
  RowProductTransposedInto<T>(dcfg_h, w_cfg, &dcfg);
  if (s.layout.node_head > 0) dcfg += dnode_cfg;
  if (s.layout.dim_tokens > 0) LayoutDimensionEncoderBackward(s, tp, dcfg, grad);
  // The table's gradient, value by value in the order of the values (q = r * 18 + f), with
  // plain pointers (dcfg and the table are row-major).
  T* dtable = grad + s.layout.layout_table;
  const int64_t stride = dcfg.cols();
  for (int64_t r = 0; r < k * nc; ++r) {
    const T* src = dcfg.data() + r * stride;
    const int32_t* rows = tp.layout_rows.data() + r * kLayoutConfigFeatureCount;
    for (int f = 0; f < kLayoutConfigFeatureCount; ++f) {
      T* out = dtable + static_cast<int64_t>(rows[f]) * de;
      const T* in = src + f * de;
      for (int d = 0; d < de; ++d) out[d] += in[d];
    }
  }
}

}  // namespace

template <typename T>
void Layer0Forward(const StageContext<T>& s, const GraphStructure& gs, const GnnInputs<T>& in,
                   const MatrixT<T>& a0_base, GnnTape<T>* tp) {
  const int64_t H = s.layout.hidden, k = in.k;
  const int64_t nc = static_cast<int64_t>(gs.config_nodes.size());
  const LayerPlan& p0 = gs.plan(0);
  const int64_t R0 = p0.rows();
  tp->a0.resize(k * R0, H);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t i = 0; i < R0; ++i) tp->a0.row(c * R0 + i) = a0_base.row(p0.nodes[i]);
  }
  if (s.tile_early) {
    TileConfigForward(s, gs, in, tp);
  } else if (s.is_layout && nc > 0) {
    LayoutValueEmbeddings(s, in, nc, tp);
    LayoutDerivedColumns(s, gs, in, nc, tp);
    if (s.layout.dim_tokens > 0) LayoutDimensionEncoderForward(s, gs, in, nc, tp);
    LayoutConfigProjection(s, gs, k, nc, tp);
  }
}

template <typename T>
void Layer0Backward(const StageContext<T>& s, const GraphStructure& gs, int64_t k,
                    const GnnTape<T>& tp, const MatrixT<T>& dh0, const MatrixT<T>& dnode_cfg,
                    T* grad, T* dtile_cfg, MatrixT<T>* da0_base) {
  const int64_t nc = static_cast<int64_t>(gs.config_nodes.size());
  const LayerPlan& p0 = gs.plan(0);
  const int64_t R0 = p0.rows();
  MatrixT<T> da0 = dh0.array() * s.gnn.ActGradMat(tp.a0).array();
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t i = 0; i < R0; ++i) da0_base->row(p0.nodes[i]) += da0.row(c * R0 + i);
  }
  if (s.tile_early) {
    TileConfigBackward(s, gs, k, tp, da0, grad, dtile_cfg);
  } else if (s.is_layout && nc > 0) {
    LayoutConfigBackward(s, gs, k, tp, da0, dnode_cfg, grad);
  }
}

template void Layer0Forward<float>(const StageContext<float>&, const GraphStructure&,
                                   const GnnInputs<float>&, const MatrixT<float>&, GnnTape<float>*);
template void Layer0Forward<double>(const StageContext<double>&, const GraphStructure&,
                                    const GnnInputs<double>&, const MatrixT<double>&,
                                    GnnTape<double>*);
template void Layer0Backward<float>(const StageContext<float>&, const GraphStructure&, int64_t,
                                    const GnnTape<float>&, const MatrixT<float>&,
                                    const MatrixT<float>&, float*, float*, MatrixT<float>*);
template void Layer0Backward<double>(const StageContext<double>&, const GraphStructure&, int64_t,
                                     const GnnTape<double>&, const MatrixT<double>&,
                                     const MatrixT<double>&, double*, double*, MatrixT<double>*);

}  // namespace tpugraphs::model::internal
