// Small helpers for writing JSON output (the --json modes of the subcommands).
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_COMMON_JSON_UTIL_H_
#define TPUGRAPHS_COMMON_JSON_UTIL_H_

#include <string>
#include <string_view>

namespace tpugraphs {

// `s` as a JSON string literal with quotes; control characters are escaped.
std::string JsonQuote(std::string_view s);

// `v` as a JSON number with `significant_digits` (printf's %.*g: 17 round-trips a double, 9 a
// float), or null when it is NaN or infinite (JSON has neither).
std::string JsonNumber(double v, int significant_digits = 17);

}  // namespace tpugraphs

#endif  // TPUGRAPHS_COMMON_JSON_UTIL_H_
