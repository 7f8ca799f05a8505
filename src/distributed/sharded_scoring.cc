#include "tpugraphs/distributed/sharded_scoring.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "tpugraphs/io/dataset.h"

namespace tpugraphs::distributed {
namespace {

// Answers Score from the gathered scores: a graph scored whole as it was, one scored in pieces
// with the inner scorer's CombineParts over the pieces put together.
class ReplayScorer : public eval::ConfigScorer {
 public:
  struct Gathered {
    bool whole = false;
    std::vector<std::vector<double>> parts;  // [part][position]
    int64_t filled = 0;                      // positions the pieces covered
  };
  ReplayScorer(const eval::ConfigScorer* inner, std::map<int64_t, Gathered> scores)
      : inner_(inner), scores_(std::move(scores)) {}
  std::string name() const override { return inner_->name(); }
  StatusOr<std::vector<double>> Score(const eval::ScoringInput& input,
                                      const std::vector<int64_t>& config_indices) override {
    auto it = scores_.find(input.graph_index);
    const size_t n = config_indices.size();
    if (it == scores_.end() || it->second.parts.empty() || it->second.parts[0].size() != n ||
        it->second.filled != static_cast<int64_t>(n)) {
      return InternalError("no gathered scores for graph " + input.graph.Id() + " (" +
                           std::to_string(n) + " configs)");
    }
    if (it->second.whole) return it->second.parts[0];
    return inner_->CombineParts(it->second.parts);
  }

