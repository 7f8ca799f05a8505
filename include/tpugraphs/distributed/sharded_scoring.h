// `evaluate` and `predict` over the ranks of a job (docs/distributed.md).
//
// Every rank runs the command's usual loop with a ShardedScorer. Its share of the work: the
// graphs it owns, and with a scorer that scores in parts (ConfigScorer::num_parts, a model
// file's members) pieces of kRankSliceConfigs configurations of every graph, dealt round the
// ranks from the graph's owner, so that one large graph is shared by every rank. What it scores
// is kept; the rest gets zeros at no cost, which the first pass only needs to keep its loop
// going and which are never written anywhere. GatherScores then brings every rank's scores to
// the root, whose ReplayScorer combines each graph's pieces and hands the scores out in a
// second, cheap pass of the same loop that produces the output. A configuration's parts do not
// depend on the rank or on the piece that computed them, so the root's output is
// byte-identical to a single process's.
//
// Thread-safety: like any ConfigScorer (one caller at a time).
#ifndef TPUGRAPHS_DISTRIBUTED_SHARDED_SCORING_H_
#define TPUGRAPHS_DISTRIBUTED_SHARDED_SCORING_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tpugraphs/common/status.h"
#include "tpugraphs/distributed/communicator.h"
#include "tpugraphs/eval/eval_indices.h"
#include "tpugraphs/eval/scorer.h"
#include "tpugraphs/io/graph_filter.h"

namespace tpugraphs::io {
class DatasetReader;
}

namespace tpugraphs::distributed {

// Owner rank of every graph of `reader`, balanced by the scoring work (nodes x configs scored)
// of the graphs `filter` keeps (eval_indices: the configs scored, may be null); the other graphs
// go to rank 0 (they are never scored).
std::vector<int> PlanScoringOwners(const io::DatasetReader& reader, const io::GraphFilter& filter,
                                   const eval::EvalIndices* eval_indices, int ranks);

class ShardedScorer : public eval::ConfigScorer {
 public:
  // Configurations per piece of a graph scored in parts (a multiple of the model scorer's
  // chunks, ModelScorer::kScoreChunk and kTaskConfigs, so that a piece holds whole chunks of the
  // call). A graph of at most this many is scored whole by its owner.
  static constexpr int64_t kRankSliceConfigs = 256;

  // owner: per graph index of the reader the evaluators use; rank of ranks.
  ShardedScorer(eval::ConfigScorer* inner, std::vector<int> owner, int rank, int ranks)
      : inner_(inner), owner_(std::move(owner)), rank_(rank), ranks_(ranks < 1 ? 1 : ranks) {}
  std::string name() const override { return inner_->name(); }
  bool wants_layout_configs() const override { return inner_->wants_layout_configs(); }
  StatusOr<std::vector<double>> Score(const eval::ScoringInput& input,
                                      const std::vector<int64_t>& config_indices) override;
  // Graphs scored here so far, whole or in part, and the pieces of them.
  int64_t scored() const { return static_cast<int64_t>(scores_.size()); }
  int64_t pieces() const;

  // Collective: sends the scores kept here to `root`. On root, returns a scorer that answers
  // every graph's Score with the scores its ranks computed (combined by this scorer's inner
  // scorer, which must outlive it); elsewhere returns null.
  StatusOr<std::unique_ptr<eval::ConfigScorer>> GatherScores(Communicator& comm, int root);

 private:
  eval::ConfigScorer* inner_;
  std::vector<int> owner_;
  int rank_;
  int ranks_;
  // What this rank scored of a graph: whole (one part, the scores) or the pieces it owns.
  struct Piece {
    int64_t begin = 0;                       // position in the call's config_indices
    bool whole = false;                      // parts[0] is the call's scores
    std::vector<std::vector<double>> parts;  // ScoreParts of the piece (or the scores)
  };
  std::map<int64_t, std::vector<Piece>> scores_;  // graph index -> pieces
};

// This rank's share of a command's scoring under a job.
struct ShardedSetup {
  eval::ConfigScorer* scorer = nullptr;  // the real scorer, owned by the caller
  std::vector<int> owners;               // PlanScoringOwners of the command's selection
};

// The first pass of `evaluate` or `predict` over the ranks of `world`: `setup` opens this rank's
// dataset and scorer, `pass` runs the command's loop over a ShardedScorer with its outputs off.
// A failure on any rank fails every rank with the same error (Communicator::Agree). Returns on
// rank 0 the scorer that replays the gathered scores for the command's real pass, and nullptr on
// the other ranks, which are then done. The replay calls the setup's scorer (CombineParts), which
// must outlive it.
StatusOr<std::unique_ptr<eval::ConfigScorer>> ScoreShardedFirstPass(
    Communicator& world, const std::function<StatusOr<ShardedSetup>()>& setup,
    const std::function<Status(eval::ConfigScorer&)>& pass);

}  // namespace tpugraphs::distributed

#endif  // TPUGRAPHS_DISTRIBUTED_SHARDED_SCORING_H_
