#include "tpugraphs/eval/scorer.h"

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
                                                        const io::DatasetReader* reader) {
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
  return factory(model_path, reader);
}

StatusOr<std::unique_ptr<ConfigScorer>> MakeScorer(const ScorerSpec& spec,
                                                   const io::DatasetReader* reader) {
  const int sources = !spec.predictions.empty() + !spec.baseline.empty() + !spec.model.empty();
  if (sources != 1) {
    return InvalidArgumentError(
        "usage: give exactly one of --predictions FILE, --baseline NAME, --model FILE");
  }
  if (!spec.predictions.empty()) {
    TPUG_ASSIGN_OR_RETURN(Predictions p, Predictions::Read(spec.predictions));
    return std::unique_ptr<ConfigScorer>(new PredictionsScorer(std::move(p)));
  }
  if (!spec.baseline.empty()) return MakeBaselineScorer(spec.baseline, spec.seed);
  return MakeModelScorer(spec.model, reader);
}

}  // namespace tpugraphs::eval
