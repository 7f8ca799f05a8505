#include "tpugraphs/train/trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/eval/metrics.h"
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

uint64_t Fnv1a(std::string_view s, uint64_t h = 1469598103934665603ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
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

StatusOr<TrainResult> Train(const TrainConfig& given) {
  TPUG_RETURN_IF_ERROR(ValidateTrainConfig(given));
  const auto t_start = std::chrono::steady_clock::now();

  // --- resolve the config (resume: the checkpoint's, with the allowed overrides) ---
  TrainConfig config = given;
  ModelFile checkpoint;
  const bool resuming = !given.resume().empty();
  if (resuming) {
    TPUG_ASSIGN_OR_RETURN(checkpoint, ReadModelFile(given.resume(), kFileKindCheckpoint));
    config = checkpoint.train_config();
    if (given.has_epochs()) config.set_epochs(given.epochs());
    if (given.has_patience()) config.set_patience(given.patience());
    if (given.has_threads()) config.set_threads(given.threads());
    config.set_output(given.output());
    // As given (unset stays unset), so that the model file's config matches an uninterrupted run.
    if (given.has_checkpoint()) {
      config.set_checkpoint(given.checkpoint());
    } else {
      config.clear_checkpoint();
    }
    TPUG_RETURN_IF_ERROR(ValidateTrainConfig(config));
  } else if (config.seed() == -1) {
    config.set_seed(static_cast<int64_t>(
        std::chrono::system_clock::now().time_since_epoch().count() & 0x7fffffffffffffffLL));
  }
  config.clear_resume();
  const uint64_t seed = static_cast<uint64_t>(config.seed());
  const std::string ckpt_path = CheckpointPathOf(config);
  TPUG_RETURN_IF_ERROR(CheckWritable(config.output(), "--output"));
  TPUG_RETURN_IF_ERROR(CheckWritable(ckpt_path, "--checkpoint"));
  RemoveStaleTemporaries(config.output());  // left by a killed earlier run
  RemoveStaleTemporaries(ckpt_path);

  // --- data selection ---
  TPUG_ASSIGN_OR_RETURN(auto train_reader, io::DatasetReader::Open(config.dataset()));
  std::unique_ptr<io::DatasetReader> valid_owned;
  const io::DatasetReader* valid_reader = train_reader.get();
  if (!config.valid_dataset().empty() && config.valid_dataset() != config.dataset()) {
    TPUG_ASSIGN_OR_RETURN(valid_owned, io::DatasetReader::Open(config.valid_dataset()));
    valid_reader = valid_owned.get();
  }
  if (config.collection().empty()) {
    std::set<std::string> found;
    for (int64_t i = 0; i < train_reader->num_graphs(); ++i) {
      const auto& info = train_reader->info(i);
      if (config.train_split().empty() || info.split == config.train_split()) {
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
          config.dataset() + ": " +
          (found.empty() ? "no graphs of split \"" + config.train_split() + "\""
                         : "several collections (" + list + "); choose one with --collection"));
    }
    config.set_collection(*found.begin());
  }
  const TaskKind task = TaskKindOfCollection(config.collection());
  TPUG_RETURN_IF_ERROR(ValidateGstConfig(config, task));
  const bool gst = config.gst() != TrainConfig::GST_OFF;
  int64_t skipped = 0;
  std::vector<int64_t> train_ids = SelectGraphs(
      *train_reader, config.collection(), config.train_split(), config.min_configs(), &skipped);
  if (train_ids.empty()) {
    return FailedPreconditionError(config.dataset() + ": no graphs of collection " +
                                   config.collection() + " and split \"" + config.train_split() +
                                   "\" with at least " + std::to_string(config.min_configs()) +
                                   " configurations");
  }
  const bool holdout = config.holdout_config_fraction() > 0;
  std::vector<int64_t> valid_ids;
  if (!holdout && !config.valid_split().empty()) {
    valid_ids = SelectGraphs(*valid_reader, config.collection(), config.valid_split(), 2, &skipped);
    if (valid_reader == train_reader.get()) {
      // Never validate on a graph that is also trained on (e.g. empty train split).
      std::set<int64_t> t(train_ids.begin(), train_ids.end());
      std::erase_if(valid_ids, [&](int64_t i) { return t.count(i) > 0; });
    }
  }
  if (!holdout && valid_ids.empty()) {
    spdlog::warn("no validation graphs (split \"{}\" of {}): epochs are compared by training loss",
                 config.valid_split(), config.collection());
  }
  if (skipped > 0) {
    spdlog::info("skipped {} graphs with fewer than {} configurations", skipped,
                 config.min_configs());
  }

  // --- model and feature transform ---
  TPUG_ASSIGN_OR_RETURN(std::unique_ptr<CostModel> model, CostModel::Create(config.model(), task));
  double raw_bytes = 0;
  for (int64_t i : train_ids) {
    const auto& info = train_reader->info(i);
    raw_bytes += info.num_nodes * (kNodeFeatureCount * 8.0 + 64) + info.num_edges * 32.0;
  }
  for (int64_t i : valid_ids) {
    const auto& info = valid_reader->info(i);
    raw_bytes += info.num_nodes * (kNodeFeatureCount * 8.0 + 64) + info.num_edges * 32.0;
  }
  const bool cache = raw_bytes < kCacheBudgetBytes;
  GraphStore store(model.get(), cache, gst);

  std::vector<Member> train(train_ids.size());
  std::vector<Member> valid;
  DataFingerprint fingerprint;
  fingerprint.set_dataset(config.dataset());
  fingerprint.set_collection(config.collection());
  uint64_t names_hash = 1469598103934665603ULL;
  int64_t train_configs = 0;
  const auto t_load = std::chrono::steady_clock::now();
  {
    Progress progress("load", static_cast<int64_t>(train_ids.size()), "graphs");
    for (size_t j = 0; j < train_ids.size(); ++j) {
      Member& m = train[j];
      m.reader = train_reader.get();
      m.index = train_ids[j];
      TPUG_ASSIGN_OR_RETURN(Graph g, train_reader->ReadGraph(m.index, false));
      if (std::all_of(g.config_runtime.begin(), g.config_runtime.end(),
                      [](int64_t t) { return t == 0; })) {
        return FailedPreconditionError(
            config.dataset() + ": training graph " + g.Id() +
            " has no measured runtimes (all 0, as in the hidden test split or for layouts "
            "ingested from an HLO module without runs): nothing to learn from; choose another "
            "--collection or --train-split");
      }
      if (!resuming) model->transform().Accumulate(g);
      names_hash = Fnv1a(g.Id() + "\n", names_hash);
      train_configs += g.num_configs;
      if (holdout) {
        TPUG_ASSIGN_OR_RETURN(std::vector<uint64_t> hashes, HashMemberConfigs(m, g));
        ConfigSplit split = SplitByDistinctConfig(hashes, config.holdout_config_fraction(),
                                                  DeriveSeed(seed, "holdout", j));
        m.pool = split.train;
        Member v = m;
        v.pool.clear();
        v.eval_configs = split.holdout;
        valid.push_back(std::move(v));
      } else {
        m.pool.resize(g.num_configs);
        for (int64_t c = 0; c < g.num_configs; ++c) m.pool[c] = c;
      }
      store.Offer(m, std::move(g));
      progress.Add(1);
    }
  }
  for (int64_t i : valid_ids) {
    Member v;
    v.reader = valid_reader;
    v.index = i;
    const int64_t c = valid_reader->info(i).num_configs;
    v.eval_configs.resize(c);
    for (int64_t x = 0; x < c; ++x) v.eval_configs[x] = x;
    valid.push_back(std::move(v));
  }
  // Cap validation configs with a fixed sample (the same every epoch).
  for (size_t j = 0; j < valid.size(); ++j) {
    Member& v = valid[j];
    if (config.valid_max_configs() > 0 &&
        static_cast<int64_t>(v.eval_configs.size()) > config.valid_max_configs()) {
      v.eval_configs =
          SampleConfigs(v.eval_configs, config.valid_max_configs(), DeriveSeed(seed, "valid", j));
      std::sort(v.eval_configs.begin(), v.eval_configs.end());
    }
  }
  fingerprint.set_num_train_graphs(static_cast<int64_t>(train.size()));
  fingerprint.set_num_valid_graphs(holdout ? 0 : static_cast<int64_t>(valid.size()));
  fingerprint.set_graph_names_hash(names_hash);
  fingerprint.set_num_train_configs(train_configs);

  if (resuming) {
    // The checkpoint's transform and parameters replace the fit and the initialisation.
    TPUG_ASSIGN_OR_RETURN(std::unique_ptr<CostModel> restored,
                          RestoreModel(checkpoint, given.resume()));
    Status s = model->transform().FromProto(checkpoint.feature_transform());
    if (!s.ok()) return s.WithContext(given.resume());
    std::copy(restored->parameters(), restored->parameters() + model->num_parameters(),
              model->parameters());
  } else {
    TPUG_RETURN_IF_ERROR(model->transform().Finalize().WithContext(config.dataset()));
    model->InitParameters(DeriveSeed(seed, "init"));
  }
  spdlog::info(
      "training {} on {} graphs ({} configs), validating on {} {}; {} parameters; loaded in {}",
      config.collection(), train.size(), train_configs, valid.size(),
      holdout ? "held-out config sets" : "graphs", model->num_parameters(),
      FormatDuration(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count()));

  // --- optimisation state ---
  const int64_t num_params = model->num_parameters();
  const int64_t batch_graphs =
      std::min<int64_t>(config.batch_graphs(), static_cast<int64_t>(train.size()));
  const int64_t steps_per_epoch =
      (static_cast<int64_t>(train.size()) + batch_graphs - 1) / batch_graphs;
  const int64_t total_steps = steps_per_epoch * config.epochs();
  const LrSchedule schedule = LrScheduleOf(config, total_steps);
  Optimizer optimizer(OptimizerOptionsOf(config), num_params);
  std::vector<float> best_params(model->parameters(), model->parameters() + num_params);
  int start_epoch = 0, best_epoch = 0, since_best = 0;
  std::vector<EpochRecord> epoch_records;  // the training history stored in the summary
  double best_metric = std::numeric_limits<double>::quiet_NaN();
  TrainResult result;
  result.higher_is_better = false;
  if (!valid.empty()) {
    if (task == TaskKind::kLayout) {
      result.metric_name = "valid_kendall";
      result.higher_is_better = true;
    } else {
      result.metric_name = "valid_top" + std::to_string(config.tile_top_k()) + "_err";
    }
  } else {
    result.metric_name = "train_loss";
  }
  if (resuming) {
    const CheckpointState& st = checkpoint.checkpoint();
    TPUG_ASSIGN_OR_RETURN(std::vector<float> m1,
                          BytesToFloats(st.first_moment(), num_params, given.resume()));
    TPUG_ASSIGN_OR_RETURN(std::vector<float> m2,
                          BytesToFloats(st.second_moment(), num_params, given.resume()));
    TPUG_RETURN_IF_ERROR(optimizer.Restore(st.optimizer_step(), std::move(m1), std::move(m2))
                             .WithContext(given.resume()));
    if (st.best_epoch() > 0) {
      TPUG_ASSIGN_OR_RETURN(best_params,
                            BytesToFloats(st.best_parameters(), num_params, given.resume()));
    }
    start_epoch = st.epochs_done();
    best_epoch = st.best_epoch();
    best_metric = st.best_metric();
    since_best = st.epochs_since_best();
    for (double v : checkpoint.summary().epoch_metric()) result.epoch_metric.push_back(v);
    epoch_records.assign(checkpoint.summary().history().begin(),
                         checkpoint.summary().history().end());
    for (double v : st.epoch_loss()) result.epoch_loss.push_back(v);
    spdlog::info("resuming {} after epoch {} (best epoch {}, {}={})", given.resume(), start_epoch,
                 best_epoch, result.metric_name, Fmt(best_metric));
    if (fingerprint.graph_names_hash() != checkpoint.data().graph_names_hash()) {
      return FailedPreconditionError(given.resume() + ": was trained on other graphs than " +
                                     config.dataset() + " now holds");
    }
  }

  // --- reference metric on the held-out configurations ---
  result.reference_metric = std::numeric_limits<double>::quiet_NaN();
  if (holdout) {
    double sum = 0;
    int64_t count = 0;
    for (size_t j = 0; j < valid.size(); ++j) {
      const Member& v = valid[j];
      TPUG_ASSIGN_OR_RETURN(auto l, store.Get(v));
      const Graph& g = l->graph;
      double value = std::numeric_limits<double>::quiet_NaN();
      if (task == TaskKind::kTile) {
        std::vector<double> rt;
        for (int64_t c : v.eval_configs) rt.push_back(g.NormalizedRuntime(c));
        value = RandomRankingTopKError(rt, config.tile_top_k());
        result.reference_name = "random";
      } else {
        result.reference_name = "ridge";
        const std::vector<int64_t>& pool = train[j].pool;
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
      if (std::isfinite(value)) {
        sum += value;
        ++count;
      }
    }
    if (count > 0) {
      result.reference_metric = sum / count;
      spdlog::info("reference {}: {}={} on the held-out configurations ({} of {} graphs)",
                   result.reference_name, result.metric_name, Fmt(result.reference_metric), count,
                   valid.size());
    } else {
      spdlog::warn("reference {}: no graph gave a finite {} (see the warnings above; a graph "
                   "whose held-out runtimes all tie has no Kendall tau)",
                   result.reference_name, result.metric_name);
    }
  }

  // --- the loop ---
  ThreadPool pool(config.threads());
  // A step with one graph runs that graph's kernels row-parallel on a second pool (the first
  // then runs the one graph inline); results do not depend on either pool's size.
  ThreadPool kernel_pool(config.threads());
  struct KernelPoolReset {
    CostModel* m;
    ~KernelPoolReset() { m->set_kernel_pool(nullptr); }
  } kernel_pool_reset{model.get()};
  std::vector<std::unique_ptr<model::ForwardTape>> tapes(batch_graphs);
  for (auto& t : tapes) t = model->NewTape();
  std::vector<std::vector<float>> grads(batch_graphs, std::vector<float>(num_params));
  std::vector<float> grad(num_params);
  const int64_t configs_per_step = batch_graphs * config.configs_per_graph();
  HistoryTable history(model->head_input_dim());
  if (resuming) {
    for (const GstHistoryRow& r : checkpoint.checkpoint().gst_history()) {
      TPUG_ASSIGN_OR_RETURN(std::vector<float> row,
                            BytesToFloats(r.row(), history.width(), given.resume()));
      history.Push(r.graph(), r.segment(), row.data(), r.step());
    }
  }
  GstOptions gst_options;
  gst_options.segments_per_step = config.gst_segments_per_step();
  gst_options.keep_probability = config.gst_keep_probability();
  gst_options.fresh_context = config.gst() == TrainConfig::GST_FRESH;
  const int64_t head_offset = model->head_parameter_offset();
  Progress progress("train", (config.epochs() - start_epoch) * steps_per_epoch * configs_per_step,
                    "configs");

  // Layout values of the validation configs, read once and kept while they fit in a budget.
  std::vector<std::vector<int8_t>> valid_values(valid.size());
  std::vector<char> valid_cached(valid.size(), 0);
  {
    double bytes = 0;
    for (size_t j = 0; j < valid.size(); ++j) {
      const io::GraphInfo& info = valid[j].reader->info(valid[j].index);
      bytes += static_cast<double>(valid[j].eval_configs.size()) * info.num_config_nodes *
               kLayoutConfigFeatureCount;
      valid_cached[j] = task == TaskKind::kLayout && bytes < kValidCacheBytes;
    }
  }
  auto validate = [&](double* metric) -> Status {
    std::vector<double> values(valid.size(), std::numeric_limits<double>::quiet_NaN());
    std::vector<Status> statuses(valid.size());
    model->set_kernel_pool(valid.size() == 1 ? &kernel_pool : nullptr);
    pool.ParallelFor(static_cast<int64_t>(valid.size()), 1, [&](int64_t, int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) {
        const Member& v = valid[j];
        auto l = store.Get(v);
        if (!l.ok()) {
          statuses[j] = l.status();
          continue;
        }
        if (valid_cached[j] && valid_values[j].empty() && !v.eval_configs.empty()) {
          auto read = v.reader->ReadLayoutConfigs(v.index, v.eval_configs);
          if (!read.ok()) {
            statuses[j] = read.status();
            continue;
          }
          valid_values[j] = std::move(read).value();
        }
        auto scores = ScoreConfigs(*model, v, **l, v.eval_configs, config.eval_batch_configs(),
                                   valid_cached[j] ? &valid_values[j] : nullptr);
        if (!scores.ok()) {
          statuses[j] = scores.status();
          continue;
        }
        std::vector<double> rt;
        for (int64_t c : v.eval_configs) rt.push_back((*l)->graph.NormalizedRuntime(c));
        values[j] = task == TaskKind::kLayout ? eval::KendallTauB(*scores, rt)
                                              : eval::TopKError(*scores, rt, config.tile_top_k());
      }
    });
    double sum = 0;
    int64_t count = 0;
    for (size_t j = 0; j < valid.size(); ++j) {
      TPUG_RETURN_IF_ERROR(statuses[j]);
      if (std::isfinite(values[j])) {
        sum += values[j];
        ++count;
      }
    }
    *metric = count > 0 ? sum / count : std::numeric_limits<double>::quiet_NaN();
    return Status::Ok();
  };

  auto last_checkpoint = std::chrono::steady_clock::now();
  auto write_checkpoint = [&](int epochs_done) -> Status {
    ModelFile ckpt;
    StoreModel(*model, &ckpt);
    *ckpt.mutable_train_config() = config;
    *ckpt.mutable_data() = fingerprint;
    CheckpointState* st = ckpt.mutable_checkpoint();
    st->set_epochs_done(epochs_done);
    st->set_optimizer_step(optimizer.step());
    st->set_first_moment(FloatsToBytes(optimizer.first_moment().data(), num_params));
    st->set_second_moment(FloatsToBytes(optimizer.second_moment().data(), num_params));
    st->set_best_epoch(best_epoch);
    st->set_best_metric(best_metric);
    st->set_best_parameters(FloatsToBytes(best_params.data(), num_params));
    st->set_epochs_since_best(since_best);
    st->set_total_steps(total_steps);
    for (double v : result.epoch_loss) st->add_epoch_loss(v);
    history.ForEach([&](int64_t graph, int64_t segment, const float* row, int64_t step) {
      GstHistoryRow* r = st->add_gst_history();
      r->set_graph(graph);
      r->set_segment(segment);
      r->set_step(step);
      r->set_row(FloatsToBytes(row, history.width()));
    });
    TrainingSummary* sum = ckpt.mutable_summary();
    sum->set_metric_name(result.metric_name);
    for (double v : result.epoch_metric) sum->add_epoch_metric(v);
    for (const EpochRecord& r : epoch_records) *sum->add_history() = r;
    return WriteModelFile(ckpt_path, ckpt, kFileKindCheckpoint);
  };

  // A checkpoint written by the epoch that triggered early stopping: the run is over.
  const bool stopped_before = config.patience() > 0 && since_best >= config.patience();
  int epoch = start_epoch;
  for (; epoch < config.epochs() && !stopped_before; ++epoch) {
    const auto t_epoch = std::chrono::steady_clock::now();
    std::vector<int64_t> order(train.size());
    for (size_t j = 0; j < order.size(); ++j) order[j] = static_cast<int64_t>(j);
    Rng shuffle(DeriveSeed(seed, "shuffle", static_cast<uint64_t>(epoch)));
    shuffle.Shuffle(order);
    double loss_sum = 0, norm_sum = 0, lr = 0;
    int64_t loss_count = 0;
    GstOptions epoch_gst = gst_options;
    epoch_gst.head_only = gst && epoch >= config.epochs() - config.gst_finetune_epochs();
    if (epoch_gst.head_only &&
        epoch == std::max(start_epoch, config.epochs() - config.gst_finetune_epochs())) {
      spdlog::info("epoch {}: GST fine-tuning of the head on fresh embeddings", epoch + 1);
    }
    for (int64_t step = 0; step < steps_per_epoch; ++step) {
      const int64_t begin = step * batch_graphs;
      const int64_t end =
          std::min<int64_t>(begin + batch_graphs, static_cast<int64_t>(order.size()));
      const int64_t nb = end - begin;
      std::vector<double> losses(nb, 0.0);
      std::vector<Status> statuses(nb);
      std::vector<int64_t> sampled(nb, 0);
      model->set_kernel_pool(nb == 1 ? &kernel_pool : nullptr);
      pool.ParallelFor(nb, 1, [&](int64_t, int64_t sb, int64_t se) {
        for (int64_t b = sb; b < se; ++b) {
          const int64_t j = order[begin + b];
          const Member& m = train[j];
          std::vector<float>& gb = grads[b];
          std::fill(gb.begin(), gb.end(), 0.0f);
          auto l = store.Get(m);
          if (!l.ok()) {
            statuses[b] = l.status();
            continue;
          }
          const Graph& g = (*l)->graph;
          std::vector<int64_t> picks = SampleConfigs(
              m.pool, config.configs_per_graph(),
              DeriveSeed(seed, "sample", static_cast<uint64_t>(epoch), static_cast<uint64_t>(j)));
          auto batch = MakeBatch(m, g, picks);
          if (!batch.ok()) {
            statuses[b] = batch.status();
            continue;
          }
          const int64_t k = static_cast<int64_t>(picks.size());
          std::vector<double> rt(k);
          for (int64_t c = 0; c < k; ++c) rt[c] = g.NormalizedRuntime(picks[c]);
          if (gst) {
            const int64_t now = optimizer.step();
            auto st = GstStep(
                *model, *(*l)->segmented, j, *batch, rt.data(), config.loss(), epoch_gst, now,
                DeriveSeed(seed, "gst", static_cast<uint64_t>(now), static_cast<uint64_t>(j)),
                &history, gb.data());
            if (!st.ok()) {
              statuses[b] = st.status();
              continue;
            }
            losses[b] = st->loss;
            sampled[b] = k;
            continue;
          }
          std::vector<float> scores(k), dscores(k);
          model->Forward(*(*l)->prepared, *batch, scores.data(), tapes[b].get());
          losses[b] =
              model::ComputeLoss(config.loss(), scores.data(), rt.data(), k, dscores.data());
          model->Backward(*(*l)->prepared, *batch, *tapes[b], dscores.data(), gb.data());
          sampled[b] = k;
        }
      });
      std::fill(grad.begin(), grad.end(), 0.0f);
      double step_loss = 0;
      int64_t step_configs = 0;
      for (int64_t b = 0; b < nb; ++b) {
        TPUG_RETURN_IF_ERROR(statuses[b]);
        step_loss += losses[b];
        step_configs += sampled[b];
        const std::vector<float>& gb = grads[b];
        for (int64_t p = 0; p < num_params; ++p) grad[p] += gb[p];
      }
      const float inv = 1.0f / static_cast<float>(nb);
      for (float& x : grad) x *= inv;
      step_loss /= nb;
      const int64_t global_step = optimizer.step();
      lr = schedule.LearningRate(global_step);
      if (!std::isfinite(step_loss)) {
        return InternalError("training diverged: loss is " + Fmt(step_loss) + " at epoch " +
                             std::to_string(epoch + 1) + ", step " + std::to_string(step + 1) +
                             " (learning rate " + Fmt(lr) +
                             "); try a lower --learning-rate or --clip-norm");
      }
      std::vector<float> frozen;  // GST fine-tuning: everything below the head stays put
      if (epoch_gst.head_only)
        frozen.assign(model->parameters(), model->parameters() + head_offset);
      const double norm = optimizer.Step(model->parameters(), grad.data(), lr);
      if (!frozen.empty()) std::copy(frozen.begin(), frozen.end(), model->parameters());
      if (!std::isfinite(norm)) {
        return InternalError("training diverged: gradient norm is not finite at epoch " +
                             std::to_string(epoch + 1) + ", step " + std::to_string(step + 1) +
                             " (learning rate " + Fmt(lr) + ")");
      }
      loss_sum += step_loss;
      norm_sum += norm;
      ++loss_count;
      progress.SetSuffix("epoch=" + std::to_string(epoch + 1) + "/" +
                         std::to_string(config.epochs()) + " loss=" + Fmt(loss_sum / loss_count));
      progress.Add(step_configs);
    }
    const double train_loss = loss_sum / std::max<int64_t>(1, loss_count);
    result.epoch_loss.push_back(train_loss);
    double metric = train_loss;
    if (!valid.empty()) TPUG_RETURN_IF_ERROR(validate(&metric));
    result.epoch_metric.push_back(metric);
    const bool improved = std::isfinite(metric) &&
                          (best_epoch == 0 || !std::isfinite(best_metric) ||
                           (result.higher_is_better ? metric > best_metric : metric < best_metric));
    if (improved) {
      best_metric = metric;
      best_epoch = epoch + 1;
      since_best = 0;
      best_params.assign(model->parameters(), model->parameters() + num_params);
    } else {
      ++since_best;
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_epoch).count();
    std::string text = "epoch=" + std::to_string(epoch + 1) + " train_loss=" + Fmt(train_loss);
    if (!valid.empty()) text += " " + result.metric_name + "=" + Fmt(metric);
    char tail[160];
    std::snprintf(tail, sizeof(tail), " lr=%.6g grad_norm=%.4g time=%.2fs%s", lr,
                  norm_sum / std::max<int64_t>(1, loss_count), secs, improved ? " best" : "");
    text += tail;
    spdlog::info("{}", text);
    EpochRecord& record = epoch_records.emplace_back();
    record.set_epoch(epoch + 1);
    record.set_train_loss(train_loss);
    record.set_valid_metric(metric);
    record.set_learning_rate(lr);
    record.set_grad_norm(norm_sum / std::max<int64_t>(1, loss_count));
    record.set_wall_seconds(secs);

    const bool stop = config.patience() > 0 && since_best >= config.patience();
    const bool last = stop || epoch + 1 == config.epochs();
    const double since_ckpt =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - last_checkpoint).count();
    if (last || since_ckpt >= config.checkpoint_interval_seconds()) {
      TPUG_RETURN_IF_ERROR(write_checkpoint(epoch + 1));
      last_checkpoint = std::chrono::steady_clock::now();
    }
    if (stop) {
      ++epoch;
      spdlog::info("early stop: {} did not improve for {} epochs (best {} at epoch {})",
                   result.metric_name, since_best, Fmt(best_metric), best_epoch);
      break;
    }
  }
  progress.Finish();

  // --- the model file of the best epoch ---
  if (best_epoch == 0) {
    // The metric was undefined in every epoch (e.g. all validation graphs tie): keep the last.
    spdlog::warn("{} was undefined in every epoch; writing the last epoch's parameters",
                 result.metric_name);
    best_params.assign(model->parameters(), model->parameters() + num_params);
    best_epoch = epoch;
  }
  std::copy(best_params.begin(), best_params.end(), model->parameters());
  ModelFile out;
  StoreModel(*model, &out);
  *out.mutable_train_config() = config;
  *out.mutable_data() = fingerprint;
  TPUG_RETURN_IF_ERROR(
      AddSelfTests(*model, config.self_test_samples(), DeriveSeed(seed, "self_test"), &out));
  TrainingSummary* summary = out.mutable_summary();
  summary->set_epochs_run(epoch);
  summary->set_best_epoch(best_epoch);
  summary->set_metric_name(result.metric_name);
  summary->set_best_metric(best_metric);
  for (double v : result.epoch_metric) summary->add_epoch_metric(v);
  for (const EpochRecord& r : epoch_records) *summary->add_history() = r;
  TPUG_RETURN_IF_ERROR(WriteModelFile(config.output(), out, kFileKindModel));

  result.epochs_run = epoch;
  result.best_epoch = best_epoch;
  result.best_metric = best_metric;
  spdlog::info(
      "wrote {} (best epoch {}, {}={}) in {}", config.output(), best_epoch, result.metric_name,
      Fmt(best_metric),
      FormatDuration(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count()));
  return result;
}

}  // namespace tpugraphs::train
