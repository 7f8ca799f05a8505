#include "tpugraphs/train/trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/hash.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/dist/communicator.h"
#include "tpugraphs/eval/metrics.h"
#include "tpugraphs/eval/scorer.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/model/cost_model.h"
#include "tpugraphs/model/losses.h"
#include "tpugraphs/train/config_sampling.h"
#include "tpugraphs/train/gst.h"
#include "tpugraphs/train/model_file.h"
#include "tpugraphs/train/optimizer.h"
#include "tpugraphs/train/ridge_baseline.h"
#include "tpugraphs/train/train_config.h"

namespace tpugraphs::train {
namespace {

using model::ConfigBatch;
using model::CostModel;
using model::PreparedGraph;

// Graphs and PreparedGraphs are kept in memory when their raw arrays total less than this.
constexpr double kCacheBudgetBytes = 2.0 * (1 << 30);
// Layout config values of the validation configurations are kept while they total less than this.
constexpr double kValidCacheBytes = 512.0 * (1 << 20);

// One graph taking part in training or validation.
struct Member {
  const io::DatasetReader* reader = nullptr;
  int64_t index = -1;                 // in reader
  std::vector<int64_t> pool;          // training: the configs sampled from
  std::vector<int64_t> eval_configs;  // validation: the configs scored (ascending)
  // Training with a carved validation: the pool before carving, which the reference is fitted
  // on (a fit without epochs to pick needs no validation).
  std::vector<int64_t> reference_pool;
};

struct Loaded {
  Graph graph;                                // without layout config values
  std::unique_ptr<PreparedGraph> prepared;    // whole graph (GST off)
  std::unique_ptr<SegmentedGraph> segmented;  // segments (GST on; docs/gst.md)
};

// Graphs (without layout config values) with their PreparedGraphs: cached or re-read per use.
class GraphStore {
 public:
  GraphStore(const CostModel* model, bool cache, bool gst)
      : model_(model), cache_(cache), gst_(gst) {}

  // Hands over a graph read earlier (to avoid reading it twice when caching).
  void Offer(const Member& m, Graph g) {
    if (cache_) pending_[Key(m)] = std::move(g);
  }

  StatusOr<std::shared_ptr<const Loaded>> Get(const Member& m) {
    const auto key = Key(m);
    if (cache_) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_map_.find(key);
      if (it != cache_map_.end()) return it->second;
    }
    auto loaded = std::make_shared<Loaded>();
    bool have = false;
    if (cache_) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(key);
      if (it != pending_.end()) {
        loaded->graph = std::move(it->second);
        pending_.erase(it);
        have = true;
      }
    }
    if (!have) {
      TPUG_ASSIGN_OR_RETURN(loaded->graph, m.reader->ReadGraph(m.index, false));
    }
    if (gst_) {
      auto segmented = PrepareSegmented(*model_, loaded->graph);
      if (!segmented.ok()) return segmented.status().WithContext(m.reader->path());
      loaded->segmented = std::make_unique<SegmentedGraph>(std::move(segmented).value());
    } else {
      auto prepared = model_->Prepare(loaded->graph);
      if (!prepared.ok()) return prepared.status().WithContext(m.reader->path());
      loaded->prepared = std::move(prepared).value();
    }
    std::shared_ptr<const Loaded> out = loaded;
    if (cache_) {
      std::lock_guard<std::mutex> lock(mu_);
      cache_map_.emplace(key, out);
    }
    return out;
  }

 private:
  static std::pair<const void*, int64_t> Key(const Member& m) { return {m.reader, m.index}; }
  const CostModel* model_;
  bool cache_;
  bool gst_;
  std::mutex mu_;
  std::map<std::pair<const void*, int64_t>, Graph> pending_;
  std::map<std::pair<const void*, int64_t>, std::shared_ptr<const Loaded>> cache_map_;
};

// The configs of `configs` as a model batch (tile rows from the graph, layout values read on
// demand from the dataset).
StatusOr<ConfigBatch> MakeBatch(const Member& m, const Graph& g,
                                const std::vector<int64_t>& configs) {
  ConfigBatch b;
  b.num_configs = static_cast<int64_t>(configs.size());
  if (g.is_tile()) {
    b.tile_feat.reserve(configs.size() * kTileConfigFeatureCount);
    for (int64_t c : configs) {
      b.tile_feat.insert(b.tile_feat.end(), g.config_feat.begin() + c * kTileConfigFeatureCount,
                         g.config_feat.begin() + (c + 1) * kTileConfigFeatureCount);
    }
  } else {
    TPUG_ASSIGN_OR_RETURN(b.layout_feat, m.reader->ReadLayoutConfigs(m.index, configs));
  }
  return b;
}

// Scores `configs` of a graph in chunks of `chunk` configs (inference).
// Scores `configs` of a graph in chunks of `chunk` configs (inference). `cached`, if not null,
// holds the layout values of exactly `configs` ([k, nc, 18]) so nothing is read from the dataset.
StatusOr<std::vector<double>> ScoreConfigs(const CostModel& model, const Member& m, const Loaded& l,
                                           const std::vector<int64_t>& configs, int64_t chunk,
                                           const std::vector<int8_t>* cached) {
  std::vector<double> out;
  out.reserve(configs.size());
  std::vector<float> scores;
  const int64_t row = l.graph.num_config_nodes() * kLayoutConfigFeatureCount;
  for (size_t begin = 0; begin < configs.size(); begin += chunk) {
    const size_t end = std::min(configs.size(), begin + static_cast<size_t>(chunk));
    std::vector<int64_t> part(configs.begin() + begin, configs.begin() + end);
    ConfigBatch batch;
    if (cached != nullptr && l.graph.is_layout()) {
      batch.num_configs = static_cast<int64_t>(part.size());
      batch.layout_feat.assign(cached->begin() + begin * row, cached->begin() + end * row);
    } else {
      TPUG_ASSIGN_OR_RETURN(batch, MakeBatch(m, l.graph, part));
    }
    scores.assign(part.size(), 0.0f);
    if (l.segmented != nullptr) {
      GstScore(model, *l.segmented, batch, chunk, scores.data());
    } else {
      model.Forward(*l.prepared, batch, scores.data(), nullptr);
    }
    out.insert(out.end(), scores.begin(), scores.end());
  }
  return out;
}

std::string Fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

// Selects the graphs of `collection` and `split` (empty = any) with at least min_configs configs.
std::vector<int64_t> SelectGraphs(const io::DatasetReader& r, const std::string& collection,
                                  const std::string& split, int64_t min_configs, int64_t* skipped) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < r.num_graphs(); ++i) {
    const io::GraphInfo& info = r.info(i);
    if (info.collection != collection) continue;
    if (!split.empty() && info.split != split) continue;
    if (info.num_configs < min_configs) {
      ++*skipped;
      continue;
    }
    out.push_back(i);
  }
  return out;
}

// Config hashes of one graph, reading layout values block by block.
StatusOr<std::vector<uint64_t>> HashMemberConfigs(const Member& m, const Graph& g) {
  if (g.is_tile()) return HashGraphConfigs(g);
  std::vector<uint64_t> out;
  out.reserve(g.num_configs);
  const int64_t row = g.num_config_nodes() * kLayoutConfigFeatureCount;
  const int64_t block = std::max<int64_t>(1, m.reader->configs_per_block(m.index));
  for (int64_t begin = 0; begin < g.num_configs; begin += block) {
    const int64_t end = std::min(g.num_configs, begin + block);
    TPUG_ASSIGN_OR_RETURN(std::vector<int8_t> v,
                          m.reader->ReadLayoutConfigRange(m.index, begin, end));
    std::vector<uint64_t> h = HashConfigRows(v.data(), end - begin, row);
    out.insert(out.end(), h.begin(), h.end());
  }
  return out;
}

// The mean of the finite values (NaN if there is none); their number in *count if given.
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

Status CheckWritable(const std::string& path, const std::string& flag) {
  AtomicFileWriter w;
  Status s = w.Open(path);
  if (!s.ok()) return IoError(flag + ": cannot write " + path + ": " + s.message());
  w.Abandon();
  return Status::Ok();
}

}  // namespace

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

