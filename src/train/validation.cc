// Validation of a TrainingRun: the members' configurations scored, the metric of an epoch, the
// reference on held-out configurations, the written model on them, and finished models compared
// on the same configurations (ValidateModels).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "tpugraphs/eval/metrics.h"
#include "tpugraphs/eval/scorer.h"
#include "tpugraphs/train/ridge_baseline.h"
#include "training_run.h"

namespace tpugraphs::train {

double RandomRankingTopKError(std::vector<double> runtimes, int64_t k) {
  const int64_t n = static_cast<int64_t>(runtimes.size());
  if (n == 0) return std::numeric_limits<double>::quiet_NaN();
  k = std::clamp<int64_t>(k, 1, n);
  std::sort(runtimes.begin(), runtimes.end());
  if (!(runtimes[0] > 0)) return std::numeric_limits<double>::quiet_NaN();
  // P(min of a uniform K-subset has rank i (0-based)) = C(n-1-i, k-1) / C(n, k); computed as a
  // running product to stay in floating range.
  double p = static_cast<double>(k) / n;  // i = 0
  double expected = 0.0;
  for (int64_t i = 0; i + k <= n; ++i) {
    expected += p * (runtimes[i] / runtimes[0] - 1.0);
    // p_{i+1} / p_i = C(n-2-i, k-1) / C(n-1-i, k-1) = (n-1-i-(k-1)) / (n-1-i).
    p *= static_cast<double>(n - 1 - i - (k - 1)) / static_cast<double>(n - 1 - i);
  }
  return expected;
}

namespace internal {

using model::ConfigBatch;
using model::CostModel;

namespace {

// Layout config values of the validation configurations are kept while they total less than this.
constexpr double kValidCacheBytes = 512.0 * (1 << 20);

}  // namespace

Status ScoreChunk(const CostModel& model, const Member& m, const Loaded& l,
                  const std::vector<int64_t>& configs, int64_t begin, int64_t end,
                  const std::vector<int8_t>* cached, double* out, ThreadPool* kernels) {
  const int64_t row = l.graph.num_config_nodes() * kLayoutConfigFeatureCount;
  ConfigBatch batch;
  if (cached != nullptr && l.graph.is_layout()) {
    batch.num_configs = end - begin;
    batch.layout_feat.assign(cached->begin() + begin * row, cached->begin() + end * row);
  } else {
    std::vector<int64_t> part(configs.begin() + begin, configs.begin() + end);
    TPUG_ASSIGN_OR_RETURN(batch, MakeBatch(m, l.graph, part));
  }
  std::vector<float> scores(end - begin, 0.0f);
  if (l.segmented != nullptr) {
    GstScore(model, *l.segmented, batch, end - begin, scores.data(), kernels);
  } else {
    model.Forward(*l.prepared, batch, scores.data(), nullptr, kernels);
  }
  std::copy(scores.begin(), scores.end(), out);
  return Status::Ok();
}

double MeanOfFinite(const std::vector<double>& values, int64_t* count) {
  double sum = 0;
  int64_t n = 0;
  for (double value : values) {
    if (std::isfinite(value)) {
      sum += value;
      ++n;
    }
  }
  if (count != nullptr) *count = n;
  return n > 0 ? sum / n : std::numeric_limits<double>::quiet_NaN();
}

void TrainingRun::SetMetricName() {
  result_.higher_is_better = false;
  if (!valid_.empty()) {
    if (ValidatesByKendall()) {
      result_.metric_name = "valid_kendall";
      result_.higher_is_better = true;
    } else {
      result_.metric_name = "valid_top" + std::to_string(config_.tile_top_k()) + "_err";
    }
  } else {
    result_.metric_name = "train_loss";
  }
}

Status TrainingRun::ComputeReference() {
  result_.reference_metric = std::numeric_limits<double>::quiet_NaN();
  if (!holdout_) return Status::Ok();
  result_.reference_name = task_ == TaskKind::kTile ? "random" : "ridge";
  // Each rank computes the graphs it owns; the values are summed in graph order.
  const std::vector<int64_t> mine = comm_->Owned(valid_owner_);
  std::vector<double> local(mine.size(), std::numeric_limits<double>::quiet_NaN());
  Status status = Status::Ok();
  for (size_t x = 0; x < mine.size() && status.ok(); ++x) status = ReferenceOf(mine[x], &local[x]);
  TPUG_RETURN_IF_ERROR(comm_->Agree(status));
  std::vector<double> values;
  TPUG_RETURN_IF_ERROR(comm_->AllGatherItems(valid_owner_, local, &values));
  int64_t count = 0;
  const double mean = MeanOfFinite(values, &count);
  if (count > 0) {
    result_.reference_metric = mean;
    spdlog::info("reference {}: {}={} on the held-out configurations ({} of {} graphs)",
                 result_.reference_name, result_.metric_name, Fmt(result_.reference_metric), count,
                 valid_.size());
  } else {
    spdlog::warn(
        "reference {}: no graph gave a finite {} (see the warnings above; a graph "
        "whose held-out runtimes all tie has no Kendall tau)",
        result_.reference_name, result_.metric_name);
  }
  return Status::Ok();
}

Status TrainingRun::ReferenceOf(int64_t j, double* value) {
  const Member& v = valid_[j];
  TPUG_ASSIGN_OR_RETURN(auto l, store_->Get(v));
  const Graph& g = l->graph;
  if (task_ == TaskKind::kTile) {
    std::vector<double> rt;
    for (int64_t c : v.eval_configs) rt.push_back(g.NormalizedRuntime(c));
    // A uniformly random ranking: exact expected top-K error; expected Kendall tau 0.
    *value = ValidatesByKendall() ? 0.0 : RandomRankingTopKError(rt, config_.tile_top_k());
    return Status::Ok();
  }
  // Layout: ridge regression fitted on the training graph's pool.
  const std::vector<int64_t>& pool =
      train_[j].reference_pool.empty() ? train_[j].pool : train_[j].reference_pool;
  const int64_t nc = g.num_config_nodes();
  TPUG_ASSIGN_OR_RETURN(auto xs, v.reader->ReadLayoutConfigs(v.index, pool));
  std::vector<double> y;
  bool positive = true;
  for (int64_t c : pool) {
    positive = positive && g.NormalizedRuntime(c) > 0;
    y.push_back(std::log(std::max(1e-30, g.NormalizedRuntime(c))));
  }
  if (!positive) {
    spdlog::warn("reference ridge skips {}: a training runtime is not positive", g.Id());
    return Status::Ok();
  }
  auto ridge = LayoutRidge::Fit(xs.data(), static_cast<int64_t>(pool.size()), nc, y.data(), 1.0);
  if (!ridge.ok()) {
    spdlog::warn("reference ridge skips {}: {}", g.Id(), ridge.status().message());
    return Status::Ok();
  }
  TPUG_ASSIGN_OR_RETURN(auto xt, v.reader->ReadLayoutConfigs(v.index, v.eval_configs));
  std::vector<double> pred = ridge->Predict(xt.data(), static_cast<int64_t>(v.eval_configs.size()));
  std::vector<double> rt;
  for (int64_t c : v.eval_configs) rt.push_back(g.NormalizedRuntime(c));
  *value = eval::KendallTauB(pred, rt);
  return Status::Ok();
}

void TrainingRun::PrepareValidation() {
  // Layout values of the validation configs, read once and kept while they fit in a budget.
  valid_values_.assign(valid_.size(), {});
  valid_cached_.assign(valid_.size(), 0);
  double bytes = 0;
  for (int64_t j : ValidationGraphsHere()) {
    const io::GraphInfo& info = valid_[j].reader->info(valid_[j].index);
    bytes += static_cast<double>(valid_[j].eval_configs.size()) * info.num_config_nodes *
             kLayoutConfigFeatureCount;
    valid_cached_[j] = task_ == TaskKind::kLayout && bytes < kValidCacheBytes;
  }
}

int64_t TrainingRun::ValidationChunk() const {
  return std::max<int64_t>(1, config_.eval_batch_configs());
}

bool TrainingRun::ValidationChunksShared() const {
  // Held-out and carved configurations are drawn by the training graph's owner alone, so only
  // it knows them; separate validation graphs' configurations every rank knows.
  return comm_->size() > 1 && !holdout_ && !carve_;
}

int TrainingRun::ValidationChunkRank(int64_t j, int64_t c) const {
  if (!ValidationChunksShared()) return valid_owner_[j];
  return static_cast<int>((valid_owner_[j] + c) % comm_->size());
}

std::vector<int64_t> TrainingRun::ValidationGraphsHere() const {
  std::vector<int64_t> out;
  const int64_t chunk = ValidationChunk();
  for (int64_t j = 0; j < static_cast<int64_t>(valid_.size()); ++j) {
    const int64_t n = static_cast<int64_t>(valid_[j].eval_configs.size());
    const int64_t chunks = std::max<int64_t>(1, (n + chunk - 1) / chunk);
    bool here = valid_owner_[j] == comm_->rank();
    for (int64_t c = 0; c < chunks && !here; ++c) here = ValidationChunkRank(j, c) == comm_->rank();
    if (here) out.push_back(j);
  }
  return out;
}

Status TrainingRun::Validate(double* metric) {
  TPUG_ASSIGN_OR_RETURN(std::vector<double> metrics, ValidationMetrics({model_.get()}));
  *metric = metrics[0];
  return Status::Ok();
}

StatusOr<std::vector<double>> TrainingRun::ValidationMetrics(
    const std::vector<const CostModel*>& models) {
  // The graphs this rank scores a chunk of (the first chunk of each is its owner's, the others
  // go round the ranks from there, so one large graph is shared by every rank), and the graphs
  // it owns, whose metrics it computes; the metrics of all are then gathered in graph order.
  const std::vector<int64_t> here = ValidationGraphsHere();
  const std::vector<int64_t> mine = comm_->Owned(valid_owner_);
  const int64_t nh = static_cast<int64_t>(here.size());
  const int64_t nm = static_cast<int64_t>(mine.size());
  const int64_t nmodels = static_cast<int64_t>(models.size());
  const bool ensemble = nmodels > 1;
  // Each graph loaded, with the layout values of its validation configurations read once.
  auto t = std::chrono::steady_clock::now();
  auto lap = [&t]() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - t).count();
    t = now;
    return s;
  };
  ++valid_phases_.validations;
  std::vector<std::shared_ptr<const Loaded>> loaded;
  TPUG_RETURN_IF_ERROR(comm_->Agree(LoadValidationGraphs(here, &loaded)));
  valid_phases_.load += lap();
  TPUG_RETURN_IF_ERROR(comm_->Agree(ReadValidationValues(here)));
  valid_phases_.read += lap();

