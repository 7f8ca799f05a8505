// What `tpugraphs tune` writes (docs/tune.md, "Output"): one .npz per graph in the release's
// encoding of configurations, a JSON/TSV summary, and for HLO text programs the module written
// back with the chosen layout.
//
// The .npz of a layout graph holds node_config_feat [K, nc, 18] int8 and node_config_ids [nc]
// int64; of a tile graph config_feat [K, 24] float32. Both add score [K] float64 (lower =
// predicted faster; with the synthetic oracle, the noise-free runtime in ns), default_score [1]
// float64 and the default configuration itself (default_node_config_feat [nc, 18] or
// default_config_feat [24]), configs_scored [1] int64.
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_TUNE_TUNED_OUTPUT_H_
#define TPUGRAPHS_TUNE_TUNED_OUTPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/ingest/hlo_text.h"
#include "tpugraphs/tune/search.h"
#include "tpugraphs/tune/search_space.h"

namespace tpugraphs::tune {

// What a closed loop adds to its output (tune --measure-cmd): per configuration of
// SearchResult::chosen, the measured runtime and the round that measured it.
struct MeasuredArrays {
  std::vector<double> runtime;
  std::vector<int64_t> round;
};

// Writes the .npz (atomically) at `path`; with `measured`, also its arrays runtime [K] float64
// and round [K] int64.
Status WriteTunedNpz(const Graph& g, const SearchResult& r, const std::string& path,
                     const MeasuredArrays* measured = nullptr);

// One JSON object summarising the search of `g` (no trailing newline).
std::string TunedJson(const Graph& g, const SearchSpace& space, const SearchResult& r,
                      const std::string& scorer, bool scores_are_ns, const std::string& output);

// HLO text `text` (the file `path` the graph was ingested from) with the layouts of
// configuration `c` written into the shapes of the arrays the space's variables stand for (each
// defining instruction's shape and each operand shape written inline for it, at the `spans` the
// HLO text parser found; tiles and memory spaces after ':' kept), every other byte
// unchanged but the module header's entry_computation_layout (if it has one): the shape of each
// entry parameter whose layout changes, and the result's if the entry's root is such an array,
// are rewritten the same way (the other shapes stay byte-identical). A tuple-shaped root or
// parameter is never a variable, so its header shape is kept. InvalidArgument naming `path` if
// the header or the instructions do not fit the module. Linear in the text. REQUIRES: `module`
// and `spans` from one ParseHloText of `text`; space made by SearchSpace::FromModule from that
// module.
StatusOr<std::string> RewriteHloLayouts(const std::string& text, const std::string& path,
                                        const xla::HloModuleProto& module,
                                        const ingest::HloTextShapeSpans& spans,
                                        const SearchSpace& space, const Config& c);

}  // namespace tpugraphs::tune

#endif  // TPUGRAPHS_TUNE_TUNED_OUTPUT_H_
