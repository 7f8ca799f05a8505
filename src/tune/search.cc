#include "tpugraphs/tune/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <unordered_set>

#include "tpugraphs/common/hash.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/synth/ground_truth.h"
#include "tpugraphs/train/model_scorer.h"

namespace tpugraphs::tune {
namespace {

// A configuration's key in a search's set of those already taken: WordHash of its values, eight
// bytes a step (HashConfig, the FNV-1a stored in measurement files, goes a byte at a time: a
// layout configuration of 300 configurable nodes is 5,400 bytes, and a search keys thousands).
// Only equality matters; the keys never leave the search.
uint64_t SeenKey(const Config& c) {
  const uint64_t h = WordHash(c.layout.data(), c.layout.size());
  return WordHash(c.tile.data(), c.tile.size() * sizeof(float), h);
}

class ModelCandidateScorer : public CandidateScorer {
 public:
  ModelCandidateScorer(train::ModelScorer* model, const Graph& g) : model_(model), g_(g) {
    g_.node_config_feat.clear();
    g_.config_feat.clear();
    g_.config_runtime.clear();
    g_.config_runtime_normalizers.clear();
    g_.num_configs = 0;
  }
  std::string name() const override { return model_->name(); }

  StatusOr<std::vector<double>> Score(const std::vector<Config>& configs) override {
    TPUG_ASSIGN_OR_RETURN(WithSpread s, ScoreWithSpread(configs));
    return std::move(s.score);
  }

  StatusOr<WithSpread> ScoreWithSpread(const std::vector<Config>& configs) override {
    const int64_t k = static_cast<int64_t>(configs.size());
    g_.num_configs = k;
    g_.node_config_feat.clear();
    g_.config_feat.clear();
    for (const Config& c : configs) {
      g_.node_config_feat.insert(g_.node_config_feat.end(), c.layout.begin(), c.layout.end());
      g_.config_feat.insert(g_.config_feat.end(), c.tile.begin(), c.tile.end());
    }
    g_.config_runtime.assign(static_cast<size_t>(k), 0);
    if (g_.is_tile()) g_.config_runtime_normalizers.assign(static_cast<size_t>(k), 1);
    std::vector<int64_t> indices(static_cast<size_t>(k));
    std::iota(indices.begin(), indices.end(), 0);
    eval::ScoringInput input{g_};
    if (prepared_ == nullptr) {  // the graph and its configuration-independent passes, once
      TPUG_ASSIGN_OR_RETURN(prepared_, model_->Prepare(g_));
    }
    TPUG_ASSIGN_OR_RETURN(auto members, model_->ScoreMembers(*prepared_, input, indices));
    if (members.size() == 1) {
      return WithSpread{members[0], std::vector<double>(static_cast<size_t>(k), 0.0)};
    }
    if (mean_.empty()) {  // the first batch fixes each member's standardisation
      for (const auto& s : members) {
        double m = 0, v = 0;
        for (double x : s) m += x;
        m /= static_cast<double>(s.size());
        for (double x : s) v += (x - m) * (x - m);
        v = std::sqrt(v / static_cast<double>(s.size()));
        mean_.push_back(m);
        inv_std_.push_back(v > 0 ? 1.0 / v : 1.0);  // constant scores: keep the scale
      }
    }
    WithSpread out{std::vector<double>(static_cast<size_t>(k), 0.0),
                   std::vector<double>(static_cast<size_t>(k), 0.0)};
    const double n = static_cast<double>(members.size());
    for (size_t m = 0; m < members.size(); ++m) {
      for (int64_t i = 0; i < k; ++i) out.score[i] += (members[m][i] - mean_[m]) * inv_std_[m];
    }
    for (double& x : out.score) x /= n;
    for (size_t m = 0; m < members.size(); ++m) {
      for (int64_t i = 0; i < k; ++i) {
        const double d = (members[m][i] - mean_[m]) * inv_std_[m] - out.score[i];
        out.spread[i] += d * d;
      }
    }
    for (double& x : out.spread) x = std::sqrt(x / n);
    return out;
  }

