#include "tpugraphs/model/tile_features.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/ingest/opcodes.h"

namespace tpugraphs::model {
namespace {

constexpr int kIsRoot = 0, kElementType = 2, kDims = 21, kMinorToMajor = 134;

// Bytes per element from the element type one-hot (columns 2-20; docs/features.md, slot order
// invalid, pred, s8, s16, s32, s64, u8, u16, u32, u64, f16, f32, f64, bf16, c64, c128, tuple,
// opaque, token); 4 when no slot is set or the type has no size.
double ElementBytes(const float* f) {
  constexpr double kBytes[19] = {4, 1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 2, 8, 16, 4, 4, 4};
  for (int i = 0; i < 19; ++i) {
    if (f[kElementType + i] == 1.0f) return kBytes[i];
  }
  return 4;
}

double Elements(const std::array<float, 6>& dims, int rank) {
  double e = 1.0;
  for (int i = 0; i < rank; ++i) e *= dims[i];
  return e;
}

void ReadArray(const float* f, std::array<float, 6>* dims, std::array<float, 6>* m2m, int* rank) {
  *rank = 0;
  for (int i = 0; i < 6; ++i) {
    (*dims)[i] = f[kDims + i];
    (*m2m)[i] = f[kMinorToMajor + i];
  }
  while (*rank < 6 && (*dims)[*rank] >= 1) ++*rank;
}

// Bounds of a list given as its first six values: as given (clamped to [1, d]) when it has
// exactly one non-zero entry per dimension, else the whole dimensions.
std::array<double, 6> Bounds(const float* first, const std::array<float, 6>& dims, int rank) {
  std::array<double, 6> b{};
  int given = 0;
  while (given < 6 && first[given] != 0) ++given;
  for (int i = 0; i < rank; ++i) {
    b[i] = given == rank ? std::clamp<double>(first[i], 1.0, dims[i]) : dims[i];
  }
  return b;
}

// Elements of an array with dims `d` (rank r) and layout m2m after padding its most minor
// dimension to 128 and its second most minor to 8 (a minor_to_major naming no dimension counts
// as descending).
double PaddedElements(const std::array<double, 6>& d, const std::array<float, 6>& m2m, int r) {
  auto minor = [&](int pos) {
    const int v = static_cast<int>(m2m[pos]);
    return v >= 0 && v < r ? v : r - 1 - pos;
  };
  int m0 = r >= 1 ? minor(0) : -1, m1 = r >= 2 ? minor(1) : -1;
  if (r >= 2 && m0 == m1) m0 = r - 1, m1 = r - 2;
  double e = 1.0;
  for (int i = 0; i < r; ++i) {
    if (i == m0) {
      e *= std::ceil(d[i] / 128) * 128;
    } else if (i == m1) {
      e *= std::ceil(d[i] / 8) * 8;
    } else {
      e *= d[i];
    }
  }
  return e;
}

}  // namespace

TileShapes TileKernelShapes(const Graph& g) {
  TileShapes s;
  const int64_t n = g.num_nodes(), m = g.num_edges();
  if (static_cast<int64_t>(g.node_feat.size()) != n * kNodeFeatureCount) return s;
  int64_t out = -1;
  for (int64_t v = n - 1; v >= 0 && out < 0; --v) {
    if (g.node_feat[v * kNodeFeatureCount + kIsRoot] == 1.0f) out = v;
  }
  if (out < 0) return s;
  ReadArray(g.node_feat.data() + out * kNodeFeatureCount, &s.out_dims, &s.out_m2m, &s.out_rank);
  s.out_bytes = ElementBytes(g.node_feat.data() + out * kNodeFeatureCount);
  const uint8_t conv = ingest::OpcodeId("convolution"), dot = ingest::OpcodeId("dot");
  int64_t matmul = -1;
  const bool have_opcodes = g.node_opcode.size() == static_cast<size_t>(n);
  for (int64_t v = 0; have_opcodes && v < n && matmul < 0; ++v) {
    if (g.node_opcode[v] == conv || g.node_opcode[v] == dot) matmul = v;
  }
  int seen = 0;
  for (int64_t e = 0; e < m && matmul >= 0; ++e) {
    if (g.edge_index[2 * e] != matmul) continue;
    const int64_t p = g.edge_index[2 * e + 1];
    if (++seen == 2 && p >= 0 && p < n) {
      const float* f = g.node_feat.data() + p * kNodeFeatureCount;
      ReadArray(f, &s.kernel_dims, &s.kernel_m2m, &s.kernel_rank);
      s.kernel_bytes = ElementBytes(f);
    }
  }
  // The output's other operands, skipping one with the weights' dims. Its edges also lead to the
  // roots of the computations it calls (a fusion's fused computation), which are not operands.
  bool kernel_skipped = false;
  double streamed = 0;
  for (int64_t e = 0; e < m; ++e) {
    if (g.edge_index[2 * e] != out) continue;
    const int64_t p = g.edge_index[2 * e + 1];
    if (p < 0 || p >= n) continue;
    std::array<float, 6> dims, m2m;
    int rank = 0;
    const float* f = g.node_feat.data() + p * kNodeFeatureCount;
    if (f[kIsRoot] == 1.0f) continue;  // a called computation's root, not an operand
    ReadArray(f, &dims, &m2m, &rank);
    if (s.kernel_rank > 0 && !kernel_skipped && rank == s.kernel_rank && dims == s.kernel_dims) {
      kernel_skipped = true;
      continue;
    }
    streamed += Elements(dims, rank) * ElementBytes(f);
  }
  s.streamed_per_out = streamed / std::max(1.0, Elements(s.out_dims, s.out_rank));
  return s;
}

void TileDerivedFeatures(const TileShapes& s, const float* raw_cfg, float* out) {
  std::fill(out, out + kTileDerivedFeatureCount, 0.0f);
  // Returns the padded tile elements (0 when the array is absent).
  auto terms = [](const std::array<float, 6>& dims, const std::array<float, 6>& m2m, int r,
                  const float* first, float* o) -> double {
    if (r == 0) return 0.0;
    const std::array<double, 6> t = Bounds(first, dims, r);
    double tiles = 1.0, elements = 1.0;
    for (int i = 0; i < r; ++i) {
      tiles *= std::ceil(dims[i] / t[i]);
      elements *= dims[i];
    }
    const double padded = PaddedElements(t, m2m, r);
    o[0] = static_cast<float>(std::log(tiles) / 8);
    o[1] = static_cast<float>(std::log(tiles * padded / elements));
    o[2] = static_cast<float>(std::log(padded) / 16);
    return padded;
  };
  // Raw tile config columns (docs/features.md): kernel bounds 0-5, output bounds 8-13.
  const double tile = terms(s.out_dims, s.out_m2m, s.out_rank, raw_cfg + 8, out);
  const double kernel_tile =
      terms(s.kernel_dims, s.kernel_m2m, s.kernel_rank, raw_cfg + 0, out + 3);
  const double working_set =
      2 * (tile * (s.out_bytes + s.streamed_per_out) + kernel_tile * s.kernel_bytes);
  if (working_set > 0) out[6] = static_cast<float>(std::log(working_set) / 16);
  // Whether the working set overflows on-chip memories of 4, 8, 16 and 32 MiB.
  for (int i = 0; i < 4; ++i) {
    out[7 + i] = working_set > static_cast<double>(int64_t{4} << (20 + i)) ? 1.0f : 0.0f;
  }
}

}  // namespace tpugraphs::model
