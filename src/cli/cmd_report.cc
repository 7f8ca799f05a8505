// `tpugraphs report`: learning curves and ranking plots of one or more models in one
// self-contained HTML file (docs/report.md).
#include <spdlog/spdlog.h>

#include <memory>

#include "command.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/report/report.h"

namespace tpugraphs::cli {
namespace {

RunFn SetupReport(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "report",
      "Write one self-contained HTML page (inline SVG, no scripts, opens offline) with the\n"
      "learning curves of the model files and, with --data, per-graph ranking plots next to the\n"
      "random baseline and a dataset panel; with --tune-trace, the closed loops of `tpugraphs\n"
      "tune`. See docs/report.md.\n"
      "Examples:\n"
      "  tpugraphs report --model a.tpm --model b.tpm -o curves.html\n"
      "  tpugraphs report --model m.tpm --data ds.tpug --split test -o report.html\n"
      "  tpugraphs report --model m.tpm --predictions p.tsv --data ds.tpug -o report.html\n"
      "  tpugraphs report --tune-trace trace.tsv -o tune.html");
  struct Flags {
    report::ReportOptions options;
    std::string output;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("--model", f->options.models,
                  "Model file written by `tpugraphs train` (repeatable: the curves overlay); at "
                  "least one --model or --tune-trace");
  cmd->add_option("--tune-trace", f->options.tune_traces,
                  "Trace printed by `tpugraphs tune --measure-cmd` (TSV; repeatable): plots the "
                  "best so far against the configurations measured, per graph");
  cmd->add_option("--data,--dataset", f->options.data,
                  "Dataset to evaluate on: each model on its own collection (default: learning "
                  "curves only)");
  cmd->add_option("--split", f->options.split,
                  "Only graphs of this split: train, valid, test (default: all)");
  cmd->add_option("--predictions", f->options.predictions,
                  "Evaluate this predictions file (docs/predictions-format.md) instead of "
                  "scoring with the models; needs --data");
  cmd->add_option("--seed", f->options.baseline_seed, "Seed of the random baseline")
      ->capture_default_str();
  cmd->add_option("--title", f->options.title, "Page title")->capture_default_str();
  cmd->add_option("--output,-o", f->output, "HTML file to write (written atomically)")->required();
  return [f]() -> Status {
    f->options.threads = Globals().threads;
    f->options.progress = ProgressEnabled();
    TPUG_RETURN_IF_ERROR(report::WriteReport(f->options, f->output));
    spdlog::info("wrote {}", f->output);
    std::printf("%s\n", f->output.c_str());
    return Status::Ok();
  };
}

}  // namespace
TPUGRAPHS_REGISTER_COMMAND(80, "report", SetupReport);
}  // namespace tpugraphs::cli
