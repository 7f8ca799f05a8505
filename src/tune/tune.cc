#include "tpugraphs/tune/tune.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "tpugraphs/common/file_lock.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/json_util.h"
#include "tpugraphs/common/proto_fields.h"
#include "tpugraphs/ingest/config_npz.h"
#include "tpugraphs/ingest/export.h"
#include "tpugraphs/ingest/ingest.h"
#include "tpugraphs/ingest/load_graphs.h"
#include "tpugraphs/synth/ground_truth.h"
#include "tpugraphs/train/model_scorer.h"
#include "tpugraphs/tune/measurements.h"
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
  if (!c.apply().empty()) return s;        // no scoring
  if (!c.measure_cmd().empty()) return s;  // the loop loads (and fine-tunes) the model itself
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
  // Applied configurations are checked against every valid value (they may come from any
  // search).
  const bool restrict = c.apply().empty() && (c.space() == TuneConfig::SPACE_DATASET ||
                                              (c.space() == TuneConfig::SPACE_AUTO && measured));
  if (in.hlo_text && g.is_layout()) {
    return SearchSpace::FromModule(g, in.module, data, /*allow_empty=*/true);
  }
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

// A directory under $TMPDIR (else /tmp) removed with everything in it when this goes.
class TemporaryDirectory {
 public:
  TemporaryDirectory() = default;
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  ~TemporaryDirectory() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  Status Create(const std::string& prefix) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      return IoError("cannot create a temporary directory " + templ + ": " + std::strerror(errno));
    }
    path_ = templ;
    return Status::Ok();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// What every result row says of graph g and its space.
TunedGraph DescribeGraph(const Graph& g, const SearchSpace& space) {
  TunedGraph t;
  t.id = g.Id();
  t.nodes = g.num_nodes();
  t.decisions = space.num_decisions();
  return t;
}

// Where graph g's output goes: `output` itself, or its place in the staged tree.
StatusOr<OutputPaths> PathsOf(const Graph& g, const std::string& output, bool single_file,
                              StagedDirectory* staged) {
  OutputPaths paths{output, output};
  if (!single_file) {
    const std::string rel = ingest::ReleaseRelativePath(g);
    TPUG_ASSIGN_OR_RETURN(paths.write, staged->Path(rel));
    paths.final = staged->FinalPath(rel);
  }
  return paths;
}

// The closed loop on one graph, and its outputs: every measured configuration, best first.
StatusOr<TunedGraph> LoopGraph(const TuneConfig& config, const SearchOptions& search,
                               const ingest::LoadedGraphs& in, const SearchSpace& space,
                               const Graph& g, const std::string& work_dir, MeasurementLog* log,
                               bool single_file, StagedDirectory* staged,
                               StagedDirectory* hlo_dir) {
  LoopOptions options = LoopOptionsOf(config);
  options.work_dir = work_dir;
  TPUG_ASSIGN_OR_RETURN(LoopResult r, RunLoop(space, g, search, options, log));
  if (r.measured.empty()) {
    return FailedPreconditionError(g.Id() + ": the loop measured no configuration");
  }
  SearchResult out;
  MeasuredArrays arrays;
  const RoundTrace& last = r.trace.back();
  out.default_config = {space.base(), last.default_runtime, "default"};
  out.scored = r.scored;
  for (const Measurement& m : r.measured) {
    out.chosen.push_back({m.config, m.runtime, "measured"});
    arrays.runtime.push_back(m.runtime);
    arrays.round.push_back(m.round);
  }
  TPUG_ASSIGN_OR_RETURN(OutputPaths paths, PathsOf(g, config.output(), single_file, staged));
  if (!config.emit_hlo().empty()) {
    TPUG_ASSIGN_OR_RETURN(std::string text,
                          RewriteHloLayouts(in.text, config.data(), in.module, in.spans, space,
                                            out.chosen[0].config));
    TPUG_ASSIGN_OR_RETURN(std::string hlo_path, hlo_dir->Path(g.name + ".hlo"));
    TPUG_RETURN_IF_ERROR(WriteFileAtomically(hlo_path, text));
  }
  TPUG_RETURN_IF_ERROR(WriteTunedNpz(g, out, paths.write, &arrays));
  TunedGraph t = DescribeGraph(g, space);
  t.scored = r.scored;
  t.default_score = last.default_runtime;
  t.best_score = last.best_runtime;
  t.seconds = r.seconds;
  t.output = paths.final;
  t.trace = r.trace;
  t.json = LoopJson(g, space, r, options, paths.final);
  return t;
}

