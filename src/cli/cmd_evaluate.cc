// `tpugraphs evaluate`: ranking metrics of a scorer (predictions file, baseline or model) on a
// dataset, per collection and per graph, plus the Kaggle score (docs/evaluate.md).
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>

#include "command.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/dist/communicator.h"
#include "tpugraphs/dist/sharded_scoring.h"
#include "tpugraphs/eval/evaluate.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/train/model_scorer.h"

namespace tpugraphs::cli {
namespace {

RunFn SetupEvaluate(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "evaluate",
      "Score configurations with a predictions file, a built-in baseline or a model and print\n"
      "ranking metrics: tile top-K error (K=1,5,10) and Kaggle score 1-err@5; layout Kendall\n"
      "tau-b, ordered-pair accuracy and top-K slowdown (K=1,10,100); means per collection and\n"
      "the Kaggle mean over the five collections present. See docs/evaluate.md.\n"
      "Example: tpugraphs evaluate --data valid.tpug --predictions preds.tsv \\\n"
      "           --eval-indices tests/data/real/eval_indices --per-graph");
  struct Flags {
    std::string data, eval_indices, split;
    std::vector<std::string> collections;
    eval::ScorerSpec scorer;
    int64_t memory_mb = train::kDefaultScoringMemoryMb;
    bool json = false, per_graph = false;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("--data,--dataset", f->data, "Dataset file with the graphs and measured runtimes")
      ->required();
  auto* preds = cmd->add_option("--predictions", f->scorer.predictions,
                                "Predictions file (docs/predictions-format.md; '-' = stdin)");
  auto* base = cmd->add_option("--baseline", f->scorer.baseline,
                               "Built-in scorer: random (seeded uniform scores) or index (config "
                               "index, the release order)");
  auto* model =
      cmd->add_option("--model", f->scorer.models,
                      "Model file written by `tpugraphs train`; several (repeat the flag or list "
                      "them) make an ensemble combined as --ensemble says");
  preds->excludes(base)->excludes(model);
  base->excludes(model);
  cmd->add_option("--ensemble", f->scorer.ensemble,
                  "How several --model files combine, per graph: zscore (mean of each model's "
                  "standardised scores) or rank (mean of normalised ranks)")
      ->check(CLI::IsMember({"zscore", "rank"}))
      ->capture_default_str();
  cmd->add_option("--seed", f->scorer.seed, "Seed of --baseline random")->capture_default_str();
  cmd->add_option("--memory-per-thread", f->memory_mb,
                  "--model: MiB of activations per scoring thread; sets how many configurations "
                  "are scored at once (the scores do not depend on it, bit for bit)")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--collection", f->collections,
                  "Only this collection, e.g. layout:xla:random (repeatable; default: all)");
  cmd->add_option("--split", f->split,
                  "Only graphs of this split: train, valid, test (default: all)");
  cmd->add_option("--eval-indices", f->eval_indices,
                  "Directory of <source>_<search>.json files, or one file: restrict those layout "
                  "collections to the listed graphs and config indices (default: all configs)");
  cmd->add_flag("--per-graph", f->per_graph, "Also print one row per graph (default: off)");
  cmd->add_flag("--json", f->json, "Print one JSON object instead of tables (default: off)");
  return [f]() -> Status {
    f->scorer.model_options.threads = Globals().threads;
    f->scorer.model_options.memory_mb = f->memory_mb;
    if (!f->split.empty()) TPUG_RETURN_IF_ERROR(ValidateSplit(f->split));
    for (const auto& c : f->collections) TPUG_RETURN_IF_ERROR(ValidateCollection(c));
    std::unique_ptr<eval::EvalIndices> indices;
    if (!f->eval_indices.empty()) {
      TPUG_ASSIGN_OR_RETURN(eval::EvalIndices loaded, eval::EvalIndices::Load(f->eval_indices));
      indices = std::make_unique<eval::EvalIndices>(std::move(loaded));
    }
    dist::Communicator& world = dist::World();
    const bool distributed = world.size() > 1 && !f->scorer.models.empty();
    // Under MPI, only models are worth sharing out: other scorers run on rank 0 alone.
    if (world.size() > 1 && !distributed && world.rank() != 0) return Status::Ok();
    eval::EvaluateOptions options;
    options.collections = f->collections;
    options.split = f->split;
    options.eval_indices = indices.get();
    options.threads = Globals().threads;
    options.progress = ProgressEnabled();
    std::unique_ptr<io::DatasetReader> reader;
    std::unique_ptr<eval::ConfigScorer> scorer;
    ReplayLogQuiet replay_quiet;
    if (distributed) {
      // Every rank scores its share of the graphs (docs/distributed.md); rank 0 then runs the
      // evaluation again on the gathered scores and prints.
      std::unique_ptr<eval::ConfigScorer> model;
      std::unique_ptr<dist::ShardedScorer> sharded;
      Status local = [&]() -> Status {
        TPUG_ASSIGN_OR_RETURN(reader, io::DatasetReader::Open(f->data));
        TPUG_ASSIGN_OR_RETURN(model, eval::MakeScorer(f->scorer, reader.get()));
        sharded = std::make_unique<dist::ShardedScorer>(
            model.get(),
            dist::PlanScoringOwners(*reader, f->collections, f->split, indices.get(), world.size()),
            world.rank());
        return eval::Evaluate(*reader, *sharded, options).status();
      }();
      TPUG_RETURN_IF_ERROR(world.Agree(local));
      TPUG_ASSIGN_OR_RETURN(scorer, sharded->GatherScores(world, 0));
      if (world.rank() != 0) return Status::Ok();
      options.progress = false;
      replay_quiet.Quiet();
    } else {
      TPUG_ASSIGN_OR_RETURN(reader, io::DatasetReader::Open(f->data));
      TPUG_ASSIGN_OR_RETURN(scorer, eval::MakeScorer(f->scorer, reader.get()));
    }
    TPUG_ASSIGN_OR_RETURN(eval::EvaluationReport report, eval::Evaluate(*reader, *scorer, options));
    replay_quiet.Restore();
    const std::string text = f->json ? eval::FormatReportJson(report, f->per_graph)
                                     : eval::FormatReportTable(report, f->per_graph);
    std::fputs(text.c_str(), stdout);
    return Status::Ok();
  };
}

}  // namespace
TPUGRAPHS_REGISTER_COMMAND(60, "evaluate", SetupEvaluate);
}  // namespace tpugraphs::cli
