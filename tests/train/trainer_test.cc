#include "tpugraphs/train/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/eval/evaluate.h"
#include "tpugraphs/eval/metrics.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/train/config_sampling.h"
#include "tpugraphs/train/model_file.h"
#include "tpugraphs/train/model_scorer.h"
#include "tpugraphs/train/train_config.h"
#include "train_test_util.h"

namespace tpugraphs::train {
namespace {

using ::tpugraphs::testing::TempDir;

TrainConfig TrainerConfig(const std::string& dataset, const std::string& output) {
  return testing::SmallTrainConfig(dataset, output);
}

class TrainerTaskTest : public ::testing::TestWithParam<TaskKind> {};

TEST_P(TrainerTaskTest, SameSeedGivesTheSameModelFileWhateverTheThreadCount) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, GetParam(), 7, 2).ok());
  TrainConfig c = TrainerConfig(data, dir.File("model.tpm"));
  c.set_threads(1);
  auto r1 = Train(c);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  auto bytes1 = ReadFileToString(c.output());
  ASSERT_TRUE(bytes1.ok());
  std::filesystem::remove(c.output());
  c.set_threads(2);
  auto r2 = Train(c);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  auto bytes2 = ReadFileToString(c.output());
  ASSERT_TRUE(bytes2.ok());
  EXPECT_EQ(r1->epoch_metric, r2->epoch_metric);
  EXPECT_EQ(r1->epoch_loss, r2->epoch_loss);
  // threads is recorded in the config and the history holds wall times; everything else must
  // be identical byte for byte.
  auto f1 = DecodeModelFile(*bytes1, "1", kFileKindModel);
  auto f2 = DecodeModelFile(*bytes2, "2", kFileKindModel);
  ASSERT_TRUE(f1.ok() && f2.ok());
  EXPECT_EQ(f1->parameters(), f2->parameters());
  f1->mutable_train_config()->clear_threads();
  f2->mutable_train_config()->clear_threads();
  ASSERT_EQ(f1->summary().history_size(), 3);
  for (ModelFile* f : {&*f1, &*f2}) {
    for (EpochRecord& r : *f->mutable_summary()->mutable_history()) {
      EXPECT_GT(r.wall_seconds(), 0.0);
      r.clear_wall_seconds();
    }
  }
  EXPECT_EQ(EncodeModelFile(*f1, kFileKindModel), EncodeModelFile(*f2, kFileKindModel));
  // A different seed gives a different model.
  c.set_seed(18);
  ASSERT_TRUE(Train(c).ok());
  auto f3 = ReadModelFile(c.output());
  ASSERT_TRUE(f3.ok());
  EXPECT_NE(f3->parameters(), f1->parameters());
}

// Validation scores every (graph, chunk of eval_batch_configs configurations) as a task of its
// own, so one graph's configurations spread over the threads: the metrics must not depend on the
// thread count or on the chunking, with one validation graph (its chunks in parallel) and with
// several.
TEST_P(TrainerTaskTest, ValidationMetricsDoNotDependOnThreadsOrChunks) {
  for (int valid_graphs : {1, 3}) {
    TempDir dir;
    const std::string data = dir.File("data.tpug");
    ASSERT_TRUE(testing::WriteSyntheticDataset(data, GetParam(), 4, valid_graphs, 16, 40).ok());
    TrainConfig c = TrainerConfig(data, dir.File("model.tpm"));
    c.set_valid_max_configs(0);
    std::vector<std::vector<double>> metrics;
    for (auto [threads, chunk] : {std::pair{1, 1000}, std::pair{1, 7}, std::pair{2, 7},
                                  std::pair{3, 3}, std::pair{2, 1000}}) {
      c.set_threads(threads);
      c.set_eval_batch_configs(chunk);
      std::filesystem::remove(c.output());
      auto r = Train(c);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(r->epoch_metric.size(), 3u);
      for (double m : r->epoch_metric) EXPECT_TRUE(std::isfinite(m)) << m;
      metrics.push_back(r->epoch_metric);
    }
    for (size_t i = 1; i < metrics.size(); ++i) {
      EXPECT_EQ(metrics[i], metrics[0]) << "valid graphs " << valid_graphs << ", run " << i;
    }
  }
}

