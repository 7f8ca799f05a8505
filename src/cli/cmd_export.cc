// `tpugraphs export`: a dataset -> release-format .npz files in the release tree layout.
#include <cstdio>

#include "command.h"
#include "tpugraphs/ingest/export.h"

namespace tpugraphs::cli {
namespace {

RunFn SetupExport(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "export",
      "Write the graphs of a dataset as release-format .npz files (dtypes and shapes as the\n"
      "official release) under OUTPUT_DIR/npz/tile/<source>/<split>/<name>.npz and\n"
      "OUTPUT_DIR/npz/layout/<source>/<search>/<split>/<name>.npz. Each file is written\n"
      "Nothing changes in OUTPUT_DIR unless every graph was exported (files are staged in a\n"
      "sibling directory OUTPUT_DIR.tmp-<pid>-<n> and moved into place at the end).\n"
      "Example: tpugraphs export tile_train.tpug --output-dir out");
  auto opt = std::make_shared<ingest::ExportOptions>();
  cmd->add_option("dataset", opt->dataset, "Dataset file to read")->required();
  cmd->add_option("-o,--output-dir", opt->output_dir, "Root directory of the release tree")
      ->required();
  cmd->add_option("--collection", opt->filter.collections,
                  "Only these collections (repeatable; default: all)");
  cmd->add_option("--split", opt->filter.splits, "Only these splits (repeatable; default: all)");
  cmd->add_option("--graph", opt->filter.names,
                  "Only these graph names (repeatable; default: all)");
  cmd->add_flag("--compress,!--no-compress", opt->compress,
                "Deflate the .npy members like np.savez_compressed (default: on)");
  cmd->add_flag("--keep-going", opt->keep_going,
                "Export the graphs that can be read and list the others (exit status 1 when any "
                "was skipped)");
  return [opt]() -> Status {
    ingest::ExportOptions o = *opt;
    o.threads = Globals().threads;
    TPUG_ASSIGN_OR_RETURN(auto summary, ingest::ExportDataset(o));
    std::printf("exported %lld graphs to %s\n", static_cast<long long>(summary.graphs),
                o.output_dir.c_str());
    for (const auto& s : summary.skipped) {
      std::printf("skipped\t%s\t%s\t%s\t%s\n", s.collection.c_str(), s.split.c_str(),
                  s.name.c_str(), s.reason.c_str());
    }
    if (!summary.skipped.empty()) {
      return DataLossError(o.dataset + ": " + std::to_string(summary.skipped.size()) +
                           " graphs could not be exported (listed on stdout)");
    }
    return Status::Ok();
  };
}

}  // namespace
TPUGRAPHS_REGISTER_COMMAND(20, "export", SetupExport);
}  // namespace tpugraphs::cli
