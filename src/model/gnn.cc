// The GNN's parameter layout and the orchestration of its forward and backward passes over the
// stage kernels of gnn_stages.h (input layer, message-passing layers, pooling, config-node head,
// output head).
#include "tpugraphs/model/gnn.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gnn_stages.h"

namespace tpugraphs::model::internal {

// ---------------------------------------------------------------------------------------------
// Parameter layout.

int TileConfigColumns(const ModelSpec& spec) {
  return kTileConfigFeatureCount + (spec.tile_derived_features() ? kTileDerivedFeatureCount : 0);
}

ParamLayout MakeParamLayout(const ModelSpec& spec, TaskKind task) {
  ParamLayout pl;
  const int H = spec.hidden_dim();
  const int L = spec.num_layers();
  pl.hidden = H;
  pl.num_layers = L;
  auto add = [&pl](const std::string& name, int64_t rows, int64_t cols) {
    pl.blocks.push_back({name, pl.total, rows, cols});
    const int64_t off = pl.total;
    pl.total += rows * cols;
    return off;
  };
  const bool layout = task == TaskKind::kLayout;
  const bool early = !layout && spec.tile_join() == ModelSpec::TILE_JOIN_EARLY;
  pl.op_table = add("opcode_embedding", spec.num_opcodes(), spec.opcode_embedding_dim());
  pl.w_op = add("input.w_opcode", spec.opcode_embedding_dim(), H);
  pl.w_feat = add("input.w_features", kNodeFeatureCount, H);
  pl.b_in = add("input.bias", 1, H);
  if (layout) {
    pl.layout_table = add("layout_value_embedding", spec.layout_value_max() + 3,
                          spec.layout_value_embedding_dim());
    pl.cfg_in = kLayoutConfigFeatureCount * spec.layout_value_embedding_dim() +
                (spec.layout_tensor_features() ? kLayoutTensorFeatureCount : 0) +
                (spec.layout_size_features() ? kLayoutSizeFeatureCount : 0) +
                (spec.layout_flow_features() ? kLayoutFlowFeatureCount : 0) +
                (spec.layout_dim_split_features() ? kLayoutDimSplitFeatureCount : 0) +
                (spec.config_loop_depth() ? 1 : 0) + spec.config_random_walk() +
                3 * spec.layout_dimension_tokens();
    pl.w_cfg = add("input.w_config", pl.cfg_in, H);
    if (spec.layout_dimension_tokens() > 0) {
      pl.dim_tokens = spec.layout_dimension_tokens();
      pl.w_dim = add("dimension_encoder.w", kDimensionTokenWidth, pl.dim_tokens);
      pl.b_dim = add("dimension_encoder.bias", 1, pl.dim_tokens);
    }
  } else if (early) {
    pl.cfg_in = TileConfigColumns(spec);
    pl.w_cfg = add("input.w_config", pl.cfg_in, H);
  }
  pl.w_layer.assign(L + 1, -1);
  pl.b_layer.assign(L + 1, -1);
  pl.ln_gain.assign(L + 1, -1);
  pl.ln_bias.assign(L + 1, -1);
  for (int l = 1; l <= L; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    pl.w_layer[l] = add(p + "w", 3 * H, H);
    pl.b_layer[l] = add(p + "bias", 1, H);
    if (spec.layer_norm()) {
      pl.ln_gain[l] = add(p + "norm_gain", 1, H);
      pl.ln_bias[l] = add(p + "norm_bias", 1, H);
    }
  }
  pl.num_pools = (spec.pool_mean() ? 1 : 0) + (spec.pool_max() ? 1 : 0) +
                 (layout && spec.config_pooling() != ModelSpec::CONFIG_POOLING_NONE ? 1 : 0);
  pl.head_in = pl.num_pools * H + (!layout && !early ? TileConfigColumns(spec) : 0);
  pl.head_dims.push_back(pl.head_in);
  for (int i = 0; i < spec.head_layers(); ++i) pl.head_dims.push_back(spec.head_hidden_dim());
  pl.head_dims.push_back(1);
  for (size_t t = 0; t + 1 < pl.head_dims.size(); ++t) {
    const std::string p = "head" + std::to_string(t) + ".";
    pl.w_head.push_back(add(p + "w", pl.head_dims[t], pl.head_dims[t + 1]));
    pl.b_head.push_back(add(p + "bias", 1, pl.head_dims[t + 1]));
  }
  pl.g_width = pl.head_in;
  if (layout && spec.config_node_head() > 0) {
    pl.node_head = spec.config_node_head();
    pl.attention = spec.config_attention();
    pl.w_node1 = add("node_head.w1", H + pl.cfg_in + pl.attention, pl.node_head);
    pl.b_node1 = add("node_head.bias", 1, pl.node_head);
    pl.w_node2 = add("node_head.w2", pl.node_head, 1);
    if (spec.config_node_head_linear()) {
      pl.w_node_linear = add("node_head.linear", H + pl.cfg_in, 1);
    }
    pl.g_width = pl.head_in + 1;
    if (pl.attention > 0) {
      pl.w_att = add("node_head.attention_qkv", H + pl.cfg_in, 3 * pl.attention);
    }
  }
  return pl;
}

// ---------------------------------------------------------------------------------------------
// Gnn.

// ---------------------------------------------------------------------------------------------
// Gnn.

template <typename T>
Gnn<T>::Gnn(const ModelSpec& spec, TaskKind task)
    : spec_(spec), task_(task), layout_(MakeParamLayout(spec, task)) {
  is_layout_ = task == TaskKind::kLayout;
  tile_early_ = !is_layout_ && spec.tile_join() == ModelSpec::TILE_JOIN_EARLY;
}

template <typename T>
void Gnn<T>::Forward(const T* params, const GraphStructure& gs, const GnnInputs<T>& in, T* scores,
                     GnnTape<T>* tape_in) const {
  GnnTape<T> local;
  GnnTape<T>& tp = tape_in != nullptr ? *tape_in : local;
  MatrixT<T> G;
  ForwardPooled(params, gs, in, &G, &tp);
  ForwardHead(params, std::move(G), scores, &tp);
}

template <typename T>
void SharedGrad<T>::Reset(const GraphStructure& gs, int hidden, int num_layers) {
  const size_t layers = gs.all_affected ? 0 : static_cast<size_t>(num_layers);
  bool same = !dirty && da0_base.rows() == gs.n && da0_base.cols() == hidden &&
              dbase.size() == layers && touched.size() == layers + 1;
  for (size_t l = 0; same && l < layers; ++l) {
    same = dbase[l].rows() == gs.n && dbase[l].cols() == hidden;
  }
  if (same) {  // zeros everywhere but on the rows written since the last Reset
    for (int64_t v : touched[0]) da0_base.row(v).setZero();
    for (size_t l = 0; l < layers; ++l) {
      for (int64_t v : touched[l + 1]) dbase[l].row(v).setZero();
    }
  } else {
    da0_base.setZero(gs.n, hidden);
    dbase.resize(layers);
    for (auto& m : dbase) m.setZero(gs.n, hidden);
  }
  touched.resize(layers + 1);
  touched[0] = gs.plan(0).nodes;
  for (size_t l = 0; l < layers; ++l) touched[l + 1] = gs.base_rows[l];
  dirty = false;
  last.mean.setZero(hidden);
  last.max.setZero(hidden);
}

template <typename T>
int64_t SharedGrad<T>::rows() const {
  int64_t r = 0;
  for (const auto& t : touched) r += static_cast<int64_t>(t.size());
  return r;
}

template <typename T>
void SharedGrad<T>::AddRows(const SharedGrad& o, int64_t b, int64_t e) {
  int64_t off = 0;
  for (size_t m = 0; m < touched.size() && off < e; ++m) {
    const std::vector<int64_t>& rows = touched[m];
    const int64_t size = static_cast<int64_t>(rows.size());
    MatrixT<T>& dst = m == 0 ? da0_base : dbase[m - 1];
    const MatrixT<T>& src = m == 0 ? o.da0_base : o.dbase[m - 1];
    for (int64_t i = std::max<int64_t>(b - off, 0); i < std::min(size, e - off); ++i) {
      dst.row(rows[i]) += src.row(rows[i]);
    }
    off += size;
  }
}

template <typename T>
void SharedGrad<T>::AddPooled(const SharedGrad& o) {
  last.mean += o.last.mean;
  last.max += o.last.max;
}

template <typename T>
int64_t SharedGrad<T>::flat_size() const {
  return (rows() + 2) * static_cast<int64_t>(last.mean.size());
}

template <typename T>
void SharedGrad<T>::Flatten(T* out) const {
  const int64_t H = last.mean.size();
  for (size_t m = 0; m < touched.size(); ++m) {
    const MatrixT<T>& src = m == 0 ? da0_base : dbase[m - 1];
    for (int64_t v : touched[m]) out = std::copy_n(src.row(v).data(), H, out);
  }
  out = std::copy_n(last.mean.data(), H, out);
  std::copy_n(last.max.data(), H, out);
}

template <typename T>
void SharedGrad<T>::AddFlat(const T* in) {
  const int64_t H = last.mean.size();
  for (size_t m = 0; m < touched.size(); ++m) {
    MatrixT<T>& dst = m == 0 ? da0_base : dbase[m - 1];
    for (int64_t v : touched[m]) {
      for (int64_t d = 0; d < H; ++d) dst(v, d) += in[d];
      in += H;
    }
  }
  for (int64_t d = 0; d < H; ++d) last.mean[d] += in[d];
  for (int64_t d = 0; d < H; ++d) last.max[d] += in[H + d];
}

template <typename T>
void Gnn<T>::ForwardPooled(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                           MatrixT<T>* G_out, GnnTape<T>* tape_in) const {
  GnnTape<T> local;
  GnnTape<T>& tp = tape_in != nullptr ? *tape_in : local;
  ForwardShared(params, gs, in.node_feat, &tp);
  ConfigsPooled(params, gs, in, tp, G_out, &tp);
}

template <typename T>
void Gnn<T>::ForwardShared(const T* params, const GraphStructure& gs, const T* node_feat,
                           GnnTape<T>* shared) const {
  const StageContext<T> s{spec_, layout_, *this, params, is_layout_, tile_early_};
  const int L = layout_.num_layers;
  GnnTape<T>& tp = *shared;
  tp.base.resize(L + 1);
  // Input layer, configuration-independent part: a0_base [n, H].
  InputForward(s, gs, node_feat, &tp.a0_base);
  // Base pass over the whole graph (exact for nodes outside S_l): h0_base, base[l].h [n, H].
  if (!gs.all_affected) {
    tp.h0_base = ActMat(tp.a0_base);
    for (int l = 1; l <= L; ++l) {
      LayerForward(params, l, gs.full, 1, l == 1 ? tp.h0_base : tp.base[l - 1].h, nullptr,
                   tp.base[l], !tp.inference);
    }
  }
  BasePools(gs, L == 0 ? tp.h0_base : tp.base[L].h, layout_.hidden, &tp);
}

template <typename T>
void Gnn<T>::ForwardConfigs(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                            const GnnTape<T>& shared, T* scores, GnnTape<T>* tape) const {
  MatrixT<T> G;
  ConfigsPooled(params, gs, in, shared, &G, tape);
  ForwardHead(params, std::move(G), scores, tape);
}

// A zeroed parameter-sized buffer at Eigen's packet alignment, added element by element into
// the caller's grad at the end (Gnn::BackwardHead's comment says why).
template <typename T>
class AlignedGrad {
 public:
  explicit AlignedGrad(int64_t n) : buf_(static_cast<size_t>(n), T(0)) {}
  T* data() { return buf_.data(); }
  void AddTo(T* grad) const {
    const size_t n = buf_.size();
    for (size_t i = 0; i < n; ++i) grad[i] += buf_[i];
  }

