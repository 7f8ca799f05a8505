// Random HLO-like programs as real xla.HloModuleProto messages.
//
// Layout programs are whole "training step"-like modules: an entry computation of convolution,
// dot, reshape, transpose, broadcast, elementwise, reduction and fusion blocks, plus while loops
// whose body and condition computations are named "while_body.K" / "while_cond.K" (so the
// featurizer's node_splits marks them), fused computations and scalar reducer computations.
// Tile kernels are small modules like the real op_tuning_data.pb kernels: a fused computation
// (with reducers) and an entry computation holding the kernel's parameters and the fusion.
//
// Structural guarantees (checked by the tests): instruction ids are unique in the module, every
// operand is defined earlier in its computation, callees come before callers (the entry is last),
// every computation has a valid root_id, shapes carry a layout (minor_to_major) except tuples.
// The module depends only on (target size, seed): the generator draws from its own Rng.
//
// Thread-safety: the functions are reentrant.
#ifndef TPUGRAPHS_SYNTH_PROGRAM_GENERATOR_H_
#define TPUGRAPHS_SYNTH_PROGRAM_GENERATOR_H_

#include <cstdint>
#include <string>

#include "xla/hlo.pb.h"

namespace tpugraphs::synth {

// A layout program of about `target_nodes` instructions (within a few percent; at least ~30).
xla::HloModuleProto GenerateLayoutProgram(int64_t target_nodes, uint64_t seed,
                                          const std::string& name);

// A tile kernel (tens of nodes): a fusion of elementwise ops, optionally around a convolution,
// a dot or a reduction, with its parameters in the entry computation.
xla::HloModuleProto GenerateTileKernel(uint64_t seed, const std::string& name);

}  // namespace tpugraphs::synth

#endif  // TPUGRAPHS_SYNTH_PROGRAM_GENERATOR_H_
