// `tpugraphs predict`: rank configurations and write a Kaggle submission CSV or a scores file;
// check a submission's IDs; merge several collections' submissions (docs/predict.md).
#include <spdlog/spdlog.h>

#include <memory>

#include "command.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/dist/communicator.h"
#include "tpugraphs/dist/sharded_scoring.h"
#include "tpugraphs/eval/submission.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/train/model_scorer.h"

namespace tpugraphs::cli {
namespace {

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
  struct Flags {
    std::string data, output, format = "kaggle", check_ids, split, explain;
    bool explain_all = false;
    std::vector<std::string> collections, merge;
    eval::ScorerSpec scorer;
    int64_t memory_mb = train::kDefaultScoringMemoryMb;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("--data,--dataset", f->data,
                  "Dataset with the graphs to rank (optional with --predictions: then the "
                  "graphs and config counts come from the predictions file)");
  auto* preds = cmd->add_option("--predictions", f->scorer.predictions,
                                "Predictions file (docs/predictions-format.md; '-' = stdin)");
  auto* base = cmd->add_option("--baseline", f->scorer.baseline,
                               "Built-in scorer: random (seeded uniform scores) or index (config "
                               "index, the release order)");
  auto* model =
      cmd->add_option("--model", f->scorer.models,
                      "Model file written by `tpugraphs train`; several (repeat the flag or list "
                      "them) make an ensemble combined as --ensemble says");
  auto* merge = cmd->add_option("--merge", f->merge,
                                "Merge these submission CSVs (e.g. one per collection) into "
                                "--output instead of ranking; duplicate IDs are an error");
  preds->excludes(base)->excludes(model)->excludes(merge);
  base->excludes(model)->excludes(merge);
  model->excludes(merge);
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
  cmd->add_option("--collection", f->collections,
                  "Only this collection (repeatable; default: all)");
  cmd->add_option("--split", f->split, "Only graphs of this split (needs --data; default: all)");
  return [f]() -> Status {
    f->scorer.model_options.threads = Globals().threads;
    f->scorer.model_options.memory_mb = f->memory_mb;
    if (!f->split.empty()) TPUG_RETURN_IF_ERROR(ValidateSplit(f->split));
    for (const auto& c : f->collections) TPUG_RETURN_IF_ERROR(ValidateCollection(c));
    std::unique_ptr<eval::Submission> expected;
    if (!f->check_ids.empty()) {
      if (f->format != "kaggle") {
        return UsageError("usage: --check-ids applies to --format kaggle only");
      }
      TPUG_ASSIGN_OR_RETURN(eval::Submission s, eval::ReadSubmission(f->check_ids));
      expected = std::make_unique<eval::Submission>(std::move(s));
    }

    dist::Communicator& world = dist::World();
    const bool distributed = world.size() > 1 && !f->scorer.models.empty() && f->merge.empty();
    // Under MPI, only models are worth sharing out: anything else runs on rank 0 alone.
    if (world.size() > 1 && !distributed && world.rank() != 0) return Status::Ok();
    if (distributed && f->data.empty()) {
      return UsageError("usage: --data is required unless --predictions is given");
    }

    if (!f->merge.empty()) {
      if (!f->data.empty() || !f->collections.empty() || !f->split.empty() ||
          f->format != "kaggle") {
        return UsageError("usage: --merge takes only submission files, --output and --check-ids");
      }
      std::vector<eval::Submission> parts;
      for (const auto& path : f->merge) {
        TPUG_ASSIGN_OR_RETURN(eval::Submission s, eval::ReadSubmission(path));
        parts.push_back(std::move(s));
      }
      TPUG_ASSIGN_OR_RETURN(auto rows, eval::MergeSubmissions(parts));
      if (expected) TPUG_RETURN_IF_ERROR(eval::CheckIds(rows, *expected));
      TPUG_RETURN_IF_ERROR(WriteFileAtomically(f->output, eval::FormatSubmission(rows)));
      spdlog::info("wrote {} rows from {} file(s) to {}", rows.size(), parts.size(), f->output);
      return Status::Ok();
    }

    eval::PredictOptions options;
    options.collections = f->collections;
    options.split = f->split;
    options.format =
        f->format == "scores" ? eval::PredictFormat::kScores : eval::PredictFormat::kKaggle;
    options.progress = ProgressEnabled();
    if (!f->explain.empty() && f->data.empty()) {
      return UsageError("usage: --explain needs --data (the layouts are in the dataset)");
    }
    if (!f->explain.empty() && f->explain == f->output) {
      return UsageError("usage: --explain and --output name the same file");
    }
    if (f->explain.empty() && f->explain_all) {
      return UsageError("usage: --explain-all needs --explain FILE");
    }
    std::unique_ptr<io::DatasetReader> reader;
    std::unique_ptr<eval::ConfigScorer> scorer;
    AtomicFileWriter out;
    AtomicFileWriter explain;
    ReplayLogQuiet replay_quiet;
    if (distributed) {
      // Every rank scores its share of the graphs (docs/distributed.md); rank 0 then writes the
      // outputs from the gathered scores.
      std::unique_ptr<eval::ConfigScorer> model;
      std::unique_ptr<dist::ShardedScorer> sharded;
      Status local = [&]() -> Status {
        if (world.rank() == 0) {
          TPUG_RETURN_IF_ERROR(out.Open(f->output));
          if (!f->explain.empty()) TPUG_RETURN_IF_ERROR(explain.Open(f->explain));
        }
        TPUG_ASSIGN_OR_RETURN(reader, io::DatasetReader::Open(f->data));
        TPUG_ASSIGN_OR_RETURN(model, eval::MakeScorer(f->scorer, reader.get()));
        sharded = std::make_unique<dist::ShardedScorer>(
            model.get(),
            dist::PlanScoringOwners(*reader, f->collections, f->split, nullptr, world.size()),
            world.rank());
        return eval::Predict(reader.get(), nullptr, *sharded, options, nullptr).status();
      }();
      TPUG_RETURN_IF_ERROR(world.Agree(local));
      TPUG_ASSIGN_OR_RETURN(scorer, sharded->GatherScores(world, 0));
      if (world.rank() != 0) return Status::Ok();
      options.progress = false;
      replay_quiet.Quiet();
    } else {
      if (!f->data.empty()) {
        TPUG_ASSIGN_OR_RETURN(reader, io::DatasetReader::Open(f->data));
      } else if (f->scorer.predictions.empty()) {
        return UsageError("usage: --data is required unless --predictions is given");
      }
      TPUG_ASSIGN_OR_RETURN(scorer, eval::MakeScorer(f->scorer, reader.get()));
      TPUG_RETURN_IF_ERROR(out.Open(f->output));
      if (!f->explain.empty()) TPUG_RETURN_IF_ERROR(explain.Open(f->explain));
    }
    if (!f->explain.empty()) {
      options.explain = &explain;
      options.explain_all = f->explain_all;
    }
    const eval::Predictions* predictions_only = nullptr;
    if (reader == nullptr) {
      predictions_only = &static_cast<eval::PredictionsScorer*>(scorer.get())->predictions();
    }
    TPUG_ASSIGN_OR_RETURN(std::vector<std::string> ids,
                          eval::Predict(reader.get(), predictions_only, *scorer, options, &out));
    replay_quiet.Restore();
    if (expected) {
      // Checked before Commit: on a mismatch the temporary is dropped and nothing is written.
      std::vector<eval::SubmissionRow> rows;
      for (auto& id : ids) rows.push_back({std::move(id), "", 0});
      TPUG_RETURN_IF_ERROR(eval::CheckIds(rows, *expected));
    }
    if (options.explain != nullptr) TPUG_RETURN_IF_ERROR(explain.Commit());
    TPUG_RETURN_IF_ERROR(out.Commit());
    spdlog::info("wrote {} graph(s) scored by {} to {}", ids.size(), scorer->name(), f->output);
    if (options.explain != nullptr) spdlog::info("wrote their layouts to {}", f->explain);
    return Status::Ok();
  };
}

}  // namespace
TPUGRAPHS_REGISTER_COMMAND(70, "predict", SetupPredict);
}  // namespace tpugraphs::cli