namespace {

// The first failure among per-item statuses (in item order), or Ok.
Status FirstError(const std::vector<Status>& statuses) {
  for (const Status& st : statuses) {
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

// A seed from the clock (TrainConfig.seed = -1), non-negative.
int64_t ClockSeed() {
  return static_cast<int64_t>(std::chrono::system_clock::now().time_since_epoch().count() &
                              0x7fffffffffffffffLL);
}

// The seed of ensemble member `member`'s own streams (TrainConfig.ensemble_member).
uint64_t MemberSeed(uint64_t seed, int member) {
  return member == 0 ? seed : DeriveSeed(seed, "ensemble_member", static_cast<uint64_t>(member));
}

// Figures of one optimizer step.
struct StepStats {
  double loss = 0;       // mean over the step's graphs
  double grad_norm = 0;  // before clipping
  double lr = 0;
  int64_t configs = 0;  // configurations scored
};

// One run of Train(): the recipe as a sequence of phases, each a method below, called in the
// order Run() shows. The members are the state the phases hand to each other.
class TrainingRun {
 public:
  StatusOr<TrainResult> Run(const TrainConfig& given);
  // Run without phase 6 (an ensemble computes the reference once, in ValidateModels).
  void SkipReference() { skip_reference_ = true; }
  // Finished models on the validation configurations `config` selects (phases 1-4, the
  // reference of phase 6 and the validation caches, without training): metric_name, the
  // reference, and in member_metrics the metric of each model followed by that of their
  // ensemble. The models must share the config's model spec and the transform it fits.
  StatusOr<TrainResult> ValidateModels(const TrainConfig& config,
                                       const std::vector<const CostModel*>& models);

 private:
  // 1. The effective config: the given one, or the checkpoint's with the allowed overrides.
  Status ResolveConfig(const TrainConfig& given);
  // 2. The training and validation graphs (collection, splits, min_configs).
  Status SelectData();
  // 3. The model, and the training graphs read once: feature statistics, config pools (holdout
  //    splits), the data fingerprint; the validation members.
  Status LoadData();
  // 4. Parameters and feature transform: fitted and initialised, or restored from the checkpoint.
  Status InitModel();
  // 5. Optimizer, schedule and best-epoch bookkeeping (restored when resuming).
  Status InitOptimisation();
  // 6. The reference metric on held-out configurations (ridge for layout, random for tile).
  Status ComputeReference();
  // 7. Thread pools, tapes, GST history, the validation cache.
  Status PrepareLoop();
  //    The validation cache alone (layout values of the validation configs kept in memory).
  void PrepareValidation();
  // 8. One epoch of steps; false when early stopping ended the run.
  StatusOr<bool> RunEpoch(int epoch);
  //    One optimizer step on the graphs order[begin, end) of pass `pass`.
  StatusOr<StepStats> Step(int epoch, int64_t pass, int64_t step, const std::vector<int64_t>& order,
                           int64_t begin, int64_t end, const GstOptions& gst_options);
  //    The visiting order of the training graphs in pass `pass` (a seeded shuffle).
  std::vector<int64_t> PassOrder(int64_t pass) const;
  //    Whether the validation metric is Kendall tau-b (layout, or tile by choice).
  bool ValidatesByKendall() const {
    return task_ == TaskKind::kLayout ||
           config_.tile_valid_metric() == TrainConfig::TILE_VALID_METRIC_KENDALL;
  }
  //    The mean validation metric.
  Status Validate(double* metric);
  //    The mean validation metric of each of `models` and, with several, of their ensemble
  //    (the mean of standardised scores per graph), last.
  StatusOr<std::vector<double>> ValidationMetrics(const std::vector<const CostModel*>& models);
  //    result_.metric_name and higher_is_better for this run's validation.
  void SetMetricName();
  //    Bookkeeping after an epoch: best parameters, history, log line, checkpoint.
  StatusOr<bool> FinishEpoch(int epoch, double train_loss, double lr, double grad_norm,
                             double seconds);
  // An epoch's steps so far, for a checkpoint written inside it.
  struct EpochSoFar {
    int64_t steps = 0;
    double loss_sum = 0, grad_norm_sum = 0, learning_rate = 0, seconds = 0;
  };
  // After `epochs_done` epochs, and `partial`'s steps of the next (nullptr: none).
  Status WriteCheckpoint(int epochs_done, const EpochSoFar* partial);
  // Whether a checkpoint is due inside an epoch (the interval has passed, or `force`); rank 0
  // decides for every rank.
  StatusOr<bool> CheckpointDue(bool force);
  // 9. The model file of the best epoch.
  Status WriteModel(int epochs_run);
  // The GST history rows of every rank, on rank 0 (in (graph, segment) order).
  Status GatherHistory(std::vector<GstHistoryRow>* rows);

  // The ranks of the job (docs/distributed.md): training graphs, validation graphs and their GST
  // history rows belong to one rank each (owner vectors, the same on every rank).
  dist::Communicator* comm_ = &dist::World();
  bool root_ = true;
  std::vector<int> train_owner_, valid_owner_;

  std::chrono::steady_clock::time_point t_start_;
  TrainConfig config_;
  TrainConfig given_;
  ModelFile checkpoint_;
  bool resuming_ = false;
  bool validate_only_ = false;   // ValidateModels: no training, no files
  bool skip_reference_ = false;  // SkipReference
  uint64_t seed_ = 0;
  // The seed of the streams that make ensemble members differ (initialisation, batch order,
  // config sampling, GST sampling, self tests): seed_ for member 0, else derived from it. The
  // data streams (holdout split, validation sample) use seed_ for every member.
  uint64_t member_seed_ = 0;
  std::string ckpt_path_;

  std::unique_ptr<io::DatasetReader> train_reader_;
  std::unique_ptr<io::DatasetReader> valid_owned_;
  const io::DatasetReader* valid_reader_ = nullptr;
  TaskKind task_ = TaskKind::kTile;
  bool gst_ = false;
  bool holdout_ = false;
  // TrainConfig.carve_valid_fraction in effect (no validation graphs): valid_ holds the carved
  // configurations, heldout_ the held-out ones (with holdout_), scored once at the end.
  bool carve_ = false;
  std::vector<int64_t> train_ids_, valid_ids_;

  std::unique_ptr<CostModel> model_;
  std::unique_ptr<GraphStore> store_;
  std::vector<Member> train_, valid_, heldout_;
  //    The carved validation configurations scored per graph at most (0 = all): valid_max_configs
  //    shared among the training graphs, but at least configs_per_graph each, so that with many
  //    graphs a validation costs about one step per graph.
  int64_t CarvedCap() const {
    if (config_.valid_max_configs() <= 0) return 0;
    const auto graphs = std::max<int64_t>(1, static_cast<int64_t>(train_ids_.size()));
    return std::max<int64_t>(config_.configs_per_graph(),
                             (config_.valid_max_configs() + graphs - 1) / graphs);
  }
  //    The early-stopping patience in effect (carve_patience with a carved validation).
  int Patience() const {
    return carve_ && config_.carve_patience() > 0 ? config_.carve_patience() : config_.patience();
  }
  //    With a carved validation and held-out configurations: the written model's metric on the
  //    held-out ones (into result_.held_out_metric).
  Status ScoreHeldOut();
  DataFingerprint fingerprint_;
  int64_t train_configs_ = 0;

  int64_t num_params_ = 0;
  int64_t batch_graphs_ = 1;
  int64_t steps_per_pass_ = 1;   // ceil(graphs / batch_graphs)
  int64_t steps_per_epoch_ = 1;  // steps_per_pass_ unless config.steps_per_epoch is set
  int64_t total_steps_ = 0;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<float> best_params_;
  // TrainConfig.ema_decay: the moving average of the parameters (empty = off).
  std::vector<float> ema_;
  void UpdateAverage();
  // Exchanges the model's parameters with the average (no-op when off).
  void SwapAverage();
  int start_epoch_ = 0, best_epoch_ = 0, since_best_ = 0;
  // A checkpoint written inside epoch start_epoch_ + 1: the steps it had taken and their sums.
  EpochSoFar resumed_;
  // TrainConfig.stop_after_steps of this invocation (cleared from config_, which is stored).
  int64_t stop_after_steps_ = 0;
  bool stopped_ = false;  // stop_after_steps reached: a checkpoint and no model
  double best_metric_ = std::numeric_limits<double>::quiet_NaN();
  std::vector<EpochRecord> epoch_records_;
  TrainResult result_;

  std::unique_ptr<ThreadPool> pool_;
  // A step with one graph runs that graph's kernels row-parallel on this second pool (the first
  // then runs the one graph inline); results do not depend on either pool's size.
  std::unique_ptr<ThreadPool> kernel_pool_;
  std::vector<std::unique_ptr<model::ForwardTape>> tapes_;
  std::vector<std::vector<float>> grads_;  // per graph of a step
  std::vector<float> grad_;                // their mean
  std::unique_ptr<HistoryTable> history_;
  GstOptions gst_options_;
  int64_t head_offset_ = 0;
  std::unique_ptr<Progress> progress_;
  std::vector<std::vector<int8_t>> valid_values_;
  std::vector<char> valid_cached_;
  std::chrono::steady_clock::time_point last_checkpoint_;
  int64_t steps_done_ = 0, configs_done_ = 0;  // by this run's loop
  double deduplicated_ = 0;    // configurations --dedup-configs removed from the pools
  bool measure_wait_ = false;  // -v with several ranks: a barrier per step measures the waiting
  double wait_seconds_ = 0;
};

StatusOr<TrainResult> TrainingRun::Run(const TrainConfig& given) {
  t_start_ = std::chrono::steady_clock::now();
  root_ = comm_->rank() == 0;
  // Every phase ends at a point all ranks reach: a failure on one rank (a file it cannot read)
  // ends every rank's run with that rank's message (dist::Communicator::Agree).
  TPUG_RETURN_IF_ERROR(comm_->Agree(ResolveConfig(given)));
  if (comm_->size() > 1) {
    // A seed drawn from the clock is rank 0's.
    std::string bytes = std::to_string(config_.seed());
    TPUG_RETURN_IF_ERROR(comm_->Broadcast(&bytes, 0));
    config_.set_seed(std::stoll(bytes));
    seed_ = static_cast<uint64_t>(config_.seed());
    member_seed_ = MemberSeed(seed_, config_.ensemble_member());
  }
  TPUG_RETURN_IF_ERROR(comm_->Agree(SelectData()));
  TPUG_RETURN_IF_ERROR(comm_->Agree(LoadData()));
  if (config_.dedup_configs()) {
    TPUG_RETURN_IF_ERROR(comm_->AllreduceSum(&deduplicated_, 1));
    spdlog::info("dedup_configs: {} repeated configurations left the training pools",
                 static_cast<int64_t>(deduplicated_));
  }
  TPUG_RETURN_IF_ERROR(InitModel());
  TPUG_RETURN_IF_ERROR(comm_->Agree(InitOptimisation()));
  if (!skip_reference_) {
    // The reference is on the held-out configurations whatever picks the best epoch.
    if (carve_ && holdout_) std::swap(valid_, heldout_);
    const Status reference = ComputeReference();
    if (carve_ && holdout_) std::swap(valid_, heldout_);
    TPUG_RETURN_IF_ERROR(reference);
  }
  TPUG_RETURN_IF_ERROR(comm_->Agree(PrepareLoop()));
  comm_->ResetCommSeconds();
  if (comm_->size() > 1) {
    // Rank 0's log level decides for all (the others log errors only).
    std::string measure(1, spdlog::should_log(spdlog::level::debug) ? '1' : '0');
    TPUG_RETURN_IF_ERROR(comm_->Broadcast(&measure, 0));
    measure_wait_ = measure == "1";
  }
  const auto t_loop = std::chrono::steady_clock::now();
  struct KernelPoolReset {
    CostModel* m;
    ~KernelPoolReset() { m->set_kernel_pool(nullptr); }
  } kernel_pool_reset{model_.get()};
  // A checkpoint written by the epoch that triggered early stopping: the run is over.
  const bool stopped_before = Patience() > 0 && since_best_ >= Patience();
  int epoch = start_epoch_;
  for (; epoch < config_.epochs() && !stopped_before; ++epoch) {
    TPUG_ASSIGN_OR_RETURN(const bool go_on, RunEpoch(epoch));
    if (!go_on) {
      ++epoch;
      break;
    }
  }
  progress_->Finish();
  {
    // Throughput and the time inside collectives (tools/bench-mpi.sh reads this line).
    const double loop =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_loop).count();
    const int64_t steps = std::max<int64_t>(1, steps_done_);
    const std::string text = fmt::format(
        "training loop: {} steps, {} configs in {:.3f} s ({:.1f} configs/s); {} rank(s), {:.3f} s "
        "in collectives ({:.3f} ms per step){}",
        steps_done_, configs_done_, loop, configs_done_ / std::max(loop, 1e-9), comm_->size(),
        comm_->comm_seconds(), 1e3 * comm_->comm_seconds() / steps,
        measure_wait_ ? fmt::format(", {:.3f} ms per step waiting for the slowest rank",
                                    1e3 * wait_seconds_ / steps)
                      : std::string());
    if (comm_->size() > 1) {
      spdlog::info("{}", text);
    } else {
      spdlog::debug("{}", text);
    }
  }
  result_.steps_run = steps_done_;
  result_.output = config_.output();
  if (stopped_) {
    result_.stopped = true;
    result_.checkpoint = ckpt_path_;
    spdlog::info(
        "stopped after {} steps (--stop-after-steps) with the checkpoint {}; the same command "
        "with --auto-resume true continues",
        steps_done_, ckpt_path_);
    return result_;
  }
  TPUG_RETURN_IF_ERROR(WriteModel(epoch));
  if (carve_ && holdout_) TPUG_RETURN_IF_ERROR(ScoreHeldOut());
  return result_;
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

Status TrainingRun::ResolveConfig(const TrainConfig& given) {
  given_ = given;
  config_ = given;
  resuming_ = !given.resume().empty();
  if (resuming_) {
    TPUG_ASSIGN_OR_RETURN(checkpoint_, ReadModelFile(given.resume(), kFileKindCheckpoint));
    config_ = checkpoint_.train_config();
    if (given.has_epochs()) config_.set_epochs(given.epochs());
    if (given.has_patience()) config_.set_patience(given.patience());
    if (given.has_threads()) config_.set_threads(given.threads());
    config_.set_output(given.output());
    // As given (unset stays unset), so that the model file's config matches an uninterrupted run.
    if (given.has_checkpoint()) {
      config_.set_checkpoint(given.checkpoint());
    } else {
      config_.clear_checkpoint();
    }
    TPUG_RETURN_IF_ERROR(ValidateTrainConfig(config_));
  } else if (config_.seed() == -1) {
    config_.set_seed(ClockSeed());
  }
  config_.clear_resume();
  stop_after_steps_ = given.stop_after_steps();
  config_.clear_stop_after_steps();
  seed_ = static_cast<uint64_t>(config_.seed());
  member_seed_ = MemberSeed(seed_, config_.ensemble_member());
  ckpt_path_ = CheckpointPathOf(config_);
  if (!root_) return Status::Ok();  // rank 0 alone writes
  TPUG_RETURN_IF_ERROR(CheckWritable(config_.output(), "--output"));
  TPUG_RETURN_IF_ERROR(CheckWritable(ckpt_path_, "--checkpoint"));
  RemoveStaleTemporaries(config_.output());  // left by a killed earlier run
  RemoveStaleTemporaries(ckpt_path_);
  return Status::Ok();
}

Status TrainingRun::SelectData() {
  TPUG_ASSIGN_OR_RETURN(train_reader_, io::DatasetReader::Open(config_.dataset()));
  valid_reader_ = train_reader_.get();
  if (!config_.valid_dataset().empty() && config_.valid_dataset() != config_.dataset()) {
    TPUG_ASSIGN_OR_RETURN(valid_owned_, io::DatasetReader::Open(config_.valid_dataset()));
    valid_reader_ = valid_owned_.get();
  }
  if (config_.collection().empty()) {
    std::set<std::string> found;
    for (int64_t i = 0; i < train_reader_->num_graphs(); ++i) {
      const auto& info = train_reader_->info(i);
      if (config_.train_split().empty() || info.split == config_.train_split()) {
        found.insert(info.collection);
      }
    }
    if (found.size() != 1) {
      std::string list;
      for (const auto& c : found) {
        if (!list.empty()) list += ", ";
        list += c;
      }
      return FailedPreconditionError(
          config_.dataset() + ": " +
          (found.empty() ? "no graphs of split \"" + config_.train_split() + "\""
                         : "several collections (" + list + "); choose one with --collection"));
    }
    config_.set_collection(*found.begin());
  }
  task_ = TaskKindOfCollection(config_.collection());
  TPUG_RETURN_IF_ERROR(ValidateGstConfig(config_, task_));
  gst_ = config_.gst() != TrainConfig::GST_OFF;
  int64_t skipped = 0;
  train_ids_ = SelectGraphs(*train_reader_, config_.collection(), config_.train_split(),
                            config_.min_configs(), &skipped);
  if (train_ids_.empty()) {
    return NoMatchingGraphsError(config_.dataset() + ": no graphs of collection " +
                                 config_.collection() + " and split \"" + config_.train_split() +
                                 "\" with at least " + std::to_string(config_.min_configs()) +
                                 " configurations");
  }
  holdout_ = config_.holdout_config_fraction() > 0;
  if (!holdout_ && !config_.valid_split().empty()) {
    valid_ids_ =
        SelectGraphs(*valid_reader_, config_.collection(), config_.valid_split(), 2, &skipped);
    if (valid_reader_ == train_reader_.get()) {
      // Never validate on a graph that is also trained on (e.g. empty train split).
      std::set<int64_t> t(train_ids_.begin(), train_ids_.end());
      std::erase_if(valid_ids_, [&](int64_t i) { return t.count(i) > 0; });
    }
  }
  carve_ = config_.carve_valid_fraction() > 0 && (holdout_ || valid_ids_.empty());
  if (!holdout_ && valid_ids_.empty()) {
    if (carve_) {
      spdlog::info(
          "no validation graphs (split \"{}\" of {}): validating on {} of each training graph's "
          "distinct configurations (carve_valid_fraction)",
          config_.valid_split(), config_.collection(), config_.carve_valid_fraction());
    } else {
      spdlog::warn(
          "no validation graphs (split \"{}\" of {}): epochs are compared by training loss",
          config_.valid_split(), config_.collection());
    }
  }
  if (skipped > 0) {
    spdlog::info("skipped {} graphs with fewer than {} configurations", skipped,
                 config_.min_configs());
  }
  return Status::Ok();
}

Status TrainingRun::LoadData() {
  TPUG_ASSIGN_OR_RETURN(model_, CostModel::Create(config_.model(), task_));
  double raw_bytes = 0;
  for (int64_t i : train_ids_) {
    const auto& info = train_reader_->info(i);
    raw_bytes += info.num_nodes * (kNodeFeatureCount * 8.0 + 64) + info.num_edges * 32.0;
  }
  for (int64_t i : valid_ids_) {
    const auto& info = valid_reader_->info(i);
    raw_bytes += info.num_nodes * (kNodeFeatureCount * 8.0 + 64) + info.num_edges * 32.0;
  }
  store_ = std::make_unique<GraphStore>(model_.get(), raw_bytes < kCacheBudgetBytes, gst_);

  train_.resize(train_ids_.size());
  fingerprint_.set_dataset(config_.dataset());
  fingerprint_.set_collection(config_.collection());
  // Training graphs are spread over the ranks by size (nodes); each rank reads its own. Rank 0
  // also reads the others once to fit the feature transform in graph order, as one process does.
  {
    std::vector<double> costs;
    for (int64_t i : train_ids_) {
      costs.push_back(static_cast<double>(train_reader_->info(i).num_nodes));
    }
    train_owner_ = dist::BalanceByCost(costs, comm_->size());
  }
  const bool fit_transform = !resuming_ && root_;
  uint64_t names_hash = 1469598103934665603ULL;
  int64_t deduplicated = 0;
  // Per training graph (in graph order; for the graphs of other ranks an entry without configs):
  // its held-out configurations (holdout_) and its carved validation configurations (carve_).
  std::vector<Member> held, carved;
  auto add_unowned = [&](const Member& m) {
    if (holdout_) held.push_back(m);  // held-out configs known to the owner only
    if (carve_) carved.push_back(m);
  };
  {
    Progress progress("load", static_cast<int64_t>(train_ids_.size()), "graphs");
    for (size_t j = 0; j < train_ids_.size(); ++j) {
      Member& m = train_[j];
      m.reader = train_reader_.get();
      m.index = train_ids_[j];
      const io::GraphInfo& info = train_reader_->info(m.index);
      names_hash = Fnv1a(info.collection + ":" + info.name + "\n", names_hash);
      train_configs_ += info.num_configs;
      const bool owned = train_owner_[j] == comm_->rank();
      if (!owned && !fit_transform) {
        add_unowned(m);
        progress.Add(1);
        continue;
      }
      TPUG_ASSIGN_OR_RETURN(Graph g, train_reader_->ReadGraph(m.index, false));
      if (std::all_of(g.config_runtime.begin(), g.config_runtime.end(),
                      [](int64_t t) { return t == 0; })) {
        return FailedPreconditionError(
            config_.dataset() + ": training graph " + g.Id() +
            " has no measured runtimes (all 0, as in the hidden test split or for layouts "
            "ingested from an HLO module without runs): nothing to learn from; choose another "
            "--collection or --train-split");
      }
      if (fit_transform) model_->transform().Accumulate(g);
      if (!owned) {
        add_unowned(m);
        progress.Add(1);
        continue;
      }
      std::vector<uint64_t> hashes;
      if (holdout_ || carve_ || config_.dedup_configs()) {
        TPUG_ASSIGN_OR_RETURN(hashes, HashMemberConfigs(m, g));
      }
      if (holdout_) {
        ConfigSplit split = SplitByDistinctConfig(hashes, config_.holdout_config_fraction(),
                                                  DeriveSeed(seed_, "holdout", j));
        m.pool = split.train;
        Member v = m;
        v.pool.clear();
        v.eval_configs = split.holdout;
        held.push_back(std::move(v));
      } else {
        m.pool.resize(g.num_configs);
        for (int64_t c = 0; c < g.num_configs; ++c) m.pool[c] = c;
      }
      if (carve_) {
        // The same split by distinct configuration, within the training pool.
        std::vector<uint64_t> pool_hashes;
        for (int64_t c : m.pool) pool_hashes.push_back(hashes[c]);
        const ConfigSplit split = SplitByDistinctConfig(pool_hashes, config_.carve_valid_fraction(),
                                                        DeriveSeed(seed_, "carve_valid", j));
        Member v = m;
        v.pool.clear();
        for (int64_t i : split.holdout) v.eval_configs.push_back(m.pool[i]);
        std::vector<int64_t> kept;
        for (int64_t i : split.train) kept.push_back(m.pool[i]);
        m.reference_pool = std::move(m.pool);
        m.pool = std::move(kept);
        carved.push_back(std::move(v));
      }
      if (config_.dedup_configs()) {
        const size_t before = m.pool.size();
        std::vector<double> runtimes(g.num_configs);
        for (int64_t c = 0; c < g.num_configs; ++c) runtimes[c] = g.NormalizedRuntime(c);
        m.pool = FastestOfEachDistinctConfig(m.pool, hashes, runtimes);
        deduplicated += static_cast<int64_t>(before - m.pool.size());
      }
      store_->Offer(m, std::move(g));
      progress.Add(1);
    }
  }
  deduplicated_ = static_cast<double>(deduplicated);  // of this rank's graphs
  if (carve_) {
    valid_ = std::move(carved);
    heldout_ = std::move(held);
  } else {
    valid_ = std::move(held);
  }
  for (int64_t i : valid_ids_) {
    Member v;
    v.reader = valid_reader_;
    v.index = i;
    const int64_t c = valid_reader_->info(i).num_configs;
    v.eval_configs.resize(c);
    for (int64_t x = 0; x < c; ++x) v.eval_configs[x] = x;
    valid_.push_back(std::move(v));
  }
  // Validation graphs: with held-out configs those of the training graphs (same owners), else
  // spread over the ranks by the work of scoring them.
  if (holdout_ || carve_) {
    valid_owner_ = train_owner_;
  } else {
    std::vector<double> costs;
    for (const Member& v : valid_) {
      int64_t configs = static_cast<int64_t>(v.eval_configs.size());
      if (config_.valid_max_configs() > 0)
        configs = std::min<int64_t>(configs, config_.valid_max_configs());
      costs.push_back(static_cast<double>(v.reader->info(v.index).num_nodes) *
                      static_cast<double>(std::max<int64_t>(1, configs)));
    }
    valid_owner_ = dist::BalanceByCost(costs, comm_->size());
  }
  // Cap validation configs with a fixed sample (the same every epoch).
  for (std::vector<Member>* set : {&valid_, &heldout_}) {
    // The held-out configurations keep the sample they have without a carved validation.
    const bool is_carved = carve_ && set == &valid_;
    const int64_t cap = is_carved ? CarvedCap() : config_.valid_max_configs();
    for (size_t j = 0; j < set->size(); ++j) {
      Member& v = (*set)[j];
      if (cap > 0 && static_cast<int64_t>(v.eval_configs.size()) > cap) {
        v.eval_configs = SampleConfigs(
            v.eval_configs, cap,
            is_carved ? DeriveSeed(seed_, "valid_carved", j) : DeriveSeed(seed_, "valid", j));
        std::sort(v.eval_configs.begin(), v.eval_configs.end());
      }
    }
  }
  fingerprint_.set_num_train_graphs(static_cast<int64_t>(train_.size()));
  fingerprint_.set_num_valid_graphs(holdout_ || carve_ ? 0 : static_cast<int64_t>(valid_.size()));
  fingerprint_.set_graph_names_hash(names_hash);
  fingerprint_.set_num_train_configs(train_configs_);
  return Status::Ok();
}

Status TrainingRun::InitModel() {
  const auto t_init = std::chrono::steady_clock::now();
  if (resuming_) {
    // The checkpoint's transform and parameters replace the fit and the initialisation.
    Status local = [&]() -> Status {
      TPUG_ASSIGN_OR_RETURN(std::unique_ptr<CostModel> restored,
                            RestoreModel(checkpoint_, given_.resume()));
      Status s = model_->transform().FromProto(checkpoint_.feature_transform());
      if (!s.ok()) return s.WithContext(given_.resume());
      std::copy(restored->parameters(), restored->parameters() + model_->num_parameters(),
                model_->parameters());
      return Status::Ok();
    }();
    TPUG_RETURN_IF_ERROR(comm_->Agree(local));
  } else {
    // Rank 0 fitted the transform on every training graph; the others take its statistics.
    TPUG_RETURN_IF_ERROR(comm_->Agree(
        root_ ? model_->transform().Finalize().WithContext(config_.dataset()) : Status::Ok()));
    if (comm_->size() > 1) {
      std::string bytes;
      if (root_) {
        FeatureTransformProto proto;
        model_->transform().ToProto(&proto);
        bytes = proto.SerializeAsString();
      }
      TPUG_RETURN_IF_ERROR(comm_->Broadcast(&bytes, 0));
      if (!root_) {
        FeatureTransformProto proto;
        if (!proto.ParseFromString(bytes)) {
          return InternalError("the feature transform broadcast by rank 0 does not parse");
        }
        TPUG_RETURN_IF_ERROR(model_->transform().FromProto(proto));
      }
    }
    model_->InitParameters(DeriveSeed(member_seed_, "init"));
  }
  if (validate_only_) return Status::Ok();
  spdlog::info(
      "training {} on {} graphs ({} configs), validating on {} {}; {} parameters; loaded in {}",
      config_.collection(), train_.size(), train_configs_, valid_.size(),
      carve_ ? "carved config sets" : (holdout_ ? "held-out config sets" : "graphs"),
      model_->num_parameters(),
      FormatDuration(std::chrono::duration<double>(t_init - t_start_).count()));
  return Status::Ok();
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

Status TrainingRun::InitOptimisation() {
  num_params_ = model_->num_parameters();
  batch_graphs_ = std::min<int64_t>(config_.batch_graphs(), static_cast<int64_t>(train_.size()));
  steps_per_pass_ = (static_cast<int64_t>(train_.size()) + batch_graphs_ - 1) / batch_graphs_;
  steps_per_epoch_ = config_.steps_per_epoch() > 0 ? config_.steps_per_epoch() : steps_per_pass_;
  if (config_.min_config_passes() > 0) {
    // The same on every rank: train_configs_ counts every training graph, owned or not.
    const double pool = static_cast<double>(train_configs_) *
                        (holdout_ ? 1.0 - config_.holdout_config_fraction() : 1.0) *
                        (carve_ ? 1.0 - config_.carve_valid_fraction() : 1.0);
    const double per_step = static_cast<double>(batch_graphs_ * config_.configs_per_graph());
    const auto need = static_cast<int64_t>(
        std::ceil(config_.min_config_passes() * pool / (per_step * config_.epochs())));
    if (need > steps_per_epoch_) {
      spdlog::info(
          "{} steps per epoch instead of {}, for {} passes over about {:.0f} training "
          "configurations (min_config_passes)",
          need, steps_per_epoch_, config_.min_config_passes(), pool);
      steps_per_epoch_ = need;
    }
  }
  if (carve_) {
    // An epoch samples at least as many training configurations as the carved validation
    // scores (estimated from the graphs' sizes, the same on every rank).
    double scored = 0;
    for (int64_t i : train_ids_) {
      double c = static_cast<double>(train_reader_->info(i).num_configs) *
                 (holdout_ ? 1.0 - config_.holdout_config_fraction() : 1.0) *
                 config_.carve_valid_fraction();
      if (CarvedCap() > 0) c = std::min(c, static_cast<double>(CarvedCap()));
      scored += c;
    }
    const double per_step = static_cast<double>(batch_graphs_ * config_.configs_per_graph());
    const auto need = static_cast<int64_t>(std::ceil(scored / per_step));
    if (need > steps_per_epoch_) {
      spdlog::info(
          "{} steps per epoch instead of {}: an epoch samples at least the about {:.0f} carved "
          "validation configurations it is validated on",
          need, steps_per_epoch_, scored);
      steps_per_epoch_ = need;
    }
  }
  total_steps_ = steps_per_epoch_ * config_.epochs();
  schedule_ = std::make_unique<LrSchedule>(LrScheduleOf(config_, total_steps_));
  optimizer_ = std::make_unique<Optimizer>(OptimizerOptionsOf(config_), num_params_);
  best_params_.assign(model_->parameters(), model_->parameters() + num_params_);
  if (config_.ema_decay() > 0) ema_ = best_params_;
  SetMetricName();
  if (!resuming_) return Status::Ok();
  const std::string& path = given_.resume();
  const CheckpointState& st = checkpoint_.checkpoint();
  TPUG_ASSIGN_OR_RETURN(std::vector<float> m1, BytesToFloats(st.first_moment(), num_params_, path));
  TPUG_ASSIGN_OR_RETURN(std::vector<float> m2,
                        BytesToFloats(st.second_moment(), num_params_, path));
  TPUG_RETURN_IF_ERROR(
      optimizer_->Restore(st.optimizer_step(), std::move(m1), std::move(m2)).WithContext(path));
  if (st.best_epoch() > 0) {
    TPUG_ASSIGN_OR_RETURN(best_params_, BytesToFloats(st.best_parameters(), num_params_, path));
  }
  if (config_.ema_decay() > 0) {
    if (st.has_ema_parameters()) {
      TPUG_ASSIGN_OR_RETURN(ema_, BytesToFloats(st.ema_parameters(), num_params_, path));
    } else {
      spdlog::warn("{} holds no parameter average; it starts from the checkpoint's parameters",
                   path);
    }
  }
  start_epoch_ = st.epochs_done();
  resumed_.steps = st.steps_into_epoch();
  if (resumed_.steps < 0 || resumed_.steps >= steps_per_epoch_) {
    return FailedPreconditionError(path + ": was written after step " +
                                   std::to_string(resumed_.steps) + " of an epoch of " +
                                   std::to_string(steps_per_epoch_) + " steps");
  }
  resumed_.loss_sum = st.partial_loss_sum();
  resumed_.grad_norm_sum = st.partial_grad_norm_sum();
  resumed_.learning_rate = st.partial_learning_rate();
  resumed_.seconds = st.partial_wall_seconds();
  best_epoch_ = st.best_epoch();
  best_metric_ = st.best_metric();
  since_best_ = st.epochs_since_best();
  for (double v : checkpoint_.summary().epoch_metric()) result_.epoch_metric.push_back(v);
  epoch_records_.assign(checkpoint_.summary().history().begin(),
                        checkpoint_.summary().history().end());
  for (double v : st.epoch_loss()) result_.epoch_loss.push_back(v);
  if (resumed_.steps > 0) {
    spdlog::info("resuming {} inside epoch {}, after step {} of {} (best epoch {}, {}={})", path,
                 start_epoch_ + 1, resumed_.steps, steps_per_epoch_, best_epoch_,
                 result_.metric_name, Fmt(best_metric_));
  } else {
    spdlog::info("resuming {} after epoch {} (best epoch {}, {}={})", path, start_epoch_,
                 best_epoch_, result_.metric_name, Fmt(best_metric_));
  }
  if (fingerprint_.graph_names_hash() != checkpoint_.data().graph_names_hash()) {
    return FailedPreconditionError(path + ": was trained on other graphs than " +
                                   config_.dataset() + " now holds");
  }
  return Status::Ok();
}

Status TrainingRun::ComputeReference() {
  result_.reference_metric = std::numeric_limits<double>::quiet_NaN();
  if (!holdout_) return Status::Ok();
  result_.reference_name = task_ == TaskKind::kTile ? "random" : "ridge";
  // Each rank computes the graphs it owns; the values are summed in graph order.
  const std::vector<int64_t> mine = comm_->Owned(valid_owner_);
  std::vector<double> local(mine.size(), std::numeric_limits<double>::quiet_NaN());
  Status status = [&]() -> Status {
    for (size_t x = 0; x < mine.size(); ++x) {
      const int64_t j = mine[x];
      const Member& v = valid_[j];
      TPUG_ASSIGN_OR_RETURN(auto l, store_->Get(v));
      const Graph& g = l->graph;
      double& value = local[x];
      if (task_ == TaskKind::kTile) {
        std::vector<double> rt;
        for (int64_t c : v.eval_configs) rt.push_back(g.NormalizedRuntime(c));
        // A uniformly random ranking: exact expected top-K error; expected Kendall tau 0.
        value = ValidatesByKendall() ? 0.0 : RandomRankingTopKError(rt, config_.tile_top_k());
      } else {
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
          continue;
        }
        auto ridge =
            LayoutRidge::Fit(xs.data(), static_cast<int64_t>(pool.size()), nc, y.data(), 1.0);
        if (!ridge.ok()) {
          spdlog::warn("reference ridge skips {}: {}", g.Id(), ridge.status().message());
          continue;
        }
        TPUG_ASSIGN_OR_RETURN(auto xt, v.reader->ReadLayoutConfigs(v.index, v.eval_configs));
        std::vector<double> pred =
            ridge->Predict(xt.data(), static_cast<int64_t>(v.eval_configs.size()));
        std::vector<double> rt;
        for (int64_t c : v.eval_configs) rt.push_back(g.NormalizedRuntime(c));
        value = eval::KendallTauB(pred, rt);
      }
    }
    return Status::Ok();
  }();
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

Status TrainingRun::PrepareLoop() {
  pool_ = std::make_unique<ThreadPool>(config_.threads());
  kernel_pool_ = std::make_unique<ThreadPool>(config_.threads());
  tapes_.resize(batch_graphs_);
  for (auto& t : tapes_) t = model_->NewTape();
  grads_.assign(batch_graphs_, std::vector<float>(num_params_));
  grad_.assign(num_params_, 0.0f);
  history_ = std::make_unique<HistoryTable>(model_->head_input_dim());
  if (resuming_) {
    for (const GstHistoryRow& r : checkpoint_.checkpoint().gst_history()) {
      // Each rank keeps the rows of its own graphs (the checkpoint may come from another number
      // of ranks); rank 0 keeps any row of a graph the run does not have, as one process does.
      const bool known = r.graph() >= 0 && r.graph() < static_cast<int64_t>(train_owner_.size());
      if (known ? train_owner_[r.graph()] != comm_->rank() : !root_) continue;
      TPUG_ASSIGN_OR_RETURN(std::vector<float> row,
                            BytesToFloats(r.row(), history_->width(), given_.resume()));
      history_->Push(r.graph(), r.segment(), row.data(), r.step());
    }
  }
  gst_options_.segments_per_step = config_.gst_segments_per_step();
  gst_options_.keep_probability = config_.gst_keep_probability();
  gst_options_.fresh_context = config_.gst() == TrainConfig::GST_FRESH;
  head_offset_ = model_->head_parameter_offset();
  const int64_t configs_per_step = batch_graphs_ * config_.configs_per_graph();
  progress_ = std::make_unique<Progress>(
      "train",
      ((config_.epochs() - start_epoch_) * steps_per_epoch_ - resumed_.steps) * configs_per_step,
      "configs");
  PrepareValidation();
  last_checkpoint_ = std::chrono::steady_clock::now();
  return Status::Ok();
}

void TrainingRun::PrepareValidation() {
  // Layout values of the validation configs, read once and kept while they fit in a budget.
  valid_values_.assign(valid_.size(), {});
  valid_cached_.assign(valid_.size(), 0);
  double bytes = 0;
  for (size_t j = 0; j < valid_.size(); ++j) {
    if (valid_owner_[j] != comm_->rank()) continue;
    const io::GraphInfo& info = valid_[j].reader->info(valid_[j].index);
    bytes += static_cast<double>(valid_[j].eval_configs.size()) * info.num_config_nodes *
             kLayoutConfigFeatureCount;
    valid_cached_[j] = task_ == TaskKind::kLayout && bytes < kValidCacheBytes;
  }
}

StatusOr<bool> TrainingRun::RunEpoch(int epoch) {
  const auto t_epoch = std::chrono::steady_clock::now();
  GstOptions epoch_gst = gst_options_;
  epoch_gst.head_only = gst_ && epoch >= config_.epochs() - config_.gst_finetune_epochs();
  if (epoch_gst.head_only &&
      epoch == std::max(start_epoch_, config_.epochs() - config_.gst_finetune_epochs())) {
    spdlog::info("epoch {}: GST fine-tuning of the head on fresh embeddings", epoch + 1);
  }
  // The epoch's steps and sums so far: none, or in the epoch a mid-epoch checkpoint
  // interrupted, the ones it had taken.
  EpochSoFar so_far = epoch == start_epoch_ ? resumed_ : EpochSoFar();
  const double earlier_seconds = so_far.seconds;
  // The run's steps are the batches of consecutive passes; this epoch takes the next
  // steps_per_epoch_ of them (with steps_per_epoch unset, exactly pass `epoch`).
  int64_t pass = -1;
  std::vector<int64_t> order;
  for (int64_t step = so_far.steps; step < steps_per_epoch_; ++step) {
    const int64_t run_step = static_cast<int64_t>(epoch) * steps_per_epoch_ + step;
    if (run_step / steps_per_pass_ != pass) {
      pass = run_step / steps_per_pass_;
      order = PassOrder(pass);
    }
    const int64_t begin = (run_step % steps_per_pass_) * batch_graphs_;
    const int64_t end =
        std::min<int64_t>(begin + batch_graphs_, static_cast<int64_t>(order.size()));
    TPUG_ASSIGN_OR_RETURN(StepStats s, Step(epoch, pass, step, order, begin, end, epoch_gst));
    so_far.loss_sum += s.loss;
    so_far.grad_norm_sum += s.grad_norm;
    so_far.learning_rate = s.lr;
    ++so_far.steps;
    progress_->SetSuffix("epoch=" + std::to_string(epoch + 1) + "/" +
                         std::to_string(config_.epochs()) +
                         " loss=" + Fmt(so_far.loss_sum / so_far.steps));
    progress_->Add(s.configs);
    ++steps_done_;
    configs_done_ += s.configs;
    if (step + 1 == steps_per_epoch_) break;  // the epoch's end writes its own checkpoint
    const bool stop = stop_after_steps_ > 0 && steps_done_ >= stop_after_steps_;
    TPUG_ASSIGN_OR_RETURN(const bool due, CheckpointDue(stop));
    if (due) {
      so_far.seconds =
          earlier_seconds +
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_epoch).count();
      TPUG_RETURN_IF_ERROR(WriteCheckpoint(epoch, &so_far));
      last_checkpoint_ = std::chrono::steady_clock::now();
    }
    if (stop) {
      stopped_ = true;
      return false;
    }
  }
  const double secs =
      earlier_seconds +
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_epoch).count();
  const int64_t steps = std::max<int64_t>(1, so_far.steps);
  return FinishEpoch(epoch, so_far.loss_sum / steps, so_far.learning_rate,
                     so_far.grad_norm_sum / steps, secs);
}

StatusOr<bool> TrainingRun::CheckpointDue(bool force) {
  bool write = force;
  if (!write && config_.checkpoint_interval_seconds() > 0) {
    write = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_checkpoint_)
                .count() >= config_.checkpoint_interval_seconds();
  }
  if (comm_->size() > 1) {
    // Wall-clock intervals differ between ranks: rank 0's clock decides.
    std::string decision(1, write ? '1' : '0');
    TPUG_RETURN_IF_ERROR(comm_->Broadcast(&decision, 0));
    write = decision == "1";
  }
  return write;
}

std::vector<int64_t> TrainingRun::PassOrder(int64_t pass) const {
  std::vector<int64_t> order(train_.size());
  for (size_t j = 0; j < order.size(); ++j) order[j] = static_cast<int64_t>(j);
  Rng shuffle(DeriveSeed(member_seed_, "shuffle", static_cast<uint64_t>(pass)));
  shuffle.Shuffle(order);
  return order;
}

StatusOr<StepStats> TrainingRun::Step(int epoch, int64_t pass, int64_t step,
                                      const std::vector<int64_t>& order, int64_t begin, int64_t end,
                                      const GstOptions& gst_options) {
  // Each graph of this rank's share of the batch: its gradient into its own buffer, on the
  // worker threads.
  const int64_t nb = end - begin;
  std::vector<int> owner(nb);
  std::vector<int64_t> mine;  // batch positions of this rank's graphs
  for (int64_t b = 0; b < nb; ++b) {
    owner[b] = train_owner_[order[begin + b]];
    if (owner[b] == comm_->rank()) mine.push_back(b);
  }
  const int64_t nm = static_cast<int64_t>(mine.size());
  std::vector<double> records(2 * nm, 0.0);  // per own graph: loss, configs sampled
  std::vector<Status> statuses(nm);
  model_->set_kernel_pool(nm == 1 ? kernel_pool_.get() : nullptr);
  pool_->ParallelFor(nm, 1, [&](int64_t, int64_t sb, int64_t se) {
    for (int64_t x = sb; x < se; ++x) {
      const int64_t j = order[begin + mine[x]];
      const Member& m = train_[j];
      std::vector<float>& gb = grads_[x];
      std::fill(gb.begin(), gb.end(), 0.0f);
      auto l = store_->Get(m);
      if (!l.ok()) {
        statuses[x] = l.status();
        continue;
      }
      const Graph& g = (*l)->graph;
      std::vector<int64_t> picks =
          SampleConfigs(m.pool, config_.configs_per_graph(),
                        DeriveSeed(member_seed_, "sample", static_cast<uint64_t>(pass),
                                   static_cast<uint64_t>(j)));
      auto batch = MakeBatch(m, g, picks);
      if (!batch.ok()) {
        statuses[x] = batch.status();
        continue;
      }
      const int64_t k = static_cast<int64_t>(picks.size());
      std::vector<double> rt(k);
      for (int64_t c = 0; c < k; ++c) rt[c] = g.NormalizedRuntime(picks[c]);
      if (gst_) {
        const int64_t now = optimizer_->step();
        auto st = GstStep(
            *model_, *(*l)->segmented, j, *batch, rt.data(), config_.loss(), gst_options, now,
            DeriveSeed(member_seed_, "gst", static_cast<uint64_t>(now), static_cast<uint64_t>(j)),
            history_.get(), gb.data());
        if (!st.ok()) {
          statuses[x] = st.status();
          continue;
        }
        records[2 * x] = st->loss;
        records[2 * x + 1] = static_cast<double>(k);
        continue;
      }
      std::vector<float> scores(k), dscores(k);
      model_->Forward(*(*l)->prepared, *batch, scores.data(), tapes_[x].get());
      records[2 * x] =
          model::ComputeLoss(config_.loss(), scores.data(), rt.data(), k, dscores.data());
      model_->Backward(*(*l)->prepared, *batch, *tapes_[x], dscores.data(), gb.data());
      records[2 * x + 1] = static_cast<double>(k);
    }
  });
  Status local = FirstError(statuses);
  if (measure_wait_) {
    // With -v: how long this rank waits for the slowest one (a barrier, outside the collectives'
    // own time), so that the time in collectives can be read as transfer.
    const auto t_wait = std::chrono::steady_clock::now();
    TPUG_RETURN_IF_ERROR(comm_->Barrier());
    wait_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_wait).count();
  }
  TPUG_RETURN_IF_ERROR(comm_->Agree(local));

