// One run of Train() (include/tpugraphs/train/trainer.h): the TrainingRun class and the pieces its
// phases share. Private to src/train: not part of the public headers. The methods are defined by
// concept:
//   trainer.cc        the run's orchestration: Run, the phases' order, the epoch loop and the step,
//                     the model file;
//   training_data.cc  the graphs: selection, reading, the graph cache, the config pools and the
//                     carving of validation configurations (the TrainingPlan);
//   validation.cc     scoring the validation members: the metric per epoch, the reference, the
//                     held-out configurations, ValidateModels;
//   chunked_step.cc   a step as (graph, chunk of configurations) tasks on the threads and ranks;
//   checkpoint.cc     CheckpointState written and restored, the mid-epoch EpochSoFar, auto-resume;
//   ensemble.cc       ensembles (ensemble.h).
#ifndef TPUGRAPHS_SRC_TRAIN_TRAINING_RUN_H_
#define TPUGRAPHS_SRC_TRAIN_TRAINING_RUN_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tpugraphs/common/eigen_types.h"
#include "tpugraphs/common/file_lock.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/distributed/communicator.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/model/cost_model.h"
#include "tpugraphs/train/gst.h"
#include "tpugraphs/train/model_file.h"
#include "tpugraphs/train/optimizer.h"
#include "tpugraphs/train/trainer.h"
#include "tpugraphs/train_config.pb.h"

namespace tpugraphs::train::internal {

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

// A graph ready for the model.
struct Loaded {
  Graph graph;                                     // without layout config values
  std::unique_ptr<model::PreparedGraph> prepared;  // whole graph (GST off)
  std::unique_ptr<SegmentedGraph> segmented;       // segments (GST on; docs/gst.md)
};

// Graphs (without layout config values) with their PreparedGraphs: cached or re-read per use.
// Thread-safety: Get may be called from several threads; Offer only before the first Get.
class GraphStore {
 public:
  GraphStore(const model::CostModel* model, bool cache, bool gst)
      : model_(model), cache_(cache), gst_(gst) {}

  // Hands over a graph read earlier (to avoid reading it twice when caching).
  void Offer(const Member& m, Graph g) {
    if (cache_) pending_[Key(m)] = std::move(g);
  }

  // The graph of `m`, prepared (segmented with GST); errors carry the dataset's path.
  StatusOr<std::shared_ptr<const Loaded>> Get(const Member& m);