TEST_P(TrainerTaskTest, ResumeContinuesExactly) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, GetParam(), 6, 2).ok());
  TrainConfig c = TrainerConfig(data, dir.File("full.tpm"));
  c.set_lr_schedule(TrainConfig::LR_SCHEDULE_CONSTANT);
  c.set_epochs(4);
  c.set_patience(0);
  auto full = Train(c);
  ASSERT_TRUE(full.ok()) << full.status().ToString();

  TrainConfig first = c;
  first.set_output(dir.File("part.tpm"));
  first.set_epochs(2);
  ASSERT_TRUE(Train(first).ok());
  TrainConfig resume;
  resume.set_resume(dir.File("part.tpm.ckpt"));
  resume.set_output(dir.File("resumed.tpm"));
  resume.set_epochs(4);
  auto resumed = Train(resume);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->epochs_run, 4);

  auto a = ReadModelFile(dir.File("full.tpm"));
  auto b = ReadModelFile(dir.File("resumed.tpm"));
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
  EXPECT_EQ(a->parameters(), b->parameters());
  EXPECT_EQ(a->summary().best_epoch(), b->summary().best_epoch());
  ASSERT_EQ(b->summary().epoch_metric_size(), 4);
  for (int e = 0; e < 4; ++e) {
    EXPECT_EQ(a->summary().epoch_metric(e), b->summary().epoch_metric(e)) << e;
  }
  // The history continues across the resume: epochs 1-2 from the checkpoint, 3-4 from the new
  // run, with the same losses, metrics and learning rates as the uninterrupted run.
  ASSERT_EQ(a->summary().history_size(), 4);
  ASSERT_EQ(b->summary().history_size(), 4);
  for (int e = 0; e < 4; ++e) {
    const EpochRecord& ra = a->summary().history(e);
    const EpochRecord& rb = b->summary().history(e);
    EXPECT_EQ(rb.epoch(), e + 1);
    EXPECT_EQ(ra.train_loss(), rb.train_loss()) << e;
    EXPECT_EQ(ra.valid_metric(), rb.valid_metric()) << e;
    EXPECT_EQ(rb.valid_metric(), b->summary().epoch_metric(e)) << e;
    EXPECT_EQ(ra.learning_rate(), rb.learning_rate()) << e;
    EXPECT_EQ(ra.grad_norm(), rb.grad_norm()) << e;
    EXPECT_GT(rb.grad_norm(), 0.0) << e;
    EXPECT_EQ(rb.train_loss(), full->epoch_loss[e]) << e;
  }
  EXPECT_EQ(b->train_config().seed(), 17);
  EXPECT_EQ(b->train_config().epochs(), 4);
  EXPECT_TRUE(b->train_config().resume().empty());
  // The checkpoint carries the optimizer state.
  auto ckpt = ReadModelFile(dir.File("resumed.tpm.ckpt"), kFileKindCheckpoint);
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ(ckpt->checkpoint().epochs_done(), 4);
  EXPECT_GT(ckpt->checkpoint().optimizer_step(), 0);
  EXPECT_EQ(ckpt->checkpoint().first_moment().size(), ckpt->parameters().size());
}

INSTANTIATE_TEST_SUITE_P(Tasks, TrainerTaskTest,
                         ::testing::Values(TaskKind::kTile, TaskKind::kLayout),
                         [](const auto& info) { return std::string(TaskKindName(info.param)); });

TEST(TrainerTest, LearnsTheSyntheticLayoutRule) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 8, 3, 16, 40).ok());
  TrainConfig c = TrainerConfig(data, dir.File("model.tpm"));
  c.set_epochs(40);
  c.set_batch_graphs(2);
  c.set_configs_per_graph(16);
  c.set_learning_rate(1e-2);
  c.set_patience(0);
  auto r = Train(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->metric_name, "valid_kendall");
  EXPECT_TRUE(r->higher_is_better);
  // Runtimes are a sum of per-node effects of the first two layout values; held-out graphs.
  EXPECT_GT(r->best_metric, 0.5);
  EXPECT_EQ(r->best_metric, r->epoch_metric[r->best_epoch - 1]);
  auto loaded = LoadModel(c.output());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->file.summary().best_epoch(), r->best_epoch);
  EXPECT_EQ(loaded->file.data().num_train_graphs(), 8);
  EXPECT_EQ(loaded->file.data().collection(), "layout:synth:random");
}

TEST(TrainerTest, HoldoutModeReportsARandomReferenceForTile) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kTile, 4, 0, 12, 40).ok());
  TrainConfig c = TrainerConfig(data, dir.File("model.tpm"));
  c.set_holdout_config_fraction(0.3);
  c.set_valid_split("");
  auto r = Train(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->metric_name, "valid_top5_err");
  EXPECT_EQ(r->reference_name, "random");
  EXPECT_GT(r->reference_metric, 0.0);
  EXPECT_TRUE(std::isfinite(r->best_metric));
}