// The configurations of `npz` for graph g (TuneConfig.apply), each checked against the space.
StatusOr<std::vector<Config>> ReadConfigs(const std::string& npz, const Graph& g,
                                          const SearchSpace& space) {
  TPUG_ASSIGN_OR_RETURN(ingest::NpzConfigs configs,
                        ingest::ReadNpzConfigs(npz, g.kind, g.node_config_ids, g.Id()));
  const int64_t row =
      g.is_layout() ? g.num_config_nodes() * kLayoutConfigFeatureCount : kTileConfigFeatureCount;
  std::vector<Config> out(static_cast<size_t>(configs.count));
  for (int64_t k = 0; k < configs.count; ++k) {
    if (g.is_layout()) {
      out[k].layout.assign(configs.layout.begin() + k * row,
                           configs.layout.begin() + (k + 1) * row);
    } else {
      out[k].tile.assign(configs.tile.begin() + k * row, configs.tile.begin() + (k + 1) * row);
    }
  }
  if (out.empty()) return InvalidArgumentError(npz + ": holds no configuration");
  for (size_t k = 0; k < out.size(); ++k) {
    if (Status valid = space.Check(out[k]); !valid.ok()) {
      return InvalidArgumentError(npz + ": configuration " + std::to_string(k) + " is not one of " +
                                  g.Id() + "'s: " + valid.message());
    }
  }
  return out;
}

// TuneConfig.apply on one graph: its configurations written back (and as HLO modules).
StatusOr<TunedGraph> ApplyGraph(const TuneConfig& config, const std::string& data,
                                const ingest::LoadedGraphs& in, const SearchSpace& space,
                                const Graph& g, bool single_file, StagedDirectory* staged,
                                StagedDirectory* hlo_dir) {
  TPUG_ASSIGN_OR_RETURN(std::vector<Config> configs, ReadConfigs(config.apply(), g, space));
  SearchResult out;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  out.default_config = {space.base(), nan, "default"};
  for (size_t k = 0; k < configs.size(); ++k) {
    if (!config.emit_hlo().empty()) {
      TPUG_ASSIGN_OR_RETURN(std::string text, RewriteHloLayouts(in.text, data, in.module, in.spans,
                                                                space, configs[k]));
      TPUG_ASSIGN_OR_RETURN(std::string hlo_path,
                            hlo_dir->Path(g.name + "." + std::to_string(k) + ".hlo"));
      TPUG_RETURN_IF_ERROR(WriteFileAtomically(hlo_path, text));
    }
    out.chosen.push_back({std::move(configs[k]), nan, "applied"});
  }
  TPUG_ASSIGN_OR_RETURN(OutputPaths paths, PathsOf(g, config.output(), single_file, staged));
  TPUG_RETURN_IF_ERROR(WriteTunedNpz(g, out, paths.write));
  TunedGraph t = DescribeGraph(g, space);
  t.default_score = t.best_score = nan;
  t.output = paths.final;
  t.json = "{\"graph\":" + JsonQuote(g.Id()) + ",\"applied\":" + std::to_string(out.chosen.size()) +
           ",\"from\":" + JsonQuote(config.apply()) + ",\"output\":" + JsonQuote(paths.final) +
           (config.emit_hlo().empty() ? std::string()
                                      : ",\"emit_hlo\":" + JsonQuote(config.emit_hlo())) +
           "}";
  return t;
}