 private:
  train::ModelScorer* model_;
  Graph g_;
  std::unique_ptr<train::ModelScorer::PreparedGraphs> prepared_;
  std::vector<double> mean_, inv_std_;
};

class OracleCandidateScorer : public CandidateScorer {
 public:
  OracleCandidateScorer(const synth::GroundTruth* truth, std::string id)
      : truth_(truth), id_(std::move(id)) {}
  std::string name() const override { return "oracle:synthetic:" + truth_->path(); }
  StatusOr<std::vector<double>> Score(const std::vector<Config>& configs) override {
    std::vector<double> out;
    out.reserve(configs.size());
    for (const Config& c : configs) {
      StatusOr<double> ns = truth_->task() == TaskKind::kLayout
                                ? truth_->LayoutCostNs(c.layout.data(), id_)
                                : truth_->TileCostNs(c.tile.data(), id_);
      if (!ns.ok()) return ns.status();
      out.push_back(*ns);
    }
    return out;
  }

 private:
  const synth::GroundTruth* truth_;
  std::string id_;
};

}  // namespace

StatusOr<CandidateScorer::WithSpread> CandidateScorer::ScoreWithSpread(
    const std::vector<Config>& configs) {
  TPUG_ASSIGN_OR_RETURN(std::vector<double> s, Score(configs));
  std::vector<double> spread(s.size(), 0.0);
  return WithSpread{std::move(s), std::move(spread)};
}

StatusOr<std::unique_ptr<CandidateScorer>> MakeModelCandidateScorer(train::ModelScorer* model,
                                                                    const Graph& g) {
  if (model->model().task() != g.kind) {
    return FailedPreconditionError(
        model->name().substr(6) + ": a " + std::string(TaskKindName(model->model().task())) +
        " model cannot tune " + std::string(TaskKindName(g.kind)) + " graph " + g.Id() +
        " (train a " + std::string(TaskKindName(g.kind)) + " model for it)");
  }
  return std::unique_ptr<CandidateScorer>(new ModelCandidateScorer(model, g));
}

StatusOr<std::unique_ptr<CandidateScorer>> MakeOracleCandidateScorer(
    const synth::GroundTruth* truth, const Graph& g) {
  if (truth->task() != g.kind) {
    return FailedPreconditionError(
        truth->path() + " is a " + std::string(TaskKindName(truth->task())) + " program but " +
        g.Id() + " is a " + std::string(TaskKindName(g.kind)) + " graph");
  }
  if (g.is_layout() && truth->configurable() != g.node_config_ids) {
    return FailedPreconditionError(
        truth->path() + ": its configurable nodes differ from those of " + g.Id() + " (" +
        std::to_string(truth->configurable().size()) + " against " +
        std::to_string(g.num_config_nodes()) + "); give the program the graph was ingested from");
  }
  return std::unique_ptr<CandidateScorer>(new OracleCandidateScorer(truth, g.Id()));
}

Status ValidateSearchOptions(const SearchOptions& o) {
  if (o.budget < 1) return InvalidArgumentError("--budget must be >= 1");
  if (o.top < 1) return InvalidArgumentError("--top must be >= 1");
  if (o.measure < 0) return InvalidArgumentError("--measure must be >= 0");
  if (o.measure > o.budget) return InvalidArgumentError("--measure must be <= --budget");
  if (o.batch < 1) return InvalidArgumentError("--batch must be >= 1");
  if (o.elite < 1) return InvalidArgumentError("--elite must be >= 1");
  if (o.max_distance < -1) return InvalidArgumentError("--max-distance must be >= -1");
  if (o.trust_anchors != "configs" && o.trust_anchors != "default") {
    return InvalidArgumentError("--trust-anchors must be configs or default, got '" +
                                o.trust_anchors + "'");
  }
  if (!std::isfinite(o.uncertainty) || o.uncertainty < 0) {
    return InvalidArgumentError("--uncertainty must be a finite value >= 0");
  }
  if (o.strategy != "evolution" && o.strategy != "random") {
    return InvalidArgumentError("--strategy must be evolution or random, got '" + o.strategy + "'");
  }
  return Status::Ok();
}

namespace {

// One search (RunSearch): its state and its steps. Every random draw comes from `rng_` in the
// order the steps run, so a seed gives the same search whatever the scorer's threads.
class Searcher {
 public:
  Searcher(const SearchSpace& space, const Graph& g, CandidateScorer& scorer,
           const SearchOptions& options)
      : space_(space),
        g_(g),
        scorer_(scorer),
        options_(options),
        rng_(DeriveSeed(options.seed, "tune:" + g.Id())) {
    if (options.progress) progress_.emplace("tune " + g.name, options.budget, "configs");
  }

