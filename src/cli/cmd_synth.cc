// `tpugraphs synth`: synthetic raw autotuning dumps with simulated runtimes.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "command.h"
#include "proto_flags.h"
#include "tpugraphs/common/json_util.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/synth/release_shaped.h"
#include "tpugraphs/synth/synth.h"

namespace tpugraphs::cli {
namespace {

// `synth --score`: prints the noise-free runtime of every configuration of an .npz.
Status PrintConfigScores(const std::string& npz, const std::string& from, bool json) {
  TPUG_ASSIGN_OR_RETURN(synth::ConfigScores scores, synth::ScoreConfigFile(npz, from));
  const std::vector<int64_t>& ns = scores.noise_free_ns;
  if (json) {
    std::string s = "{\"program\":" + JsonQuote(from) + ",\"configs\":" + JsonQuote(npz) +
                    ",\"task\":\"" + std::string(TaskKindName(scores.task)) +
                    "\",\"noise_free_ns\":[";
    for (size_t i = 0; i < ns.size(); ++i) {
      if (i > 0) s.push_back(',');
      s.append(std::to_string(ns[i]));
    }
    s += "]}\n";
    std::fputs(s.c_str(), stdout);
  } else {
    std::printf("config\tnoise_free_ns\n");
    for (size_t i = 0; i < ns.size(); ++i) {
      std::printf("%zu\t%" PRId64 "\n", i, ns[i]);
    }
  }
  return Status::Ok();
}

// `synth --release-shaped`: writes the tree and prints the graphs per collection and split.
Status WriteReleaseShaped(const SynthConfig& config, ThreadPool* pool) {
  TPUG_ASSIGN_OR_RETURN(auto counts, synth::WriteReleaseShaped(config, pool));
  std::printf("collection\tsplit\tgraphs\n");
  for (const auto& c : counts) {
    std::printf("%s\t%s\t%" PRId64 "\n", c.collection.c_str(), c.split.c_str(), c.graphs);
  }
  return Status::Ok();
}

// One line per SynthConfig field; the defaults shown are synth::DefaultSynthConfig()'s.
const ProtoFlagHelp kSynthFlags[] = {
    {"task", "tile or layout"},
    {"graphs", "Number of programs (layout) or kernels (tile) to generate; ignored with --from"},
    {"min_nodes", "Smallest layout program (instructions); sizes are drawn log-uniformly"},
    {"max_nodes", "Largest layout program (instructions)"},
    {"configs",
     "Configurations per graph, including the default (tile: at most the number of distinct tile "
     "sizes)"},
    {"seed", "Master seed"},
    {"splits",
     "Train,valid,test fractions of the graphs, e.g. 0.7,0.15,0.15 (default: all in train)"},
    {"output",
     "Output directory (receives pb/...), or a file NAME.pb for a single graph (tile: all kernels "
     "in one TuningData); not with --score",
     ",-o"},
    {"from",
     "Existing ModuleTuningData, TuningData or HloModuleProto file: keep its graph(s), make new "
     "configurations and runtimes (a TuningData makes tile data)"},
    {"layout_search",
     "Layout search style: random (most nodes change) or default (most nodes keep the compiler "
     "default)",
     "", "--search"},
    {"noise_sigma",
     "Sigma of the multiplicative lognormal runtime noise (< 0: 0.005 for layout, 0.02 for tile)",
     "", "--noise"},
    {"error_rate", "Extra failed runs (error=true, empty profile) per configuration"},
    {"source", "Collection source word in the output tree (pb/<task>/<source>/...)"},
    {"release_shaped",
     "Instead of generating --graphs graphs: write a tree with the shape of the TpuGraphs release "
     "at scale S of its graph counts to --output (npz/... and shape.tsv; docs/synth.md, "
     "\"Release-shaped trees\"); takes --seed, --cap-configs and --cap-nodes, ignores the other "
     "generation flags"},
    {"release_max_configs", "--release-shaped: cap on the configurations of one graph (0: none)",
     "", "--cap-configs"},
    {"release_max_nodes", "--release-shaped: cap on the nodes of one layout program (0: none)", "",
     "--cap-nodes"},
    {"no_cross_node_terms",
     "Layout: price each configurable node as if the nodes feeding it kept their own layouts, so "
     "that its cost depends on its own configuration alone (an ablation; true/false)"},
};

struct SynthFlags {
  std::unique_ptr<ProtoFlags> fields;
  int64_t nodes = -1;  // --nodes: both size bounds
  std::string noise_free_costs, score;
  bool json = false;
};

// The table synth prints: one row per graph written.
void PrintSummaries(const std::vector<synth::SynthGraphSummary>& summaries) {
  std::printf(
      "split\tname\tnodes\tconfigurable\tconfigs\terror_runs\tdefault_ns\tbest_ns\tworst_"
      "ns\tspread\tnoise_free_kendall\tpath\n");
  for (const auto& s : summaries) {
    const double spread =
        s.best_ns > 0 ? static_cast<double>(s.worst_ns) / static_cast<double>(s.best_ns) - 1 : 0;
    std::printf("%s\t%s\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64
                "\t%" PRId64 "\t%.4f\t%.4f\t%s\n",
                s.split.c_str(), s.name.c_str(), s.nodes, s.configurable, s.configs, s.error_runs,
                s.default_ns, s.best_ns, s.worst_ns, spread, s.noise_free_kendall, s.path.c_str());
  }
}

Status RunSynthCommand(const SynthFlags& flags) {
  SynthConfig config = synth::DefaultSynthConfig();
  TPUG_RETURN_IF_ERROR(flags.fields->Apply(&config));
  if (!flags.score.empty()) {
    if (config.from().empty()) {
      return UsageError("usage: --score needs --from PROGRAM.pb (the program synth wrote)");
    }
    return PrintConfigScores(flags.score, config.from(), flags.json);
  }
  if (config.output().empty()) return UsageError("usage: --output is required");
  if (flags.nodes >= 0) {
    config.set_min_nodes(flags.nodes);
    config.set_max_nodes(flags.nodes);
  }
  Status valid = synth::ValidateSynthConfig(&config);
  if (!valid.ok()) return UsageError("usage: " + valid.message());
  ThreadPool pool(Globals().threads);
  if (config.release_shaped() > 0) return WriteReleaseShaped(config, &pool);
  TPUG_ASSIGN_OR_RETURN(auto summaries, synth::RunSynth(config, &pool));
  if (!flags.noise_free_costs.empty()) {
    TPUG_RETURN_IF_ERROR(synth::WriteNoiseFreeCosts(config, summaries, flags.noise_free_costs));
  }
  PrintSummaries(summaries);
  return Status::Ok();
}

RunFn SetupSynth(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "synth",
      "Generate synthetic XLA programs (or take a real module with --from), layout or tile-size\n"
      "configurations and runtimes from a documented analytic TPU cost model\n"
      "(docs/synthetic-cost-model.md). Writes raw dumps that `tpugraphs ingest` reads:\n"
      "  OUT/pb/layout/<source>/<search>/<split>/<name>.pb  (tpu_graphs.ModuleTuningData)\n"
      "  OUT/pb/tile/<source>/<split>/<name>.pb             (tpu_graphs.TuningData)\n"
      "or a single file when --output ends in .pb. A table of the written graphs goes to stdout.\n"
      "The same --seed gives byte-identical files whatever --threads is. The flags are\n"
      "SynthConfig's fields (proto/tpugraphs/synth_config.proto).");
  auto flags = std::make_shared<SynthFlags>();
  const SynthConfig defaults = synth::DefaultSynthConfig();
  flags->fields =
      std::make_unique<ProtoFlags>(sub, SynthConfig::descriptor(), kSynthFlags, &defaults);
  auto* nodes = sub->add_option(
      "--nodes", flags->nodes,
      "Size of every layout program in instructions (sets --min-nodes and --max-nodes)");
  nodes->excludes(flags->fields->option("min_nodes"))->excludes(flags->fields->option("max_nodes"));
  sub->add_option("--noise-free-costs", flags->noise_free_costs,
                  "Also write every valid run's measured and noise-free runtime to this TSV "
                  "(docs/synth.md, \"Noise-free costs\")");
  sub->add_option("--score", flags->score,
                  "Instead of generating: print the noise-free runtime of each configuration of "
                  "this .npz (node_config_feat [K, nc, 18] or config_feat [K, 24], as `tune` "
                  "writes) for the program --from (TSV config, noise_free_ns)");
  sub->add_flag("--json", flags->json, "--score: print one JSON object instead of the TSV");
  return [flags]() { return RunSynthCommand(*flags); };
}

TPUGRAPHS_REGISTER_COMMAND(40, "synth", SetupSynth);

}  // namespace
}  // namespace tpugraphs::cli