// A program whose layouts offer nothing to choose: its own configuration is the answer, the
// module is written back byte for byte (--emit-hlo), and a note says why.
StatusOr<TunedGraph> UnchangedGraph(const TuneConfig& config, const std::string& data,
                                    const ingest::LoadedGraphs& in, const SearchSpace& space,
                                    const Graph& g, bool single_file, StagedDirectory* staged,
                                    StagedDirectory* hlo_dir) {
  const std::string why = g.num_config_nodes() == 0
                              ? "it has no configurable node (convolution, dot or reshape)"
                              : "no input or output of its configurable nodes is a tensor of "
                                "rank 2 to 6 whose layout can change";
  spdlog::warn("tune {}: nothing to tune, {}; the program is written back unchanged", g.Id(), why);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  SearchResult r;
  r.default_config = {space.base(), nan, "default"};
  r.chosen.push_back({space.base(), nan, "unchanged"});
  TPUG_ASSIGN_OR_RETURN(OutputPaths paths, PathsOf(g, config.output(), single_file, staged));
  if (!config.emit_hlo().empty()) {
    TPUG_ASSIGN_OR_RETURN(std::string hlo_path, hlo_dir->Path(g.name + ".hlo"));
    TPUG_RETURN_IF_ERROR(WriteFileAtomically(hlo_path, in.text));
  }
  TPUG_RETURN_IF_ERROR(WriteTunedNpz(g, r, paths.write));
  TunedGraph t = DescribeGraph(g, space);
  t.default_score = t.best_score = nan;
  t.output = paths.final;
  t.json = "{\"graph\":" + JsonQuote(g.Id()) + ",\"nodes\":" + std::to_string(g.num_nodes()) +
           ",\"configurable_nodes\":" + std::to_string(g.num_config_nodes()) +
           ",\"decisions\":0,\"nothing_to_tune\":true,\"reason\":" + JsonQuote(why) +
           ",\"from\":" + JsonQuote(data) + ",\"output\":" + JsonQuote(paths.final) +
           (config.emit_hlo().empty() ? std::string()
                                      : ",\"emit_hlo\":" + JsonQuote(config.emit_hlo())) +
           "}";
  return t;
}

// One input file of `data` and the graphs of it that the filter chose.
struct Input {
  std::string path;
  ingest::LoadedGraphs graphs;
};

// The graphs `data` holds: the file itself, or for a directory each file below it (as `ingest`
// reads one: of the XLA dump files, those of stage `hlo_stage` only) that holds a graph the
// filter chooses. A directory none of whose files holds one is a kNoMatchingGraphs error.
// `mark_absent_dimensions`: raw inputs are ingested for a model trained on such features.
StatusOr<std::vector<Input>> LoadInputs(const std::string& data, const io::GraphFilter& filter,
                                        const std::string& hlo_stage, bool mark_absent_dimensions) {
  std::vector<Input> inputs;
  std::error_code ec;
  if (!std::filesystem::is_directory(data, ec)) {
    TPUG_ASSIGN_OR_RETURN(ingest::LoadedGraphs in,
                          ingest::LoadGraphs(data, filter, mark_absent_dimensions));
    inputs.push_back({data, std::move(in)});
    return inputs;
  }
  TPUG_ASSIGN_OR_RETURN(const std::vector<std::string> files,
                        ingest::ExpandInputs({data}, hlo_stage));
  for (const std::string& file : files) {
    StatusOr<ingest::LoadedGraphs> in = ingest::LoadGraphs(file, filter, mark_absent_dimensions);
    if (!in.ok() && in.status().code() == StatusCode::kNoMatchingGraphs) continue;
    if (!in.ok()) return in.status();
    inputs.push_back({file, std::move(*in)});
  }
  if (inputs.empty()) {
    std::string chosen;
    for (const std::string& c : filter.collections) chosen += " --collection " + c;
    for (const std::string& n : filter.names) chosen += " --graph " + n;
    return NoMatchingGraphsError(data + ": none of its " + std::to_string(files.size()) +
                                 " files holds a graph that" + chosen + " chooses");
  }
  return inputs;
}

}  // namespace

