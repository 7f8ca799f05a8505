#include "tpugraphs/tune/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <unordered_set>

#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/synth/ground_truth.h"
#include "tpugraphs/train/model_scorer.h"

namespace tpugraphs::tune {
namespace {

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
    TPUG_ASSIGN_OR_RETURN(auto members, model_->ScoreMembers(input, indices));
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

StatusOr<SearchResult> RunSearch(const SearchSpace& space, const Graph& g, CandidateScorer& scorer,
                                 const SearchOptions& options) {
  TPUG_RETURN_IF_ERROR(ValidateSearchOptions(options));
  const auto start = std::chrono::steady_clock::now();
  Rng rng(DeriveSeed(options.seed, "tune:" + g.Id()));
  SearchResult result;
  std::vector<ScoredConfig> all;
  std::unordered_set<uint64_t> seen;
  std::optional<Progress> progress;
  if (options.progress) progress.emplace("tune " + g.name, options.budget, "configs");
  auto score_batch = [&](std::vector<ScoredConfig> batch) -> Status {
    if (batch.empty()) return Status::Ok();
    std::vector<Config> configs;
    for (const auto& s : batch) configs.push_back(s.config);
    TPUG_ASSIGN_OR_RETURN(CandidateScorer::WithSpread scores, scorer.ScoreWithSpread(configs));
    if (scores.score.size() != batch.size() || scores.spread.size() != batch.size()) {
      return InternalError(scorer.name() + ": wrong score count");
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      const double ranked = scores.score[i] + options.uncertainty * scores.spread[i];
      if (!std::isfinite(ranked)) {
        return InternalError(scorer.name() + ": non-finite score for a configuration of " + g.Id());
      }
      batch[i].score = ranked;
      batch[i].spread = scores.spread[i];
      all.push_back(std::move(batch[i]));
    }
    result.scored += static_cast<int64_t>(batch.size());
    if (progress) progress->Add(static_cast<int64_t>(batch.size()));
    return Status::Ok();
  };

  // 1. The seeds: the default and (evolution) the dataset's own configurations.
  std::vector<ScoredConfig> seeds;
  seeds.push_back({space.base(), 0, "default"});
  seen.insert(HashConfig(space.base()));
  if (options.strategy == "evolution") {
    const int64_t cap =
        std::min(options.budget - 1,
                 options.dataset_seeds >= 0 ? options.dataset_seeds : options.budget / 4);
    std::vector<std::pair<int64_t, Config>> valid;
    const int64_t row =
        g.is_layout() ? g.num_config_nodes() * kLayoutConfigFeatureCount : kTileConfigFeatureCount;
    for (int64_t c = 1; c < g.num_configs; ++c) {
      Config cfg;
      if (g.is_layout()) {
        cfg.layout.assign(g.node_config_feat.begin() + c * row,
                          g.node_config_feat.begin() + (c + 1) * row);
      } else {
        cfg.tile.assign(g.config_feat.begin() + c * row, g.config_feat.begin() + (c + 1) * row);
      }
      if (!space.Check(cfg).ok()) {
        ++result.invalid_dataset_configs;
        continue;
      }
      if (!seen.insert(HashConfig(cfg)).second) continue;
      valid.emplace_back(c, std::move(cfg));
    }
    const int64_t n = static_cast<int64_t>(valid.size());
    const int64_t take = std::min(cap, n);
    for (int64_t i = 0; i < take; ++i) {
      auto& [index, cfg] = valid[static_cast<size_t>(i * n / take)];
      seeds.push_back({std::move(cfg), 0, "dataset:" + std::to_string(index)});
    }
    result.dataset_configs = take;
  }
  // The trust region's anchors: the default and the dataset seeds.
  std::vector<Config> anchors;
  for (const auto& sc : seeds) {
    if (options.trust_anchors == "configs" || sc.origin == "default") anchors.push_back(sc.config);
  }
  auto in_region = [&](const Config& c) {
    if (options.max_distance < 0) return true;
    for (const Config& a : anchors) {
      if (space.WithinDistance(c, a, options.max_distance)) return true;
    }
    return false;
  };
  // Centred on the default alone: the dataset seeds outside the region are not scored either.
  if (options.trust_anchors == "default" && options.max_distance >= 0) {
    std::vector<ScoredConfig> kept;
    for (auto& sc : seeds) {
      if (sc.origin == "default" || in_region(sc.config)) kept.push_back(std::move(sc));
    }
    seeds = std::move(kept);
    result.dataset_configs = static_cast<int64_t>(seeds.size()) - 1;
  }
  // A first batch of fewer than `batch` seeds (no or few dataset configurations) is filled with
  // neighbours of the default, so that the scorer's first call sees a spread of configurations
  // (an ensemble's standardisation is fixed on it).
  for (int64_t tries = 0;
       options.strategy == "evolution" &&
       static_cast<int64_t>(seeds.size()) < std::min(options.batch, options.budget) && tries < 1000;
       ++tries) {
    Config child = space.Mutate(space.base(), rng);
    if (!in_region(child)) continue;
    if (seen.insert(HashConfig(child)).second) seeds.push_back({std::move(child), 0, "search"});
  }
  for (size_t b = 0; b < seeds.size(); b += static_cast<size_t>(options.batch)) {
    const size_t e = std::min(seeds.size(), b + static_cast<size_t>(options.batch));
    TPUG_RETURN_IF_ERROR(score_batch({seeds.begin() + b, seeds.begin() + e}));
  }
  result.default_config = all[0];
  result.best_dataset_score = std::numeric_limits<double>::infinity();
  for (const auto& s : all) {
    if (s.origin.rfind("dataset:", 0) == 0) {
      result.best_dataset_score = std::min(result.best_dataset_score, s.score);
    }
  }

  // 2. The search.
  std::vector<size_t> order;  // indices into `all`, best first (ties: scored earlier)
  auto rank = [&]() {
    order.resize(all.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return all[a].score < all[b].score; });
  };
  while (result.scored < options.budget) {
    const int64_t want = std::min(options.batch, options.budget - result.scored);
    std::vector<ScoredConfig> batch;
    rank();
    const int64_t elite = std::min<int64_t>(options.elite, static_cast<int64_t>(order.size()));
    auto parent = [&]() -> const Config& {
      const size_t a = rng.UniformInt(static_cast<uint64_t>(elite));
      const size_t b = rng.UniformInt(static_cast<uint64_t>(elite));
      return all[order[std::min(a, b)]].config;  // order is best first
    };
    int64_t failures = 0;
    while (static_cast<int64_t>(batch.size()) < want && failures < 1000) {
      Config child;
      if (options.strategy == "random") {
        child = space.Random(rng);
      } else {
        child = parent();
        if (rng.Uniform() < 0.25) child = space.Crossover(child, parent(), rng);
        child = space.Mutate(child, rng);
      }
      if (seen.count(HashConfig(child)) > 0 || !in_region(child)) {
        ++failures;
        continue;
      }
      seen.insert(HashConfig(child));
      failures = 0;
      batch.push_back(
          {std::move(child), 0, options.strategy == "random" ? std::string("random") : "search"});
    }
    if (batch.empty()) break;  // the space is exhausted
    TPUG_RETURN_IF_ERROR(score_batch(std::move(batch)));
  }
  rank();