 private:
  static std::pair<const void*, int64_t> Key(const Member& m) { return {m.reader, m.index}; }
  const model::CostModel* model_;
  bool cache_;
  bool gst_;
  std::mutex mu_;
  std::map<std::pair<const void*, int64_t>, Graph> pending_;
  std::map<std::pair<const void*, int64_t>, std::shared_ptr<const Loaded>> cache_map_;
};

// What the training data implies for the step budget, as LoadData found it: the same on every
// rank (from the sizes of every training graph, owned or not, and the fractions in effect).
struct TrainingPlan {
  // Configurations of the training graphs.
  int64_t train_configs = 0;
  // About how many of them the training pools keep: train_configs less the held-out
  // (holdout_config_fraction) and carved (carve_valid_fraction) shares.
  double pool_configs = 0;
  // With a carved validation: the carved configurations scored per graph at most (0 = all):
  // valid_max_configs shared among the training graphs, but at least configs_per_graph each.
  int64_t carved_cap = 0;
  // With a carved validation: per training graph, about how many carved configurations a
  // validation scores (its carved share, at most carved_cap); empty otherwise.
  std::vector<double> carved_scored;
  // carved_scored summed in graph order.
  double carved_scored_total = 0;
};

// Where a step's time goes (seconds, summed over steps): the configuration-independent passes
// (forward and backward), the per-configuration tasks (forward and backward), the loss, the sums
// of the chunks' parts and of the graphs' gradients (collectives included), and the optimizer.
struct StepPhases {
  double prepare = 0, shared_forward = 0, config_forward = 0, loss = 0, config_backward = 0,
         chunk_sum = 0, shared_backward = 0, gradient_sum = 0, optimizer = 0;
};

// Where the validations' time goes (seconds of wall time, summed over the run): the graphs
// loaded with their configurations' values, the (graph, model, chunk) scoring tasks, the metrics.
struct ValidationPhases {
  int64_t validations = 0;
  // load: the graphs read and prepared; read: their configurations' layout values cached.
  double load = 0, read = 0, score = 0, metrics = 0;
};

// Figures of one optimizer step.
struct StepStats {
  double loss = 0;       // mean over the step's graphs
  double grad_norm = 0;  // before clipping
  double lr = 0;
  int64_t configs = 0;  // configurations scored
};

// An epoch's steps so far, for a checkpoint written inside it (CheckpointState's partial_*).
struct EpochSoFar {
  int64_t steps = 0;
  double loss_sum = 0, grad_norm_sum = 0, learning_rate = 0, seconds = 0;
};

// One step on the chunked path (chunked_step.cc): per graph of the batch, what the step read and
// computes; per chunk task, its configurations and owner; this rank's tasks in running order.
struct ChunkedWork {
  struct StepGraph {
    std::shared_ptr<const Loaded> loaded;
    std::vector<int64_t> picks;  // the configurations sampled
    model::ConfigBatch batch;    // their values
    std::vector<double> rt;      // their normalised runtimes
    std::vector<float> scores, dscores;
    int64_t first_task = 0, num_tasks = 0;
  };
  struct Task {
    int64_t x = 0, begin = 0, end = 0, cost = 0;  // graph, configurations [begin, end), rows
    int owner = 0;
    model::ConfigBatch chunk;  // sliced from the graph's batch by the task itself
  };
  std::vector<StepGraph> graphs;
  std::vector<Task> tasks;
  std::vector<int64_t> run_order;  // this rank's tasks, the largest first
};

// One run of Train(): the recipe as a sequence of phases, each a method below, called in the
// order Run() shows. The members are the state the phases hand to each other. A TrainingRun is
// used for one Run or one ValidateModels call.
class TrainingRun {
 public:
  StatusOr<TrainResult> Run(const TrainConfig& given);
  // Run without phase 6 (an ensemble computes the reference once, in ValidateModels).
  void SkipReference() { skip_reference_ = true; }
  // Runs beside other TrainingRuns of this process, as an ensemble's members side by side do: on
  // `threads` worker threads instead of the config's (not stored in the files), and in a
  // single-process group of its own instead of distributed::World(), whose counters it would share.
  // Single-process runs only.
  void RunSideBySide(int threads) {
    threads_override_ = threads;
    own_comm_ = distributed::MakeSingleProcess();
    comm_ = own_comm_.get();
  }
  // How many training graphs `config` selects (its collection, split and min_configs), without
  // reading them or logging.
  StatusOr<int64_t> CountTrainingGraphs(const TrainConfig& config);
  // Finished models on the validation configurations `config` selects (phases 1-4, the
  // reference of phase 6 and the validation caches, without training): metric_name, the
  // reference, and in member_metrics the metric of each model followed by that of their
  // ensemble. The models must share the config's model spec and the transform it fits.
  StatusOr<TrainResult> ValidateModels(const TrainConfig& config,
                                       const std::vector<const model::CostModel*>& models);

