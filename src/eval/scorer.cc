#include "tpugraphs/eval/scorer.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "tpugraphs/common/rng.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs::eval {

StatusOr<std::vector<int8_t>> ScoringInput::LayoutConfigs(
    const std::vector<int64_t>& config_indices) const {
  const int64_t nc = graph.num_config_nodes();
  const int64_t row = nc * kLayoutConfigFeatureCount;
  for (int64_t c : config_indices) {
    if (c < 0 || c >= graph.num_configs) {
      return OutOfRangeError(graph.Id() + ": config index " + std::to_string(c) +
                             " out of range [0, " + std::to_string(graph.num_configs) + ")");
    }
  }
  if (!graph.is_layout()) {
    return FailedPreconditionError(graph.Id() + ": not a layout graph");
  }
  if (!graph.node_config_feat.empty()) {
    std::vector<int8_t> out(static_cast<size_t>(row) * config_indices.size());
    for (size_t i = 0; i < config_indices.size(); ++i) {
      std::copy_n(graph.node_config_feat.begin() + config_indices[i] * row, row,
                  out.begin() + i * row);
    }
    return out;
  }
  if (reader == nullptr || graph_index < 0) {
    return FailedPreconditionError(graph.Id() +
                                   ": layout config values are neither loaded nor readable");
  }
  return reader->ReadLayoutConfigs(graph_index, config_indices);
}

StatusOr<std::vector<double>> PredictionsScorer::Score(const ScoringInput& input,
                                                       const std::vector<int64_t>& config_indices) {
  return predictions_.ScoresFor(input.graph.collection, input.graph.name, input.graph.num_configs,
                                config_indices);
}

namespace {

class RandomScorer : public ConfigScorer {
 public:
  explicit RandomScorer(uint64_t seed) : seed_(seed) {}
  std::string name() const override {
    return "baseline:random(seed=" + std::to_string(seed_) + ")";
  }
  StatusOr<std::vector<double>> Score(const ScoringInput& input,
                                      const std::vector<int64_t>& config_indices) override {
    Rng rng(DeriveSeed(seed_, "baseline-random:" + input.graph.Id()));
    std::vector<double> all(input.graph.num_configs);
    for (double& v : all) v = rng.Uniform();
    std::vector<double> out;
    out.reserve(config_indices.size());
    for (int64_t c : config_indices) out.push_back(all[c]);
    return out;
  }

 private:
  uint64_t seed_;
};

class IndexScorer : public ConfigScorer {
 public:
  std::string name() const override { return "baseline:index"; }
  StatusOr<std::vector<double>> Score(const ScoringInput&,
                                      const std::vector<int64_t>& config_indices) override {
    return std::vector<double>(config_indices.begin(), config_indices.end());
  }
};

std::mutex& FactoryMutex() {
  static std::mutex mu;
  return mu;
}
ModelScorerFactory& Factory() {
  static ModelScorerFactory factory;
  return factory;
}

}  // namespace

