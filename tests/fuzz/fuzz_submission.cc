// Fuzzes the Kaggle submission CSV parser (eval/submission.h) and the merge and ID checks done
// on parsed files.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "tpugraphs/eval/submission.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpugraphs;
  fuzz::InitHarness();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = eval::ParseSubmission(text, "fuzz.csv");
  if (!parsed.ok()) return 0;
  auto merged = eval::MergeSubmissions({*parsed});
  if (!merged.ok()) return 0;
  if (!eval::CheckIds(*merged, *parsed).ok()) fuzz::Fail("a submission's own IDs do not check");
  (void)eval::FormatSubmission(*merged);
  return 0;
}
