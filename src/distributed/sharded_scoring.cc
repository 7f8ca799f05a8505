#include "tpugraphs/distributed/sharded_scoring.h"

#include <cstring>
#include <set>

#include "tpugraphs/io/dataset.h"

namespace tpugraphs::distributed {
namespace {

// Answers Score from the gathered scores.
class ReplayScorer : public eval::ConfigScorer {
 public:
  ReplayScorer(std::string name, std::map<int64_t, std::vector<double>> scores)
      : name_(std::move(name)), scores_(std::move(scores)) {}
  std::string name() const override { return name_; }
  StatusOr<std::vector<double>> Score(const eval::ScoringInput& input,
                                      const std::vector<int64_t>& config_indices) override {
    auto it = scores_.find(input.graph_index);
    if (it == scores_.end() || it->second.size() != config_indices.size()) {
      return InternalError("no gathered scores for graph " + input.graph.Id() + " (" +
                           std::to_string(config_indices.size()) + " configs)");
    }
    return it->second;
  }

 private:
  std::string name_;
  std::map<int64_t, std::vector<double>> scores_;
};

void AppendInt(std::string* out, int64_t v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

}  // namespace

std::vector<int> PlanScoringOwners(const io::DatasetReader& reader, const io::GraphFilter& filter,
                                   const eval::EvalIndices* eval_indices, int ranks) {
  std::vector<int64_t> selected;
  std::vector<double> costs;
  for (int64_t i = 0; i < reader.num_graphs(); ++i) {
    const io::GraphInfo& info = reader.info(i);
    if (!filter.Matches(info.collection, info.split, info.name)) continue;
    double configs = static_cast<double>(info.num_configs);
    if (eval_indices != nullptr) {
      if (const auto* list = eval_indices->Find(info.collection, info.name)) {
        configs = static_cast<double>(list->size());
      }
    }
    selected.push_back(i);
    costs.push_back(static_cast<double>(std::max<int64_t>(1, info.num_nodes)) *
                    std::max(1.0, configs));
  }
  const std::vector<int> part = BalanceByCost(costs, ranks);
  std::vector<int> owner(reader.num_graphs(), 0);
  for (size_t k = 0; k < selected.size(); ++k) owner[selected[k]] = part[k];
  return owner;
}

StatusOr<std::vector<double>> ShardedScorer::Score(const eval::ScoringInput& input,
                                                   const std::vector<int64_t>& config_indices) {
  const int64_t i = input.graph_index;
  if (i < 0 || i >= static_cast<int64_t>(owner_.size())) {
    return InternalError("sharded scoring needs dataset graphs (graph " + input.graph.Id() + ")");
  }
  if (owner_[i] != rank_) return std::vector<double>(config_indices.size(), 0.0);
  TPUG_ASSIGN_OR_RETURN(std::vector<double> scores, inner_->Score(input, config_indices));
  scores_[i] = scores;
  return scores;
}

StatusOr<std::unique_ptr<eval::ConfigScorer>> ShardedScorer::GatherScores(Communicator& comm,
                                                                          int root) {
  std::string mine;
  for (const auto& [graph, scores] : scores_) {
    AppendInt(&mine, graph);
    AppendInt(&mine, static_cast<int64_t>(scores.size()));
    mine.append(reinterpret_cast<const char*>(scores.data()), scores.size() * sizeof(double));
  }
  std::vector<std::string> all;
  TPUG_RETURN_IF_ERROR(comm.Gather(mine, root, &all));
  if (comm.rank() != root) return std::unique_ptr<eval::ConfigScorer>();
  std::map<int64_t, std::vector<double>> merged;
  for (size_t r = 0; r < all.size(); ++r) {
    const std::string& b = all[r];
    size_t pos = 0;
    while (pos < b.size()) {
      int64_t graph = 0, count = 0;
      if (b.size() - pos < 2 * sizeof(int64_t)) return InternalError("truncated scores");
      std::memcpy(&graph, b.data() + pos, sizeof(graph));
      std::memcpy(&count, b.data() + pos + 8, sizeof(count));
      pos += 16;
      if (count < 0 || (b.size() - pos) / sizeof(double) < static_cast<size_t>(count)) {
        return InternalError("truncated scores from rank " + std::to_string(r));
      }
      std::vector<double> scores(count);
      std::memcpy(scores.data(), b.data() + pos, count * sizeof(double));
      pos += count * sizeof(double);
      merged[graph] = std::move(scores);
    }
  }
  return std::unique_ptr<eval::ConfigScorer>(new ReplayScorer(inner_->name(), std::move(merged)));
}

StatusOr<std::unique_ptr<eval::ConfigScorer>> ScoreShardedFirstPass(
    Communicator& world, const std::function<StatusOr<ShardedSetup>()>& setup,
    const std::function<Status(eval::ConfigScorer&)>& pass) {
  std::unique_ptr<ShardedScorer> sharded;
  Status local = [&]() -> Status {
    TPUG_ASSIGN_OR_RETURN(ShardedSetup s, setup());
    sharded = std::make_unique<ShardedScorer>(s.scorer, std::move(s.owners), world.rank());
    return pass(*sharded);
  }();
  TPUG_RETURN_IF_ERROR(world.Agree(local));
  return sharded->GatherScores(world, 0);
}

}  // namespace tpugraphs::distributed
