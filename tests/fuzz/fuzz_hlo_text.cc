// libFuzzer harness for the HLO text parser (include/tpugraphs/ingest/hlo_text.h).
//
// Feeds arbitrary bytes to ParseHloText with small limits (so deep nesting is reached quickly),
// then, when the text parses, builds the program graph with the featurizer and its layout
// configurations (layout_candidates.h) as ingest does.
// Neither may crash, hang or leak; every rejection must be an InvalidArgument naming the input
// with a line and column. Valid modules are interesting inputs too, so copies of
// tests/data/real/hlo_text make a good seed corpus.
//
// Built by tests/fuzz/CMakeLists.txt (fuzz_hlo_text with TPUGRAPHS_BUILD_FUZZERS, run by
// tools/dev/fuzz.sh; fuzz_replay_hlo_text in the normal build). By hand, from a configured tree:
//   clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -Iinclude -Ibuild/generated
//     tests/fuzz/fuzz_hlo_text.cc
//     src/ingest/{hlo_text,hlo_graph,node_features,opcodes,layout_candidates}.cc
//     src/common/{status,rng,graph}.cc build/generated/xla/{hlo,xla_data}.pb.cc
//     build/generated/tpu_graphs/tuning.pb.cc -lprotobuf -lspdlog -lfmt -o fuzz_hlo_text
//   ./fuzz_hlo_text -max_len=32768 corpus/   # corpus: copies of tests/data/real/hlo_text/*
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/ingest/hlo_graph.h"
#include "tpugraphs/ingest/hlo_text.h"
#include "tpugraphs/ingest/layout_candidates.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const std::string kPath = "fuzz.hlo";
  tpugraphs::ingest::HloTextLimits limits;
  limits.max_nesting = 16;
  limits.max_rank = 16;
  xla::HloModuleProto module;
  std::vector<std::string> warnings;
  const tpugraphs::Status s =
      tpugraphs::ingest::ParseHloText(text, kPath, &module, &warnings, limits);
  if (!s.ok()) {
    // Errors are invalid-argument messages that start with "<path>:<line>:<column>: ".
    if (s.code() != tpugraphs::StatusCode::kInvalidArgument ||
        s.message().compare(0, kPath.size() + 1, kPath + ":") != 0) {
      std::abort();
    }
    return 0;
  }
  (void)tpugraphs::ingest::LooksLikeHloText(text);
  tpugraphs::Graph g;
  const tpugraphs::Status built = tpugraphs::ingest::BuildProgramGraph(module, kPath, &g);
  if (built.ok() && g.node_opcode.size() * tpugraphs::kNodeFeatureCount != g.node_feat.size()) {
    std::abort();
  }
  if (!built.ok()) return 0;
  // Layout configurations as ingest gives a graph-only dump: configuration 0 and a few
  // alternatives. Either a valid graph or an InvalidArgument naming the input.
  g.name = "fuzz";
  g.collection = "layout:xla:custom";
  g.kind = tpugraphs::TaskKind::kLayout;
  tpugraphs::ingest::LayoutCandidateOptions options;
  options.alternatives = 4;
  const tpugraphs::Status configs =
      tpugraphs::ingest::AddLayoutCandidates(module, kPath, options, &g);
  if (configs.ok() ? !tpugraphs::ValidateGraph(g, kPath).ok()
                   : configs.code() != tpugraphs::StatusCode::kInvalidArgument ||
                         configs.message().compare(0, kPath.size() + 1, kPath + ":") != 0) {
    std::abort();
  }
  return 0;
}