 private:
  // --- Orchestration (trainer.cc) ---
  // Phases 1-7, each ending at a point all ranks reach.
  Status SetUp(const TrainConfig& given);
  // Phase 8: the epochs from start_epoch_; the number of epochs run.
  StatusOr<int> RunEpochs();
  // The throughput line after the epochs (tools/bench/bench-mpi.sh reads it).
  void LogLoop(std::chrono::steady_clock::time_point t_loop) const;
  // 1. The effective config: the given one, or the checkpoint's with the allowed overrides.
  Status ResolveConfig(const TrainConfig& given);
  // 4. Parameters and feature transform: fitted and initialised, or restored from the checkpoint.
  Status InitModel(const TrainingPlan& plan);
  //    Rank 0's fitted transform, finalised and sent to the other ranks.
  Status ShareTransform();
  // 5. Optimizer, schedule and best-epoch bookkeeping (restored when resuming).
  Status InitOptimisation(const TrainingPlan& plan);
  //    steps_per_epoch_ raised to what min_config_passes and a carved validation need.
  void RaiseStepsPerEpoch(const TrainingPlan& plan);
  // 7. Thread pools, tapes, GST history, the validation cache.
  Status PrepareLoop();
  // 8. One epoch of steps; false when early stopping (or stop_after_steps) ended the run.
  StatusOr<bool> RunEpoch(int epoch);
  //    One optimizer step on the graphs order[begin, end) of pass `pass`.
  StatusOr<StepStats> Step(int epoch, int64_t pass, int64_t step, const std::vector<int64_t>& order,
                           int64_t begin, int64_t end, const GstOptions& gst_options);
  //    The gradient of training graph `j` on its configs sampled in pass `pass`, into grads_[x]
  //    (x: its position among this rank's graphs of the step); its loss and number of configs in
  //    record[0] and record[1]. segment_pool (the step's one graph): GST's chunk tasks run on
  //    it (gst.h, RunGstStep); the same gradient to the bit as without.
  //    kernels: the model's kernels' pool (the step's one graph), for its passes or, with
  //    GST, the head's.
  Status GraphGradient(int64_t j, int64_t x, int64_t pass, const GstOptions& gst_options,
                       double* record, ThreadPool* segment_pool = nullptr,
                       ThreadPool* kernels = nullptr);
  // --- The chunked step (chunked_step.cc) ---
  //    The same gradients, computed as tasks of (graph, chunk of its configurations) spread over
  //    the threads (docs/train.md, "More cores and machines"); for models whose configurations
  //    are independent given the graph, without Graph Segment Training.
  //    Every rank reads every graph of the batch and takes its share of the tasks; grad_
  //    receives the sum of the graphs' gradients (every rank the same), records (loss,
  //    configurations) per graph of `graphs`. The phases below, in this order.
  Status ChunkedGradients(const std::vector<int64_t>& graphs, int64_t pass,
                          std::vector<double>* records);
  //    Step on that path.
  StatusOr<StepStats> ChunkedStep(int epoch, int64_t pass, int64_t step,
                                  const std::vector<int64_t>& order, int64_t begin, int64_t end,
                                  const GstOptions& gst_options);
  //    1. The step's graphs (read ahead by the last step, or read now), their sampled
  //       configurations and runtimes; the reading ahead of the next step's started.
  Status ReadChunkedGraphs(const std::vector<int64_t>& graphs, int64_t pass, ChunkedWork* w);
  //    2. The chunk tasks of every graph and their owners (the same on every rank).
  void PlanChunkTasks(ChunkedWork* w);
  //    3. This rank's chunks' forward passes, then (several ranks) every score gathered. With
  //       config_attention: the passes to the attention, the join of every graph (each one's
  //       nodes over the pool), the passes after it.
  Status ForwardChunks(ChunkedWork* w);
  //    4. This rank's chunks' backward passes: each its parameter gradient and its part of the
  //       shared states' gradient (flattened); with config_attention around the joins.
  Status BackwardChunks(ChunkedWork* w);
  //    fn(task index) over this rank's tasks, in parallel on pool_.
  template <typename Fn>
  void ForEachOwnTask(const ChunkedWork& w, const Fn& fn);
  //    The attention of every graph of the step over all of its chunks (config_attention):
  //    with several ranks, first every chunk's rows that the join reads (q, k, v forward, d O
  //    backward) gathered from the rank that computed them into the other ranks' tapes.
  Status JoinAttention(ChunkedWork* w, bool backward);
  //    5. Per graph, its chunks' parts of the shared gradient summed in chunk order, then the
  //       shared backward pass into grads_[x].
  Status BackwardShared(ChunkedWork* w);
  //    6. The step's gradient into grad_: per graph its shared part, then its chunks', in order.
  Status SumStepGradient(const ChunkedWork& w);
  //    out = ((0 + item_0) + item_1) + ... element by element over n floats, items in order;
  //    item i belongs to rank owner[i] and `mine` holds this rank's, in order. One process: in
  //    parallel over the elements on pool_; several: Communicator::OrderedSum, the same sums.
  Status SumInOrder(const std::vector<int>& owner, const std::vector<const float*>& mine, int64_t n,
                    float* out);
  //    The summed gradient of the step's nb graphs in grad_, and their summed loss in stats:
  //    both averaged, then Update, timed as the optimizer's phase.
  StatusOr<StepStats> UpdateWithMean(int epoch, int64_t step, const GstOptions& gst_options,
                                     int64_t nb, StepStats stats);
  //    The averaged gradient in grad_ becomes the update of the parameters.
  StatusOr<StepStats> Update(int epoch, int64_t step, const GstOptions& gst_options,
                             StepStats stats);
  //    The visiting order of the training graphs in pass `pass` (a seeded shuffle).
  std::vector<int64_t> PassOrder(int64_t pass) const;
  //    Bookkeeping after an epoch: best parameters, history, log line, checkpoint.
  StatusOr<bool> FinishEpoch(int epoch, double train_loss, double lr, double grad_norm,
                             double seconds);
  //    Whether `metric` (finite or not) is better than the best so far.
  bool Improves(double metric) const;
  // 9. The model file of the best epoch.
  Status WriteModel(int epochs_run);
  // TrainConfig.ema_decay: the moving average of the parameters updated after a step.
  void UpdateAverage();
  // Exchanges the model's parameters with the average (no-op when off).
  void SwapAverage();
  // The early-stopping patience in effect (carve_patience with a carved validation), in epochs.
  int Patience() const {
    return carve_ && config_.carve_patience() > 0 ? config_.carve_patience() : config_.patience();
  }
  // Whether the epoch that leaves `epochs_done` epochs done is validated (valid_every_epochs,
  // the last epoch, or every epoch when the training loss stands in for a validation).
  bool Validates(int epochs_done) const;
  // Whether the run stops early after that epoch: a validated one, `Patience()` or more epochs
  // after the best.
  bool StopsAfter(int epochs_done) const;

