// The chunked training step of a TrainingRun (training_run.h): a step's gradient as tasks of
// (graph, chunk of its configurations) on the step's threads, shared among the ranks
// (docs/train.md, "More cores and machines"; docs/distributed.md, "A rank's step as tasks").
// Whatever the threads and ranks, every sum is formed in one fixed order, so the model file is
// the same bit for bit.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <utility>

#include "tpugraphs/common/rng.h"
#include "tpugraphs/distributed/communicator.h"
#include "tpugraphs/model/losses.h"
#include "tpugraphs/train/config_sampling.h"
#include "training_run.h"

namespace tpugraphs::train::internal {
namespace {

// Rows of work (CostModel::config_rows, 0.25-0.45 us each on one core of a 2-vCPU EPYC) per
// chunk task: enough to cover a task's fixed costs (a parameter-sized gradient buffer zeroed and
// summed, the rows of the shared gradient it writes), and few enough that one graph makes many
// tasks. On a 3,000-node program (layout recipe, 32 configurations: 18 tasks), 1,536 rows cost
// 9% at -j 1 over 3,072 (9 tasks) and gained 5% at -j 2; 1,024 lost at both. A property of the
// data: the chunks, and so the model file, never depend on the number of threads or ranks.
constexpr int64_t kChunkRows = 1536;

// config_attention models' chunks take twice the rows: each chunk also pays for its part of
// the join (its rows gathered and scattered) and for the node head's products in pieces. On the
// 3,000-node program (--config-attention 8, 32 configurations per step: 9 tasks, not 18) a step
// took 12.3 / 13.9 ms at -j 1 against 13.3 / 14.2 ms as one task per graph, where 18 chunks
// took 14.0-15.5 ms.
constexpr int64_t kAttentionChunkRows = 2 * kChunkRows;

int64_t ChunkRows(const model::CostModel& m) {
  return m.attends_across_configs() ? kAttentionChunkRows : kChunkRows;
}

// Floats per shard of SumInOrder's parallel sum.
constexpr int64_t kSumBlock = 4096;

// Seconds since t, and t moved to now.
double Lap(std::chrono::steady_clock::time_point* t) {
  const auto now = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(now - *t).count();
  *t = now;
  return s;
}

}  // namespace

Status TrainingRun::ReadStepGraph(int64_t pass, int64_t j, Prefetched* out) {
  const Member& m = train_[j];
  out->pass = pass;
  out->j = j;
  TPUG_ASSIGN_OR_RETURN(out->loaded, store_->Get(m));
  out->picks = SampleConfigs(
      m.pool, config_.configs_per_graph(),
      DeriveSeed(member_seed_, "sample", static_cast<uint64_t>(pass), static_cast<uint64_t>(j)));
  TPUG_ASSIGN_OR_RETURN(out->batch, MakeBatch(m, out->loaded->graph, out->picks));
  out->ok = true;
  return Status::Ok();
}

StatusOr<StepStats> TrainingRun::ChunkedStep(int epoch, int64_t pass, int64_t step,
                                             const std::vector<int64_t>& order, int64_t begin,
                                             int64_t end, const GstOptions& gst_options) {
  const int64_t nb = end - begin;
  std::vector<int64_t> graphs(order.begin() + begin, order.begin() + end);
  std::vector<double> records(2 * nb, 0.0);  // per graph: loss, configs sampled
  TPUG_RETURN_IF_ERROR(ChunkedGradients(graphs, pass, &records));
  StepStats stats;
  for (int64_t b = 0; b < nb; ++b) {
    stats.loss += records[2 * b];
    stats.configs += static_cast<int64_t>(records[2 * b + 1]);
  }
  return UpdateWithMean(epoch, step, gst_options, nb, stats);
}

Status TrainingRun::ChunkedGradients(const std::vector<int64_t>& graphs, int64_t pass,
                                     std::vector<double>* records) {
  auto t = std::chrono::steady_clock::now();
  ChunkedWork w;
  TPUG_RETURN_IF_ERROR(ReadChunkedGraphs(graphs, pass, &w));
  PlanChunkTasks(&w);
  phases_.prepare += Lap(&t);

  // The shared passes: one graph after the other, each graph's layer kernels row-parallel
  // (a step's graphs are uneven: side by side, the larger one's would leave threads idle), on
  // the step's own pool, whose workers are then still polling for work.
  for (size_t x = 0; x < w.graphs.size(); ++x) {
    model_->ForwardShared(*w.graphs[x].loaded->prepared, tapes_[x].get(), pool_.get());
  }
  phases_.shared_forward += Lap(&t);

  TPUG_RETURN_IF_ERROR(ForwardChunks(&w));

  // Each graph's loss over all its configurations (on every rank).
  t = std::chrono::steady_clock::now();
  for (size_t x = 0; x < w.graphs.size(); ++x) {
    ChunkedWork::StepGraph& g = w.graphs[x];
    const int64_t k = static_cast<int64_t>(g.picks.size());
    (*records)[2 * x] =
        model::ComputeLoss(config_.loss(), g.scores.data(), g.rt.data(), k, g.dscores.data());
    (*records)[2 * x + 1] = static_cast<double>(k);
  }
  phases_.loss += Lap(&t);

  TPUG_RETURN_IF_ERROR(BackwardChunks(&w));
  TPUG_RETURN_IF_ERROR(BackwardShared(&w));
  return SumStepGradient(w);
}

Status TrainingRun::ReadChunkedGraphs(const std::vector<int64_t>& graphs, int64_t pass,
                                      ChunkedWork* w) {
  const int64_t nm = static_cast<int64_t>(graphs.size());
  w->graphs.resize(nm);
  std::vector<Status> statuses(nm);
  // What the last step read ahead for this one, then the reading ahead for the next one.
  std::vector<Prefetched> ahead;
  if (prefetch_.valid()) ahead = prefetch_.get();
  if (!next_graphs_.empty()) {
    prefetch_ = std::async(std::launch::async, [this, list = next_graphs_] {
      std::vector<Prefetched> out(list.size());
      for (size_t i = 0; i < list.size(); ++i) {
        out[i].ok = ReadStepGraph(list[i].first, list[i].second, &out[i]).ok();
      }
      return out;
    });
  }
  pool_->ParallelFor(nm, 1, [&](int64_t, int64_t xb, int64_t xe) {
    for (int64_t x = xb; x < xe; ++x) {
      statuses[x] = [&]() -> Status {
        ChunkedWork::StepGraph& g = w->graphs[x];
        Prefetched got;
        for (Prefetched& p : ahead) {
          if (p.ok && p.pass == pass && p.j == graphs[x]) got = std::move(p);
        }
        if (!got.ok) TPUG_RETURN_IF_ERROR(ReadStepGraph(pass, graphs[x], &got));
        g.loaded = std::move(got.loaded);
        g.picks = std::move(got.picks);
        g.batch = std::move(got.batch);
        const int64_t k = static_cast<int64_t>(g.picks.size());
        g.rt.resize(k);
        for (int64_t c = 0; c < k; ++c) g.rt[c] = g.loaded->graph.NormalizedRuntime(g.picks[c]);
        g.scores.assign(k, 0.0f);
        g.dscores.assign(k, 0.0f);
        return Status::Ok();
      }();
    }
  });
  // Every rank reads every graph of the batch: any failure ends the step everywhere, before the
  // collectives that follow.
  return comm_->Agree(FirstError(statuses));
}

void TrainingRun::PlanChunkTasks(ChunkedWork* w) {
  const int64_t nm = static_cast<int64_t>(w->graphs.size());
  const int rank = comm_->rank(), ranks = comm_->size();
  // A graph's chunks: as many as its work has kChunkRows, of sizes that differ by one at most.
  for (int64_t x = 0; x < nm; ++x) {
    ChunkedWork::StepGraph& g = w->graphs[x];
    const int64_t k = static_cast<int64_t>(g.picks.size());
    const int64_t per_config = std::max<int64_t>(1, model_->config_rows(*g.loaded->prepared));
    g.first_task = static_cast<int64_t>(w->tasks.size());
    for (const auto& [begin, end] : ConfigChunks(k, per_config, ChunkRows(*model_))) {
      ChunkedWork::Task& task = w->tasks.emplace_back();
      task.x = x;
      task.begin = begin;
      task.end = end;
      task.cost = (end - begin) * per_config;
    }
    g.num_tasks = static_cast<int64_t>(w->tasks.size()) - g.first_task;
  }
  const int64_t nt = static_cast<int64_t>(w->tasks.size());
  // The ranks share the tasks by their work (the same assignment on every rank), each rank a
  // contiguous run of them in task order: the sums then pass one running sum along the ranks
  // (Communicator::OrderedSum) instead of every task's gradient.
  std::vector<double> costs(nt);
  for (int64_t i = 0; i < nt; ++i) costs[i] = static_cast<double>(w->tasks[i].cost);
  const std::vector<int> owners = distributed::SplitContiguous(costs, ranks);
  for (int64_t i = 0; i < nt; ++i) w->tasks[i].owner = owners[i];
  // This rank's tasks, the largest first (the order of running only: every task writes its own
  // outputs).
  for (int64_t i = 0; i < nt; ++i) {
    if (w->tasks[i].owner == rank) w->run_order.push_back(i);
  }
  std::stable_sort(w->run_order.begin(), w->run_order.end(),
                   [&](int64_t a, int64_t b) { return w->tasks[a].cost > w->tasks[b].cost; });
  while (static_cast<int64_t>(chunk_tapes_.size()) < nt) {
    chunk_tapes_.push_back(model_->NewTape());
    chunk_grads_.emplace_back(num_params_);
    chunk_dshared_.push_back(std::make_unique<model::SharedGradient>());
    chunk_dshared_flat_.emplace_back();
  }
  if (steps_done_ == 0) {
    std::string sizes;
    for (int64_t x = 0; x < nm; ++x) {
      const ChunkedWork::StepGraph& g = w->graphs[x];
      const ChunkedWork::Task* first = g.num_tasks > 0 ? &w->tasks[g.first_task] : nullptr;
      sizes += fmt::format("{}{} of {} configs, {} rows each", x ? ", " : "", g.num_tasks,
                           first ? first->end - first->begin : 0,
                           model_->config_rows(*g.loaded->prepared));
    }
    spdlog::debug("first step: {} chunk tasks on {} threads x {} ranks ({})", nt,
                  pool_->num_threads(), ranks, sizes);
  }
}

template <typename Fn>
void TrainingRun::ForEachOwnTask(const ChunkedWork& w, const Fn& fn) {
  const int64_t nr = static_cast<int64_t>(w.run_order.size());
  pool_->ParallelFor(nr, 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(w.run_order[i]);
  });
}

