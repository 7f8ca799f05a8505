#include "tpugraphs/model/gnn.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/model/row_product.h"

namespace tpugraphs::model::internal {

#ifndef NDEBUG
#define TPUG_CHECK_FINITE(m) assert((m).allFinite() && "non-finite values after a kernel")
#else
#define TPUG_CHECK_FINITE(m) ((void)0)
#endif

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
                (spec.config_loop_depth() ? 1 : 0);
    pl.w_cfg = add("input.w_config", pl.cfg_in, H);
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
    pl.g_width = pl.head_in + 1;
    if (pl.attention > 0) {
      pl.w_att = add("node_head.attention_qkv", H + pl.cfg_in, 3 * pl.attention);
    }
  }
  return pl;
}

// ---------------------------------------------------------------------------------------------
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

}  // namespace

// Graph structure and the per-layer plans.

namespace {

void BuildFullPlan(int64_t n, const std::vector<int64_t>& edges, LayerPlan& p) {
  const int64_t m = static_cast<int64_t>(edges.size() / 2);
  p.nodes.resize(n);
  p.self_ref.resize(n);
  for (int64_t i = 0; i < n; ++i) p.nodes[i] = p.self_ref[i] = i;
  // Row [u, v]: u consumes v. Operands of u are the v's; users of v are the u's.
  p.op_ptr.assign(n + 1, 0);
  p.us_ptr.assign(n + 1, 0);
  for (int64_t e = 0; e < m; ++e) {
    ++p.op_ptr[edges[2 * e] + 1];
    ++p.us_ptr[edges[2 * e + 1] + 1];
  }
  for (int64_t i = 0; i < n; ++i) {
    p.op_ptr[i + 1] += p.op_ptr[i];
    p.us_ptr[i + 1] += p.us_ptr[i];
  }
  p.op_ref.resize(m);
  p.us_ref.resize(m);
  std::vector<int64_t> op_fill(p.op_ptr.begin(), p.op_ptr.end() - 1);
  std::vector<int64_t> us_fill(p.us_ptr.begin(), p.us_ptr.end() - 1);
  for (int64_t e = 0; e < m; ++e) {
    const int64_t u = edges[2 * e], v = edges[2 * e + 1];
    p.op_ref[op_fill[u]++] = v;
    p.us_ref[us_fill[v]++] = u;
  }
}

}  // namespace

StatusOr<GraphStructure> BuildGraphStructure(const ModelSpec& spec, TaskKind task,
                                             const std::vector<uint8_t>& opcodes,
                                             const std::vector<int64_t>& edge_index,
                                             const std::vector<int64_t>& config_nodes,
                                             std::vector<int> node_cols, std::vector<int> cfg_cols,
                                             bool naive, const std::string& what) {
  GraphStructure gs;
  const int64_t n = static_cast<int64_t>(opcodes.size());
  if (n == 0) return InvalidArgumentError(what + ": graph has no nodes");
  if (edge_index.size() % 2 != 0) {
    return InvalidArgumentError(what + ": edge_index has an odd number of values");
  }
  const int64_t m = static_cast<int64_t>(edge_index.size() / 2);
  for (int64_t e = 0; e < 2 * m; ++e) {
    if (edge_index[e] < 0 || edge_index[e] >= n) {
      return InvalidArgumentError(what + ": edge " + std::to_string(e / 2) + " refers to node " +
                                  std::to_string(edge_index[e]) + " outside [0, " +
                                  std::to_string(n) + ")");
    }
  }
  gs.n = n;
  gs.m = m;
  gs.opcode.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    gs.opcode[i] = opcodes[i] < spec.num_opcodes() ? opcodes[i] : 0;
  }
  gs.node_cols = std::move(node_cols);
  gs.cfg_cols = std::move(cfg_cols);
  const bool layout = task == TaskKind::kLayout;
  if (layout) {
    std::vector<uint8_t> seen(n, 0);
    for (int64_t v : config_nodes) {
      if (v < 0 || v >= n) {
        return InvalidArgumentError(what + ": node_config_ids holds " + std::to_string(v) +
                                    ", outside [0, " + std::to_string(n) + ")");
      }
      if (seen[v]++) {
        return InvalidArgumentError(what + ": node_config_ids lists node " + std::to_string(v) +
                                    " twice");
      }
    }
    gs.config_nodes = config_nodes;
  }
  BuildFullPlan(n, edge_index, gs.full);
  const int L = spec.num_layers();
  gs.plans.resize(L + 1);
  gs.use_full.assign(L + 1, 0);
  const bool early = !layout && spec.tile_join() == ModelSpec::TILE_JOIN_EARLY;
  gs.all_affected = naive || early;
  if (gs.all_affected) {
    std::fill(gs.use_full.begin(), gs.use_full.end(), 1);
  } else {
    // S_0: configurable nodes (layout) or none (tile late join).
    std::vector<int64_t> pos(n, -1), prev_pos(n, -1);
    if (layout) gs.plans[0].nodes = gs.config_nodes;
    for (int l = 1; l <= L; ++l) {
      const LayerPlan& prev = gs.plans[l - 1];
      std::fill(prev_pos.begin(), prev_pos.end(), -1);
      for (int64_t i = 0; i < prev.rows(); ++i) prev_pos[prev.nodes[i]] = i;
      LayerPlan& p = gs.plans[l];
      p.nodes = prev.nodes;
      std::fill(pos.begin(), pos.end(), -1);
      for (int64_t i = 0; i < p.rows(); ++i) pos[p.nodes[i]] = i;
      for (int64_t v : prev.nodes) {
        for (int64_t e = gs.full.op_ptr[v]; e < gs.full.op_ptr[v + 1]; ++e) {
          const int64_t u = gs.full.op_ref[e];
          if (pos[u] < 0) pos[u] = p.rows(), p.nodes.push_back(u);
        }
        for (int64_t e = gs.full.us_ptr[v]; e < gs.full.us_ptr[v + 1]; ++e) {
          const int64_t u = gs.full.us_ref[e];
          if (pos[u] < 0) pos[u] = p.rows(), p.nodes.push_back(u);
        }
      }
      auto ref = [&](int64_t u) { return prev_pos[u] >= 0 ? prev_pos[u] : -(u + 1); };
      const int64_t R = p.rows();
      p.self_ref.resize(R);
      p.op_ptr.assign(R + 1, 0);
      p.us_ptr.assign(R + 1, 0);
      p.op_ref.clear();
      p.us_ref.clear();
      for (int64_t i = 0; i < R; ++i) {
        const int64_t v = p.nodes[i];
        p.self_ref[i] = ref(v);
        for (int64_t e = gs.full.op_ptr[v]; e < gs.full.op_ptr[v + 1]; ++e) {
          p.op_ref.push_back(ref(gs.full.op_ref[e]));
        }
        for (int64_t e = gs.full.us_ptr[v]; e < gs.full.us_ptr[v + 1]; ++e) {
          p.us_ref.push_back(ref(gs.full.us_ref[e]));
        }
        p.op_ptr[i + 1] = static_cast<int64_t>(p.op_ref.size());
        p.us_ptr[i + 1] = static_cast<int64_t>(p.us_ref.size());
      }
    }
  }
  // Rows of the configurable nodes in S_0 and S_L; nodes outside S_L.
  const LayerPlan& first = gs.plan(0);
  const LayerPlan& last = gs.plan(L);
  std::vector<int64_t> pos0(n, -1), posL(n, -1);
  for (int64_t i = 0; i < first.rows(); ++i) pos0[first.nodes[i]] = i;
  for (int64_t i = 0; i < last.rows(); ++i) posL[last.nodes[i]] = i;
  for (int64_t v : gs.config_nodes) {
    gs.config_rows_first.push_back(pos0[v]);
    gs.config_rows_last.push_back(posL[v]);
  }
  for (int64_t v = 0; v < n; ++v) {
    if (posL[v] < 0) gs.unaffected_last.push_back(v);
  }
  return gs;
}