TEST(TrainerTest, TileCanValidateByKendall) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kTile, 5, 3, 12, 30).ok());
  TrainConfig c = TrainerConfig(data, dir.File("model.tpm"));
  c.set_tile_valid_metric(TrainConfig::TILE_VALID_METRIC_KENDALL);
  auto r = Train(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->metric_name, "valid_kendall");
  EXPECT_TRUE(r->higher_is_better);
  // The best epoch's metric is the Kendall tau of the written model on the validation graphs,
  // as `evaluate` computes it.
  auto scorer = ModelScorer::Load(c.output(), 1);
  ASSERT_TRUE(scorer.ok()) << scorer.status().ToString();
  auto reader = io::DatasetReader::Open(data);
  ASSERT_TRUE(reader.ok());
  auto kendalls = testing::EvaluatedKendalls(**reader, **scorer, "valid");
  ASSERT_TRUE(kendalls.ok()) << kendalls.status().ToString();
  ASSERT_EQ(kendalls->size(), 3u);
  EXPECT_NEAR(r->best_metric, std::accumulate(kendalls->begin(), kendalls->end(), 0.0) / 3, 1e-9);
  EXPECT_EQ(*std::max_element(r->epoch_metric.begin(), r->epoch_metric.end()), r->best_metric);
  // In holdout mode the random reference is Kendall's expectation, 0.
  TrainConfig h = c;
  h.set_output(dir.File("holdout.tpm"));
  h.set_holdout_config_fraction(0.3);
  h.set_valid_split("");
  auto rh = Train(h);
  ASSERT_TRUE(rh.ok()) << rh.status().ToString();
  EXPECT_EQ(rh->metric_name, "valid_kendall");
  EXPECT_EQ(rh->reference_name, "random");
  EXPECT_EQ(rh->reference_metric, 0.0);
}

TEST(TrainerTest, EarlyStoppingAndNoValidation) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kTile, 4, 2).ok());
  TrainConfig c = TrainerConfig(data, dir.File("model.tpm"));
  c.set_learning_rate(1e-30);  // the metric cannot change
  c.set_epochs(10);
  c.set_patience(2);
  auto r = Train(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->best_epoch, 1);
  EXPECT_EQ(r->epochs_run, 3);

  c.set_valid_split("");
  c.set_epochs(2);
  c.set_learning_rate(1e-3);
  r = Train(c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->metric_name, "train_loss");
}

// The last parameters of a run (its checkpoint's), and the optimizer steps taken.
std::pair<std::string, int64_t> LastParameters(const TrainConfig& c) {
  auto ckpt = ReadModelFile(CheckpointPathOf(c), kFileKindCheckpoint);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  if (!ckpt.ok()) return {"", -1};
  return {ckpt->parameters(), ckpt->checkpoint().optimizer_step()};
}