  // Their mean, summed in batch order whatever the ranks and threads: every rank gets the sum
  // a single process forms (dist::Communicator::OrderedSum).
  StepStats stats;
  std::vector<int> owner2(2 * nb);
  for (int64_t b = 0; b < nb; ++b) owner2[2 * b] = owner2[2 * b + 1] = owner[b];
  std::vector<double> all;
  TPUG_RETURN_IF_ERROR(comm_->AllGatherItems(owner2, records, &all));
  for (int64_t b = 0; b < nb; ++b) {
    stats.loss += all[2 * b];
    stats.configs += static_cast<int64_t>(all[2 * b + 1]);
  }
  std::vector<const float*> parts;
  for (int64_t x = 0; x < nm; ++x) parts.push_back(grads_[x].data());
  TPUG_RETURN_IF_ERROR(comm_->OrderedSum(owner, parts, num_params_, grad_.data()));
  const float inv = 1.0f / static_cast<float>(nb);
  for (float& x : grad_) x *= inv;
  stats.loss /= nb;

  // The update.
  stats.lr = schedule_->LearningRate(optimizer_->step());
  if (!std::isfinite(stats.loss)) {
    // Every rank has the same loss and norm: the error is the same everywhere (Agree makes it
    // one report).
    return comm_->Agree(InternalError(
        "training diverged: loss is " + Fmt(stats.loss) + " at epoch " + std::to_string(epoch + 1) +
        ", step " + std::to_string(step + 1) + " (learning rate " + Fmt(stats.lr) +
        "); try a lower --learning-rate or --clip-norm"));
  }
  std::vector<float> frozen;  // GST fine-tuning: everything below the head stays put
  if (gst_options.head_only) {
    frozen.assign(model_->parameters(), model_->parameters() + head_offset_);
  }
  stats.grad_norm = optimizer_->Step(model_->parameters(), grad_.data(), stats.lr);
  if (!frozen.empty()) std::copy(frozen.begin(), frozen.end(), model_->parameters());
  UpdateAverage();
  if (!std::isfinite(stats.grad_norm)) {
    return comm_->Agree(InternalError(
        "training diverged: gradient norm is not finite at epoch " + std::to_string(epoch + 1) +
        ", step " + std::to_string(step + 1) + " (learning rate " + Fmt(stats.lr) + ")"));
  }
  return stats;
}

