// Derived features of the configurable nodes of layout models (ModelSpec.layout_tensor_features,
// layout_size_features, layout_flow_features): the graph's tensor shapes and layouts around every
// configurable node, and the features one configuration's layout values give them.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/model/gnn.h"
#include "tpugraphs/model/layout_flow.h"

namespace tpugraphs::model::internal {

namespace {

// Offsets in a tensor's kLayoutTensorLogWidth values.
constexpr int kLogDim = 0, kLogPad128 = 6, kLogPad8 = 12, kLogAll = 18, kLogRank = 19,
              kLogPair = 20;

// Whether layout value v names a dimension of size >= 1 of the tensor with dims d.
bool NamesDimension(int8_t v, const float* d) { return v >= 0 && v < 6 && d[v] >= 1; }

// Whether the values v set a layout other than the graph's minor_to_major m2m.
bool DiffersFromGraph(const float* m2m, const int8_t* v) {
  bool differs = false;
  for (int i = 0; i < 6; ++i) differs |= m2m[i] >= 0 && static_cast<float>(v[i]) != m2m[i];
  return differs;
}

// The tensor's rank for the size features: its leading dims >= 1.
int LeadingRank(const float* d) {
  int rank = 0;
  while (rank < 6 && d[rank] >= 1) ++rank;
  return rank;
}

// The minor and second-minor dims (-1 = none) of the layout in effect for the size features of
// a tensor of the given rank (>= 1): the configuration's values v where the first names a
// dimension, else the graph's m2m (a default value keeps the tensor as the graph has it).
void MinorPair(const float* m2m, const int8_t* v, int rank, int* m0, int* m1) {
  const bool set = v[0] >= 0 && v[0] < rank;
  auto minor = [&](int i) -> int {
    const double x = set ? static_cast<double>(v[i]) : static_cast<double>(m2m[i]);
    return x >= 0 && x < rank ? static_cast<int>(x) : -1;
  };
  *m0 = minor(0);
  *m1 = rank >= 2 ? minor(1) : -1;
}

// Tensor t (0 output, 1 input, 2 kernel) of one configurable node's info [36] and values [18]:
// its dims, its rank and the minor dims m0, m1 of the layout in effect (MinorPair). False for a
// missing tensor (rank 0), whose features are all 0.
bool TensorInEffect(const float* info, const int8_t* vals, int t, const float** d, int* rank,
                    int* m0, int* m1) {
  *d = info + 12 * t;
  *rank = LeadingRank(*d);
  if (*rank == 0) return false;
  MinorPair(*d + 6, vals + 6 * t, *rank, m0, m1);
  return true;
}

// log(padded / E) / log(1024) and log1p(padded) / 16 of LayoutSizeFeatures for the minor dims
// m0, m1 (-1 = none) of a tensor of dims d, rank and E elements.
void PaddedTerms(const float* d, double elements, int m0, int m1, double* out) {
  double padded = elements;
  if (m0 >= 0) padded = padded / d[m0] * (std::ceil(d[m0] / 128.0) * 128.0);
  if (m1 >= 0 && m1 != m0) padded = padded / d[m1] * (std::ceil(d[m1] / 8.0) * 8.0);
  out[0] = std::log(padded / elements) / std::log(1024.0);
  out[1] = std::log1p(padded) / 16;
}

// One tensor's logarithms (kLayoutTensorLogWidth) from its dims d.
void FillTensorLogs(const float* d, double* out) {
  std::fill(out, out + kLayoutTensorLogWidth, 0.0);
  double all = 1.0;
  for (int i = 0; i < 6; ++i) {
    all *= d[i] >= 1 ? d[i] : 1.0;
    if (!(d[i] >= 1)) continue;
    const double x = d[i];
    out[kLogDim + i] = std::log1p(x) / 8;
    out[kLogPad128 + i] = std::log(std::ceil(x / 128) * 128 / x) / std::log(128.0);
    out[kLogPad8 + i] = std::log(std::ceil(x / 8) * 8 / x) / std::log(8.0);
  }
  out[kLogAll] = std::log1p(all) / 16;
  const int rank = LeadingRank(d);
  if (rank == 0) return;
  double elements = 1.0;
  for (int i = 0; i < rank; ++i) elements *= d[i];
  out[kLogRank] = std::log1p(elements) / 16;
  for (int m0 = -1; m0 < rank; ++m0) {
    for (int m1 = -1; m1 < (rank >= 2 ? rank : 0); ++m1) {
      PaddedTerms(d, elements, m0, m1, out + kLogPair + 2 * ((m0 + 1) * 7 + (m1 + 1)));
    }
  }
}

}  // namespace

void FillLayoutTensorInfo(const float* raw_node_feat, GraphStructure* gs, bool rank_aware) {
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
      if (rank_aware) {
        for (int i = LeadingRank(ti); i < 6; ++i) ti[6 + i] = -1.0f;
      }
    }
  }
  FillLayoutTensorLogs(gs);
}

