// The HLO opcode table of the TpuGraphs release: opcode string -> small integer id stored in
// node_opcode (ingest-spec section 2). Unknown strings map to 0; the largest id is 120.
//
// Thread-safety: the functions only read immutable tables.
#ifndef TPUGRAPHS_INGEST_OPCODES_H_
#define TPUGRAPHS_INGEST_OPCODES_H_

#include <cstdint>
#include <string_view>

namespace tpugraphs::ingest {

inline constexpr int kMaxOpcodeId = 120;
inline constexpr int kNumOpcodeIds = kMaxOpcodeId + 1;  // ids 0..120, 0 = unknown

// Exact, case-sensitive lookup; 0 for strings not in the table.
uint8_t OpcodeId(std::string_view opcode);

// The opcode string of an id, "" for 0 and for ids above kMaxOpcodeId.
std::string_view OpcodeName(int id);

// What kind of work an instruction does, as the synthetic cost model prices it
// (docs/synthetic-cost-model.md, "Instruction classes") and as layouts flow through it:
// elementwise instructions and fusions take their first operand's layout.
enum class OpClass : uint8_t {
  kFree,         // parameter, constant, tuple, get-tuple-element, bitcast, while/call shells
  kElementwise,  // one vector op per output element, memory bound
  kReduce,       // reads its (larger) input, vector op per input element
  kMove,         // broadcast, transpose, copy, slice, concatenate, pad, ... (data movement)
  kConvolution,
  kDot,
  kReshape,
  kFusion,  // priced from its fused computation
};

// The class of an opcode string; strings not listed anywhere (including unknown ones) are
// elementwise.
OpClass OpClassOf(std::string_view opcode);

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_OPCODES_H_
