// `tpugraphs predict`: rank configurations and write a Kaggle submission CSV or a scores file;
// check a submission's IDs; merge several collections' submissions (docs/predict.md).
#include <spdlog/spdlog.h>

#include <memory>

#include "command.h"
#include "scorer_flags.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/distributed/communicator.h"
#include "tpugraphs/distributed/sharded_scoring.h"
#include "tpugraphs/eval/submission.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs::cli {
namespace {

struct PredictFlags {
  std::string data, output, format = "kaggle", check_ids, explain;
  bool explain_all = false;
  std::vector<std::string> merge;
  ScorerFlags scorer;
  GraphSelectionFlags selection;
};

// The submission files of --merge combined into --output.
Status RunMerge(const PredictFlags& f, const eval::Submission* expected) {
  if (!f.data.empty() || !f.selection.collections.empty() || !f.selection.split.empty() ||
      f.format != "kaggle") {
    return UsageError("usage: --merge takes only submission files, --output and --check-ids");
  }
  std::vector<eval::Submission> parts;
  for (const auto& path : f.merge) {
    TPUG_ASSIGN_OR_RETURN(eval::Submission s, eval::ReadSubmission(path));
    parts.push_back(std::move(s));
  }
  TPUG_ASSIGN_OR_RETURN(auto rows, eval::MergeSubmissions(parts));
  if (expected != nullptr) TPUG_RETURN_IF_ERROR(eval::CheckIds(rows, *expected));
  RemoveStaleTemporaries(f.output);  // left by a killed earlier run
  TPUG_RETURN_IF_ERROR(WriteFileAtomically(f.output, eval::FormatSubmission(rows)));
  spdlog::info("wrote {} rows from {} file(s) to {}", rows.size(), parts.size(), f.output);
  return Status::Ok();
}

Status CheckExplainFlags(const PredictFlags& f) {
  if (!f.explain.empty() && f.data.empty()) {
    return UsageError("usage: --explain needs --data (the layouts are in the dataset)");
  }
  if (!f.explain.empty() && f.explain == f.output) {
    return UsageError("usage: --explain and --output name the same file");
  }
  if (f.explain.empty() && f.explain_all) {
    return UsageError("usage: --explain-all needs --explain FILE");
  }
  return Status::Ok();
}

// What the writing pass reads and writes: the dataset (none with --predictions alone), the
// scorer and the two staged outputs.
struct PredictRun {
  std::unique_ptr<io::DatasetReader> reader;
  std::unique_ptr<eval::ConfigScorer> model;   // under MPI: the real scorer of this rank
  std::unique_ptr<eval::ConfigScorer> scorer;  // the writing pass's
  AtomicFileWriter out, explain;
};

Status OpenOutputs(const PredictFlags& f, PredictRun* run) {
  // Temporaries of a killed earlier run writing the same outputs go first.
  RemoveStaleTemporaries(f.output);
  if (!f.explain.empty()) RemoveStaleTemporaries(f.explain);
  TPUG_RETURN_IF_ERROR(run->out.Open(f.output));
  if (!f.explain.empty()) TPUG_RETURN_IF_ERROR(run->explain.Open(f.explain));
  return Status::Ok();
}

// Every rank scores its share of the graphs (docs/distributed.md); rank 0 then writes the
// outputs from the gathered scores. False on the other ranks, which are then done.
StatusOr<bool> ScoreAcrossRanks(const PredictFlags& f, const eval::ScorerSpec& spec,
                                const eval::PredictOptions& options, PredictRun* run) {
  distributed::Communicator& world = distributed::World();
  auto setup = [&]() -> StatusOr<distributed::ShardedSetup> {
    if (world.rank() == 0) TPUG_RETURN_IF_ERROR(OpenOutputs(f, run));
    TPUG_ASSIGN_OR_RETURN(run->reader, io::DatasetReader::Open(f.data));
    TPUG_ASSIGN_OR_RETURN(run->model, eval::MakeScorer(spec, run->reader.get()));
    return distributed::ShardedSetup{
        run->model.get(),
        distributed::PlanScoringOwners(*run->reader, options.filter, nullptr, world.size())};
  };
  auto pass = [&](eval::ConfigScorer& sharded) {
    return eval::Predict(run->reader.get(), nullptr, sharded, options, nullptr).status();
  };
  TPUG_ASSIGN_OR_RETURN(run->scorer, distributed::ScoreShardedFirstPass(world, setup, pass));
  return world.rank() == 0;
}

Status OpenLocally(const PredictFlags& f, const eval::ScorerSpec& spec, PredictRun* run) {
  if (!f.data.empty()) {
    TPUG_ASSIGN_OR_RETURN(run->reader, io::DatasetReader::Open(f.data));
  } else if (spec.predictions.empty()) {
    return UsageError("usage: --data is required unless --predictions is given");
  }
  TPUG_ASSIGN_OR_RETURN(run->scorer, eval::MakeScorer(spec, run->reader.get()));
  return OpenOutputs(f, run);
}

Status RunPredict(const PredictFlags& f) {
  const eval::ScorerSpec spec = ScorerSpecOf(f.scorer);
  eval::PredictOptions options;
  TPUG_ASSIGN_OR_RETURN(options.filter, GraphFilterOf(f.selection));
  std::unique_ptr<eval::Submission> expected;
  if (!f.check_ids.empty()) {
    if (f.format != "kaggle") {
      return UsageError("usage: --check-ids applies to --format kaggle only");
    }
    TPUG_ASSIGN_OR_RETURN(eval::Submission s, eval::ReadSubmission(f.check_ids));
    expected = std::make_unique<eval::Submission>(std::move(s));
  }
  distributed::Communicator& world = distributed::World();
  const bool distributed = world.size() > 1 && !spec.models.empty() && f.merge.empty();
  // Under MPI, only models are worth sharing out: anything else runs on rank 0 alone.
  if (world.size() > 1 && !distributed && world.rank() != 0) return Status::Ok();
  if (distributed && f.data.empty()) {
    return UsageError("usage: --data is required unless --predictions is given");
  }
  if (!f.merge.empty()) return RunMerge(f, expected.get());

  options.format =
      f.format == "scores" ? eval::PredictFormat::kScores : eval::PredictFormat::kKaggle;
  options.progress = ProgressEnabled();
  TPUG_RETURN_IF_ERROR(CheckExplainFlags(f));
  PredictRun run;
  ReplayLogQuiet replay_quiet;
  if (distributed) {
    TPUG_ASSIGN_OR_RETURN(const bool writer, ScoreAcrossRanks(f, spec, options, &run));
    if (!writer) return Status::Ok();
    options.progress = false;
    replay_quiet.Quiet();
  } else {
    TPUG_RETURN_IF_ERROR(OpenLocally(f, spec, &run));
  }
  if (!f.explain.empty()) {
    options.explain = &run.explain;
    options.explain_all = f.explain_all;
  }
  const eval::Predictions* predictions_only = nullptr;
  if (run.reader == nullptr) {
    predictions_only = &static_cast<eval::PredictionsScorer*>(run.scorer.get())->predictions();
  }
  TPUG_ASSIGN_OR_RETURN(
      std::vector<std::string> ids,
      eval::Predict(run.reader.get(), predictions_only, *run.scorer, options, &run.out));
  replay_quiet.Restore();
  if (expected) {
    // Checked before Commit: on a mismatch the temporary is dropped and nothing is written.
    std::vector<eval::SubmissionRow> rows;
    for (auto& id : ids) rows.push_back({std::move(id), "", 0});
    TPUG_RETURN_IF_ERROR(eval::CheckIds(rows, *expected));
  }
  if (options.explain != nullptr) TPUG_RETURN_IF_ERROR(run.explain.Commit());
  TPUG_RETURN_IF_ERROR(run.out.Commit());
  spdlog::info("wrote {} graph(s) scored by {} to {}", ids.size(), run.scorer->name(), f.output);
  if (options.explain != nullptr) spdlog::info("wrote their layouts to {}", f.explain);
  return Status::Ok();
}

RunFn SetupPredict(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "predict",
      "Rank every config of every graph with a predictions file, a built-in baseline or a model\n"
      "and write a Kaggle submission (ID,TopConfigs) or a scores file; or merge submission files.\n"
      "See docs/predict.md.\n"
      "Examples:\n"
      "  tpugraphs predict --data test.tpug --baseline random --output sub.csv\n"
      "  tpugraphs predict --merge tile.csv xla_random.csv ... --output submission.csv \\\n"
      "      --check-ids sample_submission.csv");
  auto f = std::make_shared<PredictFlags>();
  cmd->add_option("--data,--dataset", f->data,
                  "Dataset with the graphs to rank (optional with --predictions: then the "
                  "graphs and config counts come from the predictions file)");
  AddScorerFlags(cmd, &f->scorer);
  auto* merge = cmd->add_option("--merge", f->merge,
                                "Merge these submission CSVs (e.g. one per collection) into "
                                "--output instead of ranking; duplicate IDs are an error");
  f->scorer.predictions->excludes(merge);
  f->scorer.baseline->excludes(merge);
  f->scorer.model->excludes(merge);
  cmd->add_option("--output,-o", f->output, "File to write (written atomically)")->required();
  cmd->add_option("--format", f->format,
                  "kaggle: ID,TopConfigs CSV (tile: 10 best, zero-padded; layout: full "
                  "permutation); scores: a predictions v1 file")
      ->check(CLI::IsMember({"kaggle", "scores"}))
      ->capture_default_str();
  cmd->add_option("--check-ids", f->check_ids,
                  "Compare the output's IDs with this submission file (e.g. Kaggle's "
                  "sample_submission.csv); on a mismatch list missing/extra IDs, write nothing "
                  "and exit 1 (kaggle format only)");
  cmd->add_option("--explain", f->explain,
                  "Also write this file: for every layout graph, each configuration in ranked "
                  "order with the minor_to_major layouts it gives the configurable nodes "
                  "(instruction names when the dataset has them; needs --data; written "
                  "atomically)");
  cmd->add_flag("--explain-all", f->explain_all,
                "--explain: list every configurable node of every configuration (default: all "
                "nodes of configuration 0, then only the nodes where a configuration differs "
                "from it)");
  AddGraphSelectionFlags(cmd, &f->selection,
                         "Only graphs of this split (needs --data; default: all)");
  return [f]() { return RunPredict(*f); };
}

}  // namespace
TPUGRAPHS_REGISTER_COMMAND(70, "predict", SetupPredict);
}  // namespace tpugraphs::cli