  // Every (graph, model, chunk of eval_batch_configs configurations) is a task of its own, so
  // that the configurations of a single graph spread over the threads too (one graph of 1,000
  // configurations used to be scored on one thread), and over the ranks. A configuration's
  // score depends on neither the chunk's thread, rank nor the kernel pool (row-independent
  // kernels, docs/model.md), so the metrics are the same whatever the thread and rank counts.
  struct Task {
    int64_t x, m, begin, end;
  };
  const int64_t chunk = ValidationChunk();
  std::vector<Task> tasks;
  // Scores of every validation graph, [graph][model][configuration], zeros where another rank
  // scores them; summed over the ranks below (x + 0 is x: the owner gets every score as its
  // scorer computed it).
  std::vector<std::vector<std::vector<double>>> all_scores(valid_.size());
  const bool shared = ValidationChunksShared();
  for (int64_t j = 0; j < static_cast<int64_t>(valid_.size()); ++j) {
    const bool needed = shared || std::binary_search(here.begin(), here.end(), j);
    if (needed) {
      all_scores[j].assign(nmodels, std::vector<double>(valid_[j].eval_configs.size(), 0.0));
    }
  }
  for (int64_t x = 0; x < nh; ++x) {
    const int64_t j = here[x];
    const int64_t n = static_cast<int64_t>(valid_[j].eval_configs.size());
    for (int64_t m = 0; m < nmodels; ++m) {
      for (int64_t b = 0; b < n; b += chunk) {
        if (ValidationChunkRank(j, b / chunk) != comm_->rank()) continue;
        tasks.push_back({x, m, b, std::min(n, b + chunk)});
      }
    }
  }
  // A single task: its Forward spreads its rows over the kernel pool instead. Several run side
  // by side on the pool's threads, each on its own.
  ThreadPool* const kernels = tasks.size() == 1 ? kernel_pool_.get() : nullptr;
  std::vector<Status> task_status(tasks.size());
  pool_->ParallelFor(static_cast<int64_t>(tasks.size()), 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const Task& t = tasks[i];
      const int64_t j = here[t.x];
      task_status[i] = ScoreChunk(*models[t.m], valid_[j], *loaded[t.x], valid_[j].eval_configs,
                                  t.begin, t.end, valid_cached_[j] ? &valid_values_[j] : nullptr,
                                  all_scores[j][t.m].data() + t.begin, kernels);
    }
  });
  TPUG_RETURN_IF_ERROR(comm_->Agree(FirstError(task_status)));
  if (shared) {
    std::vector<double> flat;
    for (const auto& per_model : all_scores) {
      for (const std::vector<double>& s : per_model) flat.insert(flat.end(), s.begin(), s.end());
    }
    TPUG_RETURN_IF_ERROR(comm_->AllreduceSum(flat.data(), static_cast<int64_t>(flat.size())));
    size_t at = 0;
    for (auto& per_model : all_scores) {
      for (std::vector<double>& s : per_model) {
        std::copy(flat.begin() + at, flat.begin() + at + s.size(), s.begin());
        at += s.size();
      }
    }
  }
  valid_phases_.score += lap();

  // The owned graphs' places among those loaded here.
  std::vector<int64_t> loaded_at(nm);
  for (int64_t x = 0; x < nm; ++x) {
    loaded_at[x] = std::lower_bound(here.begin(), here.end(), mine[x]) - here.begin();
  }
  const size_t series = models.size() + (ensemble ? 1 : 0);
  std::vector<std::vector<double>> local(
      series, std::vector<double>(nm, std::numeric_limits<double>::quiet_NaN()));
  pool_->ParallelFor(nm, 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t x = b; x < e; ++x) {
      GraphMetrics(mine[x], x, *loaded[loaded_at[x]], all_scores[mine[x]], &local);
    }
  });
  std::vector<double> out;
  for (const std::vector<double>& l : local) {
    std::vector<double> values;
    TPUG_RETURN_IF_ERROR(comm_->AllGatherItems(valid_owner_, l, &values));
    out.push_back(MeanOfFinite(values, nullptr));
  }
  valid_phases_.metrics += lap();
  return out;
}

