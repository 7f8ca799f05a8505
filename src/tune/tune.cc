#include "tpugraphs/tune/tune.h"

#include <cmath>
#include <cstdio>
#include <memory>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/proto_fields.h"
#include "tpugraphs/ingest/export.h"
#include "tpugraphs/ingest/load_graphs.h"
#include "tpugraphs/synth/ground_truth.h"
#include "tpugraphs/train/model_scorer.h"
#include "tpugraphs/tune/search_space.h"
#include "tpugraphs/tune/tuned_output.h"

namespace tpugraphs::tune {
namespace {

// The flag name of a TuneConfig enum value: STRATEGY_RANDOM -> "random".
template <typename Enum>
std::string EnumName(const google::protobuf::EnumDescriptor* d, Enum v) {
  return EnumValueFlagName(d, d->FindValueByNumber(static_cast<int>(v))->index());
}

// The scorer every graph is searched with: a model, or synth's noise-free cost model.
struct Scorers {
  std::unique_ptr<train::ModelScorer> model;
  std::unique_ptr<synth::GroundTruth> truth;
};

StatusOr<Scorers> OpenScorers(const TuneConfig& c) {
  Scorers s;
  if (!c.model().empty()) {
    TPUG_ASSIGN_OR_RETURN(s.model,
                          train::ModelScorer::Load(c.model(), c.threads(), c.memory_per_thread()));
  } else {
    TPUG_ASSIGN_OR_RETURN(s.truth, synth::GroundTruth::Open(c.from()));
  }
  return s;
}

// Where the graph's configurations are searched: the module's tied layouts for HLO text, the
// kernel's tile sizes for the oracle's tile program, else the graph's decisions.
StatusOr<SearchSpace> SpaceOf(const TuneConfig& c, const ingest::LoadedGraphs& in,
                              const Scorers& scorers, const Graph& g, const std::string& data) {
  bool measured = false;
  for (int64_t r : g.config_runtime) measured = measured || r > 0;
  const bool restrict =
      c.space() == TuneConfig::SPACE_DATASET || (c.space() == TuneConfig::SPACE_AUTO && measured);
  if (in.hlo_text && g.is_layout()) return SearchSpace::FromModule(g, in.module, data);
  if (scorers.truth && g.is_tile()) {
    return SearchSpace::FromTileDims(g, scorers.truth->tile_output_dims(),
                                     scorers.truth->tile_kernel_dims(), data, restrict);
  }
  return SearchSpace::FromGraph(g, data, restrict);
}

// Where one graph's output goes: the single file, or its place in the staged tree.
struct OutputPaths {
  std::string write, final;
};

}  // namespace

Status ValidateTuneConfig(const TuneConfig& c) {
  if (c.model().empty() && c.oracle() == TuneConfig::ORACLE_NONE) {
    return UsageError("usage: give --model FILE or --oracle synthetic");
  }
  if (!c.model().empty() && c.oracle() != TuneConfig::ORACLE_NONE) {
    return UsageError("usage: --model and --oracle exclude each other");
  }
  if (c.oracle() != TuneConfig::ORACLE_NONE && c.from().empty()) {
    return UsageError("usage: --oracle synthetic needs --from PROGRAM.pb");
  }
  if (c.data().empty() && c.from().empty()) return UsageError("usage: --data is required");
  if (c.output().empty()) return UsageError("usage: --output is required");
  if (c.memory_per_thread() < 16 || c.memory_per_thread() > (int64_t{1} << 20)) {
    return UsageError("usage: --memory-per-thread must be in [16, 1048576] MiB");
  }
  if (!std::isfinite(c.uncertainty()) || c.uncertainty() < 0) {
    return UsageError("usage: --uncertainty must be a finite value >= 0");
  }
  if (c.max_distance() < -1) return UsageError("usage: --max-distance must be >= -1");
  if (c.threads() < 0) return UsageError("usage: -j must be >= 0");
  return ValidateSearchOptions(SearchOptionsOf(c));
}

SearchOptions SearchOptionsOf(const TuneConfig& c) {
  SearchOptions o;
  o.budget = c.budget();
  o.top = c.top();
  o.measure = c.measure();
  o.seed = c.seed();
  o.batch = c.batch();
  o.elite = c.elite();
  o.dataset_seeds = c.dataset_seeds();
  o.uncertainty = c.uncertainty();
  o.max_distance = c.max_distance();
  o.trust_anchors = EnumName(TuneConfig::TrustAnchors_descriptor(), c.trust_anchors());
  o.strategy = EnumName(TuneConfig::Strategy_descriptor(), c.strategy());
  return o;
}

StatusOr<TuneResult> Tune(const TuneConfig& config, bool progress) {
  TPUG_RETURN_IF_ERROR(ValidateTuneConfig(config));
  const std::string data = config.data().empty() ? config.from() : config.data();
  SearchOptions search = SearchOptionsOf(config);
  search.progress = progress;
  TPUG_ASSIGN_OR_RETURN(Scorers scorers, OpenScorers(config));
  io::GraphFilter filter;
  filter.collections.assign(config.collection().begin(), config.collection().end());
  filter.names.assign(config.graph().begin(), config.graph().end());
  TPUG_ASSIGN_OR_RETURN(ingest::LoadedGraphs in, ingest::LoadGraphs(data, filter));
  if (scorers.truth && in.graphs.size() != 1) {
    return InvalidArgumentError("--oracle synthetic prices one program: select one graph of " +
                                data + " with --graph");
  }
  const std::string& emit_hlo = config.emit_hlo();
  if (!emit_hlo.empty() && !in.hlo_text) {
    return InvalidArgumentError("--emit-hlo needs --data to be an HLO text dump, " + data +
                                " is not");
  }
  const std::string& output = config.output();
  const bool single_file = in.graphs.size() == 1 && output.size() > 4 &&
                           output.compare(output.size() - 4, 4, ".npz") == 0;
  StagedDirectory staged, hlo_dir;
  if (!single_file) TPUG_RETURN_IF_ERROR(staged.Begin(output));
  if (!emit_hlo.empty()) TPUG_RETURN_IF_ERROR(hlo_dir.Begin(emit_hlo));
  TuneResult result;
  for (const Graph& g : in.graphs) {
    TPUG_ASSIGN_OR_RETURN(SearchSpace space, SpaceOf(config, in, scorers, g, data));
    std::unique_ptr<CandidateScorer> scorer;
    if (scorers.model) {
      TPUG_ASSIGN_OR_RETURN(scorer, MakeModelCandidateScorer(scorers.model.get(), g));
    } else {
      TPUG_ASSIGN_OR_RETURN(scorer, MakeOracleCandidateScorer(scorers.truth.get(), g));
    }
    TPUG_ASSIGN_OR_RETURN(SearchResult r, RunSearch(space, g, *scorer, search));
    for (const auto& c : r.chosen) {
      if (Status valid = space.Check(c.config); !valid.ok()) {
        return InternalError(data + ": " + g.Id() +
                             ": search produced an invalid configuration: " + valid.message());
      }
    }
    OutputPaths paths{output, output};
    if (!single_file) {
      const std::string rel = ingest::ReleaseRelativePath(g);
      TPUG_ASSIGN_OR_RETURN(paths.write, staged.Path(rel));
      paths.final = staged.FinalPath(rel);
    }
    if (!emit_hlo.empty()) {
      TPUG_ASSIGN_OR_RETURN(std::string text,
                            RewriteHloLayouts(in.text, data, in.module, space, r.chosen[0].config));
      TPUG_ASSIGN_OR_RETURN(std::string hlo_path, hlo_dir.Path(g.name + ".hlo"));
      TPUG_RETURN_IF_ERROR(WriteFileAtomically(hlo_path, text));
    }
    TPUG_RETURN_IF_ERROR(WriteTunedNpz(g, r, paths.write));
    TunedGraph t;
    t.id = g.Id();
    t.nodes = g.num_nodes();
    t.decisions = space.num_decisions();
    t.scored = r.scored;
    t.default_score = r.default_config.score;
    t.best_score = r.chosen[0].score;
    t.seconds = r.seconds;
    t.output = paths.final;
    t.json = TunedJson(g, space, r, scorer->name(), scorers.truth != nullptr, paths.final);
    result.graphs.push_back(std::move(t));
  }
  if (!single_file) TPUG_RETURN_IF_ERROR(staged.Commit());
  if (!emit_hlo.empty()) TPUG_RETURN_IF_ERROR(hlo_dir.Commit());
  return result;
}

std::string FormatTuneTable(const TuneResult& result) {
  std::string out =
      "graph\tnodes\tdecisions\tconfigs_scored\tdefault_score\tbest_score\tseconds\toutput\n";
  for (const TunedGraph& t : result.graphs) {
    char figures[160];
    std::snprintf(figures, sizeof figures, "\t%lld\t%lld\t%lld\t%.6g\t%.6g\t%.2f\t",
                  static_cast<long long>(t.nodes), static_cast<long long>(t.decisions),
                  static_cast<long long>(t.scored), t.default_score, t.best_score, t.seconds);
    out += t.id + figures + t.output + "\n";  // the path last: any length
  }
  return out;
}

}  // namespace tpugraphs::tune