// ---------------------------------------------------------------------------------------------
// Layout tensor features.

void FillLayoutTensorInfo(const float* raw_node_feat, GraphStructure* gs) {
  // Raw feature columns (ingest-spec section 4): shape_dimensions_0..5 and
  // layout_minor_to_major_0..5.
  constexpr int kDims = 21, kMinorToMajor = 134;
  const int64_t nc = static_cast<int64_t>(gs->config_nodes.size());
  gs->tensor_info.assign(nc * kLayoutTensorInfoWidth, 0.0f);
  for (int64_t j = 0; j < nc; ++j) {
    const int64_t v = gs->config_nodes[j];
    float* info = gs->tensor_info.data() + j * kLayoutTensorInfoWidth;
    const int64_t first_op = gs->full.op_ptr[v], num_ops = gs->full.op_ptr[v + 1] - first_op;
    for (int t = 0; t < 3; ++t) {
      float* ti = info + 12 * t;
      std::fill(ti + 6, ti + 12, -1.0f);  // no tensor: no graph layout
      int64_t node = -1;
      if (t == 0)
        node = v;
      else if (t - 1 < num_ops)
        node = gs->full.op_ref[first_op + t - 1];
      if (node < 0) continue;
      const float* f = raw_node_feat + node * kNodeFeatureCount;
      for (int i = 0; i < 6; ++i) {
        ti[i] = f[kDims + i];
        ti[6 + i] = f[kMinorToMajor + i];
      }
    }
  }
}

template <typename T>
void LayoutTensorFeatures(const float* info, const int8_t* vals, T* out) {
  for (int t = 0; t < 3; ++t) {
    const float* d = info + 12 * t;
    const float* m2m = d + 6;
    const int8_t* v = vals + 6 * t;
    T* o = out + 6 * t;
    auto dim = [&](int8_t x) -> double { return x >= 0 && x < 6 && d[x] >= 1 ? d[x] : 0.0; };
    const double d0 = dim(v[0]), d1 = dim(v[1]);
    o[0] = d0 > 0 ? T(std::log1p(d0) / 8) : T(0);
    o[1] = d1 > 0 ? T(std::log1p(d1) / 8) : T(0);
    o[2] = d0 > 0 ? T(std::log(std::ceil(d0 / 128) * 128 / d0) / std::log(128.0)) : T(0);
    o[3] = d1 > 0 ? T(std::log(std::ceil(d1 / 8) * 8 / d1) / std::log(8.0)) : T(0);
    o[4] = d0 > 0 ? T(1) : T(0);
    bool differs = false;
    if (d0 > 0) {
      for (int i = 0; i < 6; ++i) differs |= m2m[i] >= 0 && static_cast<float>(v[i]) != m2m[i];
    }
    // A layout other than the graph's makes the compiler re-lay the tensor out (a copy or a
    // transpose), whose cost grows with the tensor's size: the indicator carries log1p(elements).
    o[5] = T(0);
    if (differs) {
      double elements = 1.0;
      for (int i = 0; i < 6; ++i) elements *= d[i] >= 1 ? d[i] : 1.0;
      o[5] = T(std::log1p(elements) / 16);
    }
  }
}

template void LayoutTensorFeatures<float>(const float*, const int8_t*, float*);
template void LayoutTensorFeatures<double>(const float*, const int8_t*, double*);

template <typename T>
void LayoutSizeFeatures(const float* info, const int8_t* vals, T* out) {
  for (int t = 0; t < 3; ++t) {
    const float* d = info + 12 * t;
    const float* m2m = d + 6;
    const int8_t* v = vals + 6 * t;
    T* o = out + 3 * t;
    int rank = 0;
    while (rank < 6 && d[rank] >= 1) ++rank;
    if (rank == 0) {
      o[0] = o[1] = o[2] = T(0);
      continue;
    }
    double elements = 1.0;
    for (int i = 0; i < rank; ++i) elements *= d[i];
    // The layout in effect: the configuration's where its first value names a dimension, else
    // the graph's (a default value keeps the tensor as the graph has it).
    const bool set = v[0] >= 0 && v[0] < rank;
    auto minor = [&](int i) -> int {
      const double x = set ? static_cast<double>(v[i]) : static_cast<double>(m2m[i]);
      return x >= 0 && x < rank ? static_cast<int>(x) : -1;
    };
    double padded = elements;
    const int m0 = minor(0), m1 = rank >= 2 ? minor(1) : -1;
    if (m0 >= 0) padded = padded / d[m0] * (std::ceil(d[m0] / 128.0) * 128.0);
    if (m1 >= 0 && m1 != m0) padded = padded / d[m1] * (std::ceil(d[m1] / 8.0) * 8.0);
    o[0] = T(std::log1p(elements) / 16);
    o[1] = T(std::log(padded / elements) / std::log(1024.0));
    o[2] = T(std::log1p(padded) / 16);
  }
}

