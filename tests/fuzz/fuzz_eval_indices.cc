// Fuzzes the eval-index JSON parser (eval/eval_indices.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "tpugraphs/eval/eval_indices.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpugraphs::fuzz::InitHarness();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)tpugraphs::eval::ParseEvalIndexJson(text, "fuzz.json");
  return 0;
}