void TrainingRun::UpdateAverage() {
  if (ema_.empty()) return;
  // TensorFlow's ExponentialMovingAverage with num_updates: the decay grows to ema_decay, so
  // the average forgets the initial weights within the first steps.
  const double t = static_cast<double>(optimizer_->step());
  const float d = static_cast<float>(std::min(config_.ema_decay(), (1.0 + t) / (10.0 + t)));
  const float* p = model_->parameters();
  for (int64_t i = 0; i < num_params_; ++i) ema_[i] = d * ema_[i] + (1.0f - d) * p[i];
}

void TrainingRun::SwapAverage() {
  if (ema_.empty()) return;
  std::swap_ranges(ema_.begin(), ema_.end(), model_->parameters());
}

Status TrainingRun::Validate(double* metric) {
  model_->set_kernel_pool(comm_->Owned(valid_owner_).size() == 1 ? kernel_pool_.get() : nullptr);
  TPUG_ASSIGN_OR_RETURN(std::vector<double> metrics, ValidationMetrics({model_.get()}));
  *metric = metrics[0];
  return Status::Ok();
}

StatusOr<std::vector<double>> TrainingRun::ValidationMetrics(
    const std::vector<const CostModel*>& models) {
  // This rank's validation graphs; the values of all are then summed in graph order.
  const std::vector<int64_t> mine = comm_->Owned(valid_owner_);
  const int64_t nm = static_cast<int64_t>(mine.size());
  const bool ensemble = models.size() > 1;
  const size_t series = models.size() + (ensemble ? 1 : 0);
  std::vector<std::vector<double>> local(
      series, std::vector<double>(nm, std::numeric_limits<double>::quiet_NaN()));
  std::vector<Status> statuses(nm);
  pool_->ParallelFor(nm, 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t x = b; x < e; ++x) {
      statuses[x] = [&]() -> Status {
        const int64_t j = mine[x];
        const Member& v = valid_[j];
        TPUG_ASSIGN_OR_RETURN(auto l, store_->Get(v));
        if (valid_cached_[j] && valid_values_[j].empty() && !v.eval_configs.empty()) {
          TPUG_ASSIGN_OR_RETURN(valid_values_[j],
                                v.reader->ReadLayoutConfigs(v.index, v.eval_configs));
        }
        std::vector<double> rt;
        for (int64_t c : v.eval_configs) rt.push_back(l->graph.NormalizedRuntime(c));
        auto metric = [&](const std::vector<double>& scores) {
          return ValidatesByKendall() ? eval::KendallTauB(scores, rt)
                                      : eval::TopKError(scores, rt, config_.tile_top_k());
        };
        std::vector<double> sum(ensemble ? v.eval_configs.size() : 0, 0.0);
        for (size_t m = 0; m < models.size(); ++m) {
          TPUG_ASSIGN_OR_RETURN(
              std::vector<double> scores,
              ScoreConfigs(*models[m], v, *l, v.eval_configs, config_.eval_batch_configs(),
                           valid_cached_[j] ? &valid_values_[j] : nullptr));
          local[m][x] = metric(scores);
          if (!ensemble) continue;
          const std::vector<double> z =
              eval::EnsembleTransform(scores, eval::EnsembleCombine::kStandardizedMean);
          for (size_t i = 0; i < sum.size(); ++i) sum[i] += z[i];
        }
        if (ensemble) {
          for (double& z : sum) z /= static_cast<double>(models.size());
          local[models.size()][x] = metric(sum);
        }
        return Status::Ok();
      }();
    }
  });
  TPUG_RETURN_IF_ERROR(comm_->Agree(FirstError(statuses)));
  std::vector<double> out;
  for (const std::vector<double>& l : local) {
    std::vector<double> values;
    TPUG_RETURN_IF_ERROR(comm_->AllGatherItems(valid_owner_, l, &values));
    out.push_back(MeanOfFinite(values, nullptr));
  }
  return out;
}

