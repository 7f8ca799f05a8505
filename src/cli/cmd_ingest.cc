// `tpugraphs ingest`: release .npz files, raw XLA dumps or whole trees -> one dataset file.
#include <cstdio>

#include "command.h"
#include "tpugraphs/ingest/ingest.h"

namespace tpugraphs::cli {
namespace {

RunFn SetupIngest(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "ingest",
      "Read release .npz files, raw XLA autotuning dumps, XLA HLO text or proto dumps, or\n"
      "directories of them (recursively), and write one dataset file. The kind of each file is\n"
      "told from its content; an HLO module (text or proto) becomes a graph named after the\n"
      "module whose configurations are the layouts it states (config 0) plus\n"
      "--layout-candidates alternatives, with no runtimes, for predict to rank.\n"
      "For .npz files in the release layout (npz/tile/xla/<split>/*.npz,\n"
      "npz/layout/<source>/<search>/<split>/*.npz) collection and split come from the path.\n"
      "The output is written atomically: on any error nothing is written (exit code 1).\n"
      "Example: tpugraphs ingest npz/tile/xla/train -o tile_train.tpug");
  struct Flags {
    IngestConfig config;
    std::vector<std::string> inputs;
    std::string output, collection, split, hlo_stage;
    bool keep_going, mark_absent_dimensions, json = false;
    int compression_level;
    int64_t stream_threshold, layout_candidates;
    uint64_t seed;
  };
  auto f = std::make_shared<Flags>();
  const IngestConfig& d = IngestConfig::default_instance();
  f->output = d.output();
  f->collection = d.collection();
  f->split = d.split();
  f->hlo_stage = d.hlo_stage();
  f->keep_going = d.keep_going();
  f->mark_absent_dimensions = d.mark_absent_dimensions();
  f->compression_level = d.compression_level();
  f->stream_threshold = d.stream_threshold_values();
  f->layout_candidates = d.layout_candidates();
  f->seed = d.seed();
  cmd->add_option("inputs", f->inputs, "Input files and directories (searched recursively)")
      ->required();
  cmd->add_option("-o,--output", f->output, "Dataset file to write (required)")->required();
  cmd->add_option("--collection", f->collection,
                  "Collection for every graph, e.g. tile:xla or layout:nlp:default (default: "
                  "from the release path; tile files outside it: tile:xla)");
  cmd->add_option("--split", f->split,
                  "Split for every graph: train, valid or test (default: from the path, else "
                  "none)");
  cmd->add_flag("--keep-going", f->keep_going,
                "Skip files that fail, with a warning and a count, instead of failing "
                "(default: off)");
  cmd->add_option("--compression-level", f->compression_level,
                  "zlib level of the dataset records, 0-9")
      ->capture_default_str();
  cmd->add_option("--stream-threshold", f->stream_threshold,
                  "Layout .npz files with more config values than this are streamed in chunks "
                  "(bounded memory) instead of loaded whole")
      ->capture_default_str();
  cmd->add_option("--hlo-stage", f->hlo_stage,
                  "In XLA dump directories (--xla_dump_to), read only the module_<id>.* files of "
                  "this stage (module_0001.jit_f.<stage>.txt); files named explicitly are always "
                  "read")
      ->capture_default_str();
  cmd->add_option("--layout-candidates", f->layout_candidates,
                  "HLO modules without runs (text, HloModuleProto, HloProto) in a layout "
                  "collection: add this many distinct alternative layouts after config 0 (the "
                  "layouts the dump states), runtimes absent, for predict to rank")
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "Seed of the --layout-candidates draws")
      ->capture_default_str();
  cmd->add_flag("--mark-absent-dimensions", f->mark_absent_dimensions,
                "Write -1 (no such dimension) instead of the official 0 in the node features' "
                "slots beyond each per-dimension list's length: shape dims, minor_to_major, "
                "window fields, convolution spatial dims, slices. Read from the instructions in "
                "raw dumps and HLO text, derived from the official features in .npz files. A "
                "model trained on such a dataset scores only graphs ingested the same way "
                "(default: off, the official features; docs/ingest.md, \"Absent dimensions\")");
  cmd->add_flag("--json", f->json, "Print the summary as JSON (default: a table)");
  return [f]() -> Status {
    IngestConfig c;
    for (const auto& in : f->inputs) c.add_inputs(in);
    c.set_output(f->output);
    c.set_collection(f->collection);
    c.set_split(f->split);
    c.set_hlo_stage(f->hlo_stage);
    c.set_keep_going(f->keep_going);
    c.set_mark_absent_dimensions(f->mark_absent_dimensions);
    c.set_compression_level(f->compression_level);
    c.set_stream_threshold_values(f->stream_threshold);
    c.set_layout_candidates(f->layout_candidates);
    c.set_seed(f->seed);
    c.set_threads(Globals().threads);
    TPUG_ASSIGN_OR_RETURN(auto summary, ingest::RunIngest(c));
    std::fputs(ingest::FormatIngestSummary(summary, f->json).c_str(), stdout);
    return Status::Ok();
  };
}

}  // namespace
TPUGRAPHS_REGISTER_COMMAND(10, "ingest", SetupIngest);
}  // namespace tpugraphs::cli
