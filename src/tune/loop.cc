#include "tpugraphs/tune/loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <unordered_set>

#include "tpugraphs/common/json_util.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/eval/metrics.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/train/model_file.h"
#include "tpugraphs/train/model_scorer.h"
#include "tpugraphs/train/trainer.h"
#include "tpugraphs/tune/tuned_output.h"

namespace tpugraphs::tune {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Quiets the trainer while the loop fine-tunes: its per-epoch and per-member lines, and its
// warnings about what a one-graph run lacks by design (validation graphs); a failure comes back
// as the Status. Restores the level after.
class QuietLog {
 public:
  QuietLog() : level_(spdlog::get_level()) {
    if (level_ < spdlog::level::err) spdlog::set_level(spdlog::level::err);
  }
  ~QuietLog() { spdlog::set_level(level_); }

 private:
  spdlog::level::level_enum level_;
};

// The loop's state for one graph: what was measured, the trace, and the measuring itself.
class Loop {
 public:
  Loop(const SearchSpace& space, const Graph& g, const SearchOptions& search,
       const LoopOptions& options, MeasurementLog* log)
      : space_(space), g_(g), search_(search), options_(options), log_(log) {}

  // Measures `batch` (configurations the file holds are taken from it), records the results
  // and the round's trace (batch_kendall is the caller's).
  StatusOr<std::vector<double>> Measure(const std::vector<ScoredConfig>& batch, int64_t round,
                                        bool predicted) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<double> runtime(batch.size(), 0.0);
    std::vector<size_t> unknown;
    for (size_t i = 0; i < batch.size(); ++i) {
      const Measurement* m = log_->Find(g_.Id(), batch[i].config);
      if (m != nullptr) {
        runtime[i] = m->runtime;
      } else {
        unknown.push_back(i);
      }
    }
    if (!unknown.empty()) {
      SearchResult file;
      file.default_config = {space_.base(), 0, "default"};
      for (size_t i : unknown) file.chosen.push_back(batch[i]);
      const std::string npz = options_.work_dir + "/measure-round" + std::to_string(round) + ".npz";
      TPUG_RETURN_IF_ERROR(WriteTunedNpz(g_, file, npz));
      TPUG_ASSIGN_OR_RETURN(
          std::vector<double> got,
          RunMeasureCommand(options_.measure_cmd, npz, static_cast<int64_t>(unknown.size())));
      std::remove(npz.c_str());
      std::vector<Measurement> records;
      for (size_t j = 0; j < unknown.size(); ++j) {
        const ScoredConfig& sc = batch[unknown[j]];
        runtime[unknown[j]] = got[j];
        records.push_back({g_.Id(), round, got[j], predicted ? sc.score : kNaN, sc.config});
      }
      TPUG_RETURN_IF_ERROR(log_->Append(records));
    }
    RoundTrace t;
    t.round = round;
    t.batch = static_cast<int64_t>(batch.size());
    t.new_measurements = static_cast<int64_t>(unknown.size());
    t.measure_seconds = SecondsSince(start);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].config == space_.base()) {
        default_runtime_ = runtime[i];
      }
      measured_.push_back(
          {g_.Id(), round, runtime[i], predicted ? batch[i].score : kNaN, batch[i].config});
      measured_hashes_.insert(HashConfig(batch[i].config));
      best_ = std::min(best_, runtime[i]);
    }
    t.measured = static_cast<int64_t>(measured_.size());
    t.best_runtime = best_;
    t.default_runtime = default_runtime_;
    t.speedup = std::isfinite(default_runtime_) ? default_runtime_ / best_ : kNaN;
    t.batch_kendall = kNaN;
    trace_.push_back(t);
    spdlog::info("tune {}: round {}: {} measured ({} new), best {}{}", g_.name, round, t.measured,
                 t.new_measurements, best_,
                 std::isfinite(t.speedup) ? ", " + JsonNumber(t.speedup, 4) + "x the default"
                                          : std::string());
    return runtime;
  }

  StatusOr<LoopResult> Run() {
    const auto start = std::chrono::steady_clock::now();
    if (options_.model.empty()) {
      TPUG_RETURN_IF_ERROR(RunEvolution());
    } else {
      TPUG_RETURN_IF_ERROR(RunWithModel());
    }
    LoopResult r;
    r.measured = measured_;
    std::stable_sort(
        r.measured.begin(), r.measured.end(),
        [](const Measurement& a, const Measurement& b) { return a.runtime < b.runtime; });
    r.trace = trace_;
    r.scored = scored_;
    r.seconds = SecondsSince(start);
    return r;
  }

 private:
  // The measure command as a search's scorer: each call is a generation (a round).
  class MeasuringScorer : public CandidateScorer {
   public:
    explicit MeasuringScorer(Loop* loop) : loop_(loop) {}
    std::string name() const override { return "measure:" + loop_->options_.measure_cmd; }
    StatusOr<std::vector<double>> Score(const std::vector<Config>& configs) override {
      std::vector<ScoredConfig> batch;
      for (const Config& c : configs) batch.push_back({c, 0, "search"});
      return loop_->Measure(batch, ++round_, /*predicted=*/false);
    }

   private:
    Loop* loop_;
    int64_t round_ = 0;
  };

  Status RunEvolution() {
    SearchOptions o = search_;
    o.budget = options_.rounds * options_.per_round;
    o.batch = options_.per_round;
    o.dataset_seeds = 0;
    o.top = 1;
    o.measure = 0;
    o.uncertainty = 0;
    o.progress = false;
    MeasuringScorer scorer(this);
    TPUG_ASSIGN_OR_RETURN(SearchResult r, RunSearch(space_, g_, scorer, o));
    scored_ += r.scored;
    return Status::Ok();
  }

  Status RunWithModel() {
    TPUG_ASSIGN_OR_RETURN(ModelFile file,
                          train::ReadModelFile(options_.model, train::kFileKindModel));
    finetune_base_ = file.train_config();
    model_members_ = file.ensemble_size() + 1;
    TPUG_ASSIGN_OR_RETURN(
        std::unique_ptr<train::ModelScorer> given,
        train::ModelScorer::Load(options_.model, options_.threads, options_.memory_per_thread));
    const int64_t k = options_.per_round;
    const int64_t explore = std::llround(options_.explore * static_cast<double>(k));
    for (int64_t round = 1; round <= options_.rounds; ++round) {
      const auto start = std::chrono::steady_clock::now();
      std::unique_ptr<train::ModelScorer> tuned;
      train::ModelScorer* model = given.get();
      if (!measured_.empty()) {
        TPUG_ASSIGN_OR_RETURN(std::string path, FineTune(round));
        TPUG_ASSIGN_OR_RETURN(
            tuned, train::ModelScorer::Load(path, options_.threads, options_.memory_per_thread));
        model = tuned.get();
      }
      TPUG_ASSIGN_OR_RETURN(std::unique_ptr<CandidateScorer> scorer,
                            MakeModelCandidateScorer(model, g_));
      SearchOptions o = search_;
      o.measure = k;
      // The measured configurations are scored as seeds; the search's own budget stays as given.
      o.budget = search_.budget + static_cast<int64_t>(measured_.size());
      o.measure_best = std::max<int64_t>(1, k - explore);
      o.seed = round == 1 ? search_.seed : DeriveSeed(search_.seed, "tune:round", round);
      o.extra_seeds.clear();
      for (const Measurement& m : measured_) o.extra_seeds.push_back(m.config);
      o.exclude = measured_hashes_;
      if (options_.trust_distance >= 0 && !measured_.empty()) {
        std::vector<const Measurement*> best;
        for (const Measurement& m : measured_) best.push_back(&m);
        std::stable_sort(best.begin(), best.end(), [](const Measurement* a, const Measurement* b) {
          return a->runtime < b->runtime;
        });
        best.resize(std::min<size_t>(best.size(), static_cast<size_t>(options_.trust_anchors)));
        o.anchors.clear();
        for (const Measurement* m : best) o.anchors.push_back(m->config);
        o.max_distance = options_.trust_distance;
      }
      o.progress = false;
      TPUG_ASSIGN_OR_RETURN(SearchResult r, RunSearch(space_, g_, *scorer, o));
      scored_ += r.scored;
      const double model_seconds = SecondsSince(start);
      if (r.chosen.empty()) {
        spdlog::info("tune {}: every configuration of the space is measured; the loop ends",
                     g_.name);
        break;
      }
      TPUG_ASSIGN_OR_RETURN(std::vector<double> runtime,
                            Measure(r.chosen, round, /*predicted=*/true));
      RoundTrace& t = trace_.back();
      t.model_seconds = model_seconds;
      if (r.chosen.size() >= 2) {
        std::vector<double> predicted;
        for (const ScoredConfig& sc : r.chosen) predicted.push_back(sc.score);
        t.batch_kendall = eval::KendallTauB(predicted, runtime);
      }
    }
    return Status::Ok();
  }

  // The given model fine-tuned on everything measured so far; returns the new model's path.
  StatusOr<std::string> FineTune(int64_t round) {
    Graph ft = g_;
    ft.split = "train";
    const int64_t n = static_cast<int64_t>(measured_.size());
    ft.num_configs = n;
    ft.node_config_feat.clear();
    ft.config_feat.clear();
    ft.config_runtime.clear();
    ft.config_runtime_normalizers.clear();
    double lowest = std::numeric_limits<double>::infinity();
    for (const Measurement& m : measured_) lowest = std::min(lowest, m.runtime);
    for (const Measurement& m : measured_) {
      ft.node_config_feat.insert(ft.node_config_feat.end(), m.config.layout.begin(),
                                 m.config.layout.end());
      ft.config_feat.insert(ft.config_feat.end(), m.config.tile.begin(), m.config.tile.end());
      // Integer runtimes as the dataset stores them: the ratios kept to 1e-6 of the best.
      ft.config_runtime.push_back(std::llround(m.runtime / lowest * 1e6));
      if (ft.is_tile()) ft.config_runtime_normalizers.push_back(1);
    }
    const std::string dataset = options_.work_dir + "/finetune.tpug";
    {
      TPUG_ASSIGN_OR_RETURN(auto writer, io::DatasetWriter::Create(dataset));
      TPUG_RETURN_IF_ERROR(writer->Add(ft));
      TPUG_RETURN_IF_ERROR(writer->Finish());
    }
    TrainConfig c = finetune_base_;
    c.set_dataset(dataset);
    c.clear_valid_dataset();
    c.set_collection(ft.collection);
    c.set_train_split("train");
    c.set_valid_split("");
    c.set_holdout_config_fraction(0);
    c.set_carve_valid_fraction(0);
    c.set_carve_patience(0);
    c.set_output(options_.work_dir + "/finetune-round" + std::to_string(round) + ".tpm");
    c.set_checkpoint(options_.work_dir + "/finetune.ckpt");
    c.clear_resume();
    c.set_auto_resume(false);
    c.set_init_from(options_.model);
    c.set_epochs(1);
    c.set_steps_per_epoch(static_cast<int32_t>(options_.finetune_steps));
    c.set_min_config_passes(0);
    c.set_batch_graphs(1);
    c.set_configs_per_graph(static_cast<int32_t>(std::min<int64_t>(c.configs_per_graph(), n)));
    c.set_patience(0);
    c.set_warmup_steps(
        std::min<int32_t>(c.warmup_steps(), static_cast<int32_t>(options_.finetune_steps / 5)));
    if (options_.finetune_learning_rate > 0) {
      c.set_learning_rate(options_.finetune_learning_rate);
    }
    c.set_ensemble_members(model_members_);
    c.set_ensemble_member(0);
    c.set_ensemble_member_alone(false);
    c.set_gst_finetune_epochs(0);
    c.set_stop_after_steps(0);
    c.set_dedup_configs(false);
    c.set_min_configs(2);
    c.set_checkpoint_interval_seconds(1e9);
    c.set_seed(static_cast<int64_t>(DeriveSeed(search_.seed, "tune:finetune", round) >> 1));
    c.set_threads(options_.threads);
    QuietLog quiet;
    StatusOr<train::TrainResult> result = train::Train(c);
    if (!result.ok()) {
      return result.status().WithContext("fine-tuning " + options_.model + " on the " +
                                         std::to_string(n) + " measurements of " + g_.Id());
    }
    return c.output();
  }

  const SearchSpace& space_;
  const Graph& g_;
  const SearchOptions& search_;
  const LoopOptions& options_;
  MeasurementLog* log_;
  std::vector<Measurement> measured_;  // in measuring order
  std::unordered_set<uint64_t> measured_hashes_;
  std::vector<RoundTrace> trace_;
  TrainConfig finetune_base_;  // the model's own training config, the fine-tuning's start
  int model_members_ = 1;
  double best_ = std::numeric_limits<double>::infinity();
  double default_runtime_ = kNaN;
  int64_t scored_ = 0;
};