StatusOr<TrainResult> TrainingRun::ValidateModels(const TrainConfig& config,
                                                  const std::vector<const CostModel*>& models) {
  t_start_ = std::chrono::steady_clock::now();
  root_ = comm_->rank() == 0;
  validate_only_ = true;
  TPUG_RETURN_IF_ERROR(comm_->Agree(ResolveConfig(config)));
  TPUG_RETURN_IF_ERROR(comm_->Agree(SelectData()));
  TPUG_RETURN_IF_ERROR(comm_->Agree(LoadData()));
  TPUG_RETURN_IF_ERROR(InitModel());
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
  SetMetricName();
  // The members were selected on the carved validation: they are compared on the held-out
  // configurations.
  if (carve_ && holdout_) std::swap(valid_, heldout_);
  TPUG_RETURN_IF_ERROR(ComputeReference());
  pool_ = std::make_unique<ThreadPool>(config_.threads());
  PrepareValidation();
  TPUG_ASSIGN_OR_RETURN(result_.member_metrics, ValidationMetrics(models));
  if (carve_ && holdout_) result_.held_out_metric = result_.member_metrics.back();
  return result_;
}

StatusOr<bool> TrainingRun::FinishEpoch(int epoch, double train_loss, double lr, double grad_norm,
                                        double seconds) {
  result_.epoch_loss.push_back(train_loss);
  double metric = train_loss;
  // With parameter averaging, the average is what is validated and kept.
  SwapAverage();
  const Status validated = valid_.empty() ? Status::Ok() : Validate(&metric);
  if (!validated.ok()) {
    SwapAverage();
    return validated;
  }
  result_.epoch_metric.push_back(metric);
  const bool improved =
      std::isfinite(metric) &&
      (best_epoch_ == 0 || !std::isfinite(best_metric_) ||
       (result_.higher_is_better ? metric > best_metric_ : metric < best_metric_));
  if (improved) {
    best_metric_ = metric;
    best_epoch_ = epoch + 1;
    since_best_ = 0;
    best_params_.assign(model_->parameters(), model_->parameters() + num_params_);
  } else {
    ++since_best_;
  }
  SwapAverage();
  std::string text = "epoch=" + std::to_string(epoch + 1) + " train_loss=" + Fmt(train_loss);
  if (!valid_.empty()) text += " " + result_.metric_name + "=" + Fmt(metric);
  char tail[160];
  std::snprintf(tail, sizeof(tail), " lr=%.6g grad_norm=%.4g time=%.2fs%s", lr, grad_norm, seconds,
                improved ? " best" : "");
  text += tail;
  spdlog::info("{}", text);
  EpochRecord& record = epoch_records_.emplace_back();
  record.set_epoch(epoch + 1);
  record.set_train_loss(train_loss);
  record.set_valid_metric(metric);
  record.set_learning_rate(lr);
  record.set_grad_norm(grad_norm);
  record.set_wall_seconds(seconds);

  const bool stop = Patience() > 0 && since_best_ >= Patience();
  const bool last = stop || epoch + 1 == config_.epochs();
  // stop_after_steps reached at an epoch's end: the run goes on from the next epoch.
  const bool pause = !last && stop_after_steps_ > 0 && steps_done_ >= stop_after_steps_;
  // After every epoch when the interval is 0.
  bool write = last || pause || config_.checkpoint_interval_seconds() == 0;
  if (!write) {
    TPUG_ASSIGN_OR_RETURN(write, CheckpointDue(false));
  }
  if (write) {
    TPUG_RETURN_IF_ERROR(WriteCheckpoint(epoch + 1, nullptr));
    last_checkpoint_ = std::chrono::steady_clock::now();
  }
  if (stop) {
    spdlog::info("early stop: {} did not improve for {} epochs (best {} at epoch {})",
                 result_.metric_name, since_best_, Fmt(best_metric_), best_epoch_);
  }
  if (pause) stopped_ = true;
  return !stop && !pause;
}