template void LayoutSizeFeatures<float>(const float*, const int8_t*, float*);
template void LayoutSizeFeatures<double>(const float*, const int8_t*, double*);

namespace {

// Whether layout value v names a dimension of size >= 1 of the tensor with dims d.
bool NamesDimension(int8_t v, const float* d) { return v >= 0 && v < 6 && d[v] >= 1; }

double TensorElements(const float* d) {
  double e = 1.0;
  for (int i = 0; i < 6; ++i) e *= d[i] >= 1 ? d[i] : 1.0;
  return e;
}

}  // namespace

template <typename T>
void LayoutFlowFeatures(const GraphStructure& gs, int64_t j, const int8_t* vals, T* out) {
  const float* info = gs.tensor_info.data() + j * kLayoutTensorInfoWidth;
  const int8_t* own = vals + j * kLayoutConfigFeatureCount;
  for (int t = 1; t <= 2; ++t) {
    const float* d = info + 12 * t;
    const int8_t* v = own + 6 * t;
    out[t - 1] = T(0);
    if (!NamesDimension(v[0], d)) continue;  // compiler default: the operand's layout, no copy
    // The layout the operand arrives in: its source's chosen output layout when one is set, else
    // the graph's (the source's default output layout is its graph layout, which a follower
    // shares).
    const int32_t s = gs.flow.source[2 * j + (t - 1)];
    const int8_t* cur = nullptr;
    if (s >= 0) {
      const int8_t* sv = vals + s * kLayoutConfigFeatureCount;
      if (NamesDimension(sv[0], gs.tensor_info.data() + s * kLayoutTensorInfoWidth)) cur = sv;
    }
    const float* m2m = d + 6;
    bool differs = false;
    for (int i = 0; i < 6; ++i) {
      differs |= cur != nullptr ? cur[i] >= 0 && v[i] != cur[i]
                                : m2m[i] >= 0 && static_cast<float>(v[i]) != m2m[i];
    }
    if (differs) out[t - 1] = T(std::log1p(TensorElements(d)) / 16);
  }
  // A copy back to the graph's layout for fixed-layout readers of the output or its followers.
  out[2] = T(0);
  if (gs.flow.has_exit[j] != 0.0f && NamesDimension(own[0], info)) {
    bool differs = false;
    for (int i = 0; i < 6; ++i) {
      differs |= info[6 + i] >= 0 && static_cast<float>(own[i]) != info[6 + i];
    }
    if (differs) out[2] = T(std::log1p(TensorElements(info)) / 16);
  }
  out[3] = T(gs.flow.follower_size[j]);
}

template void LayoutFlowFeatures<float>(const GraphStructure&, int64_t, const int8_t*, float*);
template void LayoutFlowFeatures<double>(const GraphStructure&, int64_t, const int8_t*, double*);

// ---------------------------------------------------------------------------------------------
// Gnn.

template <typename T>
Gnn<T>::Gnn(const ModelSpec& spec, TaskKind task)
    : spec_(spec), task_(task), layout_(MakeParamLayout(spec, task)) {
  is_layout_ = task == TaskKind::kLayout;
  tile_early_ = !is_layout_ && spec.tile_join() == ModelSpec::TILE_JOIN_EARLY;
}

template <typename T>
T Gnn<T>::Act(T x) const {
  if (spec_.activation() == ModelSpec::ACTIVATION_GELU) {
    return T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2)));
  }
  return x > T(0) ? x : T(spec_.leaky_relu_slope()) * x;
}

template <typename T>
T Gnn<T>::ActGrad(T x) const {
  if (spec_.activation() == ModelSpec::ACTIVATION_GELU) {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
    const T pdf = std::exp(T(-0.5) * x * x) * T(0.3989422804014327);
    return cdf + x * pdf;
  }
  return x > T(0) ? T(1) : T(spec_.leaky_relu_slope());
}

template <typename T>
MatrixT<T> Gnn<T>::ActMat(const MatrixT<T>& a) const {
  if (spec_.activation() == ModelSpec::ACTIVATION_GELU) {
    return a.unaryExpr([this](T x) { return Act(x); });
  }
  const T slope = T(spec_.leaky_relu_slope());
  return (a.array() > T(0)).select(a.array(), a.array() * slope).matrix();
}

template <typename T>
MatrixT<T> Gnn<T>::ActGradMat(const MatrixT<T>& a) const {
  if (spec_.activation() == ModelSpec::ACTIVATION_GELU) {
    return a.unaryExpr([this](T x) { return ActGrad(x); });
  }
  const T slope = T(spec_.leaky_relu_slope());
  return ((a.array() > T(0)).template cast<T>() * (T(1) - slope) + slope).matrix();
}

template <typename T>
template <typename Fn>
void Gnn<T>::ForRows(int64_t rows, int64_t grain, const Fn& fn) const {
  const int64_t shards = ThreadPool::NumShards(rows, grain);
  if (pool_ == nullptr || pool_->num_threads() <= 1 || shards <= 1) {
    for (int64_t s = 0; s < shards; ++s) fn(s, s * grain, std::min(rows, (s + 1) * grain));
    return;
  }
  pool_->ParallelFor(rows, grain, [&fn](int64_t s, int64_t b, int64_t e) { fn(s, b, e); });
}

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

template <typename T>
void Gnn<T>::Gather(const LayerPlan& p, int64_t k, const MatrixT<T>& prev, const MatrixT<T>* base,
                    MatrixT<T>& z) const {
  const int64_t H = layout_.hidden;
  z.resize(k * p.rows(), 3 * H);
  ForRows(k * p.rows(), kLayerRowGrain, [&](int64_t, int64_t b, int64_t e) {
    GatherRows(p, k, prev, base, z.data() + b * 3 * H, b, e);
  });
}

