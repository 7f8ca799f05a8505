// Derived tile features (ModelSpec.tile_derived_features): what a tile configuration does to the
// kernel's output and weights, computed from the shapes in the graph and the raw tile config
// values. A kernel's runtime depends on how many tiles cover the output (prod ceil(d / t)), how
// much of each tile is padding to the (8, 128) hardware tile, and how often the weights are
// re-read (docs/synthetic-cost-model.md, "Tile kernels"; the same tiling as real TPU kernels).
// These are ceilings and products of a shape and a configuration that an MLP over the raw
// bounds approximates poorly; given as logs they make the runtime nearly additive.
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_MODEL_TILE_FEATURES_H_
#define TPUGRAPHS_MODEL_TILE_FEATURES_H_

#include <array>
#include <cstdint>

#include "tpugraphs/common/graph.h"

namespace tpugraphs::model {

inline constexpr int kTileDerivedFeatureCount = 11;

// The arrays a tile configuration tiles, read from the raw node features (dims 21-26,
// minor_to_major 134-139; a rank is the number of leading non-zero dims).
struct TileShapes {
  std::array<float, 6> out_dims{}, out_m2m{};        // the kernel's output: the last root
  std::array<float, 6> kernel_dims{}, kernel_m2m{};  // operand 1 of the first convolution or dot
  int out_rank = 0, kernel_rank = 0;                 // 0 = absent
  double out_bytes = 4, kernel_bytes = 4;  // bytes per element (element type one-hot 2-20)
  // Bytes of the output's other operands (not the weights) per output element: streamed through
  // each tile along with it.
  double streamed_per_out = 0;
};

// The output is the last node in node order that is a computation root (is_root, column 0): the
// entry computation comes last in a module, as in the release's kernels and `synth`'s. The
// weights are the second operand, in edge order, of the first convolution or dot (opcode table:
// convolution 26, dot 34); the streamed operands are the output node's other operands (edge
// order, without one of the weights' dims and without called computations' roots). Graphs without
// node features give empty shapes.
TileShapes TileKernelShapes(const Graph& g);

// The kTileDerivedFeatureCount features of one configuration (raw_cfg: its 24 raw tile config
// values; output bounds 8-13, kernel bounds 0-5, each list taken as given when it has one
// non-zero entry per dimension, else as the whole dimensions): [log(tiles) / 8, log(waste),
// log(padded tile elements) / 16, log(kernel steps) / 8, log(kernel waste),
// log(padded kernel tile elements) / 16, log(working set bytes) / 16, then 1 or 0 for a working
// set above 4, 8, 16 and 32 MiB], where tiles = prod ceil(d_i / t_i), the padded tile pads its most
// minor dimension to 128 and the second most minor to 8, waste = tiles * padded tile / elements;
// the kernel terms likewise with the weights' dims and kernel bounds (0 without weights), and the
// working set is 2 (padded tile x (output + streamed bytes per element) + padded kernel tile x
// weight bytes), double-buffered: what must fit in the core's fast memory. A tile that does not
// fit spills, a cliff in runtime at a capacity the model has to find: the four indicators give it
// the steps at the usual on-chip memory sizes.
void TileDerivedFeatures(const TileShapes& s, const float* raw_cfg, float* out);

}  // namespace tpugraphs::model

#endif  // TPUGRAPHS_MODEL_TILE_FEATURES_H_
