// `tpugraphs synth`: synthetic raw autotuning dumps with simulated runtimes.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "command.h"
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

RunFn SetupSynth(CLI::App& app) {
  // Scalar flags bind to plain variables (proto3 scalars have no mutable accessor) initialised
  // from the proto defaults; strings bind to the proto directly.
  struct Flags {
    SynthConfig config = synth::DefaultSynthConfig();
    int64_t graphs = config.graphs(), min_nodes = config.min_nodes(),
            max_nodes = config.max_nodes(), configs = config.configs();
    uint64_t seed = config.seed();
    double noise = config.noise_sigma(), error_rate = config.error_rate();
    double release_shaped = config.release_shaped();
    int64_t release_max_configs = config.release_max_configs(),
            release_max_nodes = config.release_max_nodes();
    std::string splits;
    std::string noise_free_costs;
    std::string score;
    bool json = false;
  };
  auto flags = std::make_shared<Flags>();
  SynthConfig* config = &flags->config;
  CLI::App* sub = app.add_subcommand(
      "synth",
      "Generate synthetic XLA programs (or take a real module with --from), layout or tile-size\n"
      "configurations and runtimes from a documented analytic TPU cost model\n"
      "(docs/synthetic-cost-model.md). Writes raw dumps that `tpugraphs ingest` reads:\n"
      "  OUT/pb/layout/<source>/<search>/<split>/<name>.pb  (tpu_graphs.ModuleTuningData)\n"
      "  OUT/pb/tile/<source>/<split>/<name>.pb             (tpu_graphs.TuningData)\n"
      "or a single file when --output ends in .pb. A table of the written graphs goes to stdout.\n"
      "The same --seed gives byte-identical files whatever --threads is.");
  sub->add_option("--task", *config->mutable_task(), "tile or layout")
      ->capture_default_str()
      ->check(CLI::IsMember({"tile", "layout"}));
  sub->add_option("--graphs", flags->graphs,
                  "Number of programs (layout) or kernels (tile) to generate; ignored with --from")
      ->capture_default_str();
  auto* nodes = sub->add_option_function<int64_t>(
      "--nodes",
      [flags](int64_t n) {
        flags->min_nodes = n;
        flags->max_nodes = n;
      },
      "Size of every layout program in instructions (sets --min-nodes and --max-nodes)");
  sub->add_option("--min-nodes", flags->min_nodes,
                  "Smallest layout program (instructions); sizes are drawn log-uniformly")
      ->capture_default_str()
      ->excludes(nodes);
  sub->add_option("--max-nodes", flags->max_nodes, "Largest layout program (instructions)")
      ->capture_default_str()
      ->excludes(nodes);
  sub->add_option("--configs", flags->configs,
                  "Configurations per graph, including the default (tile: at most the number of "
                  "distinct tile sizes)")
      ->capture_default_str();
  sub->add_option("--seed", flags->seed, "Master seed")->capture_default_str();
  sub->add_option("--splits", flags->splits,
                  "Train,valid,test fractions of the graphs, e.g. 0.7,0.15,0.15 (default: all in "
                  "train)");
  sub->add_option("-o,--output", *config->mutable_output(),
                  "Output directory (receives pb/...), or a file NAME.pb for a single graph "
                  "(tile: all kernels in one TuningData); not with --score");
  sub->add_option(
      "--from", *config->mutable_from(),
      "Existing ModuleTuningData, TuningData or HloModuleProto file: keep its graph(s), "
      "make new configurations and runtimes (a TuningData makes tile data)");
  sub->add_option("--search", *config->mutable_layout_search(),
                  "Layout search style: random (most nodes change) or default (most nodes keep the "
                  "compiler default)")
      ->capture_default_str()
      ->check(CLI::IsMember({"random", "default"}));
  sub->add_option("--noise", flags->noise,
                  "Sigma of the multiplicative lognormal runtime noise (< 0: 0.005 for layout, "
                  "0.02 for tile)")
      ->capture_default_str();
  sub->add_option("--error-rate", flags->error_rate,
                  "Extra failed runs (error=true, empty profile) per configuration")
      ->capture_default_str();
  sub->add_option("--noise-free-costs", flags->noise_free_costs,
                  "Also write every valid run's measured and noise-free runtime to this TSV "
                  "(docs/synth.md, \"Noise-free costs\")");
  sub->add_option("--score", flags->score,
                  "Instead of generating: print the noise-free runtime of each configuration of "
                  "this .npz (node_config_feat [K, nc, 18] or config_feat [K, 24], as `tune` "
                  "writes) for the program --from (TSV config, noise_free_ns)");
  sub->add_flag("--json", flags->json, "--score: print one JSON object instead of the TSV");
  sub->add_option("--source", *config->mutable_source(),
                  "Collection source word in the output tree (pb/<task>/<source>/...)")
      ->capture_default_str();

  sub->add_option("--release-shaped", flags->release_shaped,
                  "Instead of generating --graphs graphs: write a tree with the shape of the "
                  "TpuGraphs release at scale S of its graph counts to --output (npz/... and "
                  "shape.tsv; docs/synth.md, \"Release-shaped trees\"); takes --seed, "
                  "--cap-configs and --cap-nodes, ignores the other generation flags")
      ->capture_default_str();
  sub->add_option("--cap-configs", flags->release_max_configs,
                  "--release-shaped: cap on the configurations of one graph (0: none)")
      ->capture_default_str();
  sub->add_option("--cap-nodes", flags->release_max_nodes,
                  "--release-shaped: cap on the nodes of one layout program (0: none)")
      ->capture_default_str();

  return [flags]() -> Status {
    if (!flags->score.empty()) {
      if (flags->config.from().empty()) {
        return UsageError(
            "usage: --score needs --from PROGRAM.pb (the program synth "
            "wrote)");
      }
      return PrintConfigScores(flags->score, flags->config.from(), flags->json);
    }
    if (flags->config.output().empty()) {
      return UsageError("usage: --output is required");
    }
    SynthConfig* config = &flags->config;
    const std::string* splits = &flags->splits;
    config->set_graphs(flags->graphs);
    config->set_min_nodes(flags->min_nodes);
    config->set_max_nodes(flags->max_nodes);
    config->set_configs(flags->configs);
    config->set_seed(flags->seed);
    config->set_noise_sigma(flags->noise);
    config->set_error_rate(flags->error_rate);
    config->set_release_shaped(flags->release_shaped);
    config->set_release_max_configs(flags->release_max_configs);
    config->set_release_max_nodes(flags->release_max_nodes);
    if (!splits->empty()) {
      config->clear_splits();
      size_t start = 0;
      while (start <= splits->size()) {
        size_t end = splits->find(',', start);
        if (end == std::string::npos) end = splits->size();
        const std::string part = splits->substr(start, end - start);
        char* rest = nullptr;
        const double v = std::strtod(part.c_str(), &rest);
        if (part.empty() || rest == nullptr || *rest != '\0') {
          return UsageError("usage: --splits expects numbers like 0.7,0.15,0.15, got '" + *splits +
                            "'");
        }
        config->add_splits(v);
        start = end + 1;
      }
    }
    Status valid = synth::ValidateSynthConfig(config);
    if (!valid.ok()) return UsageError("usage: " + valid.message());
    ThreadPool pool(Globals().threads);
    if (config->release_shaped() > 0) return WriteReleaseShaped(*config, &pool);
    TPUG_ASSIGN_OR_RETURN(auto summaries, synth::RunSynth(*config, &pool));
    if (!flags->noise_free_costs.empty()) {
      TPUG_RETURN_IF_ERROR(synth::WriteNoiseFreeCosts(*config, summaries, flags->noise_free_costs));
    }
    std::printf(
        "split\tname\tnodes\tconfigurable\tconfigs\terror_runs\tdefault_ns\tbest_ns\tworst_"
        "ns\tspread\tnoise_free_kendall\tpath\n");
    for (const auto& s : summaries) {
      const double spread =
          s.best_ns > 0 ? static_cast<double>(s.worst_ns) / static_cast<double>(s.best_ns) - 1 : 0;
      std::printf("%s\t%s\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64
                  "\t%" PRId64 "\t%" PRId64 "\t%.4f\t%.4f\t%s\n",
                  s.split.c_str(), s.name.c_str(), s.nodes, s.configurable, s.configs, s.error_runs,
                  s.default_ns, s.best_ns, s.worst_ns, spread, s.noise_free_kendall,
                  s.path.c_str());
    }
    return Status::Ok();
  };
}

TPUGRAPHS_REGISTER_COMMAND(40, "synth", SetupSynth);

}  // namespace
}  // namespace tpugraphs::cli