  // --- Training data and carving (training_data.cc) ---
  // 2. The training and validation graphs (collection, splits, min_configs).
  Status SelectData();
  //    The collection when none is given: the only one of the training split.
  Status ResolveCollection();
  //    The validation graphs of valid_split (none with holdout_ or a carved validation).
  void SelectValidationGraphs(int64_t* skipped);
  // 3. The model, and the training graphs read once: feature statistics, config pools (holdout
  //    splits), the data fingerprint; the validation members; what they imply for the step
  //    budget in *plan.
  Status LoadData(TrainingPlan* plan);
  //    The model and the graph store (caching when the graphs fit in a budget).
  Status CreateModelAndStore();
  //    The training graphs read in graph order: names hash and config count of every graph, the
  //    transform fitted (rank 0), the pools of this rank's graphs; per training graph its
  //    held-out (holdout_) and carved (carve_) configurations into *held and *carved.
  Status ReadTrainingGraphs(TrainingPlan* plan, uint64_t* names_hash, std::vector<Member>* held,
                            std::vector<Member>* carved);
  //    The pools of one training graph `j` this rank owns, read as `g`; its held-out and carved
  //    configurations appended to *held and *carved; the configs dedup_configs removed added to
  //    *deduplicated.
  Status MakePools(size_t j, const Graph& g, std::vector<Member>* held, std::vector<Member>* carved,
                   int64_t* deduplicated);
  //    valid_ and heldout_ from the held-out and carved configurations and the validation graphs,
  //    with their owners.
  void AssembleValidation(std::vector<Member> held, std::vector<Member> carved);
  //    The validation configurations capped with a fixed sample (the same every epoch).
  void CapValidationConfigs(int64_t carved_cap);
  //    The carved validation configurations scored per graph at most (0 = all).
  int64_t CarvedCap() const;
  //    The pool and carved estimates of *plan (plan->train_configs counted).
  void PlanSteps(TrainingPlan* plan) const;

  // --- Validation (validation.cc) ---
  //    Whether the validation metric is Kendall tau-b (layout, or tile by choice).
  bool ValidatesByKendall() const {
    return task_ == TaskKind::kLayout ||
           config_.tile_valid_metric() == TrainConfig::TILE_VALID_METRIC_KENDALL;
  }
  //    result_.metric_name and higher_is_better for this run's validation.
  void SetMetricName();
  // 6. The reference metric on held-out configurations (ridge for layout, random for tile).
  Status ComputeReference();
  //    The reference of validation member `j` into *value (left alone when it has none).
  Status ReferenceOf(int64_t j, double* value);
  //    The validation cache alone (layout values of the validation configs kept in memory).
  void PrepareValidation();
  //    The mean validation metric.
  Status Validate(double* metric);
  //    The mean validation metric of each of `models` and, with several, of their ensemble
  //    (the mean of standardised scores per graph), last.
  StatusOr<std::vector<double>> ValidationMetrics(
      const std::vector<const model::CostModel*>& models);
  //    Configurations per validation chunk (eval_batch_configs).
  int64_t ValidationChunk() const;
  //    Whether the ranks share the chunks of a validation graph (several ranks, separate
  //    validation graphs).
  bool ValidationChunksShared() const;
  //    The rank that scores chunk c of validation member j: when shared, its owner for the
  //    first and the others round the ranks from there; else its owner.
  int ValidationChunkRank(int64_t j, int64_t c) const;
  //    The validation members this rank owns or scores a chunk of, in order.
  std::vector<int64_t> ValidationGraphsHere() const;
  //    Validation members `graphs` loaded into *loaded (one task per graph).
  Status LoadValidationGraphs(const std::vector<int64_t>& graphs,
                              std::vector<std::shared_ptr<const Loaded>>* loaded);
  //    The layout values of their configurations that this rank scores read into the cache
  //    where it keeps them and they are not there yet (chunks of configurations as tasks).
  Status ReadValidationValues(const std::vector<int64_t>& graphs);
  //    Validation member `j`'s metric under each model's `scores` (and their ensemble's, last)
  //    into (*local)[series][x].
  void GraphMetrics(int64_t j, int64_t x, const Loaded& l,
                    const std::vector<std::vector<double>>& scores,
                    std::vector<std::vector<double>>* local) const;
  //    With a carved validation and held-out configurations: the written model's metric on the
  //    held-out ones (into result_.held_out_metric).
  Status ScoreHeldOut();
  //    Whether every one of `models` has this run's model spec, task and fitted transform.
  Status CheckSamePreparation(const std::vector<const model::CostModel*>& models) const;

