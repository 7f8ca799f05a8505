#include "scorer_flags.h"

#include "command.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/train/model_scorer.h"

namespace tpugraphs::cli {

void AddScorerFlags(CLI::App* cmd, ScorerFlags* f) {
  f->memory_mb = train::kDefaultScoringMemoryMb;
  f->predictions = cmd->add_option("--predictions", f->spec.predictions,
                                   "Predictions file (docs/predictions-format.md; '-' = stdin)");
  f->baseline = cmd->add_option("--baseline", f->spec.baseline,
                                "Built-in scorer: random (seeded uniform scores) or index (config "
                                "index, the release order)");
  f->model = cmd->add_option("--model", f->spec.models,
                             "Model file written by `tpugraphs train`; several (repeat the flag or "
                             "list them) make an ensemble combined as --ensemble says");
  f->predictions->excludes(f->baseline)->excludes(f->model);
  f->baseline->excludes(f->model);
  cmd->add_option("--ensemble", f->spec.ensemble,
                  "How several --model files combine, per graph: zscore (mean of each model's "
                  "standardised scores) or rank (mean of normalised ranks)")
      ->check(CLI::IsMember({"zscore", "rank"}))
      ->capture_default_str();
  cmd->add_option("--seed", f->spec.seed, "Seed of --baseline random")->capture_default_str();
  cmd->add_option("--memory-per-thread", f->memory_mb,
                  "--model: MiB of activations per scoring thread; sets how many configurations "
                  "are scored at once (the scores do not depend on it, bit for bit)")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 20))
      ->capture_default_str();
}

eval::ScorerSpec ScorerSpecOf(const ScorerFlags& f) {
  eval::ScorerSpec spec = f.spec;
  spec.model_options.threads = Globals().threads;
  spec.model_options.memory_mb = f.memory_mb;
  return spec;
}

void AddGraphSelectionFlags(CLI::App* cmd, GraphSelectionFlags* f, const char* split_help) {
  cmd->add_option("--collection", f->collections,
                  "Only this collection, e.g. layout:xla:random (repeatable; default: all)");
  cmd->add_option("--split", f->split, split_help);
}

StatusOr<io::GraphFilter> GraphFilterOf(const GraphSelectionFlags& f) {
  io::GraphFilter filter;
  for (const auto& c : f.collections) TPUG_RETURN_IF_ERROR(ValidateCollection(c));
  filter.collections = f.collections;
  if (!f.split.empty()) {
    TPUG_RETURN_IF_ERROR(ValidateSplit(f.split));
    filter.splits = {f.split};
  }
  return filter;
}

}  // namespace tpugraphs::cli
