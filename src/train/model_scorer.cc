#include "tpugraphs/train/model_scorer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>

#include "tpugraphs/io/dataset.h"
#include "tpugraphs/train/model_file.h"

namespace tpugraphs::train {
namespace {

// One chunk's layout values in a ScoreMembers call: fetched by the first of the chunk's tasks,
// read by every member's, freed by the last.
struct ChunkValues {
  std::once_flag fetched;
  Status status;
  std::vector<int8_t> values;
  std::atomic<int64_t> members_left{0};
};

}  // namespace

StatusOr<std::unique_ptr<ModelScorer>> ModelScorer::Load(const std::string& path, int threads,
                                                         int64_t memory_mb) {
  TPUG_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(path));
  std::unique_ptr<ModelScorer> s(new ModelScorer());
  s->path_ = path;
  s->file_ = std::move(loaded.file);
  s->models_.push_back(std::move(loaded.model));
  for (int i = 0; i < s->file_.ensemble_size(); ++i) {
    const std::string what = path + ": ensemble member " + std::to_string(i + 1);
    const ModelFile& member = s->file_.ensemble(i);
    if (member.task() != s->file_.task()) {
      return DataLossError(what + " is a " + member.task() + " model, member 0 a " +
                           s->file_.task() + " model");
    }
    TPUG_ASSIGN_OR_RETURN(std::unique_ptr<model::CostModel> m, RestoreModel(member, what));
    s->models_.push_back(std::move(m));
  }
  s->pool_ = std::make_unique<ThreadPool>(threads);
  s->memory_mb_ = std::max<int64_t>(1, memory_mb);
  return s;
}

StatusOr<std::vector<double>> ModelScorer::Score(const eval::ScoringInput& input,
                                                 const std::vector<int64_t>& config_indices) {
  TPUG_ASSIGN_OR_RETURN(auto members, ScoreMembers(input, config_indices));
  if (members.size() == 1) return std::move(members[0]);
  return CombineParts(members);
}

int64_t ModelScorer::num_parts() const {
  for (const auto& m : models_) {
    if (!m->supports_config_chunks()) return 0;
  }
  return num_members();
}

std::vector<double> ModelScorer::CombineParts(const std::vector<std::vector<double>>& parts) const {
  if (parts.size() == 1) return parts[0];
  std::vector<double> sum(parts.empty() ? 0 : parts[0].size(), 0.0);
  for (const std::vector<double>& s : parts) {
    const std::vector<double> z =
        eval::EnsembleTransform(s, eval::EnsembleCombine::kStandardizedMean);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += z[i];
  }
  for (double& v : sum) v /= static_cast<double>(parts.size());
  return sum;
}

ModelScorer::PreparedGraphs::PreparedGraphs() = default;
ModelScorer::PreparedGraphs::~PreparedGraphs() = default;

ModelScorer::~ModelScorer() {
  if (phases_.calls == 0) return;
  spdlog::debug(
      "scoring phases (s): calls={} graphs={} configs={} prepare={:.4f} configs_seconds={:.4f}",
      phases_.calls, phases_.graphs, phases_.configs, phases_.prepare, phases_.configs_seconds);
}

