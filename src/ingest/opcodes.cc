#include "tpugraphs/ingest/opcodes.h"

#include <array>
#include <set>
#include <string>
#include <unordered_map>

namespace tpugraphs::ingest {
namespace {

// Index = id. The numbering is the release's (ingest-spec section 2), not alphabetical; "trace"
// (97) and "tuple-select" (101) are retired XLA opcodes that keep their ids.
constexpr std::array<std::string_view, kNumOpcodeIds> kOpcodeNames = {
    "",                          // 0: unknown
    "abs",                       // 1
    "add",                       // 2
    "add-dependency",            // 3
    "after-all",                 // 4
    "all-reduce",                // 5
    "all-to-all",                // 6
    "atan2",                     // 7
    "batch-norm-grad",           // 8
    "batch-norm-inference",      // 9
    "batch-norm-training",       // 10
    "bitcast",                   // 11
    "bitcast-convert",           // 12
    "broadcast",                 // 13
    "call",                      // 14
    "ceil",                      // 15
    "cholesky",                  // 16
    "clamp",                     // 17
    "collective-permute",        // 18
    "count-leading-zeros",       // 19
    "compare",                   // 20
    "complex",                   // 21
    "concatenate",               // 22
    "conditional",               // 23
    "constant",                  // 24
    "convert",                   // 25
    "convolution",               // 26
    "copy",                      // 27
    "copy-done",                 // 28
    "copy-start",                // 29
    "cosine",                    // 30
    "custom-call",               // 31
    "divide",                    // 32
    "domain",                    // 33
    "dot",                       // 34
    "dynamic-slice",             // 35
    "dynamic-update-slice",      // 36
    "exponential",               // 37
    "exponential-minus-one",     // 38
    "fft",                       // 39
    "floor",                     // 40
    "fusion",                    // 41
    "gather",                    // 42
    "get-dimension-size",        // 43
    "set-dimension-size",        // 44
    "get-tuple-element",         // 45
    "imag",                      // 46
    "infeed",                    // 47
    "iota",                      // 48
    "is-finite",                 // 49
    "log",                       // 50
    "log-plus-one",              // 51
    "and",                       // 52
    "not",                       // 53
    "or",                        // 54
    "xor",                       // 55
    "map",                       // 56
    "maximum",                   // 57
    "minimum",                   // 58
    "multiply",                  // 59
    "negate",                    // 60
    "outfeed",                   // 61
    "pad",                       // 62
    "parameter",                 // 63
    "partition-id",              // 64
    "popcnt",                    // 65
    "power",                     // 66
    "real",                      // 67
    "recv",                      // 68
    "recv-done",                 // 69
    "reduce",                    // 70
    "reduce-precision",          // 71
    "reduce-window",             // 72
    "remainder",                 // 73
    "replica-id",                // 74
    "reshape",                   // 75
    "reverse",                   // 76
    "rng",                       // 77
    "rng-get-and-update-state",  // 78
    "rng-bit-generator",         // 79
    "round-nearest-afz",         // 80
    "rsqrt",                     // 81
    "scatter",                   // 82
    "select",                    // 83
    "select-and-scatter",        // 84
    "send",                      // 85
    "send-done",                 // 86
    "shift-left",                // 87
    "shift-right-arithmetic",    // 88
    "shift-right-logical",       // 89
    "sign",                      // 90
    "sine",                      // 91
    "slice",                     // 92
    "sort",                      // 93
    "sqrt",                      // 94
    "subtract",                  // 95
    "tanh",                      // 96
    "trace",                     // 97
    "transpose",                 // 98
    "triangular-solve",          // 99
    "tuple",                     // 100
    "tuple-select",              // 101
    "while",                     // 102
    "cbrt",                      // 103
    "all-gather",                // 104
    "collective-permute-start",  // 105
    "collective-permute-done",   // 106
    "logistic",                  // 107
    "dynamic-reshape",           // 108
    "all-reduce-start",          // 109
    "all-reduce-done",           // 110
    "reduce-scatter",            // 111
    "all-gather-start",          // 112
    "all-gather-done",           // 113
    "opt-barrier",               // 114
    "async-start",               // 115
    "async-update",              // 116
    "async-done",                // 117
    "round-nearest-even",        // 118
    "stochastic-convert",        // 119
    "tan",                       // 120
};

const std::unordered_map<std::string_view, uint8_t>& OpcodeMap() {
  static const auto* map = [] {
    auto* m = new std::unordered_map<std::string_view, uint8_t>();
    for (int id = 1; id < kNumOpcodeIds; ++id) (*m)[kOpcodeNames[id]] = static_cast<uint8_t>(id);
    return m;
  }();
  return *map;
}

}  // namespace

uint8_t OpcodeId(std::string_view opcode) {
  const auto& map = OpcodeMap();
  auto it = map.find(opcode);
  return it == map.end() ? 0 : it->second;
}

std::string_view OpcodeName(int id) {
  if (id <= 0 || id > kMaxOpcodeId) return "";
  return kOpcodeNames[id];
}

OpClass OpClassOf(std::string_view op) {
  static const std::set<std::string_view> kFree = {
      "parameter", "constant",     "tuple",      "get-tuple-element", "bitcast",     "while",
      "call",      "conditional",  "after-all",  "add-dependency",    "opt-barrier", "domain",
      "iota",      "partition-id", "replica-id", "get-dimension-size"};
  static const std::set<std::string_view> kMove = {
      "broadcast",     "transpose",     "copy",
      "slice",         "dynamic-slice", "dynamic-update-slice",
      "concatenate",   "pad",           "reverse",
      "gather",        "scatter",       "all-reduce",
      "all-gather",    "all-to-all",    "collective-permute",
      "copy-start",    "copy-done",     "sort",
      "reduce-scatter"};
  if (kFree.count(op)) return OpClass::kFree;
  if (kMove.count(op)) return OpClass::kMove;
  if (op == "reduce" || op == "reduce-window" || op == "select-and-scatter")
    return OpClass::kReduce;
  if (op == "convolution") return OpClass::kConvolution;
  if (op == "dot") return OpClass::kDot;
  if (op == "reshape") return OpClass::kReshape;
  if (op == "fusion") return OpClass::kFusion;
  return OpClass::kElementwise;
}

}  // namespace tpugraphs::ingest