Status TrainingRun::LoadValidationGraphs(const std::vector<int64_t>& graphs,
                                         std::vector<std::shared_ptr<const Loaded>>* loaded) {
  const int64_t n = static_cast<int64_t>(graphs.size());
  loaded->assign(n, nullptr);
  std::vector<Status> statuses(n);
  pool_->ParallelFor(n, 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t x = b; x < e; ++x) {
      auto got = store_->Get(valid_[graphs[x]]);
      if (got.ok()) (*loaded)[x] = std::move(got).value();
      statuses[x] = got.status();
    }
  });
  return FirstError(statuses);
}

Status TrainingRun::ReadValidationValues(const std::vector<int64_t>& graphs) {
  // The layout values of the validation configurations not read yet, in the chunks that
  // scoring uses (eval_batch_configs positions), each a task of its own: one graph of 10,000
  // configurations is read on every core, not on one (its blocks' CRCs and parses were a serial
  // 8 % of a validation of such a graph on 2 cores).
  const int64_t chunk = ValidationChunk();
  struct Read {
    int64_t j, begin, end, row;  // row: values per configuration
  };
  std::vector<Read> reads;
  for (int64_t j : graphs) {
    const Member& v = valid_[j];
    const int64_t n = static_cast<int64_t>(v.eval_configs.size());
    if (!valid_cached_[j] || !valid_values_[j].empty() || n == 0) continue;
    const int64_t row = v.reader->info(v.index).num_config_nodes * kLayoutConfigFeatureCount;
    valid_values_[j].assign(n * row, 0);
    // Only the chunks this rank scores (the same at every validation).
    for (int64_t b = 0; b < n; b += chunk) {
      if (ValidationChunkRank(j, b / chunk) != comm_->rank()) continue;
      reads.push_back({j, b, std::min(n, b + chunk), row});
    }
  }
  std::vector<Status> read_status(reads.size());
  pool_->ParallelFor(static_cast<int64_t>(reads.size()), 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const Read& r = reads[i];
      const Member& v = valid_[r.j];
      const std::vector<int64_t> wanted(v.eval_configs.begin() + r.begin,
                                        v.eval_configs.begin() + r.end);
      auto values = v.reader->ReadLayoutConfigs(v.index, wanted);
      read_status[i] = values.status();
      if (!values.ok()) continue;
      std::copy(values->begin(), values->end(), valid_values_[r.j].begin() + r.begin * r.row);
    }
  });
  const Status read = FirstError(read_status);
  if (!read.ok()) {
    // Nothing half read stays cached.
    for (const Read& r : reads) valid_values_[r.j].clear();
  }
  return read;
}