 private:
  std::vector<T, Eigen::aligned_allocator<T>> buf_;
};

template <typename T>
void Gnn<T>::ConfigsPooled(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                           const GnnTape<T>& shared, MatrixT<T>* G_out, GnnTape<T>* tape) const {
  const StageContext<T> s{spec_, layout_, *this, params, is_layout_, tile_early_};
  MatrixT<T> G;
  const MatrixT<T>& hl = ConfigLayers(params, gs, in, shared, &G, tape);
  if (layout_.node_head > 0) NodeHeadForward(s, gs, hl, tape, &G);
  TPUG_CHECK_FINITE(G);
  *G_out = std::move(G);
}

template <typename T>
void Gnn<T>::ForwardConfigsToAttention(const T* params, const GraphStructure& gs,
                                       const GnnInputs<T>& in, const GnnTape<T>& shared,
                                       GnnTape<T>* tape) const {
  const StageContext<T> s{spec_, layout_, *this, params, is_layout_, tile_early_};
  const MatrixT<T>& hl = ConfigLayers(params, gs, in, shared, &tape->pooled, tape);
  if (layout_.node_head > 0) NodeHeadInputs(s, gs, hl, in.k, tape);
}

template <typename T>
void Gnn<T>::AttendForward(const T* params, const GraphStructure& gs,
                           const std::vector<GnnTape<T>*>& chunks, GnnTape<T>* join) const {
  (void)params;
  const int64_t A = layout_.attention, nc = static_cast<int64_t>(gs.config_nodes.size());
  int64_t k = 0;
  for (const GnnTape<T>* t : chunks) k += t->k;
  join->k = k;
  join->att_p.resize(nc * k, k);
  if (A == 0) return;
  // Nodes are independent: any split of them gives the same bits.
  ForRows(nc, 8, [&](int64_t, int64_t b, int64_t e) {
    AttentionNodesForward<T>(A, nc, chunks, b, e, &join->att_p);
  });
}

template <typename T>
void Gnn<T>::ForwardConfigsFromAttention(const T* params, const GraphStructure& gs,
                                         const GnnInputs<T>& in, GnnTape<T>* tape,
                                         T* scores) const {
  (void)in;
  const StageContext<T> s{spec_, layout_, *this, params, is_layout_, tile_early_};
  MatrixT<T> G = tape->pooled;
  if (layout_.node_head > 0) NodeHeadScores(s, gs, tape, &G);
  TPUG_CHECK_FINITE(G);
  ForwardHead(params, std::move(G), scores, tape);
}

template <typename T>
void Gnn<T>::BackwardConfigsToAttention(const T* params, const GraphStructure& gs,
                                        const GnnInputs<T>& in, const GnnTape<T>& tape,
                                        const T* dscores, T* grad) const {
  const StageContext<T> s{spec_, layout_, *this, params, is_layout_, tile_early_};
  std::optional<AlignedGrad<T>> local;
  T* g = grad;
  if (reinterpret_cast<uintptr_t>(grad) % EIGEN_MAX_ALIGN_BYTES != 0) {
    local.emplace(layout_.total);
    g = local->data();
  }
  tape.dG = BackwardHeadAligned(params, tape, in.k, dscores, g);
  if (layout_.node_head > 0) NodeHeadBackwardToAttention(s, gs, in.k, tape, tape.dG, g);
  if (local) local->AddTo(grad);
}

template <typename T>
void Gnn<T>::AttendBackward(const T* params, const GraphStructure& gs,
                            const std::vector<const GnnTape<T>*>& chunks,
                            const GnnTape<T>& join) const {
  (void)params;
  const int64_t A = layout_.attention, nc = static_cast<int64_t>(gs.config_nodes.size());
  if (A == 0) return;
  ForRows(nc, 8, [&](int64_t, int64_t b, int64_t e) {
    AttentionNodesBackward<T>(A, nc, chunks, join.att_p, b, e);
  });
}

template <typename T>
void Gnn<T>::BackwardConfigsFromAttention(const T* params, const GraphStructure& gs,
                                          const GnnInputs<T>& in, const GnnTape<T>& tape, T* grad,
                                          SharedGrad<T>* dshared, T* dtile_cfg) const {
  if (reinterpret_cast<uintptr_t>(grad) % EIGEN_MAX_ALIGN_BYTES == 0) {
    ConfigsBackwardAligned(params, gs, in, tape, tape.dG, grad, dshared, dtile_cfg, true);
    return;
  }
  AlignedGrad<T> g(layout_.total);
  ConfigsBackwardAligned(params, gs, in, tape, tape.dG, g.data(), dshared, dtile_cfg, true);
  g.AddTo(grad);
}

template <typename T>
const MatrixT<T>& Gnn<T>::ConfigLayers(const T* params, const GraphStructure& gs,
                                       const GnnInputs<T>& in, const GnnTape<T>& shared,
                                       MatrixT<T>* G_out, GnnTape<T>* tape) const {
  const StageContext<T> s{spec_, layout_, *this, params, is_layout_, tile_early_};
  GnnTape<T>& tp = *tape;
  const int64_t k = in.k;
  const int L = layout_.num_layers;
  tp.k = k;
  tp.layers.resize(L + 1);
  auto base_h = [&](int l) -> const MatrixT<T>& {
    return l == 0 ? shared.h0_base : shared.base[l].h;
  };

  // Per-config layer 0 on S_0: a0, h0 [k R0, H]; then layers 1..L: layers[l].h [k R_l, H].
  Layer0Forward(s, gs, in, shared.a0_base, &tp);
  tp.h0 = ActMat(tp.a0);
  for (int l = 1; l <= L; ++l) {
    LayerForward(params, l, gs.plan(l), k, l == 1 ? tp.h0 : tp.layers[l - 1].h,
                 gs.all_affected ? nullptr : &base_h(l - 1), tp.layers[l], !tp.inference);
  }
  const MatrixT<T>& hl = L == 0 ? tp.h0 : tp.layers[L].h;  // [k RL, H]

  // Pooling into the head input G [k, g_width] (the config-node head's column is the caller's).
  G_out->setZero(k, layout_.g_width);
  PoolForward(s, gs, in, hl, shared, &tp, G_out);
  return hl;
}

template <typename T>
void Gnn<T>::ForwardHead(const T* params, MatrixT<T> G, T* scores, GnnTape<T>* tape_in) const {
  GnnTape<T> local;
  GnnTape<T>& tp = tape_in != nullptr ? *tape_in : local;
  const StageContext<T> s{spec_, layout_, *this, params, is_layout_, tile_early_};
  HeadForward(s, std::move(G), scores, &tp);
}

template <typename T>
void Gnn<T>::Backward(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                      const GnnTape<T>& tp, const T* dscores, T* grad, T* dnode_feat,
                      T* dtile_cfg) const {
  AlignedGrad<T> g(layout_.total);
  const MatrixT<T> dG = BackwardHeadAligned(params, tp, in.k, dscores, g.data());
  BackwardPooledAligned(params, gs, in, tp, dG, g.data(), dnode_feat, dtile_cfg);
  g.AddTo(grad);
}

template <typename T>
MatrixT<T> Gnn<T>::BackwardHead(const T* params, const GnnTape<T>& tp, int64_t k, const T* dscores,
                                T* grad) const {
  AlignedGrad<T> g(layout_.total);
  MatrixT<T> dG = BackwardHeadAligned(params, tp, k, dscores, g.data());
  g.AddTo(grad);
  return dG;
}

template <typename T>
void Gnn<T>::BackwardPooled(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                            const GnnTape<T>& tp, const MatrixT<T>& dG, T* grad, T* dnode_feat,
                            T* dtile_cfg) const {
  AlignedGrad<T> g(layout_.total);
  BackwardPooledAligned(params, gs, in, tp, dG, g.data(), dnode_feat, dtile_cfg);
  g.AddTo(grad);
}

template <typename T>
MatrixT<T> Gnn<T>::BackwardHeadAligned(const T* params, const GnnTape<T>& tp, int64_t k,
                                       const T* dscores, T* grad) const {
  const StageContext<T> s{spec_, layout_, *this, params, is_layout_, tile_early_};
  return HeadBackward(s, tp, k, dscores, grad);
}

template <typename T>
void Gnn<T>::BackwardPooledAligned(const T* params, const GraphStructure& gs,
                                   const GnnInputs<T>& in, const GnnTape<T>& tp,
                                   const MatrixT<T>& dG, T* grad, T* dnode_feat,
                                   T* dtile_cfg) const {
  SharedGrad<T> dshared;
  dshared.Reset(gs, layout_.hidden, layout_.num_layers);
  ConfigsBackwardAligned(params, gs, in, tp, dG, grad, &dshared, dtile_cfg);
  SharedBackwardAligned(params, gs, in.node_feat, tp, &dshared, grad, dnode_feat);
}

template <typename T>
void Gnn<T>::BackwardConfigs(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                             const GnnTape<T>& tape, const T* dscores, T* grad,
                             SharedGrad<T>* dshared, T* dtile_cfg) const {
  if (reinterpret_cast<uintptr_t>(grad) % EIGEN_MAX_ALIGN_BYTES == 0) {
    // Already at the packets' alignment (the trainer's chunk buffers): no copy needed.
    const MatrixT<T> dG = BackwardHeadAligned(params, tape, in.k, dscores, grad);
    ConfigsBackwardAligned(params, gs, in, tape, dG, grad, dshared, dtile_cfg);
    return;
  }
  AlignedGrad<T> g(layout_.total);
  const MatrixT<T> dG = BackwardHeadAligned(params, tape, in.k, dscores, g.data());
  ConfigsBackwardAligned(params, gs, in, tape, dG, g.data(), dshared, dtile_cfg);
  g.AddTo(grad);
}

template <typename T>
void Gnn<T>::ForwardConfigsPooled(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                                  const GnnTape<T>& shared, MatrixT<T>* G, GnnTape<T>* tape) const {
  ConfigsPooled(params, gs, in, shared, G, tape);
}

template <typename T>
void Gnn<T>::BackwardConfigsPooled(const T* params, const GraphStructure& gs,
                                   const GnnInputs<T>& in, const GnnTape<T>& tape,
                                   const MatrixT<T>& dG, T* grad, SharedGrad<T>* dshared) const {
  if (reinterpret_cast<uintptr_t>(grad) % EIGEN_MAX_ALIGN_BYTES == 0) {
    ConfigsBackwardAligned(params, gs, in, tape, dG, grad, dshared, nullptr);
    return;
  }
  AlignedGrad<T> g(layout_.total);
  ConfigsBackwardAligned(params, gs, in, tape, dG, g.data(), dshared, nullptr);
  g.AddTo(grad);
}

template <typename T>
void Gnn<T>::BackwardShared(const T* params, const GraphStructure& gs, const T* node_feat,
                            const GnnTape<T>& shared, SharedGrad<T>* dshared, T* grad,
                            T* dnode_feat) const {
  AlignedGrad<T> g(layout_.total);
  SharedBackwardAligned(params, gs, node_feat, shared, dshared, g.data(), dnode_feat);
  g.AddTo(grad);
}

template <typename T>
void Gnn<T>::ConfigsBackwardAligned(const T* params, const GraphStructure& gs,
                                    const GnnInputs<T>& in, const GnnTape<T>& tp,
                                    const MatrixT<T>& dG, T* grad, SharedGrad<T>* dshared,
                                    T* dtile_cfg, bool from_attention) const {
  const StageContext<T> s{spec_, layout_, *this, params, is_layout_, tile_early_};
  const int64_t H = layout_.hidden, k = in.k;
  const int L = layout_.num_layers;
  std::vector<MatrixT<T>>& dbase = dshared->dbase;  // [L] x [n, H], or empty

  // Pooling and the config-node head: dh [k RL, H], dshared->last, dnode_cfg [k nc, cfg_in].
  const int64_t RL = gs.plan(L).rows();
  MatrixT<T> dh = MatrixT<T>::Zero(k * RL, H);
  PoolBackward(s, gs, k, tp, dG, &dh, gs.all_affected ? nullptr : &dshared->last, dtile_cfg);
  MatrixT<T> dnode_cfg;
  if (layout_.node_head > 0) {
    dnode_cfg = from_attention ? NodeHeadBackwardFromAttention(s, gs, k, tp, grad, &dh)
                               : NodeHeadBackward(s, gs, k, tp, dG, grad, &dh);
  }

  // Per-config layers L..1, then layer 0: da0_base [n, H].
  for (int l = L; l >= 1; --l) {
    MatrixT<T> dprev = MatrixT<T>::Zero(k * gs.plan(l - 1).rows(), H);
    LayerBackward(params, l, gs.plan(l), k, tp.layers[l], dh, grad, dprev,
                  gs.all_affected ? nullptr : &dbase[l - 1]);
    dh = std::move(dprev);
  }
  Layer0Backward(s, gs, k, tp, dh, dnode_cfg, grad, dtile_cfg, &dshared->da0_base);
}

template <typename T>
void Gnn<T>::SharedBackwardAligned(const T* params, const GraphStructure& gs, const T* node_feat,
                                   const GnnTape<T>& shared, SharedGrad<T>* dshared, T* grad,
                                   T* dnode_feat) const {
  const StageContext<T> s{spec_, layout_, *this, params, is_layout_, tile_early_};
  const int L = layout_.num_layers;
  std::vector<MatrixT<T>>& dbase = dshared->dbase;
  MatrixT<T>& da0_base = dshared->da0_base;
  dshared->dirty = true;  // the passes below write every row
  // Base pass backward (gradients reach base states only outside S_l; see docs/model.md).
  if (!gs.all_affected) {
    // The last layer's base gradient from pooling: the mean's on every node outside S_L, then
    // the max pool's entries in order.
    const int64_t H = layout_.hidden;
    MatrixT<T> dlast = MatrixT<T>::Zero(gs.n, H);
    for (int64_t v : gs.unaffected_last) dlast.row(v) = dshared->last.mean;
    if (spec_.pool_max()) {
      for (int64_t d = 0; d < H; ++d) {
        if (shared.base_arg[d] >= 0) dlast(shared.base_arg[d], d) += dshared->last.max[d];
      }
    }
    for (int l = L; l >= 1; --l) {
      LayerBackward(params, l, gs.full, 1, shared.base[l], l == L ? dlast : dbase[l], grad,
                    dbase[l - 1], nullptr);
    }
    const MatrixT<T>& d0 = L == 0 ? dlast : dbase[0];
    da0_base.array() += d0.array() * ActGradMat(shared.a0_base).array();
  }
  TPUG_CHECK_FINITE(da0_base);

  // Input layer parameters and node features.
  InputBackward(s, gs, node_feat, da0_base, grad, dnode_feat);
}

template struct SharedGrad<float>;
template struct SharedGrad<double>;
template class Gnn<float>;
template class Gnn<double>;

}  // namespace tpugraphs::model::internal