TEST(TrainerTest, StepsPerEpochSetsTheBudgetAndCutsTheSameStreamOfPasses) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  // 5 training graphs in batches of 2: a pass is 3 steps (2 + 2 + 1 graphs).
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 5, 0).ok());
  TrainConfig a = TrainerConfig(data, dir.File("a.tpm"));
  a.set_batch_graphs(2);
  a.set_epochs(2);
  a.set_patience(0);
  a.set_valid_split("");
  ASSERT_TRUE(Train(a).ok());
  // Explicitly one pass per epoch: the same run.
  TrainConfig b = a;
  b.set_output(dir.File("b.tpm"));
  b.set_steps_per_epoch(3);
  ASSERT_TRUE(Train(b).ok());
  // Both passes in one epoch: the same steps, hence the same final parameters.
  TrainConfig c = a;
  c.set_output(dir.File("c.tpm"));
  c.set_epochs(1);
  c.set_steps_per_epoch(6);
  auto rc = Train(c);
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(rc->epochs_run, 1);
  const auto pa = LastParameters(a), pb = LastParameters(b), pc = LastParameters(c);
  EXPECT_EQ(pa.second, 6);
  EXPECT_EQ(pb, pa);
  EXPECT_EQ(pc, pa);
  // Epochs that end in the middle of a pass continue the same stream of steps: 3 epochs of 2
  // steps take the 6 steps of 1 epoch of 6.
  TrainConfig d = a;
  d.set_output(dir.File("d.tpm"));
  d.set_epochs(3);
  d.set_steps_per_epoch(2);
  ASSERT_TRUE(Train(d).ok());
  EXPECT_EQ(LastParameters(d), pa);
  // A different budget gives a different model: 2 epochs of 4 steps.
  TrainConfig e = a;
  e.set_output(dir.File("e.tpm"));
  e.set_steps_per_epoch(4);
  auto re = Train(e);
  ASSERT_TRUE(re.ok());
  const auto pe = LastParameters(e);
  EXPECT_EQ(pe.second, 8);
  EXPECT_NE(pe.first, pa.first);
  // One graph: steps_per_epoch steps between validations.
  const std::string one = dir.File("one.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(one, TaskKind::kLayout, 1, 0, 16, 40).ok());
  TrainConfig f = TrainerConfig(one, dir.File("f.tpm"));
  f.set_holdout_config_fraction(0.25);
  f.set_train_split("");
  f.set_valid_split("");
  f.set_epochs(3);
  f.set_patience(0);
  f.set_steps_per_epoch(5);
  auto rf = Train(f);
  ASSERT_TRUE(rf.ok()) << rf.status().ToString();
  EXPECT_EQ(rf->epoch_metric.size(), 3u);
  EXPECT_EQ(LastParameters(f).second, 15);
  // min_config_passes raises the steps per epoch to cover the pool: 40 configs, 25 % held out,
  // so 30 in the pool; 8 per step over 3 epochs. 4 passes need ceil(4 * 30 / 24) = 5 steps per
  // epoch; 2 passes need 3, fewer than steps_per_epoch 5, which then stays.
  TrainConfig g = f;
  g.set_output(dir.File("g.tpm"));
  g.set_steps_per_epoch(0);
  g.set_min_config_passes(4);
  ASSERT_TRUE(Train(g).ok());
  EXPECT_EQ(LastParameters(g), LastParameters(f));
  TrainConfig h = f;
  h.set_output(dir.File("h.tpm"));
  h.set_min_config_passes(2);
  ASSERT_TRUE(Train(h).ok());
  EXPECT_EQ(LastParameters(h).second, 15);
  h.set_steps_per_epoch(0);
  ASSERT_TRUE(Train(h).ok());
  EXPECT_EQ(LastParameters(h).second, 9);
  h.set_min_config_passes(-1);
  EXPECT_FALSE(Train(h).ok());
}

// --train-split train,valid: the last model of a recipe trained on the training and the
// validation programs. An epoch is one pass over both splits' graphs, and the validation graphs,
// all of them trained on, are never validated on: epochs are compared by the training loss.
TEST(TrainerTest, TrainSplitListTrainsOnEverySplitNamed) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  // 3 training and 2 validation graphs in batches of 2.
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 3, 2).ok());
  TrainConfig a = TrainerConfig(data, dir.File("a.tpm"));
  a.set_batch_graphs(2);
  a.set_epochs(2);
  a.set_patience(0);
  auto ra = Train(a);
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  EXPECT_EQ(ra->metric_name, "valid_kendall");
  EXPECT_EQ(LastParameters(a).second, 4);  // 3 graphs: 2 steps per epoch
  TrainConfig b = a;
  b.set_output(dir.File("b.tpm"));
  b.set_train_split("train,valid");
  auto rb = Train(b);
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_EQ(rb->metric_name, "train_loss");
  EXPECT_EQ(LastParameters(b).second, 6);  // 5 graphs: 3 steps per epoch
  // The order of the list names the same graphs.
  TrainConfig c = b;
  c.set_output(dir.File("c.tpm"));
  c.set_train_split("valid,train");
  ASSERT_TRUE(Train(c).ok());
  EXPECT_EQ(LastParameters(c), LastParameters(b));
  for (const char* bad : {"train,", "train,train", "train,,valid", "train,bogus", ","}) {
    TrainConfig d = b;
    d.set_train_split(bad);
    Status s = ValidateTrainConfig(d);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("--train-split"), std::string::npos) << s.message();
  }
}

// The Kendall tau of the configurations `held` of graph 0 of `data`, scored by the model file.
double HeldOutKendall(const std::string& data, const std::string& model,
                      const std::vector<int64_t>& held) {
  auto reader = io::DatasetReader::Open(data);
  auto scorer = ModelScorer::Load(model, 1);
  EXPECT_TRUE(reader.ok() && scorer.ok());
  if (!reader.ok() || !scorer.ok()) return std::nan("");
  auto g = (*reader)->ReadGraph(0, true);
  EXPECT_TRUE(g.ok());
  if (!g.ok()) return std::nan("");
  eval::ScoringInput input{*g, reader->get(), 0};
  auto scores = (*scorer)->Score(input, held);
  EXPECT_TRUE(scores.ok());
  if (!scores.ok()) return std::nan("");
  std::vector<double> rt;
  for (int64_t c : held) rt.push_back(g->NormalizedRuntime(c));
  return eval::KendallTauB(*scores, rt);
}