template <typename T>
void Gnn<T>::Scatter(const LayerPlan& p, int64_t k, const MatrixT<T>& dz, MatrixT<T>& dprev,
                     MatrixT<T>* dbase) const {
  const int64_t H = layout_.hidden;
  const int64_t R = p.rows();
  const int64_t Rp = k > 0 ? dprev.rows() / k : 0;
  const bool mean = spec_.aggregation() == ModelSpec::AGGREGATION_MEAN;
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
  const int64_t grain = 4 * kLayerRowGrain;
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
  MatrixRefT<T> gW(grad + layout_.w_layer[l], 3 * H, H);
  T* gb = grad + layout_.b_layer[l];
  for (int64_t s = 0; s < shards; ++s) {
    const T* part = t.partial.data() + s * width;
    gW += ConstMatrixRefT<T>(part, 3 * H, H);
    const T* db = part + 3 * H * H;
    for (int64_t j = 0; j < H; ++j) gb[j] += db[j];
    if (ln) {
      T* gg = grad + layout_.ln_gain[l];
      T* gbias = grad + layout_.ln_bias[l];
      for (int64_t j = 0; j < H; ++j) gg[j] += db[H + j], gbias[j] += db[2 * H + j];
    }
  }
  TPUG_CHECK_FINITE(t.dz);
  Scatter(p, k, t.dz, dprev, dbase);
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

namespace {

// Cross-configuration attention of ModelSpec.config_attention. x: [k * nc, din] node head inputs,
// row c * nc + j = configurable node j in configuration c; w: [din, 3A] = [W_q | W_k | W_v].
// For every node j separately, over the k configurations: S = Q K^T / sqrt(A), P = row softmax
// of S, O = P V. Fills qkv [k * nc, 3A], p [nc * k, k] (node j's P at rows j * k ..) and
// o [k * nc, A].
template <typename T>
void ConfigAttentionForward(const MatrixT<T>& x, const T* w_att, int64_t A, int64_t k, int64_t nc,
                            MatrixT<T>* qkv, MatrixT<T>* p, MatrixT<T>* o) {
  ConstMatrixRefT<T> w(w_att, x.cols(), 3 * A);
  qkv->noalias() = x * w;
  p->resize(nc * k, k);
  o->resize(k * nc, A);
  const T scale = T(1) / std::sqrt(T(A));
  MatrixT<T> q(k, A), kk(k, A), v(k, A);
  for (int64_t j = 0; j < nc; ++j) {
    for (int64_t c = 0; c < k; ++c) {
      const auto row = qkv->row(c * nc + j);
      q.row(c) = row.segment(0, A);
      kk.row(c) = row.segment(A, A);
      v.row(c) = row.segment(2 * A, A);
    }
    auto pj = p->middleRows(j * k, k);
    pj.noalias() = (q * kk.transpose()) * scale;
    for (int64_t c = 0; c < k; ++c) {
      auto r = pj.row(c);
      const T top = r.maxCoeff();
      r = (r.array() - top).exp().matrix();
      r /= r.sum();
    }
    const MatrixT<T> oj = pj * v;
    for (int64_t c = 0; c < k; ++c) o->row(c * nc + j) = oj.row(c);
  }
}

// Adjoint of ConfigAttentionForward: given d_o [k * nc, A], adds d loss / d W to grad_w [din, 3A]
// and d loss / d x to dx [k * nc, din].
template <typename T>
void ConfigAttentionBackward(const MatrixT<T>& x, const T* w_att, int64_t A, int64_t k, int64_t nc,
                             const MatrixT<T>& qkv, const MatrixT<T>& p, const MatrixT<T>& d_o,
                             T* grad_w, MatrixT<T>* dx) {
  const T scale = T(1) / std::sqrt(T(A));
  MatrixT<T> dqkv(k * nc, 3 * A);
  MatrixT<T> q(k, A), kk(k, A), v(k, A), dout(k, A);
  for (int64_t j = 0; j < nc; ++j) {
    for (int64_t c = 0; c < k; ++c) {
      const auto row = qkv.row(c * nc + j);
      q.row(c) = row.segment(0, A);
      kk.row(c) = row.segment(A, A);
      v.row(c) = row.segment(2 * A, A);
      dout.row(c) = d_o.row(c * nc + j);
    }
    const auto pj = p.middleRows(j * k, k);
    const MatrixT<T> dv = pj.transpose() * dout;  // [k, A]
    const MatrixT<T> dp = dout * v.transpose();   // [k, k]
    // Softmax adjoint per row: dS = P .* (dP - sum(dP .* P)), then the 1/sqrt(A) scale.
    const VectorT<T> inner = (dp.array() * pj.array()).rowwise().sum().matrix();
    MatrixT<T> ds = (pj.array() * (dp.colwise() - inner).array()).matrix() * scale;
    const MatrixT<T> dq = ds * kk;             // [k, A]
    const MatrixT<T> dk = ds.transpose() * q;  // [k, A]
    for (int64_t c = 0; c < k; ++c) {
      auto row = dqkv.row(c * nc + j);
      row.segment(0, A) = dq.row(c);
      row.segment(A, A) = dk.row(c);
      row.segment(2 * A, A) = dv.row(c);
    }
  }
  ConstMatrixRefT<T> w(w_att, x.cols(), 3 * A);
  MatrixRefT<T>(grad_w, x.cols(), 3 * A).noalias() += x.transpose() * dqkv;
  dx->noalias() += dqkv * w.transpose();
}

}  // namespace

template <typename T>
void Gnn<T>::ForwardPooled(const T* params, const GraphStructure& gs, const GnnInputs<T>& in,
                           MatrixT<T>* G_out, GnnTape<T>* tape_in) const {
  GnnTape<T> local;
  GnnTape<T>& tp = tape_in != nullptr ? *tape_in : local;
  const int64_t H = layout_.hidden, n = gs.n, k = in.k;
  const int L = layout_.num_layers;
  const int64_t kept = static_cast<int64_t>(gs.node_cols.size());
  const int64_t kc = static_cast<int64_t>(gs.cfg_cols.size());
  const int64_t nc = static_cast<int64_t>(gs.config_nodes.size());
  tp.k = k;
  tp.base.resize(L + 1);
  tp.layers.resize(L + 1);

  // Input layer, configuration-independent part: a0_base[v] = E[op_v] W_op + f_v W_feat + b.
  const int64_t D_op = spec_.opcode_embedding_dim();
  ConstMatrixRefT<T> op_table(params + layout_.op_table, spec_.num_opcodes(), D_op);
  ConstMatrixRefT<T> w_op(params + layout_.w_op, D_op, H);
  MatrixT<T> op_proj = op_table * w_op;  // [num_opcodes, H]
  MatrixT<T> wfk(kept, H);               // rows of w_feat of the kept columns
  for (int64_t j = 0; j < kept; ++j) {
    wfk.row(j) = Eigen::Map<const RowVectorT<T>>(params + layout_.w_feat + gs.node_cols[j] * H, H);
  }
  ConstMatrixRefT<T> feat(in.node_feat, n, kept);
  tp.a0_base.noalias() = feat * wfk;  // [n, H]
  Eigen::Map<const RowVectorT<T>> b_in(params + layout_.b_in, H);
  for (int64_t v = 0; v < n; ++v) tp.a0_base.row(v) += op_proj.row(gs.opcode[v]) + b_in;
  TPUG_CHECK_FINITE(tp.a0_base);

  // Base pass over the whole graph (exact for nodes outside S_l).
  if (!gs.all_affected) {
    tp.h0_base = ActMat(tp.a0_base);
    for (int l = 1; l <= L; ++l) {
      LayerForward(params, l, gs.full, 1, l == 1 ? tp.h0_base : tp.base[l - 1].h, nullptr,
                   tp.base[l], !tp.inference);
    }
  }
  auto base_h = [&](int l) -> const MatrixT<T>& { return l == 0 ? tp.h0_base : tp.base[l].h; };

  // Per-config layer 0 on S_0.
  const LayerPlan& p0 = gs.plan(0);
  const int64_t R0 = p0.rows();
  tp.a0.resize(k * R0, H);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t i = 0; i < R0; ++i) tp.a0.row(c * R0 + i) = tp.a0_base.row(p0.nodes[i]);
  }
  if (tile_early_) {
    tp.cfg_in = MatrixT<T>::Zero(k, layout_.cfg_in);
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < kc; ++j) tp.cfg_in(c, gs.cfg_cols[j]) = in.tile_cfg[c * kc + j];
    }
    ConstMatrixRefT<T> w_cfg(params + layout_.w_cfg, layout_.cfg_in, H);
    MatrixT<T> cfg_h;  // [k, H]
    RowProductInto<T>(tp.cfg_in, w_cfg, &cfg_h);
    for (int64_t c = 0; c < k; ++c) tp.a0.middleRows(c * R0, R0).rowwise() += cfg_h.row(c);
  } else if (is_layout_ && nc > 0) {
    const int de = spec_.layout_value_embedding_dim();
    const int vmax = spec_.layout_value_max();
    const int reserved = vmax + 2;
    ConstMatrixRefT<T> table(params + layout_.layout_table, vmax + 3, de);
    const int64_t nv = k * nc * kLayoutConfigFeatureCount;
    tp.layout_rows.resize(nv);
    tp.cfg_in.resize(k * nc, layout_.cfg_in);  // [k nc, 18 de]
    for (int64_t q = 0; q < nv; ++q) {
      const int v = in.layout_cfg[q];
      const int row = v >= -1 && v <= vmax ? v + 1 : reserved;
      tp.layout_rows[q] = row;
      tp.cfg_in.row(q / kLayoutConfigFeatureCount)
          .segment((q % kLayoutConfigFeatureCount) * de, de) = table.row(row);
    }
    // The derived columns follow the value embeddings in this order (MakeParamLayout's cfg_in):
    // tensor features, size features, flow features, loop depth. fill writes `count` columns
    // from `off` of every row r = c * nc + j with feature(r, out), or zeros when the graph
    // lacks what the feature needs.
    int64_t off = kLayoutConfigFeatureCount * de;
    auto fill = [&](int count, bool have, const auto& feature) {
      for (int64_t r = 0; r < k * nc; ++r) {
        T* out = tp.cfg_in.row(r).data() + off;
        if (have) {
          feature(r, out);
        } else {
          std::fill(out, out + count, T(0));
        }
      }
      off += count;
    };
    const bool have_info =
        static_cast<int64_t>(gs.tensor_info.size()) == nc * kLayoutTensorInfoWidth;
    const auto info_of = [&](int64_t r) {
      return gs.tensor_info.data() + (r % nc) * kLayoutTensorInfoWidth;
    };
    if (spec_.layout_tensor_features()) {
      fill(kLayoutTensorFeatureCount, have_info, [&](int64_t r, T* out) {
        LayoutTensorFeatures<T>(info_of(r), in.layout_cfg + r * kLayoutConfigFeatureCount, out);
      });
    }
    if (spec_.layout_size_features()) {
      fill(kLayoutSizeFeatureCount, have_info, [&](int64_t r, T* out) {
        LayoutSizeFeatures<T>(info_of(r), in.layout_cfg + r * kLayoutConfigFeatureCount, out);
      });
    }
    if (spec_.layout_flow_features()) {
      // Flow features read the whole configuration (the layouts chosen upstream).
      fill(kLayoutFlowFeatureCount, have_info && gs.flow.size() == nc, [&](int64_t r, T* out) {
        LayoutFlowFeatures<T>(gs, r % nc, in.layout_cfg + (r / nc) * nc * kLayoutConfigFeatureCount,
                              out);
      });
    }
    if (spec_.config_loop_depth()) {
      // While loops around the node, the same for every configuration.
      fill(1, static_cast<int64_t>(gs.config_loop_depth.size()) == nc,
           [&](int64_t r, T* out) { *out = T(gs.config_loop_depth[r % nc]); });
    }
    ConstMatrixRefT<T> w_cfg(params + layout_.w_cfg, layout_.cfg_in, H);
    MatrixT<T> cfg_h;  // [k nc, H]
    RowProductInto<T>(tp.cfg_in, w_cfg, &cfg_h);
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < nc; ++j) {
        tp.a0.row(c * R0 + gs.config_rows_first[j]) += cfg_h.row(c * nc + j);
      }
    }
  }
  tp.h0 = ActMat(tp.a0);
  const MatrixT<T>* base_ptr = gs.all_affected ? nullptr : &tp.h0_base;
  for (int l = 1; l <= L; ++l) {
    LayerForward(params, l, gs.plan(l), k, l == 1 ? tp.h0 : tp.layers[l - 1].h,
                 gs.all_affected ? nullptr : &base_h(l - 1), tp.layers[l], !tp.inference);
  }
  (void)base_ptr;
  const MatrixT<T>& hl = L == 0 ? tp.h0 : tp.layers[L].h;  // [k RL, H]
  const int64_t RL = gs.plan(L).rows();

  // Pooling into the head input G [k, head_in].
  MatrixT<T> G = MatrixT<T>::Zero(k, layout_.g_width);
  int64_t off = 0;
  if (spec_.pool_mean()) {
    RowVectorT<T> base_sum = RowVectorT<T>::Zero(H);
    if (!gs.all_affected) {
      for (int64_t v : gs.unaffected_last) base_sum += base_h(L).row(v);
    }
    for (int64_t c = 0; c < k; ++c) {
      RowVectorT<T> s = base_sum;
      // Row by row in order (an Eigen column sum peels by the block's address, so a
      // configuration's last bits followed its position in the batch).
      T* __restrict acc = s.data();
      for (int64_t i = 0; i < RL; ++i) {
        const T* __restrict row = hl.data() + (c * RL + i) * H;
        for (int64_t d = 0; d < H; ++d) acc[d] += row[d];
      }
      G.row(c).segment(off, H) = s / T(n);
    }
    off += H;
  }
  if (spec_.pool_max()) {
    RowVectorT<T> base_max = RowVectorT<T>::Constant(H, -std::numeric_limits<T>::infinity());
    std::vector<int64_t> base_arg(H, 0);
    if (!gs.all_affected) {
      const MatrixT<T>& bh = base_h(L);
      for (int64_t v : gs.unaffected_last) {
        for (int64_t d = 0; d < H; ++d) {
          if (bh(v, d) > base_max[d]) base_max[d] = bh(v, d), base_arg[d] = -(v + 1);
        }
      }
    }
    tp.max_ref.resize(k * H);
    for (int64_t c = 0; c < k; ++c) {
      // Row-major walk over the S_L rows of config c (contiguous), keeping the running max.
      T* best = G.row(c).data() + off;
      int64_t* arg = tp.max_ref.data() + c * H;
      for (int64_t d = 0; d < H; ++d) best[d] = base_max[d], arg[d] = base_arg[d];
      for (int64_t i = 0; i < RL; ++i) {
        const T* row = hl.data() + (c * RL + i) * H;
        for (int64_t d = 0; d < H; ++d) {
          if (row[d] > best[d]) best[d] = row[d], arg[d] = i;
        }
      }
    }
    off += H;
  }
  if (is_layout_ && spec_.config_pooling() != ModelSpec::CONFIG_POOLING_NONE) {
    const T scale =
        spec_.config_pooling() == ModelSpec::CONFIG_POOLING_MEAN && nc > 0 ? T(1) / T(nc) : T(1);
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < nc; ++j) {
        G.row(c).segment(off, H) += scale * hl.row(c * RL + gs.config_rows_last[j]);
      }
    }
    off += H;
  }
  if (!is_layout_ && !tile_early_) {
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < kc; ++j) G(c, off + gs.cfg_cols[j]) = in.tile_cfg[c * kc + j];
    }
  }
  if (layout_.node_head > 0) {
    // Per-configurable-node score s_v = w2 . act(W1 [h_v ; e_v] + b1), summed into column head_in.
    const int64_t W = layout_.node_head, din = H + layout_.cfg_in;
    tp.node_x.resize(k * nc, din);
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < nc; ++j) {
        tp.node_x.row(c * nc + j).head(H) = hl.row(c * RL + gs.config_rows_last[j]);
        tp.node_x.row(c * nc + j).tail(layout_.cfg_in) = tp.cfg_in.row(c * nc + j);
      }
    }
    const int64_t A = layout_.attention;
    ConstMatrixRefT<T> w1(params + layout_.w_node1, din + A, W);
    Eigen::Map<const RowVectorT<T>> b1(params + layout_.b_node1, W);
    Eigen::Map<const VectorT<T>> w2(params + layout_.w_node2, W);
    RowProductInto<T>(tp.node_x, w1.topRows(din), &tp.node_pre);
    if (A > 0) {
      ConfigAttentionForward(tp.node_x, params + layout_.w_att, A, k, nc, &tp.att_qkv, &tp.att_p,
                             &tp.att_o);
      RowProductAdd<T>(tp.att_o, w1.bottomRows(A), tp.node_pre);
    }
    tp.node_pre.rowwise() += b1;
    const MatrixT<T> act = ActMat(tp.node_pre);
    VectorT<T> s(k * nc);  // [k nc]
    RowProduct<T>(act.data(), k * nc, W, W, w2.data(), 1, 1, s.data(), 1, /*accumulate=*/false);
    tp.node_weight.resize(k * nc);
    const bool lse = spec_.config_node_head_pooling() == ModelSpec::NODE_HEAD_POOLING_LOGSUMEXP;
    // Scalar loops in node order: Eigen's vectorised sum and exp peel by the segment's address
    // (c * nc), so a configuration's pooled score followed its position in the batch.
    for (int64_t c = 0; c < k; ++c) {
      const T* sc = s.data() + c * nc;
      T* wc = tp.node_weight.data() + c * nc;
      if (!lse) {
        T total = T(0);
        for (int64_t j = 0; j < nc; ++j) total += sc[j], wc[j] = T(1);
        G(c, layout_.head_in) = total;
      } else if (nc == 0) {
        G(c, layout_.head_in) = T(0);
      } else {
        // log Sum exp(s_v), shifted by the maximum; the weights are the softmax of s.
        T top = sc[0];
        for (int64_t j = 1; j < nc; ++j) top = std::max(top, sc[j]);
        T total = T(0);
        for (int64_t j = 0; j < nc; ++j) wc[j] = std::exp(sc[j] - top), total += wc[j];
        G(c, layout_.head_in) = top + std::log(total);
        for (int64_t j = 0; j < nc; ++j) wc[j] /= total;
      }
    }
  }
  TPUG_CHECK_FINITE(G);
  *G_out = std::move(G);
}