  StatusOr<SearchResult> Run() {
    const auto start = std::chrono::steady_clock::now();
    std::vector<ScoredConfig> seeds = Seeds();
    for (size_t b = 0; b < seeds.size(); b += static_cast<size_t>(options_.batch)) {
      const size_t e = std::min(seeds.size(), b + static_cast<size_t>(options_.batch));
      TPUG_RETURN_IF_ERROR(ScoreBatch({seeds.begin() + b, seeds.begin() + e}));
    }
    NoteSeedScores();
    TPUG_RETURN_IF_ERROR(Search());
    Rank();
    if (options_.measure > 0) {
      ChooseMeasurementSet();
    } else {
      for (size_t i : Choosable()) {
        if (result_.chosen.size() >= static_cast<size_t>(options_.top)) break;
        result_.chosen.push_back(all_[i]);
      }
    }
    if (progress_) progress_->Finish();
    result_.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::move(result_);
  }

 private:
  bool Evolution() const { return options_.strategy == "evolution"; }

  // Scores `batch` (ranked value: score + uncertainty x spread) and keeps it in all_.
  Status ScoreBatch(std::vector<ScoredConfig> batch) {
    if (batch.empty()) return Status::Ok();
    std::vector<Config> configs;
    for (const auto& sc : batch) configs.push_back(sc.config);
    const auto t0 = std::chrono::steady_clock::now();
    TPUG_ASSIGN_OR_RETURN(CandidateScorer::WithSpread scores, scorer_.ScoreWithSpread(configs));
    result_.scorer_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (scores.score.size() != batch.size() || scores.spread.size() != batch.size()) {
      return InternalError(scorer_.name() + ": wrong score count");
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      const double ranked = scores.score[i] + options_.uncertainty * scores.spread[i];
      if (!std::isfinite(ranked)) {
        return InternalError(scorer_.name() + ": non-finite score for a configuration of " +
                             g_.Id());
      }
      batch[i].score = ranked;
      batch[i].spread = scores.spread[i];
      all_.push_back(std::move(batch[i]));
    }
    result_.scored += static_cast<int64_t>(batch.size());
    if (progress_) progress_->Add(static_cast<int64_t>(batch.size()));
    return Status::Ok();
  }

  // Configuration c of the graph, as the space holds configurations.
  Config GraphConfig(int64_t c) const {
    Config cfg;
    if (g_.is_layout()) {
      const int64_t row = g_.num_config_nodes() * kLayoutConfigFeatureCount;
      cfg.layout.assign(g_.node_config_feat.begin() + c * row,
                        g_.node_config_feat.begin() + (c + 1) * row);
    } else {
      const int64_t row = kTileConfigFeatureCount;
      cfg.tile.assign(g_.config_feat.begin() + c * row, g_.config_feat.begin() + (c + 1) * row);
    }
    return cfg;
  }

  // Up to dataset_seeds (default budget / 4) of the graph's distinct valid configurations, spread
  // evenly over its configuration order.
  void AddDatasetSeeds(std::vector<ScoredConfig>* seeds) {
    const int64_t cap = std::max<int64_t>(
        0, std::min(options_.budget - static_cast<int64_t>(seeds->size()),
                    options_.dataset_seeds >= 0 ? options_.dataset_seeds : options_.budget / 4));
    std::vector<std::pair<int64_t, Config>> valid;
    for (int64_t c = 1; c < g_.num_configs; ++c) {
      Config cfg = GraphConfig(c);
      if (!space_.Check(cfg).ok()) {
        ++result_.invalid_dataset_configs;
        continue;
      }
      if (!seen_.insert(SeenKey(cfg)).second) continue;
      valid.emplace_back(c, std::move(cfg));
    }
    const int64_t n = static_cast<int64_t>(valid.size());
    const int64_t take = std::min(cap, n);
    for (int64_t i = 0; i < take; ++i) {
      auto& [index, cfg] = valid[static_cast<size_t>(i * n / take)];
      seeds->push_back({std::move(cfg), 0, "dataset:" + std::to_string(index)});
    }
    result_.dataset_configs = take;
  }