  // --- Checkpoints (checkpoint.cc) ---
  // After `epochs_done` epochs, and `partial`'s steps of the next (nullptr: none).
  Status WriteCheckpoint(int epochs_done, const EpochSoFar* partial);
  Status KeepPreviousCheckpoint();
  // Whether a checkpoint is due inside an epoch (the interval has passed, or `force`); rank 0
  // decides for every rank.
  StatusOr<bool> CheckpointDue(bool force);
  // The GST history rows of every rank, on rank 0 (in (graph, segment) order).
  Status GatherHistory(std::vector<GstHistoryRow>* rows);
  // The checkpoint's feature transform and parameters into model_.
  Status RestoreModelState();
  // Fine-tuning (TrainConfig.init_from): reads the file and takes its architecture (ResolveConfig),
  // then its transform and parameters (InitModel).
  Status ReadInitModel();
  Status InitFromModel();
  // The checkpoint's optimizer, parameter average, best epoch, history and the steps of the
  // epoch it interrupted (after InitOptimisation's fresh state; steps_per_epoch_ set).
  Status RestoreTrainingState();
  // The checkpoint's GST history rows of this rank's graphs into history_.
  Status RestoreHistory();

  // The ranks of the job (docs/distributed.md): training graphs, validation graphs and their GST
  // history rows belong to one rank each (owner vectors, the same on every rank).
  std::unique_ptr<distributed::Communicator> own_comm_;  // RunSideBySide
  distributed::Communicator* comm_ = &distributed::World();
  bool root_ = true;
  std::vector<int> train_owner_, valid_owner_;

  std::chrono::steady_clock::time_point t_start_;
  TrainConfig config_;
  TrainConfig given_;
  ModelFile checkpoint_;
  ModelFile init_;  // TrainConfig.init_from's model file (fine-tuning), when given
  bool resuming_ = false;
  bool validate_only_ = false;   // ValidateModels: no training, no files
  bool skip_reference_ = false;  // SkipReference
  int threads_override_ = 0;     // SetThreads (0: the config's)
  bool quiet_select_ = false;    // CountTrainingGraphs: SelectData logs nothing
  int Threads() const { return threads_override_ > 0 ? threads_override_ : config_.threads(); }
  uint64_t seed_ = 0;
  // The seed of the streams that make ensemble members differ (initialisation, batch order,
  // config sampling, GST sampling, self tests): seed_ for member 0, else derived from it. The
  // data streams (holdout split, validation sample) use seed_ for every member.
  uint64_t member_seed_ = 0;
  std::string ckpt_path_;
  // Whether ckpt_path_ holds a checkpoint of this run known to be good (written and read back,
  // or resumed from): only such a one is kept as the previous checkpoint.
  bool newest_ckpt_good_ = false;
  // One run per output (common/file_lock.h), held by rank 0 from ResolveConfig to the end.
  std::unique_ptr<OutputLock> output_lock_, ckpt_lock_;

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

