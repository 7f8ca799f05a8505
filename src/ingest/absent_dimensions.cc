#include "tpugraphs/ingest/absent_dimensions.h"

#include <algorithm>

namespace tpugraphs::ingest {
namespace {

// Column layout of the rank-bearing lists (ingest-spec 3.2).
constexpr int kShapeDims = 21;
constexpr int kMinorToMajor = 134;
constexpr int kWindowFields[] = {37, 45, 53, 61, 69, 77, 85};  // size .. reversal, 6 slots each
constexpr int kInputSpatial = 95, kKernelSpatial = 101;        // 4 slots each
constexpr int kSliceFields[] = {109, 113, 117};                // start, stride, limit; 2 slots
constexpr int kDynamicSlice = 121;                             // 2 slots
// Convolution dimension numbers held as scalars: input batch/feature, kernel input/output
// feature, output batch/feature. Two of them always differ, so one is not 0 in a convolution.
constexpr int kConvScalars[] = {93, 94, 99, 100, 105, 106};

// Number of leading values >= 1 among row[first .. first + width).
int LeadingAtLeastOne(const float* row, int first, int width) {
  int n = 0;
  while (n < width && row[first + n] >= 1.0f) ++n;
  return n;
}

void Pad(float* row, int first, int width, int count) {
  for (int i = std::max(count, 0); i < width; ++i) row[first + i] = kAbsentDimension;
}

}  // namespace

DimensionCounts CountsOfInstruction(const xla::HloInstructionProto& inst) {
  DimensionCounts c;
  c.shape = inst.shape().dimensions_size();
  c.minor_to_major = inst.shape().layout().minor_to_major_size();
  c.window = inst.window().dimensions_size();
  c.input_spatial = inst.convolution_dimension_numbers().input_spatial_dimensions_size();
  c.kernel_spatial = inst.convolution_dimension_numbers().kernel_spatial_dimensions_size();
  c.slice = inst.slice_dimensions_size();
  c.dynamic_slice = inst.dynamic_slice_sizes_size();
  return c;
}

DimensionCounts CountsFromFeatures(const float* row) {
  DimensionCounts c;
  c.shape = LeadingAtLeastOne(row, kShapeDims, 6);
  c.minor_to_major = c.shape;
  if (c.shape >= 2) {
    // A permutation of two or more dimensions is never all 0: those zeros are "no layout".
    bool all_zero = true;
    for (int i = 0; i < c.shape; ++i) all_zero &= row[kMinorToMajor + i] == 0.0f;
    if (all_zero) c.minor_to_major = 0;
  }
  c.window = LeadingAtLeastOne(row, kWindowFields[0], 6);
  bool convolution = false;
  for (int col : kConvScalars) convolution |= row[col] != 0.0f;
  c.input_spatial = c.kernel_spatial = convolution ? c.window : 0;
  c.slice = LeadingAtLeastOne(row, kSliceFields[1], 2);
  c.dynamic_slice = LeadingAtLeastOne(row, kDynamicSlice, 2);
  return c;
}

void MarkAbsentDimensions(const DimensionCounts& c, float* row) {
  Pad(row, kShapeDims, 6, c.shape);
  Pad(row, kMinorToMajor, 6, c.minor_to_major);
  for (int first : kWindowFields) Pad(row, first, 6, c.window);
  Pad(row, kInputSpatial, 4, c.input_spatial);
  Pad(row, kKernelSpatial, 4, c.kernel_spatial);
  for (int first : kSliceFields) Pad(row, first, 2, c.slice);
  Pad(row, kDynamicSlice, 2, c.dynamic_slice);
}

bool IsAbsentDimensionColumn(int column) {
  auto in = [column](int first, int width) { return column >= first && column < first + width; };
  if (in(kShapeDims, 6) || in(kMinorToMajor, 6) || in(kInputSpatial, 4) || in(kKernelSpatial, 4) ||
      in(kDynamicSlice, 2)) {
    return true;
  }
  for (int first : kWindowFields) {
    if (in(first, 6)) return true;
  }
  for (int first : kSliceFields) {
    if (in(first, 2)) return true;
  }
  return false;
}

void DeriveAbsentDimensions(Graph* g) {
  if (g->absent_dimensions_marked) return;
  const int64_t n = g->num_nodes();
  for (int64_t v = 0; v < n; ++v) {
    float* row = g->node_feat.data() + v * kNodeFeatureCount;
    MarkAbsentDimensions(CountsFromFeatures(row), row);
  }
  g->absent_dimensions_marked = true;
}

}  // namespace tpugraphs::ingest
