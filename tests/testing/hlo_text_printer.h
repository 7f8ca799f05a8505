// Prints our xla.HloModuleProto subset as HLO text, for round-trip tests of the HLO text parser
// and for the parser benchmark (tools/bench). Test and benchmark code only.
//
// Every field the featurizer reads is printed, so parsing the text back gives the same features,
// opcodes, edges and node_splits. Two styles: the current one (no '%', operand shapes omitted)
// and the older one ('%' names, operand shapes inline, plus metadata/backend_config/sharding
// attributes that the parser must skip).
#ifndef TPUGRAPHS_TESTS_TESTING_HLO_TEXT_PRINTER_H_
#define TPUGRAPHS_TESTS_TESTING_HLO_TEXT_PRINTER_H_

#include <string>

#include "xla/hlo.pb.h"

namespace tpugraphs::testing {

enum class HloTextStyle { kCurrent, kOlder };

std::string PrintHloText(const xla::HloModuleProto& module,
                         HloTextStyle style = HloTextStyle::kCurrent);

}  // namespace tpugraphs::testing

#endif  // TPUGRAPHS_TESTS_TESTING_HLO_TEXT_PRINTER_H_