StatusOr<std::unique_ptr<ConfigScorer>> MakeBaselineScorer(const std::string& name, uint64_t seed) {
  if (name == "random") return std::unique_ptr<ConfigScorer>(new RandomScorer(seed));
  if (name == "index") return std::unique_ptr<ConfigScorer>(new IndexScorer());
  std::string known;
  for (const auto& n : BaselineNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgumentError("unknown baseline \"" + name + "\" (known: " + known + ")");
}

bool RegisterModelScorerFactory(ModelScorerFactory factory) {
  std::lock_guard<std::mutex> lock(FactoryMutex());
  Factory() = std::move(factory);
  return true;
}

StatusOr<std::unique_ptr<ConfigScorer>> MakeModelScorer(const std::string& model_path,
                                                        const io::DatasetReader* reader,
                                                        const ModelScorerOptions& options) {
  ModelScorerFactory factory;
  {
    std::lock_guard<std::mutex> lock(FactoryMutex());
    factory = Factory();
  }
  if (!factory) {
    return UnimplementedError(model_path +
                              ": this build has no model scorer registered (--model needs the "
                              "model library); use --predictions or --baseline");
  }
  return factory(model_path, reader, options);
}

StatusOr<std::unique_ptr<ConfigScorer>> MakeScorer(const ScorerSpec& spec,
                                                   const io::DatasetReader* reader) {
  const int sources = !spec.predictions.empty() + !spec.baseline.empty() + !spec.models.empty();
  if (sources != 1) {
    return UsageError(
        "usage: give exactly one of --predictions FILE, --baseline NAME, --model FILE...");
  }
  if (!spec.predictions.empty()) {
    TPUG_ASSIGN_OR_RETURN(Predictions p, Predictions::Read(spec.predictions));
    return std::unique_ptr<ConfigScorer>(new PredictionsScorer(std::move(p)));
  }
  if (!spec.baseline.empty()) return MakeBaselineScorer(spec.baseline, spec.seed);
  TPUG_ASSIGN_OR_RETURN(EnsembleCombine how, ParseEnsembleCombine(spec.ensemble));
  if (spec.models.size() == 1) return MakeModelScorer(spec.models[0], reader, spec.model_options);
  std::vector<std::unique_ptr<ConfigScorer>> members;
  for (const std::string& path : spec.models) {
    TPUG_ASSIGN_OR_RETURN(auto m, MakeModelScorer(path, reader, spec.model_options));
    members.push_back(std::move(m));
  }
  return std::unique_ptr<ConfigScorer>(new EnsembleScorer(std::move(members), how));
}

StatusOr<EnsembleCombine> ParseEnsembleCombine(const std::string& name) {
  if (name == "zscore") return EnsembleCombine::kStandardizedMean;
  if (name == "rank") return EnsembleCombine::kMeanRank;
  return InvalidArgumentError("unknown ensemble combination \"" + name +
                              "\" (known: zscore, rank)");
}

std::vector<double> EnsembleTransform(const std::vector<double>& scores, EnsembleCombine how) {
  const size_t n = scores.size();
  std::vector<double> out(n, 0.0);
  if (n == 0) return out;
  if (how == EnsembleCombine::kStandardizedMean) {
    double mean = 0.0;
    for (double v : scores) mean += v;
    mean /= static_cast<double>(n);
    double var = 0.0;
    for (double v : scores) var += (v - mean) * (v - mean);
    const double sd = std::sqrt(var / static_cast<double>(n));
    if (!(sd > 0.0)) return out;
    for (size_t i = 0; i < n; ++i) out[i] = (scores[i] - mean) / sd;
    return out;
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  for (size_t first = 0; first < n;) {
    size_t last = first;
    while (last + 1 < n && scores[order[last + 1]] == scores[order[first]]) ++last;
    // Ranks are 1-based; a run of ties shares the mean of its ranks.
    const double rank = 0.5 * static_cast<double>(first + last) + 1.0;
    for (size_t i = first; i <= last; ++i) out[order[i]] = rank / static_cast<double>(n);
    first = last + 1;
  }
  return out;
}

EnsembleScorer::EnsembleScorer(std::vector<std::unique_ptr<ConfigScorer>> members,
                               EnsembleCombine how)
    : members_(std::move(members)), how_(how) {}

std::string EnsembleScorer::name() const {
  std::string out =
      how_ == EnsembleCombine::kStandardizedMean ? "ensemble:zscore(" : "ensemble:rank(";
  for (size_t i = 0; i < members_.size(); ++i) {
    if (i > 0) out += ",";
    out += members_[i]->name();
  }
  return out + ")";
}

bool EnsembleScorer::wants_layout_configs() const {
  for (const auto& m : members_) {
    if (m->wants_layout_configs()) return true;
  }
  return false;
}

StatusOr<std::vector<double>> EnsembleScorer::Score(const ScoringInput& input,
                                                    const std::vector<int64_t>& config_indices) {
  std::vector<std::vector<double>> scores;
  for (const auto& m : members_) {
    TPUG_ASSIGN_OR_RETURN(std::vector<double> s, m->Score(input, config_indices));
    if (s.size() != config_indices.size()) {
      return InternalError(m->name() + ": returned " + std::to_string(s.size()) + " scores for " +
                           std::to_string(config_indices.size()) + " configurations");
    }
    scores.push_back(std::move(s));
  }
  return Combine(scores);
}

std::vector<double> EnsembleScorer::Combine(const std::vector<std::vector<double>>& scores) const {
  std::vector<double> sum(scores.empty() ? 0 : scores[0].size(), 0.0);
  for (const std::vector<double>& s : scores) {
    const std::vector<double> t = EnsembleTransform(s, how_);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += t[i];
  }
  for (double& v : sum) v /= static_cast<double>(members_.size());
  return sum;
}

int64_t EnsembleScorer::num_parts() const {
  int64_t parts = 0;
  for (const auto& m : members_) {
    if (m->num_parts() == 0) return 0;
    parts += m->num_parts();
  }
  return parts;
}

StatusOr<std::vector<std::vector<double>>> EnsembleScorer::ScoreParts(
    const ScoringInput& input, const std::vector<int64_t>& config_indices) {
  std::vector<std::vector<double>> parts;
  for (const auto& m : members_) {
    TPUG_ASSIGN_OR_RETURN(std::vector<std::vector<double>> p, m->ScoreParts(input, config_indices));
    for (std::vector<double>& v : p) parts.push_back(std::move(v));
  }
  return parts;
}

std::vector<double> EnsembleScorer::CombineParts(
    const std::vector<std::vector<double>>& parts) const {
  std::vector<std::vector<double>> scores;
  size_t at = 0;
  for (const auto& m : members_) {
    const size_t k = static_cast<size_t>(m->num_parts());
    const std::vector<std::vector<double>> mine(parts.begin() + at, parts.begin() + at + k);
    at += k;
    scores.push_back(m->CombineParts(mine));
  }
  return Combine(scores);
}

StatusOr<std::vector<std::vector<double>>> ConfigScorer::ScoreParts(const ScoringInput& input,
                                                                    const std::vector<int64_t>&) {
  return InternalError(name() + ": scores " + input.graph.Id() + " whole, not in parts");
}

std::vector<double> ConfigScorer::CombineParts(
    const std::vector<std::vector<double>>& parts) const {
  return parts.empty() ? std::vector<double>() : parts[0];
}

}  // namespace tpugraphs::eval
