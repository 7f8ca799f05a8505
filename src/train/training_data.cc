// The training data of a TrainingRun: which graphs train and validate, the graph cache, the
// config pools of the training graphs (held-out, carved and deduplicated configurations) and
// the TrainingPlan they imply.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "tpugraphs/common/hash.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/io/graph_filter.h"
#include "tpugraphs/train/config_sampling.h"
#include "tpugraphs/train/train_config.h"
#include "training_run.h"

namespace tpugraphs::train::internal {
namespace {

using model::ConfigBatch;
using model::CostModel;

// Graphs and PreparedGraphs are kept in memory when their raw arrays total less than this.
constexpr double kCacheBudgetBytes = 2.0 * (1 << 30);
// Decoded config blocks kept by the dataset readers (DatasetReader::SetBlockCacheBytes): all of
// them for a single graph or a small collection, whose steps then sample from memory; a
// release-sized collection's blocks (gigabytes) mostly miss and cost this much RSS at most.
constexpr int64_t kConfigBlockCacheBytes = int64_t{256} << 20;

// Selects the graphs of `collection` and `split` (empty = any) with at least min_configs configs.
// The graphs of `collection` and `split` ("" = any) in `r`, the ones with fewer than
// `min_configs` configurations left out and counted in `skipped`. An empty result is allowed
// here: the caller says what it means.
std::vector<int64_t> GraphsOf(const io::DatasetReader& r, const std::string& collection,
                              const std::string& split, int64_t min_configs, int64_t* skipped) {
  io::GraphFilter filter;
  filter.collections = {collection};
  if (!split.empty()) filter.splits = {split};
  std::vector<int64_t> out;
  for (int64_t i = 0; i < r.num_graphs(); ++i) {
    const io::GraphInfo& info = r.info(i);
    if (!filter.Matches(info.collection, info.split, info.name)) continue;
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

// The bytes of a graph's raw arrays, as the cache budget counts them.
double RawBytes(const io::GraphInfo& info) {
  return info.num_nodes * (kNodeFeatureCount * 8.0 + 64) + info.num_edges * 32.0;
}

// An error unless some configuration of training graph `g` has a measured runtime.
Status CheckMeasured(const Graph& g, const std::string& dataset) {
  if (std::all_of(g.config_runtime.begin(), g.config_runtime.end(),
                  [](int64_t t) { return t == 0; })) {
    return FailedPreconditionError(
        dataset + ": training graph " + g.Id() +
        " has no measured runtimes (all 0, as in the hidden test split or for layouts "
        "ingested from an HLO module without runs): nothing to learn from; choose another "
        "--collection or --train-split");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::shared_ptr<const Loaded>> GraphStore::Get(const Member& m) {
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

Status TrainingRun::SelectData() {
  TPUG_ASSIGN_OR_RETURN(train_reader_, io::DatasetReader::Open(config_.dataset()));
  valid_reader_ = train_reader_.get();
  if (!config_.valid_dataset().empty() && config_.valid_dataset() != config_.dataset()) {
    TPUG_ASSIGN_OR_RETURN(valid_owned_, io::DatasetReader::Open(config_.valid_dataset()));
    valid_reader_ = valid_owned_.get();
  }
  if (config_.collection().empty()) TPUG_RETURN_IF_ERROR(ResolveCollection());
  task_ = TaskKindOfCollection(config_.collection());
  TPUG_RETURN_IF_ERROR(ValidateGstConfig(config_, task_));
  gst_ = config_.gst() != TrainConfig::GST_OFF;
  int64_t skipped = 0;
  io::GraphFilter train_filter;
  train_filter.collections = {config_.collection()};
  TPUG_RETURN_IF_ERROR(ParseSplitList(config_.train_split(), &train_filter.splits));
  StatusOr<std::vector<int64_t>> chosen =
      io::SelectGraphs(*train_reader_, train_filter, [&](int64_t i) {
        if (train_reader_->info(i).num_configs >= config_.min_configs()) return true;
        ++skipped;
        return false;
      });
  if (!chosen.ok()) {
    if (skipped == 0) return chosen.status();
    return NoMatchingGraphsError(chosen.status().message() + "; training graphs need at least " +
                                 std::to_string(config_.min_configs()) +
                                 " configurations (--min-configs)");
  }
  train_ids_ = std::move(*chosen);
  holdout_ = config_.holdout_config_fraction() > 0;
  if (!holdout_ && !config_.valid_split().empty()) SelectValidationGraphs(&skipped);
  carve_ = config_.carve_valid_fraction() > 0 && (holdout_ || valid_ids_.empty());
  if (quiet_select_) return Status::Ok();
  if (!holdout_ && valid_ids_.empty()) {
    if (carve_) {
      spdlog::info(
          "no validation graphs (split \"{}\" of {}): validating on {} of each training graph's "
          "distinct configurations (carve_valid_fraction)",
          config_.valid_split(), config_.collection(), config_.carve_valid_fraction());
    } else if (std::find(train_filter.splits.begin(), train_filter.splits.end(),
                         config_.valid_split()) != train_filter.splits.end()) {
      // The collection recipe's choice (train_split "train,valid"), not a missing split.
      spdlog::info(
          "the validation split \"{}\" of {} is trained on (train_split \"{}\"): epochs are "
          "compared by training loss",
          config_.valid_split(), config_.collection(), config_.train_split());
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

StatusOr<int64_t> TrainingRun::CountTrainingGraphs(const TrainConfig& config) {
  config_ = config;
  quiet_select_ = true;
  TPUG_RETURN_IF_ERROR(SelectData());
  return static_cast<int64_t>(train_ids_.size());
}

Status TrainingRun::ResolveCollection() {
  std::vector<std::string> splits;
  TPUG_RETURN_IF_ERROR(ParseSplitList(config_.train_split(), &splits));
  std::set<std::string> found;
  for (int64_t i = 0; i < train_reader_->num_graphs(); ++i) {
    const auto& info = train_reader_->info(i);
    if (splits.empty() || std::find(splits.begin(), splits.end(), info.split) != splits.end()) {
      found.insert(info.collection);
    }
  }
  if (found.size() != 1) {
    std::string list;
    for (const auto& c : found) {
      if (!list.empty()) list += ", ";
      list += c;
    }
    if (found.empty()) {
      io::GraphFilter filter;
      filter.splits = splits;
      std::vector<io::GraphKey> keys;
      for (int64_t i = 0; i < train_reader_->num_graphs(); ++i) {
        const auto& info = train_reader_->info(i);
        keys.push_back({info.collection, info.split, info.name});
      }
      return io::NoGraphMatchesError(config_.dataset(), filter, keys);
    }
    return FailedPreconditionError(config_.dataset() + ": several collections (" + list +
                                   "); choose one with --collection");
  }
  config_.set_collection(*found.begin());
  return Status::Ok();
}

void TrainingRun::SelectValidationGraphs(int64_t* skipped) {
  valid_ids_ = GraphsOf(*valid_reader_, config_.collection(), config_.valid_split(), 2, skipped);
  if (valid_reader_ == train_reader_.get()) {
    // Never validate on a graph that is also trained on (e.g. empty train split).
    std::set<int64_t> t(train_ids_.begin(), train_ids_.end());
    std::erase_if(valid_ids_, [&](int64_t i) { return t.count(i) > 0; });
  }
}

Status TrainingRun::LoadData(TrainingPlan* plan) {
  TPUG_RETURN_IF_ERROR(CreateModelAndStore());
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
    train_owner_ = distributed::BalanceByCost(costs, comm_->size());
  }
  *plan = TrainingPlan();
  uint64_t names_hash = 1469598103934665603ULL;
  // Per training graph (in graph order; for the graphs of other ranks an entry without configs):
  // its held-out configurations (holdout_) and its carved validation configurations (carve_).
  std::vector<Member> held, carved;
  TPUG_RETURN_IF_ERROR(ReadTrainingGraphs(plan, &names_hash, &held, &carved));
  AssembleValidation(std::move(held), std::move(carved));
  PlanSteps(plan);
  CapValidationConfigs(plan->carved_cap);
  fingerprint_.set_num_train_graphs(static_cast<int64_t>(train_.size()));
  fingerprint_.set_num_valid_graphs(holdout_ || carve_ ? 0 : static_cast<int64_t>(valid_.size()));
  fingerprint_.set_graph_names_hash(names_hash);
  fingerprint_.set_num_train_configs(plan->train_configs);
  return Status::Ok();
}

Status TrainingRun::CreateModelAndStore() {
  TPUG_ASSIGN_OR_RETURN(model_, CostModel::Create(config_.model(), task_));
  // Every model trains in chunks of configurations but Graph Segment Training's (config_attention
  // ones around a join of each graph's chunks, chunked_step.cc).
  chunked_ = !gst_ && (model_->supports_config_chunks() || model_->attends_across_configs());
  double raw_bytes = 0;
  for (int64_t i : train_ids_) raw_bytes += RawBytes(train_reader_->info(i));
  for (int64_t i : valid_ids_) raw_bytes += RawBytes(valid_reader_->info(i));
  store_ = std::make_unique<GraphStore>(model_.get(), raw_bytes < kCacheBudgetBytes, gst_);
  train_reader_->SetBlockCacheBytes(kConfigBlockCacheBytes);
  if (valid_owned_) valid_owned_->SetBlockCacheBytes(kConfigBlockCacheBytes);
  return Status::Ok();
}

Status TrainingRun::ReadTrainingGraphs(TrainingPlan* plan, uint64_t* names_hash,
                                       std::vector<Member>* held, std::vector<Member>* carved) {
  const bool fit_transform = !resuming_ && root_;
  int64_t deduplicated = 0;
  auto add_unowned = [&](const Member& m) {
    if (holdout_) held->push_back(m);  // held-out configs known to the owner only
    if (carve_) carved->push_back(m);
  };
  Progress progress("load", static_cast<int64_t>(train_ids_.size()), "graphs");
  for (size_t j = 0; j < train_ids_.size(); ++j) {
    Member& m = train_[j];
    m.reader = train_reader_.get();
    m.index = train_ids_[j];
    const io::GraphInfo& info = train_reader_->info(m.index);
    *names_hash = Fnv1a(info.collection + ":" + info.name + "\n", *names_hash);
    plan->train_configs += info.num_configs;
    const bool owned = train_owner_[j] == comm_->rank();
    // Steps of chunk tasks need every graph on every rank (the ranks share a step's tasks);
    // validation stays with the owner.
    const bool needed = owned || chunked_;
    if (!needed && !fit_transform) {
      add_unowned(m);
      progress.Add(1);
      continue;
    }
    TPUG_ASSIGN_OR_RETURN(Graph g, train_reader_->ReadGraph(m.index, false));
    TPUG_RETURN_IF_ERROR(CheckMeasured(g, config_.dataset()));
    if (fit_transform) model_->transform().Accumulate(g);
    if (!owned) {
      add_unowned(m);
      if (needed) {
        std::vector<Member> not_validated;
        int64_t not_counted = 0;
        TPUG_RETURN_IF_ERROR(MakePools(j, g, &not_validated, &not_validated, &not_counted));
        store_->Offer(m, std::move(g));
      }
      progress.Add(1);
      continue;
    }
    TPUG_RETURN_IF_ERROR(MakePools(j, g, held, carved, &deduplicated));
    store_->Offer(m, std::move(g));
    progress.Add(1);
  }
  deduplicated_ = static_cast<double>(deduplicated);  // of this rank's graphs
  return Status::Ok();
}

Status TrainingRun::MakePools(size_t j, const Graph& g, std::vector<Member>* held,
                              std::vector<Member>* carved, int64_t* deduplicated) {
  Member& m = train_[j];
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
    held->push_back(std::move(v));
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
    carved->push_back(std::move(v));
  }
  if (config_.dedup_configs()) {
    const size_t before = m.pool.size();
    std::vector<double> runtimes(g.num_configs);
    for (int64_t c = 0; c < g.num_configs; ++c) runtimes[c] = g.NormalizedRuntime(c);
    m.pool = FastestOfEachDistinctConfig(m.pool, hashes, runtimes);
    *deduplicated += static_cast<int64_t>(before - m.pool.size());
  }
  return Status::Ok();
}

void TrainingRun::AssembleValidation(std::vector<Member> held, std::vector<Member> carved) {
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
    return;
  }
  std::vector<double> costs;
  for (const Member& v : valid_) {
    int64_t configs = static_cast<int64_t>(v.eval_configs.size());
    if (config_.valid_max_configs() > 0)
      configs = std::min<int64_t>(configs, config_.valid_max_configs());
    costs.push_back(static_cast<double>(v.reader->info(v.index).num_nodes) *
                    static_cast<double>(std::max<int64_t>(1, configs)));
  }
  valid_owner_ = distributed::BalanceByCost(costs, comm_->size());
}

void TrainingRun::CapValidationConfigs(int64_t carved_cap) {
  for (std::vector<Member>* set : {&valid_, &heldout_}) {
    // The held-out configurations keep the sample they have without a carved validation.
    const bool is_carved = carve_ && set == &valid_;
    const int64_t cap = is_carved ? carved_cap : config_.valid_max_configs();
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
}

int64_t TrainingRun::CarvedCap() const {
  if (config_.valid_max_configs() <= 0) return 0;
  const auto graphs = std::max<int64_t>(1, static_cast<int64_t>(train_ids_.size()));
  return std::max<int64_t>(config_.configs_per_graph(),
                           (config_.valid_max_configs() + graphs - 1) / graphs);
}

void TrainingRun::PlanSteps(TrainingPlan* plan) const {
  const double kept_by_holdout = holdout_ ? 1.0 - config_.holdout_config_fraction() : 1.0;
  plan->pool_configs = static_cast<double>(plan->train_configs) * kept_by_holdout *
                       (carve_ ? 1.0 - config_.carve_valid_fraction() : 1.0);
  if (!carve_) return;
  plan->carved_cap = CarvedCap();
  // Estimated from the graphs' sizes, so the same on every rank.
  for (int64_t i : train_ids_) {
    double c = static_cast<double>(train_reader_->info(i).num_configs) * kept_by_holdout *
               config_.carve_valid_fraction();
    if (plan->carved_cap > 0) c = std::min(c, static_cast<double>(plan->carved_cap));
    plan->carved_scored.push_back(c);
    plan->carved_scored_total += c;
  }
}

}  // namespace tpugraphs::train::internal