  std::unique_ptr<model::CostModel> model_;
  std::unique_ptr<GraphStore> store_;
  std::vector<Member> train_, valid_, heldout_;
  DataFingerprint fingerprint_;

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
  std::vector<std::unique_ptr<model::ForwardTape>> tapes_;  // per graph of a step
  std::vector<std::vector<float>> grads_;                   // per graph of a step
  // Per chunk task of a step (ChunkedGradients; grown to the largest step's count).
  std::vector<std::unique_ptr<model::ForwardTape>> chunk_tapes_;
  std::vector<std::vector<float, Eigen::aligned_allocator<float>>> chunk_grads_;
  std::vector<std::unique_ptr<model::SharedGradient>> chunk_dshared_;
  std::vector<std::vector<float>> chunk_dshared_flat_;  // chunk_dshared_ as flat vectors
  std::vector<std::unique_ptr<model::SharedGradient>> graph_dshared_;  // per graph: their sum
  // Steps as chunk tasks (no Graph Segment Training, no config_attention): every rank holds
  // every training graph and its pool, and the ranks share a step's tasks.
  bool chunked_ = false;
  // Seconds per phase of the step, summed over the run (logged with -v; bench-scaling reads it).
  StepPhases phases_;
  ValidationPhases valid_phases_;  // logged with -v, as phases_ is
  std::vector<float> grad_;        // their mean
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

  // The next step's graphs, configurations and their values, read on a thread of their own
  // while this step computes (with more than one thread; ChunkedGradients). Declared last: its
  // destructor waits for the reading, which uses the members above.
  struct Prefetched {
    int64_t pass = -1, j = -1;
    std::shared_ptr<const Loaded> loaded;
    std::vector<int64_t> picks;
    model::ConfigBatch batch;
    bool ok = false;
  };
  std::vector<std::pair<int64_t, int64_t>> next_graphs_;  // (pass, j) of this rank's next step
  std::future<std::vector<Prefetched>> prefetch_;
  //    Reads what a step needs of graph j in pass `pass` (ChunkedGradients and the prefetch).
  Status ReadStepGraph(int64_t pass, int64_t j, Prefetched* out);
};

// The configs of `configs` as a model batch (tile rows from the graph, layout values read on
// demand from the dataset). Defined in training_data.cc.
StatusOr<model::ConfigBatch> MakeBatch(const Member& m, const Graph& g,
                                       const std::vector<int64_t>& configs);

// Scores configs[begin, end) of a graph (inference, one model batch) into out[0, end - begin).
// `cached`, if not null, holds the layout values of exactly `configs` ([k, nc, 18]) so nothing
// is read from the dataset. kernels: the model's kernels' pool (optional). Defined in
// validation.cc.
Status ScoreChunk(const model::CostModel& model, const Member& m, const Loaded& l,
                  const std::vector<int64_t>& configs, int64_t begin, int64_t end,
                  const std::vector<int8_t>* cached, double* out, ThreadPool* kernels = nullptr);

// A value as the logs print it (%.6g).
inline std::string Fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

// The mean of the finite values (NaN if there is none); their number in *count if given.
// Defined in validation.cc.
double MeanOfFinite(const std::vector<double>& values, int64_t* count);

// The first failure among per-item statuses (in item order), or Ok.
inline Status FirstError(const std::vector<Status>& statuses) {
  for (const Status& st : statuses) {
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

// A seed from the clock (TrainConfig.seed = -1), non-negative. Defined in trainer.cc, as are
// the next two.
int64_t ClockSeed();

// The seed of ensemble member `member`'s own streams (TrainConfig.ensemble_member).
uint64_t MemberSeed(uint64_t seed, int member);

// Ok when `path` can be written (nothing is left behind); else an IoError naming `flag`.
Status CheckWritable(const std::string& path, const std::string& flag);

// Whether a finished member file or a checkpoint was written by the run `want` describes: the
// same config up to what does not change the result (threads, output and checkpoint paths,
// resume, stop_after_steps, ensemble_member_alone, members_side_by_side, and ensemble_members:
// member m's run depends on the seed and m alone, so the single model of a seed is member 0 of
// every ensemble of that seed; kept when fine-tuning, where --init-from fixes it) and what the run
// resolves (an unset collection). Defined in checkpoint.cc.
bool SameMemberRun(TrainConfig stored, TrainConfig want);

// TrainConfig.auto_resume: the config that continues the run's own checkpoint when the same
// command wrote it, else the config as given. Defined in checkpoint.cc.
TrainConfig ResumeIfInterrupted(const TrainConfig& config);

}  // namespace tpugraphs::train::internal

#endif  // TPUGRAPHS_SRC_TRAIN_TRAINING_RUN_H_
