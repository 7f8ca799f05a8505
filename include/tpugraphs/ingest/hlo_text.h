// XLA HLO text (what `XLA_FLAGS=--xla_dump_to=DIR` writes by default) -> xla.HloModuleProto.
//
// The parser fills the same in-memory proto subset the raw-dump path reads (proto/xla/), so the
// one featurizer (node_features.h, hlo_graph.h) computes the features of text and proto dumps
// alike. It reads the grammar subset documented in docs/hlo-text.md: the module header, the
// computations (ENTRY, signature, ROOT), instructions in both the current style (operand shapes
// omitted, '%' optional) and the older one (operand shapes inline), shapes with element types,
// dynamic dimensions, tuples, tokens and layouts (tiles, memory spaces), and every attribute the
// 140 node features read. Constants' values, metadata, backend_config, sharding and
// frontend_attributes are skipped.
//
// Node order is text order (XLA prints callees before callers and operands before users).
// Instruction and computation ids are assigned in text order, starting at 1; names are resolved
// the way XLA's own parser does it: an operand must be defined earlier in its computation and a
// called computation earlier in the module, so a cycle can only show up as a use before
// definition, which is an error.
//
// Errors are InvalidArgument "<path>:<line>:<column>: <what was expected>, found '<text>'".
// Unknown opcodes (not in the release's opcode table) and unknown attributes are warnings naming
// them; their node is kept (opcode id 0) and the attribute skipped.
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_INGEST_HLO_TEXT_H_
#define TPUGRAPHS_INGEST_HLO_TEXT_H_

#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/status.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::ingest {

// Limits that keep hostile input from exhausting the stack or producing absurd shapes.
struct HloTextLimits {
  // Nesting depth of tuple shapes and of brackets in skipped attribute values and constants.
  int max_nesting = 64;
  // Dimensions of one array shape.
  int max_rank = 64;
};

// True if `bytes` (after optional whitespace and comments) start with the `HloModule` keyword.
bool LooksLikeHloText(std::string_view bytes);

// Where the text states a shape, as the byte range [begin, end) of the text ("f32[2,3]{1,0}",
// a tuple shape "(...)" whole), and the instruction the shape belongs to.
struct HloShapeSpan {
  int64_t instruction_id = 0;
  size_t begin = 0, end = 0;
};
// The shapes that state the layouts of a module's arrays, as the parser read them: each
// instruction's own shape (after "name ="), and each operand shape written inline before an
// operand's name (the older style: "dot(f32[20,30]{1,0} %p, ...)"; instruction_id = the
// operand's). Both in text order. For writing the text back with other layouts (tune
// --emit-hlo): the spans are exactly what ingest reads, strings and comments excluded.
struct HloTextShapeSpans {
  std::vector<HloShapeSpan> definitions;
  std::vector<HloShapeSpan> operands;
};

// Parses one HLO module. `path` prefixes every message. Warnings (unknown opcodes and
// attributes, each name once) are appended to `warnings` when it is not null. `module` is
// cleared first; on error its content is unspecified. With `spans`, also where the text states
// the instructions' shapes (cleared first).
Status ParseHloText(std::string_view text, const std::string& path, xla::HloModuleProto* module,
                    std::vector<std::string>* warnings = nullptr,
                    const HloTextLimits& limits = HloTextLimits(),
                    HloTextShapeSpans* spans = nullptr);

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_HLO_TEXT_H_
