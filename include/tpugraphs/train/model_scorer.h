// A trained model file as an eval::ConfigScorer, so that `tpugraphs evaluate --model FILE` and
// `tpugraphs predict --model FILE` score configurations with it (eval/scorer.h).
//
// Scoring a graph prepares it once per call, with each member's configuration-independent pass,
// and scores the requested configurations in chunks (kTaskConfigs, or kScoreChunk with
// config_attention), a task per (member, chunk) in parallel on the scorer's threads (Prepare keeps
// the prepared graph across calls); layout config values are fetched per chunk, once for all
// the members, so 100k configurations are never held at once. Scores do not depend on the
// thread count.
//
// An ensemble's file (ModelFile.ensemble, TrainConfig.ensemble_members) is scored by each member
// in turn and combined per graph as eval::EnsembleScorer combines several model files: the mean
// of the members' standardised scores (eval::EnsembleTransform, kStandardizedMean).
//
// Thread-safety: Score is called from one thread at a time (it parallelises internally).
#ifndef TPUGRAPHS_TRAIN_MODEL_SCORER_H_
#define TPUGRAPHS_TRAIN_MODEL_SCORER_H_

#include <memory>
#include <string>
#include <vector>

#include "tpugraphs/common/status.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/eval/scorer.h"
#include "tpugraphs/model/cost_model.h"
#include "tpugraphs/model_file.pb.h"

namespace tpugraphs::train {

class ModelScorer : public eval::ConfigScorer {
 public:
  static constexpr int64_t kScoreChunk = 256;
  // Configurations per scoring task when no member couples a chunk's configurations (no
  // config_attention): small enough that a 64-configuration `tune` batch is several tasks per
  // member, large enough that a task's matrix products keep their speed (the node head's rows
  // are configurable nodes x configurations).
  static constexpr int64_t kTaskConfigs = 16;

  // Loads (and self-tests) a model file, every member of an ensemble. threads: 0 = all cores;
  // memory_mb: activation memory per scoring thread (eval::ModelScorerOptions).
  static StatusOr<std::unique_ptr<ModelScorer>> Load(
      const std::string& path, int threads, int64_t memory_mb = eval::kDefaultScoringMemoryMb);

  std::string name() const override { return "model:" + path_; }
  StatusOr<std::vector<double>> Score(const eval::ScoringInput& input,
                                      const std::vector<int64_t>& config_indices) override;
  // Each member's own scores of config_indices (one vector per member, member 0 first), before
  // an ensemble's standardisation: for callers that compare configurations scored in different
  // calls, whose per-call standardisation would differ (`tpugraphs tune`). Score() is the
  // standardised mean of these.
  StatusOr<std::vector<std::vector<double>>> ScoreMembers(
      const eval::ScoringInput& input, const std::vector<int64_t>& config_indices);
  // The parts are the members' own scores (ScoreMembers), when no member couples the
  // configurations of a call (config_attention); CombineParts, their standardised mean.
  int64_t num_parts() const override;
  StatusOr<std::vector<std::vector<double>>> ScoreParts(
      const eval::ScoringInput& input, const std::vector<int64_t>& config_indices) override {
    return ScoreMembers(input, config_indices);
  }
  std::vector<double> CombineParts(const std::vector<std::vector<double>>& parts) const override;

  // A graph prepared for every member, with each member's configuration-independent pass done
  // (where the model allows: not with config_attention): made once by Prepare, then scored by
  // any number of ScoreMembers calls (`tune`'s batches of candidates). Holds no reference to the
  // graph.
  class PreparedGraphs {
   public:
    ~PreparedGraphs();

   private:
    friend class ModelScorer;
    PreparedGraphs();
    std::string id;  // the graph's Id(), checked by ScoreMembers
    std::vector<std::unique_ptr<model::PreparedGraph>> prepared;  // per member
    std::vector<std::unique_ptr<model::ForwardTape>> shared;      // per member, or null
  };
  StatusOr<std::unique_ptr<PreparedGraphs>> Prepare(const Graph& g);
  // ScoreMembers above on a graph `prepared` was made of (input.graph).
  StatusOr<std::vector<std::vector<double>>> ScoreMembers(
      const PreparedGraphs& prepared, const eval::ScoringInput& input,
      const std::vector<int64_t>& config_indices);

  // Where the scorer's time went, in seconds of wall time summed over its calls (logged at
  // debug level when the scorer is destroyed; tools/bench/bench-scaling.sh reads that line):
  // preparing the graphs with their configuration-independent passes, and the configurations'
  // chunk tasks.
  struct Phases {
    int64_t calls = 0, graphs = 0, configs = 0;
    double prepare = 0, configs_seconds = 0;
  };
  const Phases& phases() const { return phases_; }
  ~ModelScorer() override;

  const ModelFile& file() const { return file_; }
  // The members (one for a single model; member 0 is the file's own model).
  int64_t num_members() const { return static_cast<int64_t>(models_.size()); }
  const model::CostModel& model(int64_t member = 0) const { return *models_[member]; }

 private:
  ModelScorer() = default;
  std::string path_;
  ModelFile file_;
  std::vector<std::unique_ptr<model::CostModel>> models_;
  std::unique_ptr<ThreadPool> pool_;
  int64_t memory_mb_ = eval::kDefaultScoringMemoryMb;
  Phases phases_;
};

// Installs ModelScorer::Load as eval's model scorer factory (eval::RegisterModelScorerFactory);
// each scorer gets the threads and memory of the options it is made with. Returns true.
bool RegisterModelFileScorer();
inline constexpr int64_t kDefaultScoringMemoryMb = eval::kDefaultScoringMemoryMb;

}  // namespace tpugraphs::train

#endif  // TPUGRAPHS_TRAIN_MODEL_SCORER_H_