// carve_valid_fraction on one graph with held-out configurations: the epochs are picked on
// configurations carved from the training pool, the held-out ones are scored once by the model
// written, the epoch is long enough to sample what it validates, and carve_patience stops the
// run; the same seed gives the same model whatever the thread count. With validation graphs
// nothing changes.
TEST(TrainerTest, CarvedValidationPicksTheEpochsAndStopsTheRun) {
  TempDir dir;
  const std::string one = dir.File("one.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(one, TaskKind::kLayout, 1, 0, 16, 200).ok());
  TrainConfig a = TrainerConfig(one, dir.File("a.tpm"));
  a.set_holdout_config_fraction(0.25);
  a.set_train_split("");
  a.set_valid_split("");
  a.set_epochs(3);
  a.set_patience(0);
  // Without carving: the held-out configurations pick the epochs, one step per epoch.
  auto plain = Train(a);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(std::isnan(plain->held_out_metric));
  EXPECT_EQ(LastParameters(a).second, 3);

  TrainConfig c = a;
  c.set_output(dir.File("c.tpm"));
  c.set_carve_valid_fraction(0.2);
  c.set_threads(1);
  auto rc = Train(c);
  ASSERT_TRUE(rc.ok()) << rc.status().ToString();
  EXPECT_EQ(rc->metric_name, "valid_kendall");
  EXPECT_EQ(rc->epochs_run, 3);
  // 200 configs, 150 after the held-out quarter, 30 of them carved: an epoch samples at least
  // 30 configurations, 8 per step, so ceil(30 / 8) = 4 steps.
  EXPECT_EQ(LastParameters(c).second, 12);
  // The held-out figure is the written model's on the held-out configurations (the split the
  // trainer draws from the seed), not the carved validation's best.
  auto reader = io::DatasetReader::Open(one);
  ASSERT_TRUE(reader.ok());
  auto g = (*reader)->ReadGraph(0, true);
  ASSERT_TRUE(g.ok());
  auto hashes = HashGraphConfigs(*g);
  ASSERT_TRUE(hashes.ok());
  const ConfigSplit split = SplitByDistinctConfig(*hashes, 0.25, DeriveSeed(17, "holdout", 0));
  ASSERT_EQ(split.holdout.size(), 50u);
  ASSERT_TRUE(std::isfinite(rc->held_out_metric));
  EXPECT_NEAR(rc->held_out_metric, HeldOutKendall(one, c.output(), split.holdout), 1e-9);
  EXPECT_NE(rc->held_out_metric, rc->best_metric);
  // The reference is on the held-out configurations, as without carving.
  EXPECT_EQ(rc->reference_metric, plain->reference_metric);
  // Deterministic for a seed, whatever the thread count.
  TrainConfig d = c;
  d.set_output(dir.File("d.tpm"));
  d.set_threads(2);
  auto rd = Train(d);
  ASSERT_TRUE(rd.ok());
  EXPECT_EQ(rd->epoch_metric, rc->epoch_metric);
  EXPECT_EQ(rd->held_out_metric, rc->held_out_metric);
  EXPECT_EQ(LastParameters(d), LastParameters(c));

  // carve_patience stops a run whose metric cannot change, though patience is 0.
  TrainConfig e = c;
  e.set_output(dir.File("e.tpm"));
  e.set_learning_rate(1e-30);
  e.set_epochs(10);
  e.set_carve_patience(2);
  auto re = Train(e);
  ASSERT_TRUE(re.ok()) << re.status().ToString();
  EXPECT_EQ(re->best_epoch, 1);
  EXPECT_EQ(re->epochs_run, 3);

  // An ensemble's held-out figure is the ensemble's on the held-out configurations.
  TrainConfig f = c;
  f.set_output(dir.File("f.tpm"));
  f.set_ensemble_members(2);
  auto rf = Train(f);
  ASSERT_TRUE(rf.ok()) << rf.status().ToString();
  EXPECT_EQ(rf->held_out_metric, rf->best_metric);
  EXPECT_NEAR(rf->held_out_metric, HeldOutKendall(one, f.output(), split.holdout), 1e-9);

  // With validation graphs the carve options change nothing.
  const std::string many = dir.File("many.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(many, TaskKind::kLayout, 3, 2).ok());
  TrainConfig v = TrainerConfig(many, dir.File("v.tpm"));
  v.set_patience(0);
  v.set_learning_rate(1e-30);
  v.set_epochs(4);
  auto rv = Train(v);
  ASSERT_TRUE(rv.ok());
  TrainConfig w = v;
  w.set_output(dir.File("w.tpm"));
  w.set_carve_valid_fraction(0.2);
  w.set_carve_patience(1);
  auto rw = Train(w);
  ASSERT_TRUE(rw.ok()) << rw.status().ToString();
  EXPECT_EQ(rw->epochs_run, 4);
  EXPECT_EQ(rw->epoch_metric, rv->epoch_metric);
  // The same steps (the parameters themselves may differ in their last bits where heap alignment
  // regroups vectorised sums in this test binary; the tpugraphs binary aligns every block).
  EXPECT_EQ(LastParameters(w).second, LastParameters(v).second);
  EXPECT_TRUE(std::isnan(rw->held_out_metric));

  // A collection without validation graphs validates on carved configurations too; the
  // valid_max_configs budget is shared among its graphs (at least configs_per_graph each). 4
  // graphs of 100 configurations, 20 carved from each: 80 scored, 24 sampled per step (3 graphs
  // x 8), so 4 steps per epoch instead of a pass's 2; with valid_max_configs 16 each graph keeps
  // max(8, 16 / 4) = 8, 32 scored, 2 steps.
  const std::string noval = dir.File("noval.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(noval, TaskKind::kLayout, 4, 0, 16, 100).ok());
  TrainConfig x = TrainerConfig(noval, dir.File("x.tpm"));
  x.set_valid_split("");
  x.set_epochs(2);
  x.set_patience(0);
  x.set_carve_valid_fraction(0.2);
  auto rx = Train(x);
  ASSERT_TRUE(rx.ok()) << rx.status().ToString();
  EXPECT_EQ(rx->metric_name, "valid_kendall");
  EXPECT_TRUE(std::isnan(rx->held_out_metric));  // nothing held out
  EXPECT_EQ(LastParameters(x).second, 8);
  x.set_valid_max_configs(16);
  ASSERT_TRUE(Train(x).ok());
  EXPECT_EQ(LastParameters(x).second, 4);
  x.set_carve_valid_fraction(0);
  auto rplain = Train(x);
  ASSERT_TRUE(rplain.ok());
  EXPECT_EQ(rplain->metric_name, "train_loss");

  w.set_carve_valid_fraction(1.0);
  EXPECT_FALSE(Train(w).ok());
  w.set_carve_valid_fraction(0.2);
  w.set_carve_patience(-1);
  EXPECT_FALSE(Train(w).ok());
}

// ema_decay: the checkpoint's average follows the recursion by hand over the parameters of the
// same run without averaging (averaging does not change the trajectory), the model file holds
// the average of its best epoch, and a resumed run continues the average exactly.
TEST(TrainerTest, ParameterAverageFollowsTheStepsAndIsWhatIsKept) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 4, 2).ok());
  TrainConfig base = TrainerConfig(data, dir.File("plain.tpm"));
  base.set_lr_schedule(TrainConfig::LR_SCHEDULE_CONSTANT);
  base.set_steps_per_epoch(1);
  base.set_patience(0);
  base.set_checkpoint_interval_seconds(0);
  auto params_after = [&](int epochs, double lr) {
    TrainConfig c = base;
    c.set_epochs(epochs);
    c.set_learning_rate(lr);
    EXPECT_TRUE(Train(c).ok());
    auto ckpt = ReadModelFile(CheckpointPathOf(c), kFileKindCheckpoint);
    EXPECT_TRUE(ckpt.ok());
    auto p = BytesToFloats(ckpt->parameters(), ckpt->parameters().size() / 4, "ckpt");
    EXPECT_TRUE(p.ok());
    return p.ok() ? *p : std::vector<float>();
  };
  // The initial parameters: one step at a learning rate too small to move a float.
  std::vector<double> want;
  for (float v : params_after(1, 1e-30)) want.push_back(v);
  const double decay = 0.5;
  for (int t = 1; t <= 4; ++t) {
    const std::vector<float> p = params_after(t, base.learning_rate());
    ASSERT_EQ(p.size(), want.size());
    const double d = std::min(decay, (1.0 + t) / (10.0 + t));
    for (size_t i = 0; i < p.size(); ++i) want[i] = d * want[i] + (1 - d) * p[i];
  }
  TrainConfig ema = base;
  ema.set_output(dir.File("ema.tpm"));
  ema.set_epochs(4);
  ema.set_ema_decay(decay);
  auto run = Train(ema);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  auto ckpt = ReadModelFile(CheckpointPathOf(ema), kFileKindCheckpoint);
  ASSERT_TRUE(ckpt.ok());
  const std::string& ema_bytes = ckpt->checkpoint().ema_parameters();
  auto got = BytesToFloats(ema_bytes, ema_bytes.size() / 4, "ema");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs((*got)[i] - want[i]) / (1e-3 + std::fabs(want[i])));
  }
  EXPECT_LT(worst, 1e-4);
  // The training parameters are those of the plain run: averaging does not steer the steps.
  EXPECT_EQ(ckpt->parameters(), ReadModelFile(CheckpointPathOf(base), kFileKindCheckpoint)
                                    ->parameters());  // base ran last with 4 epochs
  // The model file holds the average at the best epoch (a run stopped there has it last).
  auto model = ReadModelFile(ema.output());
  ASSERT_TRUE(model.ok());
  const int best = model->summary().best_epoch();
  ASSERT_GE(best, 1);
  TrainConfig upto = ema;
  upto.set_output(dir.File("upto.tpm"));
  upto.set_epochs(best);
  ASSERT_TRUE(Train(upto).ok());
  auto upto_ckpt = ReadModelFile(CheckpointPathOf(upto), kFileKindCheckpoint);
  ASSERT_TRUE(upto_ckpt.ok());
  EXPECT_EQ(model->parameters(), upto_ckpt->checkpoint().ema_parameters());
  EXPECT_NE(model->parameters(), upto_ckpt->parameters());
  // Resuming after 2 epochs gives the uninterrupted run's average and model.
  TrainConfig first = ema;
  first.set_output(dir.File("part.tpm"));
  first.set_epochs(2);
  ASSERT_TRUE(Train(first).ok());
  TrainConfig resume;
  resume.set_resume(CheckpointPathOf(first));
  resume.set_output(dir.File("resumed.tpm"));
  resume.set_epochs(4);
  ASSERT_TRUE(Train(resume).ok());
  auto resumed = ReadModelFile(dir.File("resumed.tpm"));
  auto resumed_ckpt = ReadModelFile(dir.File("resumed.tpm.ckpt"), kFileKindCheckpoint);
  ASSERT_TRUE(resumed.ok() && resumed_ckpt.ok());
  EXPECT_EQ(resumed->parameters(), model->parameters());
  EXPECT_EQ(resumed_ckpt->checkpoint().ema_parameters(), ckpt->checkpoint().ema_parameters());
}