std::string Num(double v) { return JsonNumber(v, 9); }  // null when not finite

}  // namespace

Status ValidateLoopOptions(const LoopOptions& o) {
  if (o.measure_cmd.empty()) return UsageError("usage: the loop needs --measure-cmd CMD");
  if (o.rounds < 1) return UsageError("usage: --rounds must be >= 1");
  if (o.per_round < 1) return UsageError("usage: --measure-cmd needs --measure K >= 1");
  if (!std::isfinite(o.explore) || o.explore < 0 || o.explore > 1) {
    return UsageError("usage: --explore must be in [0, 1]");
  }
  if (o.finetune_steps < 1 || o.finetune_steps > 1000000) {
    return UsageError("usage: --finetune-steps must be in [1, 1000000]");
  }
  if (o.trust_distance < -1) return UsageError("usage: --trust-distance must be >= -1");
  if (o.trust_anchors < 1) return UsageError("usage: --trust-best must be >= 1");
  if (!std::isfinite(o.finetune_learning_rate) || o.finetune_learning_rate < 0) {
    return UsageError("usage: --finetune-learning-rate must be >= 0 (0: the model's own)");
  }
  return Status::Ok();
}

StatusOr<LoopResult> RunLoop(const SearchSpace& space, const Graph& g, const SearchOptions& search,
                             const LoopOptions& options, MeasurementLog* log) {
  TPUG_RETURN_IF_ERROR(ValidateLoopOptions(options));
  return Loop(space, g, search, options, log).Run();
}