  bool InRegion(const Config& c) const {
    if (options_.max_distance < 0) return true;
    for (const Config& a : anchors_) {
      if (space_.WithinDistance(c, a, options_.max_distance)) return true;
    }
    return false;
  }

  // The first configurations scored: the default, (evolution) the dataset's own, the trust
  // region applied, and neighbours of the default filling a first batch, so that the scorer's
  // first call sees a spread of configurations (an ensemble's standardisation is fixed on it).
  std::vector<ScoredConfig> Seeds() {
    std::vector<ScoredConfig> seeds;
    seeds.push_back({space_.base(), 0, "default"});
    seen_.insert(SeenKey(space_.base()));
    for (const Config& c : options_.extra_seeds) {
      if (static_cast<int64_t>(seeds.size()) >= options_.budget) break;
      if (seen_.insert(SeenKey(c)).second) seeds.push_back({c, 0, "measured"});
    }
    if (Evolution()) AddDatasetSeeds(&seeds);
    if (!options_.anchors.empty()) {
      anchors_ = options_.anchors;
    } else {
      for (const auto& sc : seeds) {
        if (options_.trust_anchors == "configs" || sc.origin == "default" ||
            sc.origin == "measured") {
          anchors_.push_back(sc.config);
        }
      }
    }
    // Centred on the default alone: the dataset seeds outside the region are not scored either.
    if (options_.trust_anchors == "default" && options_.max_distance >= 0) {
      std::vector<ScoredConfig> kept;
      int64_t dataset_kept = 0;
      for (auto& sc : seeds) {
        if (sc.origin == "default" || sc.origin == "measured" || InRegion(sc.config)) {
          if (sc.origin.rfind("dataset:", 0) == 0) ++dataset_kept;
          kept.push_back(std::move(sc));
        }
      }
      seeds = std::move(kept);
      result_.dataset_configs = dataset_kept;
    }
    const int64_t first_batch = std::min(options_.batch, options_.budget);
    for (int64_t tries = 0;
         Evolution() && static_cast<int64_t>(seeds.size()) < first_batch && tries < 1000; ++tries) {
      Config child = space_.Mutate(space_.base(), rng_);
      if (!InRegion(child)) continue;
      if (seen_.insert(SeenKey(child)).second) seeds.push_back({std::move(child), 0, "search"});
    }
    return seeds;
  }

  void NoteSeedScores() {
    result_.default_config = all_[0];
    result_.best_dataset_score = std::numeric_limits<double>::infinity();
    for (const auto& sc : all_) {
      if (sc.origin.rfind("dataset:", 0) == 0) {
        result_.best_dataset_score = std::min(result_.best_dataset_score, sc.score);
      }
    }
  }

  // order_: indices into all_, best first (ties: scored earlier).
  void Rank() {
    order_.resize(all_.size());
    std::iota(order_.begin(), order_.end(), 0);
    std::stable_sort(order_.begin(), order_.end(),
                     [&](size_t a, size_t b) { return all_[a].score < all_[b].score; });
  }

  // A new configuration: a uniform draw (random), or a mutated child of elite parents, crossed
  // over a quarter of the time (evolution).
  Config Candidate(int64_t elite) {
    if (!Evolution()) return space_.Random(rng_);
    auto parent = [&]() -> const Config& {
      const size_t a = rng_.UniformInt(static_cast<uint64_t>(elite));
      const size_t b = rng_.UniformInt(static_cast<uint64_t>(elite));
      return all_[order_[std::min(a, b)]].config;  // order_ is best first
    };
    Config child = parent();
    if (rng_.Uniform() < 0.25) child = space_.Crossover(child, parent(), rng_);
    return space_.Mutate(child, rng_);
  }