void FillLayoutTensorLogs(GraphStructure* gs) {
  const int64_t nc = static_cast<int64_t>(gs->config_nodes.size());
  gs->tensor_logs.assign(nc * 3 * kLayoutTensorLogWidth, 0.0);
  for (int64_t j = 0; j < nc; ++j) {
    for (int t = 0; t < 3; ++t) {
      FillTensorLogs(gs->tensor_info.data() + j * kLayoutTensorInfoWidth + 12 * t,
                     gs->tensor_logs.data() + (j * 3 + t) * kLayoutTensorLogWidth);
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
    const bool differs = d0 > 0 && DiffersFromGraph(m2m, v);
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
    T* o = out + 3 * t;
    const float* d;
    int rank, m0, m1;
    if (!TensorInEffect(info, vals, t, &d, &rank, &m0, &m1)) {
      o[0] = o[1] = o[2] = T(0);
      continue;
    }
    double elements = 1.0;
    for (int i = 0; i < rank; ++i) elements *= d[i];
    double padded[2];
    PaddedTerms(d, elements, m0, m1, padded);
    o[0] = T(std::log1p(elements) / 16);
    o[1] = T(padded[0]);
    o[2] = T(padded[1]);
  }
}

template void LayoutSizeFeatures<float>(const float*, const int8_t*, float*);
template void LayoutSizeFeatures<double>(const float*, const int8_t*, double*);

template <typename T>
void LayoutDimSplitFeatures(const float* info, const int8_t* vals, T* out) {
  for (int t = 0; t < 3; ++t) {
    T* o = out + 4 * t;
    std::fill(o, o + 4, T(0));
    const float* d;
    int rank, m0, m1;
    if (!TensorInEffect(info, vals, t, &d, &rank, &m0, &m1)) continue;
    // Sizes are whole numbers stored as floats: exact below 2^24.
    auto split = [](double x, double tile, T* pair) {
      const double whole = std::floor(x / tile);
      pair[0] = T((x - whole * tile) / tile);
      pair[1] = T(std::log1p(whole) / 8);
    };
    if (m0 >= 0) split(d[m0], 128.0, o);
    if (m1 >= 0 && m1 != m0) split(d[m1], 8.0, o + 2);
  }
}

template void LayoutDimSplitFeatures<float>(const float*, const int8_t*, float*);
template void LayoutDimSplitFeatures<double>(const float*, const int8_t*, double*);

int LayoutDimensionTokenCount(const float* info) {
  return LeadingRank(info) + LeadingRank(info + 12) + LeadingRank(info + 24);
}

template <typename T>
int LayoutDimensionTokens(const float* info, const int8_t* vals, T* tokens, int8_t* tensor) {
  int count = 0;
  for (int t = 0; t < 3; ++t) {
    const float* d = info + 12 * t;
    const float* m2m = d + 6;
    const int8_t* v = vals + 6 * t;
    const int rank = LeadingRank(d);
    double elements = 1.0;
    for (int i = 0; i < rank; ++i) elements *= d[i];
    // The configuration sets the layout when its first value names a dimension (MinorPair).
    const bool set = v[0] >= 0 && v[0] < rank;
    for (int i = 0; i < rank; ++i, ++count) {
      int g = -1, e = -1;
      for (int j = 0; j < rank && g < 0; ++j) g = m2m[j] == static_cast<float>(i) ? j : -1;
      if (set) {
        for (int j = 0; j < rank && e < 0; ++j) e = v[j] == i ? j : -1;
      } else {
        e = g;
      }
      // Sizes are whole numbers stored as floats: exact below 2^24.
      const double x = d[i];
      const double lanes = std::floor(x / 128.0), sublanes = std::floor(x / 8.0);
      T* o = tokens + static_cast<int64_t>(count) * kDimensionTokenWidth;
      o[0] = T(std::log1p(x) / 8);
      o[1] = T((x - lanes * 128.0) / 128.0);
      o[2] = T(std::log1p(lanes) / 8);
      o[3] = T((x - sublanes * 8.0) / 8.0);
      o[4] = T(std::log1p(sublanes) / 8);
      o[5] = T(g == 0 ? 1 : 0);
      o[6] = T(g == 1 ? 1 : 0);
      o[7] = T(g >= 0 ? (g + 1) / 6.0 : 0.0);
      o[8] = T(e == 0 ? 1 : 0);
      o[9] = T(e == 1 ? 1 : 0);
      o[10] = T(e >= 0 ? (e + 1) / 6.0 : 0.0);
      o[11] = T(set ? 1 : 0);
      o[12] = T(set && e != g ? 1 : 0);
      o[13] = T(std::log1p(elements) / 16);
      tensor[count] = static_cast<int8_t>(t);
    }
  }
  return count;
}

template int LayoutDimensionTokens<float>(const float*, const int8_t*, float*, int8_t*);
template int LayoutDimensionTokens<double>(const float*, const int8_t*, double*, int8_t*);

template <typename T>
void LayoutTensorFeaturesLookup(const float* info, const double* logs, const int8_t* vals, T* out) {
  for (int t = 0; t < 3; ++t) {
    const float* d = info + 12 * t;
    const float* m2m = d + 6;
    const double* lg = logs + kLayoutTensorLogWidth * t;
    const int8_t* v = vals + 6 * t;
    T* o = out + 6 * t;
    const bool n0 = NamesDimension(v[0], d), n1 = NamesDimension(v[1], d);
    o[0] = n0 ? T(lg[kLogDim + v[0]]) : T(0);
    o[1] = n1 ? T(lg[kLogDim + v[1]]) : T(0);
    o[2] = n0 ? T(lg[kLogPad128 + v[0]]) : T(0);
    o[3] = n1 ? T(lg[kLogPad8 + v[1]]) : T(0);
    o[4] = n0 ? T(1) : T(0);
    o[5] = n0 && DiffersFromGraph(m2m, v) ? T(lg[kLogAll]) : T(0);
  }
}

template void LayoutTensorFeaturesLookup<float>(const float*, const double*, const int8_t*, float*);
template void LayoutTensorFeaturesLookup<double>(const float*, const double*, const int8_t*,
                                                 double*);

template <typename T>
void LayoutSizeFeaturesLookup(const float* info, const double* logs, const int8_t* vals, T* out) {
  for (int t = 0; t < 3; ++t) {
    const double* lg = logs + kLayoutTensorLogWidth * t;
    T* o = out + 3 * t;
    const float* d;
    int rank, m0, m1;
    if (!TensorInEffect(info, vals, t, &d, &rank, &m0, &m1)) {
      o[0] = o[1] = o[2] = T(0);
      continue;
    }
    const double* pair = lg + kLogPair + 2 * ((m0 + 1) * 7 + (m1 + 1));
    o[0] = T(lg[kLogRank]);
    o[1] = T(pair[0]);
    o[2] = T(pair[1]);
  }
}

template void LayoutSizeFeaturesLookup<float>(const float*, const double*, const int8_t*, float*);
template void LayoutSizeFeaturesLookup<double>(const float*, const double*, const int8_t*, double*);

namespace {

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

}  // namespace tpugraphs::model::internal