Status TrainingRun::GatherHistory(std::vector<GstHistoryRow>* rows) {
  rows->clear();
  std::string mine;
  history_->ForEach([&](int64_t graph, int64_t segment, const float* row, int64_t step) {
    GstHistoryRow r;
    r.set_graph(graph);
    r.set_segment(segment);
    r.set_step(step);
    r.set_row(FloatsToBytes(row, history_->width()));
    const std::string bytes = r.SerializeAsString();
    const uint64_t size = bytes.size();
    mine.append(reinterpret_cast<const char*>(&size), sizeof(size));
    mine += bytes;
  });
  std::vector<std::string> all;
  if (comm_->size() == 1) {
    all = {std::move(mine)};
  } else {
    TPUG_RETURN_IF_ERROR(comm_->Gather(mine, 0, &all));
  }
  std::map<std::pair<int64_t, int64_t>, GstHistoryRow> merged;
  for (const std::string& b : all) {
    size_t pos = 0;
    while (pos + sizeof(uint64_t) <= b.size()) {
      uint64_t size = 0;
      std::memcpy(&size, b.data() + pos, sizeof(size));
      pos += sizeof(size);
      GstHistoryRow r;
      if (size > b.size() - pos || !r.ParseFromArray(b.data() + pos, static_cast<int>(size))) {
        return InternalError("a GST history row gathered from another rank does not parse");
      }
      pos += size;
      const auto key = std::make_pair(r.graph(), r.segment());
      merged[key] = std::move(r);
    }
  }
  for (auto& [key, r] : merged) rows->push_back(std::move(r));
  return Status::Ok();
}

