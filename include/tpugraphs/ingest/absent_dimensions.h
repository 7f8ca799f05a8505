// "No such dimension" in the node features: -1 instead of the official 0 in the per-dimension
// slots beyond a list's length (docs/ingest.md, "Absent dimensions").
//
// The release's featurizer pads each per-dimension list (a shape's dims, its layout's
// minor_to_major, a window's fields, ...) with 0 to a fixed width (ingest-spec 3.1, SEQ and
// SEQNA). 0 is also the index of dimension 0 and a real padding or start value, so a rank-2
// tensor's minor_to_major {1, 0} and a rank-6 tensor's {1, 0, 0, 0, 0, 0} read the same. The
// 1st-place Kaggle team re-featurized the release with -1 padding for this reason
// (field-notes.md, TGraph). `ingest --mark-absent-dimensions` writes -1 in those slots, for
// these lists (the "rank-bearing" lists, whose length the release's features still tell):
//
//   columns     list                                   length from the official features
//   21-26       shape.dimensions                       leading dims >= 1
//   134-139     shape.layout.minor_to_major            the shape's rank; 0 when the first
//                                                      rank (>= 2) values are all 0 (no layout)
//   37-42, 45-50, 53-58, 61-66, 69-74, 77-82, 85-90
//               window.dimensions' seven fields        leading window sizes >= 1
//   95-98, 101-104
//               convolution input / kernel spatial     the window's length for a convolution
//               dimensions                             (a dimension number is not 0), else 0
//   109-110, 113-114, 117-118
//               slice_dimensions' start/stride/limit   leading strides >= 1
//   121-122     dynamic_slice_sizes                    leading sizes >= 1
//
// The sums, products and counts after each list, inst.dimensions (31-36) and padding_config
// (125-132) keep their official values: the latter's lengths cannot be told from the features.
// From a raw dump or HLO text the lengths are read from the instruction itself; from a release
// .npz they are derived as in the table. The two agree except where the derivation cannot see
// the list: a dimension of size 0 ends the rank early, and a rank-1 array without a layout
// reads as having one.
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_INGEST_ABSENT_DIMENSIONS_H_
#define TPUGRAPHS_INGEST_ABSENT_DIMENSIONS_H_

#include "tpugraphs/common/graph.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::ingest {

// The value written in a slot beyond a list's length.
inline constexpr float kAbsentDimension = -1.0f;

// The lengths of the rank-bearing lists of one node.
struct DimensionCounts {
  int shape = 0;
  int minor_to_major = 0;
  int window = 0;
  int input_spatial = 0;
  int kernel_spatial = 0;
  int slice = 0;
  int dynamic_slice = 0;

  bool operator==(const DimensionCounts&) const = default;
};

// The lengths as the instruction holds them.
DimensionCounts CountsOfInstruction(const xla::HloInstructionProto& inst);

// The lengths as the official 140 features of one node tell them (the table above). Also
// correct for a row already marked, so deriving twice changes nothing.
DimensionCounts CountsFromFeatures(const float* row);

// Writes kAbsentDimension in `row`'s slots beyond `counts` (row: 140 node features).
void MarkAbsentDimensions(const DimensionCounts& counts, float* row);

// True for the columns MarkAbsentDimensions may change.
bool IsAbsentDimensionColumn(int column);

// Derives the lengths from every node's features and marks its row; sets
// g->absent_dimensions_marked. Does nothing to a graph already marked.
void DeriveAbsentDimensions(Graph* g);

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_ABSENT_DIMENSIONS_H_
