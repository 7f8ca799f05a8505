// `tpugraphs stats`: figures about a dataset (per collection, optionally per graph).
#include <cstdio>

#include "command.h"
#include "tpugraphs/eval/measurement_noise.h"
#include "tpugraphs/io/dataset_stats.h"

namespace tpugraphs::cli {
namespace {

RunFn SetupStats(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "stats",
      "Print per-collection figures of a dataset: graphs, nodes, edges, configurable nodes,\n"
      "configs, distinct configs, runtime min/max/spread, opcode histogram; where configs were\n"
      "measured more than once, the measurement noise (relative deviation of one runtime, for\n"
      "train --hinge-pair-weighting noise --hinge-noise), the Kendall of a remeasurement and the\n"
      "Kendall a perfect model could reach against one measurement (docs/stats.md).\n"
      "Example: tpugraphs stats tile_train.tpug --per-graph --json");
  struct Flags {
    std::string dataset;
    bool json = false, per_graph = false;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("dataset", f->dataset, "Dataset file to read")->required();
  cmd->add_flag("--json", f->json, "Print one JSON object (default: a table)");
  cmd->add_flag("--per-graph", f->per_graph, "Also list every graph (default: off)");
  return [f]() -> Status {
    TPUG_ASSIGN_OR_RETURN(auto reader, io::DatasetReader::Open(f->dataset));
    auto noise = [](std::span<const int64_t> runtimes, std::span<const uint64_t> keys,
                    io::GraphStats* g) {
      const eval::MeasurementNoise m = eval::EstimateMeasurementNoise(runtimes, keys);
      g->noise = m.noise;
      g->retest_kendall = m.retest_kendall;
      g->noise_ceiling_upper = m.ceiling_upper;
      g->noise_ceiling = m.ceiling;
    };
    TPUG_ASSIGN_OR_RETURN(auto stats, io::ComputeDatasetStats(*reader, Globals().threads, noise));
    std::string text = f->json ? io::FormatStatsJson(stats, f->per_graph)
                               : io::FormatStatsTable(stats, f->per_graph);
    std::fputs(text.c_str(), stdout);
    return Status::Ok();
  };
}

}  // namespace
TPUGRAPHS_REGISTER_COMMAND(30, "stats", SetupStats);
}  // namespace tpugraphs::cli