std::string LoopJson(const Graph& g, const SearchSpace& space, const LoopResult& r,
                     const LoopOptions& options, const std::string& output) {
  const RoundTrace last = r.trace.empty() ? RoundTrace{} : r.trace.back();
  std::string s =
      "{\"graph\":" + JsonQuote(g.Id()) + ",\"nodes\":" + std::to_string(g.num_nodes()) +
      ",\"configurable_nodes\":" + std::to_string(g.num_config_nodes()) +
      ",\"decisions\":" + std::to_string(space.num_decisions()) + ",\"scorer\":" +
      JsonQuote(options.model.empty() ? "measurements" : "model:" + options.model) +
      ",\"measure_cmd\":" + JsonQuote(options.measure_cmd) +
      ",\"measured\":" + std::to_string(r.measured.size()) +
      ",\"best_runtime\":" + Num(last.best_runtime) +
      ",\"default_runtime\":" + Num(last.default_runtime) + ",\"speedup\":" + Num(last.speedup) +
      ",\"configs_scored\":" + std::to_string(r.scored) + ",\"seconds\":" + Num(r.seconds) +
      ",\"rounds\":[";
  for (size_t i = 0; i < r.trace.size(); ++i) {
    const RoundTrace& t = r.trace[i];
    if (i > 0) s += ",";
    s += "{\"round\":" + std::to_string(t.round) + ",\"batch\":" + std::to_string(t.batch) +
         ",\"new_measurements\":" + std::to_string(t.new_measurements) +
         ",\"measured\":" + std::to_string(t.measured) +
         ",\"best_runtime\":" + Num(t.best_runtime) +
         ",\"default_runtime\":" + Num(t.default_runtime) + ",\"speedup\":" + Num(t.speedup) +
         ",\"batch_kendall\":" + Num(t.batch_kendall) +
         ",\"model_seconds\":" + Num(t.model_seconds) +
         ",\"measure_seconds\":" + Num(t.measure_seconds) + "}";
  }
  s += "],\"output\":" + JsonQuote(output) + "}";
  return s;
}

}  // namespace tpugraphs::tune