void TrainingRun::GraphMetrics(int64_t j, int64_t x, const Loaded& l,
                               const std::vector<std::vector<double>>& scores,
                               std::vector<std::vector<double>>* local) const {
  const Member& v = valid_[j];
  std::vector<double> rt;
  for (int64_t c : v.eval_configs) rt.push_back(l.graph.NormalizedRuntime(c));
  auto metric = [&](const std::vector<double>& s) {
    return ValidatesByKendall() ? eval::KendallTauB(s, rt)
                                : eval::TopKError(s, rt, config_.tile_top_k());
  };
  const bool ensemble = scores.size() > 1;
  std::vector<double> sum(ensemble ? v.eval_configs.size() : 0, 0.0);
  for (size_t m = 0; m < scores.size(); ++m) {
    (*local)[m][x] = metric(scores[m]);
    if (!ensemble) continue;
    const std::vector<double> z =
        eval::EnsembleTransform(scores[m], eval::EnsembleCombine::kStandardizedMean);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += z[i];
  }
  if (ensemble) {
    for (double& z : sum) z /= static_cast<double>(scores.size());
    (*local)[scores.size()][x] = metric(sum);
  }
}

Status TrainingRun::ScoreHeldOut() {
  // The model holds the written (best) parameters; the held-out configurations take the
  // validation's place for one scoring.
  std::swap(valid_, heldout_);
  PrepareValidation();
  double metric = std::numeric_limits<double>::quiet_NaN();
  const Status scored = Validate(&metric);
  std::swap(valid_, heldout_);
  PrepareValidation();
  TPUG_RETURN_IF_ERROR(scored);
  result_.held_out_metric = metric;
  std::string name = result_.metric_name;
  if (name.rfind("valid_", 0) == 0) name = "held_out_" + name.substr(6);
  spdlog::info("the written model on the held-out configurations: {}={}", name, Fmt(metric));
  return Status::Ok();
}

