// libFuzzer harness for the HLO text rewrite of `tune --emit-hlo` (RewriteHloLayouts,
// include/tpugraphs/tune/tuned_output.h) and the module header parser behind it.
//
// Input: HLO text. When the text parses and its graph has layouts to choose, a configuration
// drawn with the text's hash as seed is written into the text. The rewrite may refuse
// (an InvalidArgument naming the input), but it may not crash, hang or leak, and what it writes
// must round-trip: it parses again, gives the same configurable nodes, and states the drawn
// configuration as its configuration 0. A hang is a finding through the fuzzer's per-input
// -timeout (tools/dev/fuzz.sh). Seeds: the real modules of tests/data/real/hlo_text.
//
// Built by tests/fuzz/CMakeLists.txt (fuzz_hlo_rewrite with TPUGRAPHS_BUILD_FUZZERS, run by
// tools/dev/fuzz.sh; fuzz_replay_hlo_rewrite in the normal build).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/ingest/hlo_graph.h"
#include "tpugraphs/ingest/hlo_text.h"
#include "tpugraphs/ingest/layout_candidates.h"
#include "tpugraphs/tune/search_space.h"
#include "tpugraphs/tune/tuned_output.h"

namespace {

const std::string kPath = "fuzz.hlo";

bool NamesTheInput(const tpugraphs::Status& s) {
  return s.code() == tpugraphs::StatusCode::kInvalidArgument &&
         s.message().compare(0, kPath.size() + 1, kPath + ":") == 0;
}

// The graph `tpugraphs ingest` makes of HLO text with no alternative layouts (configuration 0
// is the layouts the text states), and where the text states its shapes. False if the text is
// not a module ingest accepts.
bool Ingest(std::string_view text, xla::HloModuleProto* module,
            tpugraphs::ingest::HloTextShapeSpans* spans, tpugraphs::Graph* g) {
  tpugraphs::ingest::HloTextLimits limits;
  limits.max_nesting = 16;
  limits.max_rank = 16;
  std::vector<std::string> warnings;
  if (!tpugraphs::ingest::ParseHloText(text, kPath, module, &warnings, limits, spans).ok()) {
    return false;
  }
  if (!tpugraphs::ingest::BuildProgramGraph(*module, kPath, g).ok()) return false;
  g->name = "fuzz";
  g->collection = "layout:xla:custom";
  g->kind = tpugraphs::TaskKind::kLayout;
  tpugraphs::ingest::LayoutCandidateOptions options;
  options.alternatives = 0;
  return tpugraphs::ingest::AddLayoutCandidates(*module, kPath, options, g).ok() &&
         tpugraphs::ValidateGraph(*g, kPath).ok();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  uint64_t seed = 1469598103934665603ull;  // FNV-1a of the text
  for (size_t i = 0; i < size; ++i) seed = (seed ^ data[i]) * 1099511628211ull;
  xla::HloModuleProto module;
  tpugraphs::ingest::HloTextShapeSpans spans;
  tpugraphs::Graph g;
  if (!Ingest(text, &module, &spans, &g)) return 0;
  auto space = tpugraphs::tune::SearchSpace::FromModule(g, module, kPath, /*allow_empty=*/true);
  if (!space.ok()) {
    if (!NamesTheInput(space.status())) std::abort();
    return 0;
  }
  if (space->variables().empty()) return 0;  // nothing to write: tune copies the text
  tpugraphs::Rng rng(seed);
  const tpugraphs::tune::Config c = space->Random(rng);
  auto out = tpugraphs::tune::RewriteHloLayouts(text, kPath, module, spans, *space, c);
  if (!out.ok()) {
    if (!NamesTheInput(out.status())) std::abort();
    return 0;
  }
  xla::HloModuleProto back_module;
  tpugraphs::ingest::HloTextShapeSpans back_spans;
  tpugraphs::Graph back;
  if (!Ingest(*out, &back_module, &back_spans, &back))
    std::abort();  // the rewrite broke the module
  if (back.node_config_ids != g.node_config_ids) std::abort();
  const size_t row = c.layout.size();
  if (back.node_config_feat.size() < row ||
      !std::equal(c.layout.begin(), c.layout.end(), back.node_config_feat.begin())) {
    std::abort();  // the emitted module does not state the configuration written into it
  }
  return 0;
}