template <typename T>
void Gnn<T>::ForwardHead(const T* params, MatrixT<T> G, T* scores, GnnTape<T>* tape_in) const {
  GnnTape<T> local;
  GnnTape<T>& tp = tape_in != nullptr ? *tape_in : local;
  const int64_t k = G.rows();
  const size_t nh = layout_.w_head.size();
  tp.head_in.resize(nh);
  tp.head_pre.resize(nh);
  VectorT<T> node_score;
  if (layout_.node_head > 0) node_score = G.col(layout_.head_in);
  tp.head_in[0] = G.leftCols(layout_.head_in);
  for (size_t t = 0; t < nh; ++t) {
    ConstMatrixRefT<T> W(params + layout_.w_head[t], layout_.head_dims[t],
                         layout_.head_dims[t + 1]);
    Eigen::Map<const RowVectorT<T>> b(params + layout_.b_head[t], layout_.head_dims[t + 1]);
    RowProductInto<T>(tp.head_in[t], W, &tp.head_pre[t]);
    tp.head_pre[t].rowwise() += b;
    if (t + 1 < nh) tp.head_in[t + 1] = ActMat(tp.head_pre[t]);
  }
  TPUG_CHECK_FINITE(tp.head_pre[nh - 1]);
  for (int64_t c = 0; c < k; ++c) {
    scores[c] = tp.head_pre[nh - 1](c, 0) + (layout_.node_head > 0 ? node_score[c] : T(0));
  }
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
  const size_t nh = layout_.w_head.size();
  MatrixT<T> dx(k, 1);
  for (int64_t c = 0; c < k; ++c) dx(c, 0) = dscores[c];
  for (size_t t = nh; t-- > 0;) {
    const int64_t din = layout_.head_dims[t], dout = layout_.head_dims[t + 1];
    MatrixT<T> dpre = dx;
    if (t + 1 < nh) {
      dpre.array() *= ActGradMat(tp.head_pre[t]).array();
    }
    ConstMatrixRefT<T> W(params + layout_.w_head[t], din, dout);
    MatrixRefT<T>(grad + layout_.w_head[t], din, dout).noalias() +=
        tp.head_in[t].transpose() * dpre;
    Eigen::Map<RowVectorT<T>>(grad + layout_.b_head[t], dout) += dpre.colwise().sum();
    RowProductTransposedInto<T>(dpre, W, &dx);
  }
  if (layout_.node_head > 0) {
    MatrixT<T> out(k, layout_.g_width);
    out.leftCols(layout_.head_in) = dx;
    for (int64_t c = 0; c < k; ++c) out(c, layout_.head_in) = dscores[c];
    return out;
  }
  return dx;  // [k, g_width]
}

