// `tpugraphs tune`: search each graph's configuration space with a trained model (or the
// synthetic cost model) as the scorer and write the best configurations (docs/tune.md).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "command.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/ingest/export.h"
#include "tpugraphs/ingest/hlo_text.h"
#include "tpugraphs/ingest/ingest.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "tpugraphs/ingest/release_npz.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/io/record_format.h"
#include "tpugraphs/synth/ground_truth.h"
#include "tpugraphs/synth/synth.h"
#include "tpugraphs/train/model_scorer.h"
#include "tpugraphs/tune/search.h"
#include "tpugraphs/tune/search_space.h"
#include "tpugraphs/tune/tuned_output.h"

namespace tpugraphs::cli {
namespace {

struct TuneFlags {
  std::string data, model, oracle, from, output, emit_hlo, space = "auto";
  std::vector<std::string> collections, graphs;
  tune::SearchOptions search;
  int64_t memory_mb = train::kDefaultScoringMemoryMb;
  bool json = false;
};

// The graphs of --data: a dataset file, a release .npz or a raw dump (HLO text included). For an
// HLO text dump, also its text and module (for the tied space and --emit-hlo).
struct Input {
  std::vector<Graph> graphs;
  bool hlo_text = false;
  std::string text;
  xla::HloModuleProto module;
};

bool Selected(const TuneFlags& f, const std::string& collection, const std::string& name) {
  bool c = f.collections.empty(), n = f.graphs.empty();
  for (const auto& x : f.collections) c = c || x == collection;
  for (const auto& x : f.graphs) n = n || x == name;
  return c && n;
}

StatusOr<Input> LoadInput(const TuneFlags& f) {
  Input in;
  TPUG_ASSIGN_OR_RETURN(std::string head, [&]() -> StatusOr<std::string> {
    int fd = -1;
    uint64_t size = 0;
    TPUG_RETURN_IF_ERROR(OpenRegularFileForReading(f.data, &fd, &size));
    std::string h(8, '\0');
    const ssize_t got = ::pread(fd, h.data(), h.size(), 0);
    ::close(fd);
    h.resize(got > 0 ? static_cast<size_t>(got) : 0);
    return h;
  }());
  if (head.size() == 8 && std::memcmp(head.data(), io::kFileMagic, 8) == 0) {
    TPUG_ASSIGN_OR_RETURN(auto reader, io::DatasetReader::Open(f.data));
    for (int64_t i = 0; i < reader->num_graphs(); ++i) {
      const auto& info = reader->info(i);
      if (!Selected(f, info.collection, info.name)) continue;
      TPUG_ASSIGN_OR_RETURN(Graph g, reader->ReadGraph(i, true));
      in.graphs.push_back(std::move(g));
    }
    return in;
  }
  TPUG_ASSIGN_OR_RETURN(ingest::InputKind kind, ingest::DetectInputKind(f.data));
  std::vector<Graph> graphs;
  if (kind == ingest::InputKind::kReleaseNpz) {
    std::string collection = f.collections.size() == 1 ? f.collections[0] : "";
    if (collection.empty()) collection = ingest::InferFromReleasePath(f.data).collection;
    TPUG_ASSIGN_OR_RETURN(Graph g, ingest::LoadReleaseNpz(f.data, collection, "", ""));
    graphs.push_back(std::move(g));
  } else {
    ingest::RawDumpOptions options;
    if (f.collections.size() == 1) options.collection = f.collections[0];
    TPUG_ASSIGN_OR_RETURN(graphs, ingest::LoadRawDump(f.data, options));
    TPUG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(f.data));
    if (ingest::LooksLikeHloText(bytes)) {
      in.hlo_text = true;
      TPUG_RETURN_IF_ERROR(ingest::ParseHloText(bytes, f.data, &in.module));
      in.text = std::move(bytes);
    }
  }
  for (Graph& g : graphs) {
    if (Selected(f, f.collections.size() == 1 ? f.collections[0] : g.collection, g.name)) {
      in.graphs.push_back(std::move(g));
    }
  }
  return in;
}

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
      "noise-free cost model instead of a model.");
  auto f = std::make_shared<TuneFlags>();
  cmd->add_option("--data,--dataset", f->data,
                  "Graphs to tune: a dataset file (.tpug), a release .npz or a raw dump (HLO "
                  "text, HloModuleProto, ModuleTuningData, TuningData); default: --from");
  auto* model = cmd->add_option("--model", f->model, "Model file written by `tpugraphs train`");
  auto* oracle = cmd->add_option("--oracle", f->oracle,
                                 "synthetic: score with synth's noise-free cost model of --from "
                                 "(the best the search can find)")
                     ->check(CLI::IsMember({"synthetic"}));
  model->excludes(oracle);
  cmd->add_option("--from", f->from,
                  "--oracle synthetic: the program synth wrote (ModuleTuningData or a one-kernel "
                  "TuningData) that the graph was ingested from");
  cmd->add_option("--collection", f->collections,
                  "Only graphs of this collection (repeatable); for a raw dump or .npz, the "
                  "collection to give its graph");
  cmd->add_option("--graph", f->graphs, "Only the graph of this name (repeatable)");
  cmd->add_option("--budget", f->search.budget, "Configurations to score per graph, seeds included")
      ->capture_default_str();
  cmd->add_option("--top", f->search.top, "Configurations to write per graph (best first)")
      ->capture_default_str();
  cmd->add_option("--measure", f->search.measure,
                  "Instead of --top: a set of K configurations to measure: the best, the "
                  "default and diverse near-best ones");
  cmd->add_option("--seed", f->search.seed, "Seed of the search")->capture_default_str();
  cmd->add_option("--strategy", f->search.strategy,
                  "evolution (seeded local search) or random (the default plus uniform draws)")
      ->check(CLI::IsMember({"evolution", "random"}))
      ->capture_default_str();
  cmd->add_option("--space", f->space,
                  "dataset: each decision takes only the values the graph's own configurations "
                  "give it (what the model was trained on); full: every valid value; auto: "
                  "dataset when the graph has measured configurations, else full (HLO text and "
                  "other graph-only dumps: always full)")
      ->check(CLI::IsMember({"auto", "dataset", "full"}))
      ->capture_default_str();
  cmd->add_option("--uncertainty", f->search.uncertainty,
                  "Rank candidates by score + L x the ensemble members' disagreement (the "
                  "standard deviation of their standardised scores): > 0 prefers configurations "
                  "the members agree on (0: the ensemble's mean alone; no effect with one model "
                  "or the oracle)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-distance", f->search.max_distance,
                  "Trust region: score only candidates that differ in at most D decisions from "
                  "an anchor (--trust-anchors; 0 with configs: choose among the default and the "
                  "graph's own configurations alone; -1: no limit)")
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()))
      ->capture_default_str();
  cmd->add_option("--trust-anchors", f->search.trust_anchors,
                  "--max-distance counts from: configs (the default and the graph's own "
                  "configurations) or default (the default alone)")
      ->check(CLI::IsMember({"configs", "default"}))
      ->capture_default_str();
  cmd->add_option("--batch", f->search.batch, "Candidates scored per batch")->capture_default_str();
  cmd->add_option("--elite", f->search.elite, "Parents are drawn from this many best")
      ->capture_default_str();
  cmd->add_option("--dataset-seeds", f->search.dataset_seeds,
                  "At most this many of the graph's own configurations seed the search "
                  "(default: budget / 4)");
  cmd->add_option("--memory-per-thread", f->memory_mb,
                  "--model: MiB of activations per scoring thread")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("-o,--output", f->output,
                  "NAME.npz for one graph, else a directory receiving one file per graph at "
                  "npz/<task>/<source>[/<search>]/<split>/<name>.npz")
      ->required();
  cmd->add_option("--emit-hlo", f->emit_hlo,
                  "For an HLO text --data: write <DIR>/<graph>.hlo, the module with the best "
                  "configuration's layouts");
  cmd->add_flag("--json", f->json, "Print one JSON object per graph (one per line)");
  return [f]() -> Status {
    if (f->model.empty() && f->oracle.empty()) {
      return UsageError("usage: give --model FILE or --oracle synthetic");
    }
    if (!f->oracle.empty() && f->from.empty()) {
      return UsageError("usage: --oracle synthetic needs --from PROGRAM.pb");
    }
    if (f->data.empty()) f->data = f->from;
    if (f->data.empty()) return UsageError("usage: --data is required");
    TPUG_RETURN_IF_ERROR(tune::ValidateSearchOptions(f->search));
    f->search.progress = ProgressEnabled();

    std::unique_ptr<train::ModelScorer> model;
    std::unique_ptr<synth::GroundTruth> truth;
    if (!f->model.empty()) {
      TPUG_ASSIGN_OR_RETURN(model,
                            train::ModelScorer::Load(f->model, Globals().threads, f->memory_mb));
    } else {
      TPUG_ASSIGN_OR_RETURN(truth, synth::GroundTruth::Open(f->from));
    }
    TPUG_ASSIGN_OR_RETURN(Input in, LoadInput(*f));
    if (in.graphs.empty()) {
      return NoMatchingGraphsError(f->data + ": no graph matches the --collection/--graph filters");
    }
    if (truth && in.graphs.size() != 1) {
      return InvalidArgumentError("--oracle synthetic prices one program: select one graph of " +
                                  f->data + " with --graph");
    }
    if (!f->emit_hlo.empty() && !in.hlo_text) {
      return InvalidArgumentError("--emit-hlo needs --data to be an HLO text dump, " + f->data +
                                  " is not");
    }
    const bool single_file = in.graphs.size() == 1 && f->output.size() > 4 &&
                             f->output.compare(f->output.size() - 4, 4, ".npz") == 0;
    StagedDirectory staged, hlo_dir;
    if (!single_file) TPUG_RETURN_IF_ERROR(staged.Begin(f->output));
    if (!f->emit_hlo.empty()) TPUG_RETURN_IF_ERROR(hlo_dir.Begin(f->emit_hlo));
    std::vector<std::string> lines;
    for (const Graph& g : in.graphs) {
      const std::string what = f->data + ": " + g.Id();
      bool measured = false;
      for (int64_t r : g.config_runtime) measured = measured || r > 0;
      const bool restrict = f->space == "dataset" || (f->space == "auto" && measured);
      StatusOr<tune::SearchSpace> space = [&]() {
        if (in.hlo_text && g.is_layout()) {
          return tune::SearchSpace::FromModule(g, in.module, f->data);
        }
        if (truth && g.is_tile()) {
          return tune::SearchSpace::FromTileDims(g, truth->tile_output_dims(),
                                                 truth->tile_kernel_dims(), f->data, restrict);
        }
        return tune::SearchSpace::FromGraph(g, f->data, restrict);
      }();
      if (!space.ok()) return space.status();
      std::unique_ptr<tune::CandidateScorer> scorer;
      if (model) {
        TPUG_ASSIGN_OR_RETURN(scorer, tune::MakeModelCandidateScorer(model.get(), g));
      } else {
        TPUG_ASSIGN_OR_RETURN(scorer, tune::MakeOracleCandidateScorer(truth.get(), g));
      }
      TPUG_ASSIGN_OR_RETURN(tune::SearchResult r, tune::RunSearch(*space, g, *scorer, f->search));
      for (const auto& c : r.chosen) {
        Status valid = space->Check(c.config);
        if (!valid.ok())
          return InternalError(what +
                               ": search produced an invalid configuration: " + valid.message());
      }
      std::string final_path = f->output, path = f->output;
      if (!single_file) {
        const std::string rel = ingest::ReleaseRelativePath(g);
        TPUG_ASSIGN_OR_RETURN(path, staged.Path(rel));
        final_path = staged.FinalPath(rel);
      }
      if (!f->emit_hlo.empty()) {
        TPUG_ASSIGN_OR_RETURN(
            std::string text,
            tune::RewriteHloLayouts(in.text, f->data, in.module, *space, r.chosen[0].config));
        TPUG_ASSIGN_OR_RETURN(std::string hlo_path, hlo_dir.Path(g.name + ".hlo"));
        TPUG_RETURN_IF_ERROR(WriteFileAtomically(hlo_path, text));
      }
      TPUG_RETURN_IF_ERROR(tune::WriteTunedNpz(g, r, path));
      if (f->json) {
        lines.push_back(
            tune::TunedJson(g, *space, r, scorer->name(), truth != nullptr, final_path));
      } else {
        const double best = r.chosen[0].score;
        // The path last: any length (a fixed buffer once cut long ones).
        char figures[160];
        std::snprintf(figures, sizeof figures, "\t%lld\t%lld\t%lld\t%.6g\t%.6g\t%.2f\t",
                      static_cast<long long>(g.num_nodes()),
                      static_cast<long long>(space->num_decisions()),
                      static_cast<long long>(r.scored), r.default_config.score, best, r.seconds);
        lines.push_back(g.Id() + figures + final_path);
      }
    }
    if (!single_file) TPUG_RETURN_IF_ERROR(staged.Commit());
    if (!f->emit_hlo.empty()) TPUG_RETURN_IF_ERROR(hlo_dir.Commit());
    if (!f->json) {
      std::printf(
          "graph\tnodes\tdecisions\tconfigs_scored\tdefault_score\tbest_score\tseconds\toutput\n");
    }
    for (const auto& l : lines) std::printf("%s\n", l.c_str());
    return Status::Ok();
  };
}

}  // namespace
TPUGRAPHS_REGISTER_COMMAND(65, "tune", SetupTune);
}  // namespace tpugraphs::cli
