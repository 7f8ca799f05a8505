// ConfigScorer: anything that scores configurations of a graph (lower = predicted faster). The
// evaluators (Evaluate, predict's writers) only talk to this interface, so a predictions file, a
// built-in baseline and a trained model are interchangeable.
//
// A model implements ConfigScorer and registers a factory with RegisterModelScorerFactory (for
// example from a static initialiser in its own source file); `tpugraphs evaluate/predict --model
// FILE` then call MakeModelScorer. Layout graphs are handed over without their config values when
// the scorer does not ask for them (wants_layout_configs() == false); ScoringInput::LayoutConfigs
// fetches exactly the configs a scorer needs from the dataset, so a model can score 100k configs
// in batches without holding them all.
//
// Thread-safety: the evaluators call Score from one thread at a time (a scorer may parallelise
// internally). ScoringInput::LayoutConfigs may be called from any thread.
#ifndef TPUGRAPHS_EVAL_SCORER_H_
#define TPUGRAPHS_EVAL_SCORER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/eval/predictions.h"

namespace tpugraphs::io {
class DatasetReader;
}

namespace tpugraphs::eval {

// What a scorer gets to see of one graph.
struct ScoringInput {
  // The graph: nodes, edges, features, num_configs; tile config_feat. For layout graphs
  // node_config_feat is empty unless the scorer asked for it. Runtimes are present but a scorer
  // must not use them.
  const Graph& graph;
  // Where the graph came from, or nullptr (e.g. predict from a predictions file alone).
  const io::DatasetReader* reader = nullptr;
  int64_t graph_index = -1;  // index in `reader`

  // Layout config values [k, nc, 18] (int8, row-major) of the given configs, in that order:
  // from graph.node_config_feat if loaded, else read from the dataset.
  StatusOr<std::vector<int8_t>> LayoutConfigs(const std::vector<int64_t>& config_indices) const;
};

class ConfigScorer {
 public:
  virtual ~ConfigScorer() = default;
  // Short description for logs and reports ("predictions:file.tsv", "baseline:random(seed=1)").
  virtual std::string name() const = 0;
  // Whether the evaluators should load layout config values into ScoringInput::graph.
  virtual bool wants_layout_configs() const { return false; }
  // One finite score per entry of config_indices (same order; indices may repeat and are all in
  // [0, graph.num_configs)). Lower = predicted faster. Errors name the graph.
  virtual StatusOr<std::vector<double>> Score(const ScoringInput& input,
                                              const std::vector<int64_t>& config_indices) = 0;

  // Scorers whose calls can be cut into pieces of configurations. Their scores come from
  // parts, a value per part and configuration that does not depend on which other
  // configurations share the call (a model ensemble's members' own scores), combined over the
  // whole call afterwards (the ensemble's standardisation). num_parts() > 0 says so, and then:
  //   CombineParts(ScoreParts(input, c)) == Score(input, c), bit for bit, and
  //   ScoreParts of any piece of c gives those configurations the same values.
  // MPI ranks share one graph's configurations through them (distributed/sharded_scoring.h).
  // 0, the default: a call is scored whole.
  virtual int64_t num_parts() const { return 0; }
  // REQUIRES: num_parts() > 0. num_parts() vectors, one value per entry of config_indices.
  virtual StatusOr<std::vector<std::vector<double>>> ScoreParts(
      const ScoringInput& input, const std::vector<int64_t>& config_indices);
  // REQUIRES: num_parts() > 0; parts as ScoreParts makes them, for a whole call.
  virtual std::vector<double> CombineParts(const std::vector<std::vector<double>>& parts) const;
};

// Scores read from a predictions file (docs/predictions-format.md).
class PredictionsScorer : public ConfigScorer {
 public:
  explicit PredictionsScorer(Predictions predictions) : predictions_(std::move(predictions)) {}
  std::string name() const override { return "predictions:" + predictions_.source(); }
  StatusOr<std::vector<double>> Score(const ScoringInput& input,
                                      const std::vector<int64_t>& config_indices) override;
  const Predictions& predictions() const { return predictions_; }