TEST(TrainerTest, DedupConfigsTrainsOnTheFastestCopyOfEachConfiguration) {
  TempDir dir;
  // The same graphs twice: as generated, and with every configuration measured a second time,
  // slower. With dedup_configs the second dataset's pools are the first's (the fastest copies),
  // so the runs take the same steps on the same values.
  const std::string plain = dir.File("plain.tpug"), doubled = dir.File("doubled.tpug");
  {
    auto wp = io::DatasetWriter::Create(plain);
    auto wd = io::DatasetWriter::Create(doubled);
    ASSERT_TRUE(wp.ok() && wd.ok());
    for (int i = 0; i < 3; ++i) {
      Graph g = testing::SyntheticGraph(TaskKind::kLayout, "g" + std::to_string(i), "train", 16, 12,
                                        500 + i);
      ASSERT_TRUE((*wp)->Add(g).ok());
      const int64_t row = g.num_config_nodes() * kLayoutConfigFeatureCount;
      Graph d = g;
      d.node_config_feat.clear();
      d.config_runtime.clear();
      for (int64_t c = 0; c < g.num_configs; ++c) {
        for (int copy = 0; copy < 2; ++copy) {
          d.node_config_feat.insert(d.node_config_feat.end(), g.node_config_feat.begin() + c * row,
                                    g.node_config_feat.begin() + (c + 1) * row);
          d.config_runtime.push_back(g.config_runtime[c] * (copy == 0 ? 3 : 1) / 2 +
                                     (copy == 0 ? 7 : 0));
        }
      }
      d.num_configs = 2 * g.num_configs;
      ASSERT_TRUE((*wd)->Add(d).ok());
    }
    ASSERT_TRUE((*wp)->Finish().ok() && (*wd)->Finish().ok());
  }
  // In `doubled`, copy 0 runs 1.5x the original + 7 and copy 1 half the original: copy 1 is the
  // fastest, and its runtimes keep the original order (the hinge loss sees only the order).
  TrainConfig a = TrainerConfig(plain, dir.File("a.tpm"));
  a.set_valid_split("");
  a.set_patience(0);
  TrainConfig b = a;
  b.set_dataset(doubled);
  b.set_output(dir.File("b.tpm"));
  b.set_dedup_configs(true);
  ASSERT_TRUE(Train(a).ok());
  ASSERT_TRUE(Train(b).ok());
  EXPECT_EQ(LastParameters(b).first, LastParameters(a).first);
  // Without dedup the doubled pools differ, and so does the model.
  TrainConfig c = b;
  c.set_output(dir.File("c.tpm"));
  c.set_dedup_configs(false);
  ASSERT_TRUE(Train(c).ok());
  EXPECT_NE(LastParameters(c).first, LastParameters(a).first);
}