Status TrainingRun::ForwardChunks(ChunkedWork* w) {
  auto t = std::chrono::steady_clock::now();
  const bool attention = model_->attends_across_configs();
  ForEachOwnTask(*w, [&](int64_t ti) {
    ChunkedWork::Task& task = w->tasks[ti];
    ChunkedWork::StepGraph& g = w->graphs[task.x];
    task.chunk =
        model::SliceBatch(g.batch, task.begin, task.end, g.loaded->graph.num_config_nodes());
    if (attention) {
      model_->ForwardConfigsToAttention(*g.loaded->prepared, task.chunk, *tapes_[task.x],
                                        chunk_tapes_[ti].get());
    } else {
      model_->ForwardConfigs(*g.loaded->prepared, task.chunk, *tapes_[task.x],
                             g.scores.data() + task.begin, chunk_tapes_[ti].get());
    }
  });
  if (attention) {
    TPUG_RETURN_IF_ERROR(JoinAttention(w, /*backward=*/false));
    ForEachOwnTask(*w, [&](int64_t ti) {
      ChunkedWork::Task& task = w->tasks[ti];
      ChunkedWork::StepGraph& g = w->graphs[task.x];
      model_->ForwardConfigsFromAttention(*g.loaded->prepared, task.chunk, chunk_tapes_[ti].get(),
                                          g.scores.data() + task.begin);
    });
  }
  phases_.config_forward += Lap(&t);
  if (comm_->size() == 1) return Status::Ok();
  // Every configuration's score, from the rank of its chunk (floats, exact as doubles).
  std::vector<int> owner;
  std::vector<double> mine, all;
  for (const ChunkedWork::Task& task : w->tasks) {
    for (int64_t c = task.begin; c < task.end; ++c) {
      owner.push_back(task.owner);
      if (task.owner == comm_->rank()) mine.push_back(w->graphs[task.x].scores[c]);
    }
  }
  TPUG_RETURN_IF_ERROR(comm_->AllGatherItems(owner, mine, &all));
  size_t i = 0;
  for (const ChunkedWork::Task& task : w->tasks) {
    for (int64_t c = task.begin; c < task.end; ++c) {
      w->graphs[task.x].scores[c] = static_cast<float>(all[i++]);
    }
  }
  phases_.gradient_sum += Lap(&t);
  return Status::Ok();
}