Status TrainingRun::WriteCheckpoint(int epochs_done, const EpochSoFar* partial) {
  // The GST history is spread over the ranks; rank 0 writes the checkpoint.
  std::vector<GstHistoryRow> rows;
  TPUG_RETURN_IF_ERROR(GatherHistory(&rows));
  if (!root_) return comm_->Agree(Status::Ok());
  ModelFile ckpt;
  StoreModel(*model_, &ckpt);
  *ckpt.mutable_train_config() = config_;
  *ckpt.mutable_data() = fingerprint_;
  CheckpointState* st = ckpt.mutable_checkpoint();
  st->set_epochs_done(epochs_done);
  st->set_optimizer_step(optimizer_->step());
  st->set_first_moment(FloatsToBytes(optimizer_->first_moment().data(), num_params_));
  st->set_second_moment(FloatsToBytes(optimizer_->second_moment().data(), num_params_));
  st->set_best_epoch(best_epoch_);
  st->set_best_metric(best_metric_);
  st->set_best_parameters(FloatsToBytes(best_params_.data(), num_params_));
  if (!ema_.empty()) st->set_ema_parameters(FloatsToBytes(ema_.data(), num_params_));
  st->set_epochs_since_best(since_best_);
  st->set_total_steps(total_steps_);
  for (double v : result_.epoch_loss) st->add_epoch_loss(v);
  for (GstHistoryRow& r : rows) *st->add_gst_history() = std::move(r);
  if (partial != nullptr) {
    st->set_steps_into_epoch(partial->steps);
    st->set_partial_loss_sum(partial->loss_sum);
    st->set_partial_grad_norm_sum(partial->grad_norm_sum);
    st->set_partial_learning_rate(partial->learning_rate);
    st->set_partial_wall_seconds(partial->seconds);
  }
  TrainingSummary* sum = ckpt.mutable_summary();
  sum->set_metric_name(result_.metric_name);
  for (double v : result_.epoch_metric) sum->add_epoch_metric(v);
  for (const EpochRecord& r : epoch_records_) *sum->add_history() = r;
  TPUG_RETURN_IF_ERROR(comm_->Agree(WriteModelFile(ckpt_path_, ckpt, kFileKindCheckpoint)));
  ++result_.checkpoints_written;
  return Status::Ok();
}

Status TrainingRun::WriteModel(int epochs_run) {
  if (best_epoch_ == 0) {
    // The metric was undefined in every epoch (e.g. all validation graphs tie): keep the last.
    spdlog::warn("{} was undefined in every epoch; writing the last epoch's parameters",
                 result_.metric_name);
    if (!ema_.empty()) {
      best_params_ = ema_;
    } else {
      best_params_.assign(model_->parameters(), model_->parameters() + num_params_);
    }
    best_epoch_ = epochs_run;
  }
  std::copy(best_params_.begin(), best_params_.end(), model_->parameters());
  result_.epochs_run = epochs_run;
  result_.best_epoch = best_epoch_;
  result_.best_metric = best_metric_;
  // Rank 0 writes the model file; the others learn whether it worked.
  if (!root_) return comm_->Agree(Status::Ok());
  Status written = [&]() -> Status {
    ModelFile out;
    StoreModel(*model_, &out);
    *out.mutable_train_config() = config_;
    *out.mutable_data() = fingerprint_;
    TPUG_RETURN_IF_ERROR(AddSelfTests(*model_, config_.self_test_samples(),
                                      DeriveSeed(member_seed_, "self_test"), &out));
    TrainingSummary* summary = out.mutable_summary();
    summary->set_epochs_run(epochs_run);
    summary->set_best_epoch(best_epoch_);
    summary->set_metric_name(result_.metric_name);
    summary->set_best_metric(best_metric_);
    for (double v : result_.epoch_metric) summary->add_epoch_metric(v);
    for (const EpochRecord& r : epoch_records_) *summary->add_history() = r;
    return WriteModelFile(config_.output(), out, kFileKindModel);
  }();
  TPUG_RETURN_IF_ERROR(comm_->Agree(written));
  spdlog::info(
      "wrote {} (best epoch {}, {}={}) in {}", config_.output(), best_epoch_, result_.metric_name,
      Fmt(best_metric_),
      FormatDuration(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start_).count()));
  return Status::Ok();
}

// Whether a finished member file was written by the run `want` describes: the same config up to
// what does not change the result (threads, output and checkpoint paths) and what the run
// resolves (an unset collection).
bool SameMemberRun(TrainConfig stored, TrainConfig want) {
  for (TrainConfig* c : {&stored, &want}) {
    c->clear_threads();
    c->clear_output();
    c->clear_checkpoint();
    c->clear_resume();
    c->clear_stop_after_steps();
    c->clear_ensemble_member_alone();
  }
  if (want.collection().empty()) stored.clear_collection();
  return stored.SerializeAsString() == want.SerializeAsString();
}