TEST(TrainerTest, ErrorsComeBeforeAnyWork) {
  TempDir dir;
  TrainConfig c = TrainerConfig(dir.File("missing.tpug"), dir.File("model.tpm"));
  c.set_learning_rate(-1);
  auto r = Train(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--learning-rate"), std::string::npos);
  c.set_learning_rate(1e-3);
  c.set_output(dir.File("no/such/dir/model.tpm"));
  r = Train(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--output"), std::string::npos);
  c.set_output(dir.File("model.tpm"));
  r = Train(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing.tpug"), std::string::npos);
  // Nothing was left behind.
  EXPECT_TRUE(dir.List().empty());

  // A dataset with two collections needs --collection.
  {
    auto w = io::DatasetWriter::Create(dir.File("mixed.tpug"));
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add(testing::SyntheticGraph(TaskKind::kTile, "a", "train", 8, 4, 1)).ok());
    ASSERT_TRUE((*w)->Add(testing::SyntheticGraph(TaskKind::kLayout, "b", "train", 8, 4, 2)).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  c.set_dataset(dir.File("mixed.tpug"));
  r = Train(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--collection"), std::string::npos);
}

TEST(ValidateTrainConfigTest, NamesTheFlag) {
  TrainConfig c;
  c.set_dataset("d");
  c.set_output("o");
  EXPECT_TRUE(ValidateTrainConfig(c).ok());
  struct Case {
    std::function<void(TrainConfig&)> set;
    const char* flag;
  } cases[] = {
      {[](TrainConfig& x) { x.clear_output(); }, "--output"},
      {[](TrainConfig& x) { x.clear_dataset(); }, "--dataset"},
      {[](TrainConfig& x) { x.set_epochs(0); }, "--epochs"},
      {[](TrainConfig& x) { x.set_batch_graphs(0); }, "--batch-graphs"},
      {[](TrainConfig& x) { x.set_configs_per_graph(1); }, "--configs-per-graph"},
      {[](TrainConfig& x) { x.set_beta2(1.0); }, "--beta2"},
      {[](TrainConfig& x) { x.set_clip_norm(-1); }, "--clip-norm"},
      {[](TrainConfig& x) { x.set_holdout_config_fraction(1.0); }, "--holdout-config-fraction"},
      {[](TrainConfig& x) { x.set_collection("Tile"); }, "--collection"},
      {[](TrainConfig& x) { x.set_train_split("training"); }, "--train-split"},
      {[](TrainConfig& x) { x.set_seed(-5); }, "--seed"},
      {[](TrainConfig& x) { x.set_min_lr_ratio(2); }, "--min-lr-ratio"},
      {[](TrainConfig& x) { x.set_ema_decay(1.0); }, "--ema-decay"},
      {[](TrainConfig& x) { x.set_ema_decay(-0.1); }, "--ema-decay"},
  };
  for (const Case& k : cases) {
    TrainConfig bad = c;
    k.set(bad);
    Status s = ValidateTrainConfig(bad);
    ASSERT_FALSE(s.ok()) << k.flag;
    EXPECT_NE(s.message().find(k.flag), std::string::npos) << s.message();
  }
}

TEST(RandomRankingTopKErrorTest, MatchesEnumerationOfAllSubsets) {
  std::vector<double> rt = {5, 3, 9, 3.5, 12, 4};
  for (int k = 1; k <= 6; ++k) {
    // Enumerate all k-subsets of 6 configs.
    double sum = 0;
    int count = 0;
    for (int mask = 0; mask < 64; ++mask) {
      if (__builtin_popcount(mask) != k) continue;
      double best = 1e300;
      for (int i = 0; i < 6; ++i) {
        if (mask & (1 << i)) best = std::min(best, rt[i]);
      }
      sum += best / 3.0 - 1.0;
      ++count;
    }
    EXPECT_NEAR(RandomRankingTopKError(rt, k), sum / count, 1e-12) << k;
  }
}

}  // namespace
}  // namespace tpugraphs::train