Status TrainingRun::JoinAttention(ChunkedWork* w, bool backward) {
  if (comm_->size() > 1) {
    // The rows of every chunk, from its rank to the others (floats, exact as doubles), into
    // the tapes of the chunks they do not compute.
    std::vector<int> owner;
    std::vector<double> mine, all;
    for (size_t ti = 0; ti < w->tasks.size(); ++ti) {
      const ChunkedWork::Task& task = w->tasks[ti];
      const model::PreparedGraph& pg = *w->graphs[task.x].loaded->prepared;
      const int64_t kc = task.end - task.begin;
      const int64_t n = model_->attention_row_floats(pg, kc, backward);
      owner.insert(owner.end(), n, task.owner);
      if (task.owner == comm_->rank()) {
        const float* rows = model_->AttentionRows(pg, kc, backward, chunk_tapes_[ti].get());
        mine.insert(mine.end(), rows, rows + n);
      }
    }
    TPUG_RETURN_IF_ERROR(comm_->AllGatherItems(owner, mine, &all));
    size_t i = 0;
    for (size_t ti = 0; ti < w->tasks.size(); ++ti) {
      const ChunkedWork::Task& task = w->tasks[ti];
      const model::PreparedGraph& pg = *w->graphs[task.x].loaded->prepared;
      const int64_t kc = task.end - task.begin;
      const int64_t n = model_->attention_row_floats(pg, kc, backward);
      if (task.owner != comm_->rank()) {
        float* rows = model_->AttentionRows(pg, kc, backward, chunk_tapes_[ti].get());
        for (int64_t f = 0; f < n; ++f) rows[f] = static_cast<float>(all[i + f]);
      }
      i += n;
    }
  }
  // Graph after graph, each one's nodes split over the step's pool.
  for (size_t x = 0; x < w->graphs.size(); ++x) {
    const ChunkedWork::StepGraph& g = w->graphs[x];
    if (g.num_tasks == 0) continue;
    std::vector<model::ForwardTape*> chunks;
    for (int64_t i = g.first_task; i < g.first_task + g.num_tasks; ++i) {
      chunks.push_back(chunk_tapes_[i].get());
    }
    if (backward) {
      model_->AttendBackward(*g.loaded->prepared, {chunks.begin(), chunks.end()}, *tapes_[x],
                             pool_.get());
    } else {
      model_->AttendForward(*g.loaded->prepared, chunks, tapes_[x].get(), pool_.get());
    }
  }
  return Status::Ok();
}