// The config of ensemble member m's own run: its streams, and its files beside the ensemble's.
TrainConfig MemberConfig(const TrainConfig& ensemble, int m) {
  TrainConfig c = ensemble;
  c.set_ensemble_member(m);
  c.set_output(EnsembleMemberPathOf(ensemble.output(), m));
  if (!ensemble.checkpoint().empty()) {
    c.set_checkpoint(EnsembleMemberPathOf(ensemble.checkpoint(), m));
  }
  return c;
}

// TrainConfig.auto_resume: the config that continues the run's own checkpoint when the same
// command wrote it, else the config as given.
TrainConfig ResumeIfInterrupted(const TrainConfig& config) {
  if (!config.auto_resume() || !config.resume().empty()) return config;
  const std::string path = CheckpointPathOf(config);
  if (!FileSize(path).ok()) return config;
  auto stored = ReadModelFile(path, kFileKindCheckpoint);
  if (!stored.ok()) {
    spdlog::warn("--auto-resume: starting afresh; {}", stored.status().message());
    return config;
  }
  // The checkpoint's config is the resolved one: a clock seed (-1) never matches, and the run
  // starts afresh.
  if (!SameMemberRun(stored->train_config(), config)) {
    spdlog::warn("--auto-resume: starting afresh; {} was written by another command", path);
    return config;
  }
  spdlog::info("--auto-resume: {} is this command's; resuming the interrupted run", path);
  TrainConfig resumed = config;
  resumed.set_resume(path);
  return resumed;
}

// Member m (of n) finished by an earlier run of the same command, read back from its file
// `mc.output()`; nullopt when there is none (a file of another run, or an unreadable one, is
// retrained, with a warning). Every rank reads it, as every rank reads a checkpoint.
std::optional<ModelFile> FinishedMember(const TrainConfig& mc, int m, int n) {
  if (!FileSize(mc.output()).ok()) return std::nullopt;
  auto stored = ReadModelFile(mc.output(), kFileKindModel);
  if (stored.ok() && SameMemberRun(stored->train_config(), mc)) {
    const TrainingSummary& s = stored->summary();
    spdlog::info("ensemble member {}/{}: reusing {} (finished earlier; best epoch {}, {}={})",
                 m + 1, n, mc.output(), s.best_epoch(), s.metric_name(), Fmt(s.best_metric()));
    return std::move(stored).value();
  }
  spdlog::warn("ensemble member {}/{}: retraining; {} is {}", m + 1, n, mc.output(),
               stored.ok() ? "from another run" : stored.status().message());
  return std::nullopt;
}

// TrainConfig.ensemble_members > 1: trains (or reuses) each member as its own run into
// "<output>.member-<m>", validates the members and their ensemble on the same validation
// configurations (and computes the reference once), and writes one model file holding them all
// (format version 2).
StatusOr<TrainResult> TrainEnsemble(const TrainConfig& given) {
  const int n = given.ensemble_members();
  if (!given.resume().empty()) {
    return InvalidArgumentError(
        "--resume continues one model's checkpoint; an ensemble (--ensemble-members " +
        std::to_string(n) +
        ") resumes by running the same command again: its finished members, kept as " +
        EnsembleMemberPathOf(given.output(), 0) + " ..., are reused");
  }
  dist::Communicator& comm = dist::World();
  TrainConfig config = given;
  if (config.seed() == -1) {
    // One clock seed for every member (rank 0's under MPI).
    std::string bytes = std::to_string(ClockSeed());
    if (comm.size() > 1) TPUG_RETURN_IF_ERROR(comm.Broadcast(&bytes, 0));
    config.set_seed(std::stoll(bytes));
  }
  TPUG_RETURN_IF_ERROR(CheckWritable(config.output(), "--output"));
  const auto t_start = std::chrono::steady_clock::now();
  TrainResult first;  // member 0's run: epochs and best epoch
  std::vector<ModelFile> files(n);
  int64_t steps_run = 0;  // by the members this invocation trains (stop_after_steps)
  for (int m = 0; m < n; ++m) {
    TrainConfig mc = MemberConfig(config, m);
    // A member finished by an earlier run of the same command is read back, not retrained.
    if (std::optional<ModelFile> done = FinishedMember(mc, m, n)) {
      files[m] = std::move(*done);
      const TrainingSummary& s = files[m].summary();
      if (m == 0) {
        first.epochs_run = s.epochs_run();
        first.best_epoch = s.best_epoch();
        first.best_metric = s.best_metric();
      }
      continue;
    }
    if (config.stop_after_steps() > 0) {
      if (steps_run >= config.stop_after_steps()) {
        // The step budget ended with the previous member: this one starts next time.
        TrainResult stopped;
        stopped.stopped = true;
        stopped.steps_run = steps_run;
        stopped.checkpoint = CheckpointPathOf(mc);
        spdlog::info("stopped after {} steps (--stop-after-steps) before ensemble member {}/{}",
                     steps_run, m + 1, n);
        return stopped;
      }
      mc.set_stop_after_steps(config.stop_after_steps() - steps_run);
    }
    spdlog::info("ensemble member {}/{}: training", m + 1, n);
    TrainingRun run;
    run.SkipReference();
    TPUG_ASSIGN_OR_RETURN(TrainResult r, run.Run(ResumeIfInterrupted(mc)));
    steps_run += r.steps_run;
    if (r.stopped) {
      r.steps_run = steps_run;
      return r;
    }
    if (m == 0) first = r;
    TPUG_RETURN_IF_ERROR(comm.Barrier());
    TPUG_ASSIGN_OR_RETURN(files[m], ReadModelFile(mc.output(), kFileKindModel));
  }
  // The members on the validation configurations, alone and together.
  std::vector<std::unique_ptr<CostModel>> models;
  std::vector<const CostModel*> views;
  for (int m = 0; m < n; ++m) {
    TPUG_ASSIGN_OR_RETURN(models.emplace_back(),
                          RestoreModel(files[m], EnsembleMemberPathOf(config.output(), m)));
    views.push_back(models.back().get());
  }
  TrainingRun validation;
  TPUG_ASSIGN_OR_RETURN(TrainResult result, validation.ValidateModels(config, views));
  result.epochs_run = first.epochs_run;
  result.best_epoch = first.best_epoch;
  result.steps_run = steps_run;
  result.output = config.output();
  double ensemble_metric = std::numeric_limits<double>::quiet_NaN();
  if (result.metric_name == "train_loss") {
    // No validation graphs: nothing to compare the members on; stdout keeps member 0's loss.
    spdlog::warn("ensemble of {}: no validation configurations, so no validation metric", n);
    result.member_metrics.clear();
    result.best_metric = first.best_metric;
  } else {
    ensemble_metric = result.member_metrics.back();
    result.member_metrics.pop_back();
    result.best_metric = ensemble_metric;
    std::string list;
    for (int m = 0; m < n; ++m) list += (m > 0 ? " " : "") + Fmt(result.member_metrics[m]);
    spdlog::info("ensemble of {}: {}={} on the {} configurations (members: {})", n,
                 result.metric_name, Fmt(ensemble_metric),
                 std::isnan(result.held_out_metric) ? "validation" : "held-out", list);
  }
  // One file: member 0's with the others inside it.
  Status written = Status::Ok();
  if (comm.rank() == 0) {
    ModelFile out = files[0];
    out.set_format_version(kModelFormatVersion);
    out.mutable_train_config()->set_output(config.output());
    if (config.checkpoint().empty()) {
      out.mutable_train_config()->clear_checkpoint();
    } else {
      out.mutable_train_config()->set_checkpoint(config.checkpoint());
    }
    if (!std::isnan(ensemble_metric)) out.mutable_summary()->set_ensemble_metric(ensemble_metric);
    for (int m = 1; m < n; ++m) {
      ModelFile* member = out.add_ensemble();
      *member = files[m];
      member->clear_checkpoint();
    }
    written = WriteModelFile(config.output(), out, kFileKindModel);
    if (written.ok()) {
      // The members live on in the ensemble file; their own files and checkpoints go.
      for (int m = 0; m < n; ++m) {
        const TrainConfig mc = MemberConfig(config, m);
        std::remove(mc.output().c_str());
        std::remove(CheckpointPathOf(mc).c_str());
      }
    }
  }
  TPUG_RETURN_IF_ERROR(comm.Agree(written));
  spdlog::info(
      "wrote {} (ensemble of {}, {}={}) in {}", config.output(), n, result.metric_name,
      Fmt(ensemble_metric),
      FormatDuration(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count()));
  return result;
}

// TrainConfig.ensemble_member_alone: member `ensemble_member` of the ensemble `config` describes,
// trained (or found finished) into its member file as TrainEnsemble would.
StatusOr<TrainResult> TrainMemberAlone(const TrainConfig& config) {
  TrainConfig ensemble = config;
  ensemble.clear_ensemble_member_alone();
  ensemble.clear_ensemble_member();
  const int m = config.ensemble_member();
  const int n = config.ensemble_members();
  const TrainConfig mc = MemberConfig(ensemble, m);
  if (std::optional<ModelFile> done = FinishedMember(mc, m, n)) {
    const TrainingSummary& s = done->summary();
    TrainResult r;
    r.epochs_run = s.epochs_run();
    r.best_epoch = s.best_epoch();
    r.metric_name = s.metric_name();
    r.best_metric = s.best_metric();
    for (double v : s.epoch_metric()) r.epoch_metric.push_back(v);
    r.output = mc.output();
    return r;
  }
  spdlog::info("ensemble member {}/{} alone, into {}", m + 1, n, mc.output());
  TrainingRun run;
  run.SkipReference();
  return run.Run(ResumeIfInterrupted(mc));
}

}  // namespace

StatusOr<TrainResult> Train(const TrainConfig& config) {
  TPUG_RETURN_IF_ERROR(ValidateTrainConfig(config));
  if (config.ensemble_member_alone()) return TrainMemberAlone(config);
  // ensemble_member > 0 trains that member alone (member 0 alone is the single model).
  if (config.ensemble_members() > 1 && config.ensemble_member() == 0) return TrainEnsemble(config);
  TrainingRun run;
  return run.Run(ResumeIfInterrupted(config));
}

}  // namespace tpugraphs::train