StatusOr<TrainResult> TrainingRun::ValidateModels(const TrainConfig& config,
                                                  const std::vector<const CostModel*>& models) {
  t_start_ = std::chrono::steady_clock::now();
  root_ = comm_->rank() == 0;
  validate_only_ = true;
  TPUG_RETURN_IF_ERROR(comm_->Agree(ResolveConfig(config)));
  TPUG_RETURN_IF_ERROR(comm_->Agree(SelectData()));
  TrainingPlan plan;
  TPUG_RETURN_IF_ERROR(comm_->Agree(LoadData(&plan)));
  TPUG_RETURN_IF_ERROR(InitModel(plan));
  TPUG_RETURN_IF_ERROR(CheckSamePreparation(models));
  SetMetricName();
  // The members were selected on the carved validation: they are compared on the held-out
  // configurations.
  if (carve_ && holdout_) std::swap(valid_, heldout_);
  TPUG_RETURN_IF_ERROR(ComputeReference());
  pool_ = std::make_unique<ThreadPool>(Threads());
  PrepareValidation();
  TPUG_ASSIGN_OR_RETURN(result_.member_metrics, ValidationMetrics(models));
  if (carve_ && holdout_) result_.held_out_metric = result_.member_metrics.back();
  return result_;
}

Status TrainingRun::CheckSamePreparation(const std::vector<const CostModel*>& models) const {
  // The validation graphs are prepared with this run's model: every model must agree with it
  // on everything preparation reads (the spec and the fitted transform).
  FeatureTransformProto fitted;
  model_->transform().ToProto(&fitted);
  const std::string fitted_bytes = fitted.SerializeAsString();
  const std::string spec_bytes = model_->spec().SerializeAsString();
  for (size_t m = 0; m < models.size(); ++m) {
    FeatureTransformProto t;
    models[m]->transform().ToProto(&t);
    if (t.SerializeAsString() != fitted_bytes ||
        models[m]->spec().SerializeAsString() != spec_bytes || models[m]->task() != task_) {
      return FailedPreconditionError("ensemble member " + std::to_string(m) +
                                     ": its model spec or feature transform differs from the "
                                     "one the config fits on " +
                                     config_.dataset());
    }
  }
  return Status::Ok();
}

}  // namespace internal
}  // namespace tpugraphs::train