 private:
  Predictions predictions_;
};

// Built-in reference scorers that need no training (docs/evaluate.md):
//   "random": score of config c of graph G = the c-th Uniform() draw of an Rng seeded with
//             DeriveSeed(seed, "baseline-random:" + G.Id()): a uniformly random ranking per
//             graph, identical whatever the graph order, subset or thread count. The floor every
//             model must beat (expected Kendall tau 0, OPA about 0.5).
//   "index":  score = config index: the release order, which is what Kaggle's
//             sample_submission.csv ranks (0;1;2;...).
inline const std::vector<std::string>& BaselineNames() {
  static const std::vector<std::string> names = {"random", "index"};
  return names;
}
StatusOr<std::unique_ptr<ConfigScorer>> MakeBaselineScorer(const std::string& name, uint64_t seed);

// How a model scorer runs: its worker threads (0 = all cores) and the activation memory of one
// scoring thread in MiB, which sets how many configurations one forward call scores. Neither
// changes a score (docs/model.md, "Scores do not depend on their neighbours").
inline constexpr int64_t kDefaultScoringMemoryMb = 256;
struct ModelScorerOptions {
  int threads = 0;
  int64_t memory_mb = kDefaultScoringMemoryMb;
};

// Hook for trained models. The factory loads a model file and returns its scorer; `reader` is
// the dataset being scored (for feature statistics checks), possibly nullptr.
using ModelScorerFactory = std::function<StatusOr<std::unique_ptr<ConfigScorer>>(
    const std::string& model_path, const io::DatasetReader* reader,
    const ModelScorerOptions& options)>;
// Installs the factory (the last one registered wins). Returns true so it can initialise a
// static.
bool RegisterModelScorerFactory(ModelScorerFactory factory);
// Unimplemented error if no factory is registered in this build.
StatusOr<std::unique_ptr<ConfigScorer>> MakeModelScorer(const std::string& model_path,
                                                        const io::DatasetReader* reader,
                                                        const ModelScorerOptions& options);

// How an ensemble combines its members' scores of one graph (docs/evaluate.md, "Ensembles").
// Each member's scores of the configurations scored together are turned into
//   kStandardizedMean: z = (s - mean) / stddev (population; all zeros when the scores are
//                      constant), so members on different scales weigh the same;
//   kMeanRank:         the rank of s among them divided by their count (ties get their average
//                      rank), which ignores the scores' spacing altogether;
// and the ensemble's score is the mean over members, in member order.
enum class EnsembleCombine { kStandardizedMean, kMeanRank };
// "zscore" or "rank"; the error lists both.
StatusOr<EnsembleCombine> ParseEnsembleCombine(const std::string& name);
// The per-member transform above, exposed for tests.
std::vector<double> EnsembleTransform(const std::vector<double>& scores, EnsembleCombine how);

// Several scorers as one (e.g. the models of several seeds). The members' scores of a graph
// depend on which configurations are scored together only through the transform's statistics;
// evaluate and predict score each graph's configurations in one call.
class EnsembleScorer : public ConfigScorer {
 public:
  EnsembleScorer(std::vector<std::unique_ptr<ConfigScorer>> members, EnsembleCombine how);
  std::string name() const override;
  bool wants_layout_configs() const override;
  StatusOr<std::vector<double>> Score(const ScoringInput& input,
                                      const std::vector<int64_t>& config_indices) override;
  // The members' parts one after another, when every member has parts.
  int64_t num_parts() const override;
  StatusOr<std::vector<std::vector<double>>> ScoreParts(
      const ScoringInput& input, const std::vector<int64_t>& config_indices) override;
  std::vector<double> CombineParts(const std::vector<std::vector<double>>& parts) const override;
  size_t size() const { return members_.size(); }

 private:
  // The members' scores of one call combined as how_ says.
  std::vector<double> Combine(const std::vector<std::vector<double>>& scores) const;
  std::vector<std::unique_ptr<ConfigScorer>> members_;
  EnsembleCombine how_;
};

// Which scorer a command uses: exactly one of the three sources must be set. Several models make
// an EnsembleScorer combined as `ensemble` says.
struct ScorerSpec {
  std::string predictions;           // a predictions file ("-" = stdin)
  std::string baseline;              // a BaselineNames() entry
  std::vector<std::string> models;   // model files (need a registered factory)
  std::string ensemble = "zscore";   // ParseEnsembleCombine name, used with several models
  uint64_t seed = 1;                 // for baselines that draw random numbers
  ModelScorerOptions model_options;  // threads and memory of the model scorers
};
// Builds the scorer; errors name the flag ("usage: ..." when not exactly one source is given).
StatusOr<std::unique_ptr<ConfigScorer>> MakeScorer(const ScorerSpec& spec,
                                                   const io::DatasetReader* reader);

}  // namespace tpugraphs::eval

#endif  // TPUGRAPHS_EVAL_SCORER_H_