Status TrainingRun::BackwardChunks(ChunkedWork* w) {
  auto t = std::chrono::steady_clock::now();
  const bool attention = model_->attends_across_configs();
  ForEachOwnTask(*w, [&](int64_t ti) {
    const ChunkedWork::Task& task = w->tasks[ti];
    ChunkedWork::StepGraph& g = w->graphs[task.x];
    auto& gt = chunk_grads_[ti];
    std::fill(gt.begin(), gt.end(), 0.0f);
    if (attention) {
      model_->BackwardConfigsToAttention(*g.loaded->prepared, task.chunk, *chunk_tapes_[ti],
                                         g.dscores.data() + task.begin, gt.data());
      return;
    }
    model::SharedGradient& dshared = *chunk_dshared_[ti];
    model_->BackwardConfigs(*g.loaded->prepared, task.chunk, *chunk_tapes_[ti],
                            g.dscores.data() + task.begin, gt.data(), &dshared);
    // Flattened here, while the task's part is warm in this thread's cache.
    chunk_dshared_flat_[ti].resize(dshared.flat_size());
    dshared.Flatten(chunk_dshared_flat_[ti].data());
  });
  if (attention) {
    TPUG_RETURN_IF_ERROR(JoinAttention(w, /*backward=*/true));
    ForEachOwnTask(*w, [&](int64_t ti) {
      const ChunkedWork::Task& task = w->tasks[ti];
      ChunkedWork::StepGraph& g = w->graphs[task.x];
      model::SharedGradient& dshared = *chunk_dshared_[ti];
      model_->BackwardConfigsFromAttention(*g.loaded->prepared, task.chunk, *chunk_tapes_[ti],
                                           chunk_grads_[ti].data(), &dshared);
      chunk_dshared_flat_[ti].resize(dshared.flat_size());
      dshared.Flatten(chunk_dshared_flat_[ti].data());
    });
  }
  phases_.config_backward += Lap(&t);
  return Status::Ok();
}