StatusOr<std::unique_ptr<ModelScorer::PreparedGraphs>> ModelScorer::Prepare(const Graph& g) {
  for (const auto& m : models_) {
    if (g.kind != m->task()) {
      return FailedPreconditionError(
          path_ + ": a " + std::string(TaskKindName(m->task())) + " model cannot score " +
          std::string(TaskKindName(g.kind)) + " graph " + g.Id() +
          (g.is_layout() ? " (tile models rank the tile sizes of one fused kernel; a program's "
                           "layout configurations need a layout model)"
                         : ""));
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t members = num_members();
  std::unique_ptr<PreparedGraphs> out(new PreparedGraphs());
  out->id = g.Id();
  out->prepared.resize(members);
  out->shared.resize(members);
  std::vector<Status> statuses(members);
  // Each member's graph and its configuration-independent pass, side by side (Prepare and
  // InferShared are const; each task sets its own member's chunk size).
  pool_->ParallelFor(members, 1, [&](int64_t, int64_t kb, int64_t ke) {
    for (int64_t k = kb; k < ke; ++k) {
      model::CostModel& m = *models_[k];
      auto pg = m.Prepare(g);
      if (!pg.ok()) {
        statuses[k] = pg.status().WithContext(path_ + ": scoring " + g.Id());
        continue;
      }
      out->prepared[k] = std::move(pg).value();
      // Configurations per Forward call from the per-thread memory budget: inference keeps
      // (num_layers + 2) rows of hidden_dim floats per recomputed node and configuration (the
      // input pre-activation and state and each layer's output). The budget is per thread, so
      // the chunks (and the scores' last bits) do not depend on the thread count.
      const ModelSpec& spec = m.spec();
      const int64_t row_bytes =
          static_cast<int64_t>(spec.num_layers() + 2) * spec.hidden_dim() * sizeof(float);
      m.set_inference_chunk_rows(memory_mb_ * (int64_t{1} << 20) / row_bytes);
      if (m.supports_config_chunks()) {
        out->shared[k] = m.NewTape();
        m.InferShared(*out->prepared[k], out->shared[k].get());
      }
    }
  });
  for (const Status& st : statuses) TPUG_RETURN_IF_ERROR(st);
  phases_.prepare += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++phases_.graphs;
  return out;
}

StatusOr<std::vector<std::vector<double>>> ModelScorer::ScoreMembers(
    const eval::ScoringInput& input, const std::vector<int64_t>& config_indices) {
  TPUG_ASSIGN_OR_RETURN(std::unique_ptr<PreparedGraphs> prepared, Prepare(input.graph));
  return ScoreMembers(*prepared, input, config_indices);
}

StatusOr<std::vector<std::vector<double>>> ModelScorer::ScoreMembers(
    const PreparedGraphs& prepared, const eval::ScoringInput& input,
    const std::vector<int64_t>& config_indices) {
  const Graph& g = input.graph;
  if (prepared.id != g.Id() || static_cast<int64_t>(prepared.prepared.size()) != num_members()) {
    return InternalError(path_ + ": scoring " + g.Id() + " with the preparation of " + prepared.id);
  }
  for (int64_t c : config_indices) {
    if (c < 0 || c >= g.num_configs) {
      return OutOfRangeError(g.Id() + ": config index " + std::to_string(c) + " out of range");
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t members = num_members();
  const int64_t n = static_cast<int64_t>(config_indices.size());
  // Configurations per task: kTaskConfigs where every member scores each configuration on its
  // own (the chunk passes give the same bits for any split), kScoreChunk where config_attention
  // couples a chunk's configurations. Fixed by the model, never by the thread count.
  const int64_t task_rows = num_parts() > 0 ? kTaskConfigs : kScoreChunk;
  const int64_t chunks = (n + task_rows - 1) / task_rows;
  // One task per (member, chunk), so an ensemble's members score side by side even when a call
  // holds a single chunk, and a `tune` batch of 64 is 4 x members tasks (a 16-core machine
  // stays busy with an 8-member model); each task's scores are the same whatever runs it.
  // Tasks go chunk by chunk (task = chunk * members + member): a chunk's layout values are
  // fetched once, by the first of its tasks to run, shared by its members, and freed when the
  // last of them ends, so a call holds a few chunks' values at a time whatever its size. (Each
  // member fetching its own copy decoded every dataset block once per member: an 8-member model
  // spent a tenth of `predict` inflating the same blocks.)
  std::vector<std::vector<double>> out(members, std::vector<double>(n, 0.0));
  std::vector<Status> statuses(members * chunks);
  std::vector<ChunkValues> values(g.is_tile() ? 0 : chunks);
  for (ChunkValues& v : values) v.members_left.store(members, std::memory_order_relaxed);
  pool_->ParallelFor(members * chunks, 1, [&](int64_t, int64_t tb, int64_t te) {
    std::vector<float> scores;
    for (int64_t task = tb; task < te; ++task) {
      const int64_t chunk = task / members, k = task % members;
      const model::CostModel& m = *models_[k];
      const model::PreparedGraph& pg = *prepared.prepared[k];
      const int64_t begin = chunk * task_rows;
      const int64_t end = std::min(n, begin + task_rows);
      model::ConfigBatch batch;
      batch.num_configs = end - begin;
      if (g.is_tile()) {
        for (int64_t i = begin; i < end; ++i) {
          const int64_t c = config_indices[i];
          batch.tile_feat.insert(batch.tile_feat.end(),
                                 g.config_feat.begin() + c * kTileConfigFeatureCount,
                                 g.config_feat.begin() + (c + 1) * kTileConfigFeatureCount);
        }
      } else {
        ChunkValues& v = values[chunk];
        std::call_once(v.fetched, [&] {
          auto read = input.LayoutConfigs(
              std::vector<int64_t>(config_indices.begin() + begin, config_indices.begin() + end));
          if (read.ok()) {
            v.values = std::move(read).value();
          } else {
            v.status = read.status();
          }
        });
        if (!v.status.ok()) {
          statuses[task] = v.status;
        } else {
          batch.layout_feat = v.values;  // a copy: the batch owns its values
        }
        if (v.members_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
          std::vector<int8_t>().swap(v.values);
        }
        if (!statuses[task].ok()) continue;
      }
      Status st = m.ValidateBatch(pg, batch);
      if (!st.ok()) {
        statuses[task] = st.WithContext(g.Id());
        continue;
      }
      scores.assign(static_cast<size_t>(batch.num_configs), 0.0f);
      if (prepared.shared[k] != nullptr) {
        m.InferConfigs(pg, batch, *prepared.shared[k], scores.data());
      } else {
        m.Forward(pg, batch, scores.data(), nullptr);
      }
      for (int64_t i = 0; i < batch.num_configs; ++i) {
        out[k][begin + i] = scores[i];
        if (!std::isfinite(out[k][begin + i])) {
          statuses[task] =
              InternalError(path_ + ": non-finite score for config " +
                            std::to_string(config_indices[begin + i]) + " of " + g.Id());
        }
      }
    }
  });
  for (const Status& s : statuses) TPUG_RETURN_IF_ERROR(s);
  phases_.configs_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++phases_.calls;
  phases_.configs += n;
  return out;
}

bool RegisterModelFileScorer() {
  return eval::RegisterModelScorerFactory(
      [](const std::string& path, const io::DatasetReader* reader,
         const eval::ModelScorerOptions& options) -> StatusOr<std::unique_ptr<eval::ConfigScorer>> {
        TPUG_ASSIGN_OR_RETURN(auto scorer,
                              ModelScorer::Load(path, options.threads, options.memory_mb));
        if (reader != nullptr) {
          const std::string& trained = scorer->file().data().collection();
          bool seen = false;
          for (int64_t i = 0; i < reader->num_graphs() && !seen; ++i) {
            seen = reader->info(i).collection == trained;
          }
          if (!seen && !trained.empty()) {
            spdlog::warn("{}: model was trained on {}, which {} does not contain", path, trained,
                         reader->path());
          }
        }
        return std::unique_ptr<eval::ConfigScorer>(std::move(scorer));
      });
}

}  // namespace tpugraphs::train
