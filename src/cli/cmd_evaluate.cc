// `tpugraphs evaluate`: ranking metrics of a scorer (predictions file, baseline or model) on a
// dataset, per collection and per graph, plus the Kaggle score (docs/evaluate.md).
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>

#include "command.h"
#include "scorer_flags.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/distributed/communicator.h"
#include "tpugraphs/distributed/sharded_scoring.h"
#include "tpugraphs/eval/evaluate.h"
#include "tpugraphs/io/dataset.h"

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
    std::string data, eval_indices;
    ScorerFlags scorer;
    GraphSelectionFlags selection;
    bool json = false, per_graph = false;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("--data,--dataset", f->data, "Dataset file with the graphs and measured runtimes")
      ->required();
  AddScorerFlags(cmd, &f->scorer);
  AddGraphSelectionFlags(cmd, &f->selection,
                         "Only graphs of this split: train, valid, test (default: all)");
  cmd->add_option("--eval-indices", f->eval_indices,
                  "Directory of <source>_<search>.json files, or one file: restrict those layout "
                  "collections to the listed graphs and config indices (default: all configs)");
  cmd->add_flag("--per-graph", f->per_graph, "Also print one row per graph (default: off)");
  cmd->add_flag("--json", f->json, "Print one JSON object instead of tables (default: off)");
  return [f]() -> Status {
    const eval::ScorerSpec spec = ScorerSpecOf(f->scorer);
    eval::EvaluateOptions options;
    TPUG_ASSIGN_OR_RETURN(options.filter, GraphFilterOf(f->selection));
    std::unique_ptr<eval::EvalIndices> indices;
    if (!f->eval_indices.empty()) {
      TPUG_ASSIGN_OR_RETURN(eval::EvalIndices loaded, eval::EvalIndices::Load(f->eval_indices));
      indices = std::make_unique<eval::EvalIndices>(std::move(loaded));
    }
    options.eval_indices = indices.get();
    options.threads = Globals().threads;
    options.progress = ProgressEnabled();
    distributed::Communicator& world = distributed::World();
    const bool distributed = world.size() > 1 && !spec.models.empty();
    // Under MPI, only models are worth sharing out: other scorers run on rank 0 alone.
    if (world.size() > 1 && !distributed && world.rank() != 0) return Status::Ok();
    std::unique_ptr<io::DatasetReader> reader;
    std::unique_ptr<eval::ConfigScorer> scorer;
    // The real scorer: under a job, the replay of the gathered scores combines a graph's pieces
    // with it.
    std::unique_ptr<eval::ConfigScorer> model;
    ReplayLogQuiet replay_quiet;
    if (distributed) {
      // Every rank scores its share of the graphs (docs/distributed.md); rank 0 then runs the
      // evaluation again on the gathered scores and prints.
      auto setup = [&]() -> StatusOr<distributed::ShardedSetup> {
        TPUG_ASSIGN_OR_RETURN(reader, io::DatasetReader::Open(f->data));
        TPUG_ASSIGN_OR_RETURN(model, eval::MakeScorer(spec, reader.get()));
        return distributed::ShardedSetup{
            model.get(),
            distributed::PlanScoringOwners(*reader, options.filter, indices.get(), world.size())};
      };
      auto pass = [&](eval::ConfigScorer& sharded) {
        return eval::Evaluate(*reader, sharded, options).status();
      };
      TPUG_ASSIGN_OR_RETURN(scorer, distributed::ScoreShardedFirstPass(world, setup, pass));
      if (world.rank() != 0) return Status::Ok();
      options.progress = false;
      replay_quiet.Quiet();
    } else {
      TPUG_ASSIGN_OR_RETURN(reader, io::DatasetReader::Open(f->data));
      TPUG_ASSIGN_OR_RETURN(scorer, eval::MakeScorer(spec, reader.get()));
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
