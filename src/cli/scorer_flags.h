// The flags `evaluate` and `predict` share: which scorer ranks the configurations
// (--predictions, --baseline or --model with --ensemble, --seed, --memory-per-thread) and which
// graphs (--collection, --split).
#ifndef TPUGRAPHS_CLI_SCORER_FLAGS_H_
#define TPUGRAPHS_CLI_SCORER_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "tpugraphs/common/status.h"
#include "tpugraphs/eval/scorer.h"
#include "tpugraphs/io/graph_filter.h"

namespace tpugraphs::cli {

struct ScorerFlags {
  eval::ScorerSpec spec;
  int64_t memory_mb = 0;
  CLI::Option* predictions = nullptr;
  CLI::Option* baseline = nullptr;
  CLI::Option* model = nullptr;
};

// Adds the scorer flags to `cmd`; the three sources exclude one another.
void AddScorerFlags(CLI::App* cmd, ScorerFlags* flags);

// The scorer as the flags and the global -j describe it.
eval::ScorerSpec ScorerSpecOf(const ScorerFlags& flags);

struct GraphSelectionFlags {
  std::vector<std::string> collections;
  std::string split;
};

// Adds --collection (repeatable) and --split; `split_help` tells what the split needs.
void AddGraphSelectionFlags(CLI::App* cmd, GraphSelectionFlags* flags, const char* split_help);

// The filter of the flags, after checking the collection and split names.
StatusOr<io::GraphFilter> GraphFilterOf(const GraphSelectionFlags& flags);

}  // namespace tpugraphs::cli

#endif  // TPUGRAPHS_CLI_SCORER_FLAGS_H_
