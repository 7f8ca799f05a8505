// `tpugraphs tune`: flags -> TuneConfig -> tune::Tune (docs/tune.md). The flags are generated
// from TuneConfig's fields (proto_flags.h); only their help texts are written here.
#include <cstdio>
#include <memory>
#include <string>

#include "command.h"
#include "proto_flags.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/tune/tune.h"
#include "tpugraphs/tune_config.pb.h"

namespace tpugraphs::cli {
namespace {

const ProtoFlagHelp kTuneFlags[] = {
    {"data",
     "Graphs to tune: a dataset file (.tpug), a release .npz, a raw dump (HLO text, "
     "HloModuleProto, ModuleTuningData, TuningData) or a directory of them read as ingest reads "
     "one (--graph picks the module); default: --from",
     ",--dataset"},
    {"hlo_stage",
     "In a --data directory, read only the XLA dump files (module_<digits>.*) of this stage, as "
     "ingest --hlo-stage does"},
    {"model", "Model file written by `tpugraphs train`"},
    {"oracle",
     "synthetic: score with synth's noise-free cost model of --from (the best the search can "
     "find)"},
    {"from",
     "--oracle synthetic: the program synth wrote (ModuleTuningData or a one-kernel TuningData) "
     "that the graph was ingested from"},
    {"collection",
     "Only graphs of this collection; for a raw dump or .npz, the collection to give its graph"},
    {"graph", "Only the graph of this name"},
    {"budget", "Configurations to score per graph, seeds included"},
    {"top", "Configurations to write per graph (best first)"},
    {"measure",
     "Instead of --top: a set of K configurations to measure: the best, the default and diverse "
     "near-best ones (0 = off)"},
    {"seed", "Seed of the search"},
    {"strategy", "evolution (seeded local search) or random (the default plus uniform draws)"},
    {"space",
     "dataset: each decision takes only the values the graph's own configurations give it (what "
     "the model was trained on); full: every valid value; auto: dataset when the graph has "
     "measured configurations, else full (HLO text and other graph-only dumps: always full)"},
    {"uncertainty",
     "Rank candidates by score + L x the ensemble members' disagreement (the standard deviation "
     "of their standardised scores): > 0 prefers configurations the members agree on (0: the "
     "ensemble's mean alone; no effect with one model or the oracle)"},
    {"max_distance",
     "Trust region: score only candidates that differ in at most D decisions from an anchor "
     "(--trust-anchors; 0 with configs: choose among the default and the graph's own "
     "configurations alone; -1: no limit)"},
    {"trust_anchors",
     "--max-distance counts from: configs (the default and the graph's own configurations) or "
     "default (the default alone)"},
    {"batch", "Candidates scored per batch"},
    {"elite", "Parents are drawn from this many best"},
    {"dataset_seeds",
     "At most this many of the graph's own configurations seed the search (-1: budget / 4)"},
    {"memory_per_thread", "--model: MiB of activations per scoring thread"},
    {"output",
     "NAME.npz for one graph, else a directory receiving one file per graph at "
     "npz/<task>/<source>[/<search>]/<split>/<name>.npz (required)",
     ",-o"},
    {"emit_hlo",
     "For an HLO text --data: write <DIR>/<graph>.hlo, the module with the best configuration's "
     "layouts"},
    {"measure_cmd",
     "Close the loop: measure each round's --measure K configurations with this command (run "
     "by /bin/sh; {} is the batch's .npz, shell-quoted; it prints 'index<TAB>runtime' lines as "
     "`synth --score` does). With --model, the model is fine-tuned on the measurements before "
     "each round's search; without, an evolutionary search on measurements alone. The output's "
     "configuration 0 is the best measured"},
    {"rounds", "--measure-cmd: rounds of measuring, learning and searching"},
    {"measurements",
     "--measure-cmd: keep every measurement in this file as it arrives; a rerun (killed, or "
     "with more --rounds) measures nothing twice"},
    {"explore",
     "--measure-cmd: share of each round's K chosen for diversity among the near-best (the rest: "
     "the model's best)"},
    {"finetune_steps", "--measure-cmd: optimizer steps of each round's fine-tuning"},
    {"finetune_learning_rate",
     "--measure-cmd: learning rate of the fine-tuning (0: the model's own training rate)"},
    {"trust_distance",
     "--measure-cmd: after round 1, search within D changed decisions of the --trust-best best "
     "measured configurations (-1: anywhere)"},
    {"trust_best", "--measure-cmd: how many of the best measured centre --trust-distance"},
    {"apply",
     "Instead of searching: check and write the configurations of this .npz (as tune writes "
     "them, e.g. a --measure-cmd batch); with --emit-hlo, <DIR>/<graph>.<index>.hlo for each"},
};
// TuneConfig.threads has no flag of its own: it is the global -j/--threads.

struct TuneFlags {
  std::unique_ptr<ProtoFlags> fields;
  bool json = false;
};

RunFn SetupTune(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tune",
      "Search each graph's configuration space (layouts: a minor_to_major permutation per\n"
      "tensor of each configurable node; tile: the tile sizes the kernel's shapes allow) with a\n"
      "trained model as the scorer, starting from the default and the dataset's configurations,\n"
      "and write the best configurations found in the release encoding (docs/tune.md).\n"
      "Example: tpugraphs tune --data prog.tpug --model layout.tpm --budget 2000 --top 5 \\\n"
      "           -o tuned.npz --json\n"
      "Ground truth for synthetic programs: --oracle synthetic --from PROGRAM.pb scores with the\n"
      "noise-free cost model instead of a model.\n"
      "Closed loop: --measure-cmd CMD --rounds R --measure K measures K configurations a round,\n"
      "fine-tunes the model on them and searches again, e.g.\n"
      "  tpugraphs tune --data prog.pb --model layout.tpm --measure 10 --rounds 3 \\\n"
      "    --measure-cmd 'tpugraphs -q synth --score {} --from prog.pb' \\\n"
      "    --measurements prog.measured.tsv -o best.npz");
  auto f = std::make_shared<TuneFlags>();
  f->fields = std::make_unique<ProtoFlags>(cmd, TuneConfig::descriptor(), kTuneFlags);
  cmd->add_flag("--json", f->json, "Print one JSON object per graph (one per line)");
  return [f]() -> Status {
    TuneConfig config;
    TPUG_RETURN_IF_ERROR(f->fields->Apply(&config));
    config.set_threads(Globals().threads);
    TPUG_ASSIGN_OR_RETURN(tune::TuneResult result, tune::Tune(config, ProgressEnabled()));
    if (f->json) {
      for (const auto& g : result.graphs) std::printf("%s\n", g.json.c_str());
    } else {
      std::fputs(tune::FormatTuneTable(result).c_str(), stdout);
    }
    return Status::Ok();
  };
}

}  // namespace
TPUGRAPHS_REGISTER_COMMAND(65, "tune", SetupTune);
}  // namespace tpugraphs::cli