template <typename T>
void Gnn<T>::BackwardPooledAligned(const T* params, const GraphStructure& gs,
                                   const GnnInputs<T>& in, const GnnTape<T>& tp,
                                   const MatrixT<T>& dG, T* grad, T* dnode_feat,
                                   T* dtile_cfg) const {
  const int64_t H = layout_.hidden, n = gs.n, k = in.k;
  const int L = layout_.num_layers;
  const int64_t kept = static_cast<int64_t>(gs.node_cols.size());
  const int64_t kc = static_cast<int64_t>(gs.cfg_cols.size());
  const int64_t nc = static_cast<int64_t>(gs.config_nodes.size());

  // Pooling.
  const int64_t RL = gs.plan(L).rows();
  MatrixT<T> dh = MatrixT<T>::Zero(k * RL, H);
  std::vector<MatrixT<T>> dbase;  // [L + 1] x [n, H]
  if (!gs.all_affected) {
    dbase.resize(L + 1);
    for (auto& m : dbase) m = MatrixT<T>::Zero(n, H);
  }
  int64_t off = 0;
  if (spec_.pool_mean()) {
    RowVectorT<T> total = RowVectorT<T>::Zero(H);
    for (int64_t c = 0; c < k; ++c) {
      const RowVectorT<T> g = dG.row(c).segment(off, H) / T(n);
      dh.middleRows(c * RL, RL).rowwise() += g;
      total += g;
    }
    if (!gs.all_affected) {
      for (int64_t v : gs.unaffected_last) dbase[L].row(v) += total;
    }
    off += H;
  }
  if (spec_.pool_max()) {
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t d = 0; d < H; ++d) {
        const int64_t r = tp.max_ref[c * H + d];
        if (r >= 0) {
          dh(c * RL + r, d) += dG(c, off + d);
        } else {
          dbase[L](-r - 1, d) += dG(c, off + d);
        }
      }
    }
    off += H;
  }
  if (is_layout_ && spec_.config_pooling() != ModelSpec::CONFIG_POOLING_NONE) {
    const T scale =
        spec_.config_pooling() == ModelSpec::CONFIG_POOLING_MEAN && nc > 0 ? T(1) / T(nc) : T(1);
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < nc; ++j) {
        dh.row(c * RL + gs.config_rows_last[j]) += scale * dG.row(c).segment(off, H);
      }
    }
    off += H;
  }
  if (!is_layout_ && !tile_early_ && dtile_cfg != nullptr) {
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < kc; ++j) dtile_cfg[c * kc + j] += dG(c, off + gs.cfg_cols[j]);
    }
  }
  MatrixT<T> dnode_cfg;  // config_node_head: [k nc, cfg_in] gradient reaching cfg_in rows
  if (layout_.node_head > 0) {
    const int64_t W = layout_.node_head, din = H + layout_.cfg_in, A = layout_.attention;
    ConstMatrixRefT<T> w1(params + layout_.w_node1, din + A, W);
    Eigen::Map<const RowVectorT<T>> w2(params + layout_.w_node2, W);
    MatrixT<T> act = ActMat(tp.node_pre);
    MatrixT<T> dpre = ActGradMat(tp.node_pre);  // [k nc, W]
    VectorT<T> ds(k * nc);
    for (int64_t c = 0; c < k; ++c) {
      ds.segment(c * nc, nc) = dG(c, layout_.head_in) * tp.node_weight.segment(c * nc, nc);
    }
    Eigen::Map<VectorT<T>>(grad + layout_.w_node2, W).noalias() += act.transpose() * ds;
    dpre.array() *= (ds * w2).array();
    MatrixRefT<T> gw1(grad + layout_.w_node1, din + A, W);
    gw1.topRows(din).noalias() += tp.node_x.transpose() * dpre;
    Eigen::Map<RowVectorT<T>>(grad + layout_.b_node1, W) += dpre.colwise().sum();
    MatrixT<T> dx;  // [k nc, din]
    RowProductTransposedInto<T>(dpre, w1.topRows(din), &dx);
    if (A > 0) {
      gw1.bottomRows(A).noalias() += tp.att_o.transpose() * dpre;
      MatrixT<T> d_o;  // [k nc, A]
      RowProductTransposedInto<T>(dpre, w1.bottomRows(A), &d_o);
      ConfigAttentionBackward(tp.node_x, params + layout_.w_att, A, k, nc, tp.att_qkv, tp.att_p,
                              d_o, grad + layout_.w_att, &dx);
    }
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < nc; ++j) {
        dh.row(c * RL + gs.config_rows_last[j]) += dx.row(c * nc + j).head(H);
      }
    }
    dnode_cfg = dx.rightCols(layout_.cfg_in);
  }

  // Per-config layers L..1, then layer 0.
  for (int l = L; l >= 1; --l) {
    MatrixT<T> dprev = MatrixT<T>::Zero(k * gs.plan(l - 1).rows(), H);
    LayerBackward(params, l, gs.plan(l), k, tp.layers[l], dh, grad, dprev,
                  gs.all_affected ? nullptr : &dbase[l - 1]);
    dh = std::move(dprev);
  }
  const LayerPlan& p0 = gs.plan(0);
  const int64_t R0 = p0.rows();
  MatrixT<T> da0 = dh.array() * ActGradMat(tp.a0).array();
  MatrixT<T> da0_base = MatrixT<T>::Zero(n, H);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t i = 0; i < R0; ++i) da0_base.row(p0.nodes[i]) += da0.row(c * R0 + i);
  }
  if (tile_early_) {
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
    ConstMatrixRefT<T> w_cfg(params + layout_.w_cfg, layout_.cfg_in, H);
    MatrixRefT<T>(grad + layout_.w_cfg, layout_.cfg_in, H).noalias() +=
        tp.cfg_in.transpose() * dcfg_h;
    if (dtile_cfg != nullptr) {
      MatrixT<T> dcfg;  // [k, cfg_in]
      RowProductTransposedInto<T>(dcfg_h, w_cfg, &dcfg);
      for (int64_t c = 0; c < k; ++c) {
        for (int64_t j = 0; j < kc; ++j) dtile_cfg[c * kc + j] += dcfg(c, gs.cfg_cols[j]);
      }
    }
  } else if (is_layout_ && nc > 0) {
    const int de = spec_.layout_value_embedding_dim();
    MatrixT<T> dcfg_h(k * nc, H);
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t j = 0; j < nc; ++j) {
        dcfg_h.row(c * nc + j) = da0.row(c * R0 + gs.config_rows_first[j]);
      }
    }
    ConstMatrixRefT<T> w_cfg(params + layout_.w_cfg, layout_.cfg_in, H);
    MatrixRefT<T>(grad + layout_.w_cfg, layout_.cfg_in, H).noalias() +=
        tp.cfg_in.transpose() * dcfg_h;
    MatrixT<T> dcfg;  // [k nc, 18 de]
    RowProductTransposedInto<T>(dcfg_h, w_cfg, &dcfg);
    if (layout_.node_head > 0) dcfg += dnode_cfg;
    MatrixRefT<T> dtable(grad + layout_.layout_table, spec_.layout_value_max() + 3, de);
    const int64_t nv = k * nc * kLayoutConfigFeatureCount;
    for (int64_t q = 0; q < nv; ++q) {
      dtable.row(tp.layout_rows[q]) +=
          dcfg.row(q / kLayoutConfigFeatureCount).segment((q % kLayoutConfigFeatureCount) * de, de);
    }
  }

  // Base pass backward (gradients reach base states only outside S_l; see docs/model.md).
  if (!gs.all_affected) {
    for (int l = L; l >= 1; --l) {
      LayerBackward(params, l, gs.full, 1, tp.base[l], dbase[l], grad, dbase[l - 1], nullptr);
    }
    da0_base.array() += dbase[0].array() * ActGradMat(tp.a0_base).array();
  }
  TPUG_CHECK_FINITE(da0_base);

  // Input layer parameters.
  const int64_t D_op = spec_.opcode_embedding_dim();
  ConstMatrixRefT<T> feat(in.node_feat, n, kept);
  MatrixT<T> dwfk = feat.transpose() * da0_base;  // [kept, H]
  for (int64_t j = 0; j < kept; ++j) {
    Eigen::Map<RowVectorT<T>>(grad + layout_.w_feat + gs.node_cols[j] * H, H) += dwfk.row(j);
  }
  Eigen::Map<RowVectorT<T>>(grad + layout_.b_in, H) += da0_base.colwise().sum();
  MatrixT<T> dop_proj = MatrixT<T>::Zero(spec_.num_opcodes(), H);
  for (int64_t v = 0; v < n; ++v) dop_proj.row(gs.opcode[v]) += da0_base.row(v);
  ConstMatrixRefT<T> op_table(params + layout_.op_table, spec_.num_opcodes(), D_op);
  ConstMatrixRefT<T> w_op(params + layout_.w_op, D_op, H);
  MatrixRefT<T>(grad + layout_.op_table, spec_.num_opcodes(), D_op).noalias() +=
      dop_proj * w_op.transpose();
  MatrixRefT<T>(grad + layout_.w_op, D_op, H).noalias() += op_table.transpose() * dop_proj;
  if (dnode_feat != nullptr) {
    MatrixT<T> wfk(kept, H);
    for (int64_t j = 0; j < kept; ++j) {
      wfk.row(j) =
          Eigen::Map<const RowVectorT<T>>(params + layout_.w_feat + gs.node_cols[j] * H, H);
    }
    MatrixRefT<T>(dnode_feat, n, kept).noalias() += da0_base * wfk.transpose();
  }
}

template class Gnn<float>;
template class Gnn<double>;

}  // namespace tpugraphs::model::internal