Status TrainingRun::BackwardShared(ChunkedWork* w) {
  auto t = std::chrono::steady_clock::now();
  const int64_t nm = static_cast<int64_t>(w->graphs.size());
  while (static_cast<int64_t>(graph_dshared_.size()) < nm) {
    graph_dshared_.push_back(std::make_unique<model::SharedGradient>());
  }
  if (measure_wait_) {
    // With -v on several ranks: how long this rank waits for the slowest one (a barrier outside
    // the collectives' own time), so that the time in collectives can be read as transfer.
    const auto t_wait = std::chrono::steady_clock::now();
    TPUG_RETURN_IF_ERROR(comm_->Barrier());
    wait_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_wait).count();
    Lap(&t);
  }
  // Per graph, its chunks' parts summed in chunk order from zero: ((0 + d_0) + d_1) + ...
  std::vector<float> sum;
  for (int64_t x = 0; x < nm; ++x) {
    const ChunkedWork::StepGraph& g = w->graphs[x];
    model::SharedGradient& acc = *graph_dshared_[x];
    model_->ZeroSharedGradient(*g.loaded->prepared, &acc);
    if (g.num_tasks == 0) continue;
    std::vector<int> owner;
    std::vector<const float*> mine;
    for (int64_t i = g.first_task; i < g.first_task + g.num_tasks; ++i) {
      owner.push_back(w->tasks[i].owner);
      if (w->tasks[i].owner == comm_->rank()) mine.push_back(chunk_dshared_flat_[i].data());
    }
    sum.resize(acc.flat_size());
    TPUG_RETURN_IF_ERROR(SumInOrder(owner, mine, acc.flat_size(), sum.data()));
    acc.AddFlat(sum.data());
  }
  phases_.chunk_sum += Lap(&t);

  // The shared backward pass of every graph (on every rank), into grads_[x].
  for (int64_t x = 0; x < nm; ++x) {
    std::fill(grads_[x].begin(), grads_[x].end(), 0.0f);
    if (w->graphs[x].num_tasks == 0) continue;  // no configurations: no gradient
    model_->BackwardShared(*w->graphs[x].loaded->prepared, *tapes_[x], graph_dshared_[x].get(),
                           grads_[x].data(), pool_.get());
  }
  phases_.shared_backward += Lap(&t);
  return Status::Ok();
}

Status TrainingRun::SumStepGradient(const ChunkedWork& w) {
  // ((0 + S_0) + g_0,0 + g_0,1 + ...) + S_1 + g_1,0 + ... in that order (S_x graph x's shared
  // part, g_x,i its chunks'). Every rank has the shared parts: S_x counts as the rank's of its
  // first chunk, so that the owners stay in rank order.
  auto t = std::chrono::steady_clock::now();
  std::vector<int> owner;
  std::vector<const float*> mine;
  int shared_owner = 0;
  for (size_t x = 0; x < w.graphs.size(); ++x) {
    const ChunkedWork::StepGraph& g = w.graphs[x];
    if (g.num_tasks > 0) shared_owner = w.tasks[g.first_task].owner;
    owner.push_back(shared_owner);
    if (comm_->rank() == shared_owner) mine.push_back(grads_[x].data());
    for (int64_t i = g.first_task; i < g.first_task + g.num_tasks; ++i) {
      owner.push_back(w.tasks[i].owner);
      if (w.tasks[i].owner == comm_->rank()) mine.push_back(chunk_grads_[i].data());
    }
  }
  TPUG_RETURN_IF_ERROR(SumInOrder(owner, mine, num_params_, grad_.data()));
  (comm_->size() == 1 ? phases_.chunk_sum : phases_.gradient_sum) += Lap(&t);
  return Status::Ok();
}

Status TrainingRun::SumInOrder(const std::vector<int>& owner, const std::vector<const float*>& mine,
                               int64_t n, float* out) {
  if (comm_->size() > 1) return comm_->OrderedSum(owner, mine, n, out);
  pool_->ParallelFor(n, kSumBlock, [&](int64_t, int64_t p0, int64_t p1) {
    std::fill(out + p0, out + p1, 0.0f);
    for (const float* item : mine) {
      for (int64_t p = p0; p < p1; ++p) out[p] += item[p];
    }
  });
  return Status::Ok();
}

}  // namespace tpugraphs::train::internal