  // 3. The output set.
  if (options.measure > 0) {
    const size_t k = static_cast<size_t>(options.measure);
    std::vector<size_t> chosen = {order[0]};
    if (k >= 2 && order[0] != 0) chosen.push_back(0);  // all[0] is the default
    const size_t pool = std::min(order.size(), 3 * k);
    while (chosen.size() < std::min(k, order.size())) {
      size_t best = SIZE_MAX;
      int64_t best_d = -1;
      for (size_t i = 0; i < pool; ++i) {
        const size_t cand = order[i];
        if (std::find(chosen.begin(), chosen.end(), cand) != chosen.end()) continue;
        int64_t d = INT64_MAX;
        for (size_t c : chosen) d = std::min(d, space.Distance(all[cand].config, all[c].config));
        if (d > best_d) {
          best_d = d;
          best = cand;
        }
      }
      if (best == SIZE_MAX) {  // the pool is used up: the next best
        for (size_t i : order) {
          if (std::find(chosen.begin(), chosen.end(), i) == chosen.end()) {
            best = i;
            break;
          }
        }
      }
      chosen.push_back(best);
    }
    std::stable_sort(chosen.begin(), chosen.end(),
                     [&](size_t a, size_t b) { return all[a].score < all[b].score; });
    for (size_t i : chosen) result.chosen.push_back(all[i]);
  } else {
    for (size_t i = 0; i < order.size() && i < static_cast<size_t>(options.top); ++i) {
      result.chosen.push_back(all[order[i]]);
    }
  }
  if (progress) progress->Finish();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tpugraphs::tune