  // Batches of new configurations until the budget is spent or the space is exhausted.
  Status Search() {
    while (result_.scored < options_.budget) {
      const int64_t want = std::min(options_.batch, options_.budget - result_.scored);
      std::vector<ScoredConfig> batch;
      Rank();
      const int64_t elite = std::min<int64_t>(options_.elite, static_cast<int64_t>(order_.size()));
      int64_t failures = 0;
      while (static_cast<int64_t>(batch.size()) < want && failures < 1000) {
        Config child = Candidate(elite);
        const uint64_t key = SeenKey(child);
        if (seen_.count(key) > 0 || !InRegion(child)) {
          ++failures;
          continue;
        }
        seen_.insert(key);
        failures = 0;
        batch.push_back({std::move(child), 0, Evolution() ? std::string("search") : "random"});
      }
      if (batch.empty()) break;  // the space is exhausted
      TPUG_RETURN_IF_ERROR(ScoreBatch(std::move(batch)));
    }
    return Status::Ok();
  }

  // order_ without the configurations options_.exclude names.
  std::vector<size_t> Choosable() const {
    if (options_.exclude.empty()) return order_;
    std::vector<size_t> out;
    for (size_t i : order_) {
      if (options_.exclude.count(HashConfig(all_[i].config)) == 0) out.push_back(i);
    }
    return out;
  }

  // The measurement set: the measure_best best, the default, then greedily the configuration of
  // the best 3K farthest from those chosen (the next best once they are used up), listed best
  // first. Excluded configurations are passed over throughout.
  void ChooseMeasurementSet() {
    const size_t k = static_cast<size_t>(options_.measure);
    const std::vector<size_t> order = Choosable();
    if (order.empty()) return;
    const size_t n = std::min(k, order.size());
    std::vector<size_t> chosen;
    for (size_t i = 0;
         i < order.size() && chosen.size() < n &&
         chosen.size() < static_cast<size_t>(std::max<int64_t>(1, options_.measure_best));
         ++i) {
      chosen.push_back(order[i]);
    }
    auto taken = [&](size_t i) {
      return std::find(chosen.begin(), chosen.end(), i) != chosen.end();
    };
    // all_[0] is the default.
    const bool default_choosable = std::find(order.begin(), order.end(), 0) != order.end();
    if (k >= 2 && chosen.size() < n && default_choosable && !taken(0)) chosen.push_back(0);
    const size_t pool = std::min(order.size(), 3 * k);
    while (chosen.size() < n) {
      size_t best = SIZE_MAX;
      int64_t best_d = -1;
      for (size_t i = 0; i < pool; ++i) {
        const size_t cand = order[i];
        if (taken(cand)) continue;
        int64_t d = INT64_MAX;
        for (size_t c : chosen) d = std::min(d, space_.Distance(all_[cand].config, all_[c].config));
        if (d > best_d) {
          best_d = d;
          best = cand;
        }
      }
      if (best == SIZE_MAX) {  // the pool is used up: the next best
        for (size_t i : order) {
          if (!taken(i)) {
            best = i;
            break;
          }
        }
      }
      chosen.push_back(best);
    }
    std::stable_sort(chosen.begin(), chosen.end(),
                     [&](size_t a, size_t b) { return all_[a].score < all_[b].score; });
    for (size_t i : chosen) result_.chosen.push_back(all_[i]);
  }

  const SearchSpace& space_;
  const Graph& g_;
  CandidateScorer& scorer_;
  const SearchOptions& options_;
  Rng rng_;
  std::optional<Progress> progress_;
  SearchResult result_;
  std::vector<ScoredConfig> all_;  // every configuration scored, in scoring order
  std::unordered_set<uint64_t> seen_;
  std::vector<Config> anchors_;  // the trust region's centres
  std::vector<size_t> order_;
};

}  // namespace

StatusOr<SearchResult> RunSearch(const SearchSpace& space, const Graph& g, CandidateScorer& scorer,
                                 const SearchOptions& options) {
  TPUG_RETURN_IF_ERROR(ValidateSearchOptions(options));
  return Searcher(space, g, scorer, options).Run();
}

}  // namespace tpugraphs::tune