LoopOptions LoopOptionsOf(const TuneConfig& c) {
  LoopOptions o;
  o.measure_cmd = c.measure_cmd();
  o.rounds = c.rounds();
  o.per_round = c.measure();
  o.explore = c.explore();
  o.model = c.model();
  o.finetune_steps = c.finetune_steps();
  o.finetune_learning_rate = c.finetune_learning_rate();
  o.trust_distance = c.trust_distance();
  o.trust_anchors = c.trust_best();
  o.threads = c.threads();
  o.memory_per_thread = c.memory_per_thread();
  return o;
}

Status ValidateTuneConfig(const TuneConfig& c) {
  const bool loop = !c.measure_cmd().empty();
  if (loop && c.oracle() != TuneConfig::ORACLE_NONE) {
    return UsageError("usage: --measure-cmd and --oracle exclude each other");
  }
  if (loop && c.measure() < 1) {
    return UsageError("usage: --measure-cmd needs --measure K, the configurations per round");
  }
  if (!loop && !c.measurements().empty()) {
    return UsageError("usage: --measurements keeps the results of --measure-cmd; give it too");
  }
  if (!c.apply().empty()) {
    if (loop) return UsageError("usage: --apply and --measure-cmd exclude each other");
    if (c.data().empty()) return UsageError("usage: --apply needs --data, the program");
    if (c.output().empty()) return UsageError("usage: --output is required");
    return Status::Ok();  // no scorer, no search
  }
  if (!loop && c.model().empty() && c.oracle() == TuneConfig::ORACLE_NONE) {
    return UsageError("usage: give --model FILE, --oracle synthetic or --measure-cmd CMD");
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
  for (char ch : c.hlo_stage()) {
    if (ch == '/' || ch == '\0') {
      return UsageError("usage: --hlo-stage '" + c.hlo_stage() +
                        "' is not a stage name (e.g. after_optimizations)");
    }
  }
  if (loop) {
    TPUG_RETURN_IF_ERROR(ValidateLoopOptions(LoopOptionsOf(c)));
    // The loop sets measure (its rounds' sets) and budget (without a model: rounds x measure).
    SearchOptions o = SearchOptionsOf(c);
    o.measure = std::min(o.measure, o.budget);
    return ValidateSearchOptions(o);
  }
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

// Where `tune` spends its time (the -v log's "tune phases" line): loading the
// model, reading the inputs, building each graph's search space, the search's own work between
// the scorer's calls, the scorer's calls, writing the outputs, and (--measure-cmd) each graph's
// closed loop whole.
struct TunePhases {
  double model = 0, inputs = 0, space = 0, search = 0, scoring = 0, write = 0;
  double loop = 0;  // closed-loop graphs, whole (measuring, fine-tuning and searching)
  // Adds the time since *stamp to *phase and moves *stamp to now.
  void Add(double* phase, std::chrono::steady_clock::time_point* stamp) {
    const auto now = std::chrono::steady_clock::now();
    *phase += std::chrono::duration<double>(now - *stamp).count();
    *stamp = now;
  }
};

StatusOr<TuneResult> Tune(const TuneConfig& config, bool progress) {
  TPUG_RETURN_IF_ERROR(ValidateTuneConfig(config));
  const std::string data = config.data().empty() ? config.from() : config.data();
  SearchOptions search = SearchOptionsOf(config);
  search.progress = progress;
  TunePhases phases;
  auto stamp = std::chrono::steady_clock::now();
  TPUG_ASSIGN_OR_RETURN(Scorers scorers, OpenScorers(config));
  phases.Add(&phases.model, &stamp);
  io::GraphFilter filter;
  filter.collections.assign(config.collection().begin(), config.collection().end());
  filter.names.assign(config.graph().begin(), config.graph().end());
  const bool mark_absent =
      scorers.model != nullptr && scorers.model->model().transform().absent_dimensions_marked();
  TPUG_ASSIGN_OR_RETURN(const std::vector<Input> inputs,
                        LoadInputs(data, filter, config.hlo_stage(), mark_absent));
  phases.Add(&phases.inputs, &stamp);
  size_t total_graphs = 0;
  for (const Input& input : inputs) total_graphs += input.graphs.graphs.size();
  if (scorers.truth && total_graphs != 1) {
    return InvalidArgumentError("--oracle synthetic prices one program: select one graph of " +
                                data + " with --graph");
  }
  const std::string& emit_hlo = config.emit_hlo();
  for (const Input& input : inputs) {
    if (emit_hlo.empty() || input.graphs.hlo_text) continue;
    return InvalidArgumentError(
        "--emit-hlo writes the chosen layouts back into the program's HLO text, so --data must "
        "be an HLO text dump (a file XLA wrote with --xla_dump_to, e.g. "
        "module_0001.jit_f.after_optimizations.txt, or a directory of them), and " +
        input.path +
        " is not one (a dataset file, a release .npz or a binary dump has no text to write "
        "back). Pass the module's HLO text; without --emit-hlo, tune writes the chosen "
        "configurations to --output only");
  }
  const std::string& output = config.output();
  const bool single_file =
      total_graphs == 1 && output.size() > 4 && output.compare(output.size() - 4, 4, ".npz") == 0;
  StagedDirectory staged, hlo_dir;
  if (single_file) RemoveStaleTemporaries(output);  // left by a killed earlier run
  if (!single_file) TPUG_RETURN_IF_ERROR(staged.Begin(output));
  if (!emit_hlo.empty()) TPUG_RETURN_IF_ERROR(hlo_dir.Begin(emit_hlo));
  const bool loop = !config.measure_cmd().empty();
  MeasurementLog log;
  TemporaryDirectory work;
  std::unique_ptr<OutputLock> measurements_lock;
  if (loop) {
    if (!config.measurements().empty()) {
      // Two loops appending to one measurements file would measure the same sets twice.
      TPUG_ASSIGN_OR_RETURN(measurements_lock,
                            OutputLock::Acquire(config.measurements(), "--measurements"));
    }
    TPUG_ASSIGN_OR_RETURN(log, MeasurementLog::Open(config.measurements()));
    TPUG_RETURN_IF_ERROR(work.Create("tpugraphs-tune"));
  }
  TuneResult result;
  for (const Input& input : inputs) {
    const ingest::LoadedGraphs& in = input.graphs;
    const std::string& source = input.path;
    for (const Graph& g : in.graphs) {
      stamp = std::chrono::steady_clock::now();
      TPUG_ASSIGN_OR_RETURN(SearchSpace space, SpaceOf(config, in, scorers, g, source));
      phases.Add(&phases.space, &stamp);
      if (in.hlo_text && g.is_layout() && space.variables().empty()) {
        TPUG_ASSIGN_OR_RETURN(TunedGraph t, UnchangedGraph(config, source, in, space, g,
                                                           single_file, &staged, &hlo_dir));
        result.graphs.push_back(std::move(t));
        phases.Add(&phases.write, &stamp);
        continue;
      }
      if (!config.apply().empty()) {
        TPUG_ASSIGN_OR_RETURN(
            TunedGraph t, ApplyGraph(config, source, in, space, g, single_file, &staged, &hlo_dir));
        result.graphs.push_back(std::move(t));
        phases.Add(&phases.write, &stamp);
        continue;
      }
      if (loop) {
        TPUG_ASSIGN_OR_RETURN(TunedGraph t, LoopGraph(config, search, in, space, g, work.path(),
                                                      &log, single_file, &staged, &hlo_dir));
        result.graphs.push_back(std::move(t));
        phases.Add(&phases.loop, &stamp);
        continue;
      }
      std::unique_ptr<CandidateScorer> scorer;
      if (scorers.model) {
        TPUG_ASSIGN_OR_RETURN(scorer, MakeModelCandidateScorer(scorers.model.get(), g));
      } else {
        TPUG_ASSIGN_OR_RETURN(scorer, MakeOracleCandidateScorer(scorers.truth.get(), g));
      }
      TPUG_ASSIGN_OR_RETURN(SearchResult r, RunSearch(space, g, *scorer, search));
      phases.Add(&phases.search, &stamp);
      phases.search -= r.scorer_seconds;
      phases.scoring += r.scorer_seconds;
      for (const auto& c : r.chosen) {
        if (Status valid = space.Check(c.config); !valid.ok()) {
          return InternalError(source + ": " + g.Id() +
                               ": search produced an invalid configuration: " + valid.message());
        }
      }
      TPUG_ASSIGN_OR_RETURN(OutputPaths paths, PathsOf(g, output, single_file, &staged));
      if (!emit_hlo.empty()) {
        TPUG_ASSIGN_OR_RETURN(
            std::string text,
            RewriteHloLayouts(in.text, source, in.module, in.spans, space, r.chosen[0].config));
        TPUG_ASSIGN_OR_RETURN(std::string hlo_path, hlo_dir.Path(g.name + ".hlo"));
        TPUG_RETURN_IF_ERROR(WriteFileAtomically(hlo_path, text));
      }
      TPUG_RETURN_IF_ERROR(WriteTunedNpz(g, r, paths.write));
      TunedGraph t = DescribeGraph(g, space);
      t.scored = r.scored;
      t.default_score = r.default_config.score;
      t.best_score = r.chosen[0].score;
      t.seconds = r.seconds;
      t.output = paths.final;
      t.json = TunedJson(g, space, r, scorer->name(), scorers.truth != nullptr, paths.final);
      result.graphs.push_back(std::move(t));
      phases.Add(&phases.write, &stamp);
    }
  }
  stamp = std::chrono::steady_clock::now();
  if (!single_file) TPUG_RETURN_IF_ERROR(staged.Commit());
  if (!emit_hlo.empty()) TPUG_RETURN_IF_ERROR(hlo_dir.Commit());
  phases.Add(&phases.write, &stamp);
  spdlog::debug(
      "tune phases (s): model={:.4f} inputs={:.4f} space={:.4f} search={:.4f} scoring={:.4f} "
      "write={:.4f} loop={:.4f}",
      phases.model, phases.inputs, phases.space, phases.search, phases.scoring, phases.write,
      phases.loop);
  return result;
}

std::string FormatTuneTable(const TuneResult& result) {
  if (!result.graphs.empty() && !result.graphs[0].trace.empty()) {
    std::string out =
        "graph\tround\tmeasured\tnew\tbest_runtime\tdefault_runtime\tspeedup\tbatch_kendall\t"
        "seconds\toutput\n";
    for (const TunedGraph& t : result.graphs) {
      for (const RoundTrace& r : t.trace) {
        char figures[200];
        std::snprintf(figures, sizeof figures, "\t%lld\t%lld\t%lld\t%.9g\t%.9g\t%.6g\t%.4f\t%.2f\t",
                      static_cast<long long>(r.round), static_cast<long long>(r.measured),
                      static_cast<long long>(r.new_measurements), r.best_runtime, r.default_runtime,
                      r.speedup, r.batch_kendall, r.model_seconds + r.measure_seconds);
        out += t.id + figures + t.output + "\n";
      }
    }
    return out;
  }
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
