// Fuzzes the predictions TSV parser (eval/predictions.h) and the lookups done on its result.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tpugraphs/eval/predictions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpugraphs;
  fuzz::InitHarness();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = eval::Predictions::Parse(text, "fuzz.tsv");
  if (!parsed.ok()) return 0;
  const eval::Predictions& p = *parsed;
  for (const eval::GraphPredictions& g : p.graphs()) {
    if (p.Find(g.collection, g.name) != &g) fuzz::Fail("graph not found by id");
    const int64_t n = std::min<int64_t>(g.max_index() + 1, 1 << 16);
    std::vector<int64_t> wanted;
    for (const auto& e : g.entries) {
      if (e.config_index < n) wanted.push_back(e.config_index);
    }
    auto scores = p.ScoresFor(g.collection, g.name, n, wanted);
    if (scores.ok() && scores->size() != wanted.size()) fuzz::Fail("ScoresFor size mismatch");
    (void)p.ScoresFor(g.collection, g.name, n, {0, n - 1});
  }
  (void)p.CheckAllKnown({});
  return 0;
}