 private:
  const eval::ConfigScorer* inner_;
  std::map<int64_t, Gathered> scores_;
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
  const int64_t n = static_cast<int64_t>(config_indices.size());
  std::vector<double> zeros(config_indices.size(), 0.0);
  if (inner_->num_parts() == 0 || n <= kRankSliceConfigs || ranks_ <= 1) {
    if (owner_[i] != rank_) return zeros;
    TPUG_ASSIGN_OR_RETURN(std::vector<double> scores, inner_->Score(input, config_indices));
    Piece whole;
    whole.whole = true;
    whole.parts.push_back(scores);
    scores_[i].push_back(std::move(whole));
    return scores;
  }
  // Pieces dealt round the ranks, the first to the graph's owner.
  const int64_t pieces = (n + kRankSliceConfigs - 1) / kRankSliceConfigs;
  for (int64_t k = 0; k < pieces; ++k) {
    if ((owner_[i] + k) % ranks_ != rank_) continue;
    const int64_t begin = k * kRankSliceConfigs;
    const int64_t end = std::min(n, begin + kRankSliceConfigs);
    const std::vector<int64_t> mine(config_indices.begin() + begin, config_indices.begin() + end);
    Piece piece;
    piece.begin = begin;
    TPUG_ASSIGN_OR_RETURN(piece.parts, inner_->ScoreParts(input, mine));
    if (static_cast<int64_t>(piece.parts.size()) != inner_->num_parts()) {
      return InternalError(inner_->name() + ": " + std::to_string(piece.parts.size()) +
                           " parts for " + input.graph.Id() + ", not " +
                           std::to_string(inner_->num_parts()));
    }
    for (const std::vector<double>& p : piece.parts) {
      if (p.size() != mine.size()) {
        return InternalError(inner_->name() + ": a part of " + std::to_string(p.size()) +
                             " scores for " + std::to_string(mine.size()) + " configs of " +
                             input.graph.Id());
      }
    }
    scores_[i].push_back(std::move(piece));
  }
  return zeros;
}

int64_t ShardedScorer::pieces() const {
  int64_t total = 0;
  for (const auto& [graph, pieces] : scores_) total += static_cast<int64_t>(pieces.size());
  return total;
}

StatusOr<std::unique_ptr<eval::ConfigScorer>> ShardedScorer::GatherScores(Communicator& comm,
                                                                          int root) {
  // Per piece: graph, begin, count, parts, whole, then parts x count doubles.
  std::string mine;
  for (const auto& [graph, pieces] : scores_) {
    for (const Piece& p : pieces) {
      const int64_t count = static_cast<int64_t>(p.parts[0].size());
      AppendInt(&mine, graph);
      AppendInt(&mine, p.begin);
      AppendInt(&mine, count);
      AppendInt(&mine, static_cast<int64_t>(p.parts.size()));
      AppendInt(&mine, p.whole ? 1 : 0);
      for (const std::vector<double>& part : p.parts) {
        mine.append(reinterpret_cast<const char*>(part.data()), part.size() * sizeof(double));
      }
    }
  }
  spdlog::debug("sharded scoring: rank {} of {} scored {} graph(s), {} piece(s)", rank_, ranks_,
                scored(), pieces());
  std::vector<std::string> all;
  TPUG_RETURN_IF_ERROR(comm.Gather(mine, root, &all));
  if (comm.rank() != root) return std::unique_ptr<eval::ConfigScorer>();
  struct Received {
    int64_t begin;
    bool whole;
    std::vector<std::vector<double>> parts;
  };
  std::map<int64_t, std::vector<Received>> received;
  for (size_t r = 0; r < all.size(); ++r) {
    const std::string& b = all[r];
    const std::string from = " from rank " + std::to_string(r);
    size_t pos = 0;
    while (pos < b.size()) {
      int64_t head[5];
      if (b.size() - pos < sizeof(head)) return InternalError("truncated scores" + from);
      std::memcpy(head, b.data() + pos, sizeof(head));
      pos += sizeof(head);
      const int64_t count = head[2], parts = head[3];
      if (count < 0 || parts < 1 || head[1] < 0 ||
          (b.size() - pos) / sizeof(double) / static_cast<size_t>(parts) <
              static_cast<size_t>(count)) {
        return InternalError("truncated scores" + from);
      }
      Received got{head[1], head[4] != 0, std::vector<std::vector<double>>(parts)};
      for (auto& part : got.parts) {
        part.resize(count);
        std::memcpy(part.data(), b.data() + pos, count * sizeof(double));
        pos += count * sizeof(double);
      }
      received[head[0]].push_back(std::move(got));
    }
  }
  // Each graph's pieces put in their places.
  std::map<int64_t, ReplayScorer::Gathered> merged;
  for (auto& [graph, pieces] : received) {
    ReplayScorer::Gathered& g = merged[graph];
    int64_t n = 0;
    for (const Received& p : pieces) n = std::max<int64_t>(n, p.begin + p.parts[0].size());
    g.whole = pieces.size() == 1 && pieces[0].whole;
    g.parts.assign(pieces[0].parts.size(), std::vector<double>(n, 0.0));
    for (const Received& p : pieces) {
      if (p.parts.size() != g.parts.size()) return InternalError("mismatched scores of a graph");
      for (size_t q = 0; q < p.parts.size(); ++q) {
        std::copy(p.parts[q].begin(), p.parts[q].end(), g.parts[q].begin() + p.begin);
      }
      g.filled += static_cast<int64_t>(p.parts[0].size());
    }
  }
  return std::unique_ptr<eval::ConfigScorer>(new ReplayScorer(inner_, std::move(merged)));
}

StatusOr<std::unique_ptr<eval::ConfigScorer>> ScoreShardedFirstPass(
    Communicator& world, const std::function<StatusOr<ShardedSetup>()>& setup,
    const std::function<Status(eval::ConfigScorer&)>& pass) {
  std::unique_ptr<ShardedScorer> sharded;
  Status local = [&]() -> Status {
    TPUG_ASSIGN_OR_RETURN(ShardedSetup s, setup());
    sharded =
        std::make_unique<ShardedScorer>(s.scorer, std::move(s.owners), world.rank(), world.size());
    return pass(*sharded);
  }();
  TPUG_RETURN_IF_ERROR(world.Agree(local));
  return sharded->GatherScores(world, 0);
}

}  // namespace tpugraphs::distributed
