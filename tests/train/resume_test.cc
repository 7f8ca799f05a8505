// `Train` resumed from a checkpoint ends exactly where the uninterrupted run ends: the same
// parameters and model file, with Graph Segment Training's history table and early stopping
// carried through the checkpoint.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/train/model_file.h"
#include "tpugraphs/train/trainer.h"
#include "train_test_util.h"

namespace tpugraphs::train {
namespace {

using ::tpugraphs::testing::TempDir;

TrainConfig ResumeConfig(const std::string& dataset, const std::string& output) {
  TrainConfig c;
  c.set_dataset(dataset);
  c.set_output(output);
  c.set_batch_graphs(2);
  c.set_configs_per_graph(8);
  c.set_warmup_steps(2);
  c.set_learning_rate(1e-2);
  c.set_lr_schedule(TrainConfig::LR_SCHEDULE_CONSTANT);
  c.mutable_model()->set_hidden_dim(8);
  c.mutable_model()->set_num_layers(2);
  c.mutable_model()->set_opcode_embedding_dim(4);
  c.mutable_model()->set_head_hidden_dim(8);
  c.set_checkpoint_interval_seconds(0);
  c.set_seed(23);
  return c;
}

// GST keeps a table of historical segment embeddings across steps; a resumed run must start
// from the table the interrupted run had, not from an empty one.
TEST(ResumeTest, GstResumeContinuesExactly) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 6, 2, 40, 24).ok());
  TrainConfig c = ResumeConfig(data, dir.File("full.tpm"));
  c.set_epochs(4);
  c.set_patience(0);
  c.mutable_model()->set_segment_size(12);
  c.set_gst(TrainConfig::GST_ON);
  c.set_gst_keep_probability(0.5);
  c.set_gst_finetune_epochs(0);
  auto full = Train(c);
  ASSERT_TRUE(full.ok()) << full.status().ToString();

  TrainConfig first = c;
  first.set_output(dir.File("part.tpm"));
  first.set_epochs(2);
  ASSERT_TRUE(Train(first).ok());
  auto ckpt = ReadModelFile(dir.File("part.tpm.ckpt"), kFileKindCheckpoint);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  EXPECT_GT(ckpt->checkpoint().gst_history_size(), 0);
  TrainConfig resume;
  resume.set_resume(dir.File("part.tpm.ckpt"));
  resume.set_output(dir.File("resumed.tpm"));
  resume.set_epochs(4);
  auto resumed = Train(resume);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->epoch_loss, full->epoch_loss);
  EXPECT_EQ(resumed->epoch_metric, full->epoch_metric);
  auto a = ReadModelFile(dir.File("full.tpm"));
  auto b = ReadModelFile(dir.File("resumed.tpm"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->parameters() == b->parameters());
}

// A checkpoint written by the epoch that triggered early stopping (the process then died before
// writing the model): resuming must not train further.
TEST(ResumeTest, CheckpointOfTheEarlyStoppingEpochResumesToTheSameModel) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kTile, 6, 3).ok());
  TrainConfig c = ResumeConfig(data, dir.File("m.tpm"));
  c.set_epochs(30);
  c.set_patience(1);
  c.set_learning_rate(3e-2);
  auto full = Train(c);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_LT(full->epochs_run, 30) << "the run did not stop early; nothing to check";
  auto want = ReadFileToString(dir.File("m.tpm"));
  ASSERT_TRUE(want.ok());
  auto ckpt = ReadModelFile(dir.File("m.tpm.ckpt"), kFileKindCheckpoint);
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ(ckpt->checkpoint().epochs_done(), full->epochs_run);
  EXPECT_EQ(ckpt->checkpoint().epoch_loss_size(), full->epochs_run);

  TrainConfig resume;
  resume.set_resume(dir.File("m.tpm.ckpt"));
  resume.set_output(dir.File("m.tpm"));
  auto resumed = Train(resume);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->epochs_run, full->epochs_run);
  EXPECT_EQ(resumed->best_epoch, full->best_epoch);
  EXPECT_EQ(resumed->epoch_loss, full->epoch_loss);
  auto got = ReadFileToString(dir.File("m.tpm"));
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == *want) << "the resumed model file differs from the uninterrupted run's";
}

// With valid_every_epochs, patience counts epochs and a run stops only at a validation: a
// checkpoint of an epoch between two validations, already `patience` epochs after the best, goes
// on to the next validation when resumed. Resumed after every epoch, the run ends where the
// uninterrupted one does, with the same model.
TEST(ResumeTest, ResumingBetweenValidationsStopsWhereTheUninterruptedRunStops) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 6, 2, 40, 24).ok());
  TrainConfig c = ResumeConfig(data, dir.File("full.tpm"));
  c.set_epochs(60);
  c.set_steps_per_epoch(5);
  c.set_valid_every_epochs(3);
  c.set_patience(2);
  c.set_learning_rate(3e-2);
  c.set_auto_resume(true);
  c.set_checkpoint_interval_seconds(3600);
  auto full = Train(c);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_LT(full->epochs_run, 60) << "the run did not stop early; nothing to check";
  EXPECT_EQ(full->epochs_run % 3, 0);
  EXPECT_EQ(full->epochs_run - full->best_epoch, 3) << "the first validation 2 epochs after";

  TrainConfig part = c;
  part.set_output(dir.File("part.tpm"));
  part.set_stop_after_steps(5);  // one epoch per invocation
  int invocations = 0;
  while (!FileSize(part.output()).ok()) {
    ASSERT_LT(++invocations, 61) << "the run does not end";
    auto r = Train(part);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  EXPECT_EQ(invocations, full->epochs_run);
  auto a = ReadModelFile(c.output());
  auto b = ReadModelFile(part.output());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->summary().epochs_run(), full->epochs_run);
  EXPECT_EQ(b->summary().best_epoch(), full->best_epoch);
  EXPECT_TRUE(a->parameters() == b->parameters());
}

// auto_resume (the same command run again after a kill): the run's own checkpoint is taken
// when the same command wrote it, and a checkpoint of another command or an unreadable one is
// passed over with a fresh start.
TEST(ResumeTest, AutoResumeTakesOnlyTheSameCommandsCheckpoint) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 6, 2, 40, 24).ok());
  TrainConfig c = ResumeConfig(data, dir.File("m.tpm"));
  c.set_epochs(3);
  c.set_auto_resume(true);
  ASSERT_TRUE(Train(c).ok());
  auto first = ReadModelFile(c.output());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(FileSize(c.output() + ".ckpt").ok()) << "the finished run keeps its checkpoint";
  auto wall_times = [](const ModelFile& f) {
    std::vector<double> w;
    for (const EpochRecord& r : f.summary().history()) w.push_back(r.wall_seconds());
    return w;
  };

  // The model lost, the checkpoint kept: the run resumes after its last epoch and trains
  // nothing more, so even the epochs' wall times are the first run's.
  ASSERT_EQ(std::remove(c.output().c_str()), 0);
  ASSERT_TRUE(Train(c).ok());
  auto again = ReadModelFile(c.output());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->parameters() == first->parameters());
  EXPECT_EQ(wall_times(*again), wall_times(*first));

  // Another command (another seed) beside that checkpoint starts afresh.
  TrainConfig other = c;
  other.set_seed(24);
  ASSERT_EQ(std::remove(c.output().c_str()), 0);
  ASSERT_TRUE(Train(other).ok());
  auto fresh = ReadModelFile(c.output());
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(fresh->train_config().seed(), 24);
  EXPECT_FALSE(fresh->parameters() == first->parameters());

  // An unreadable checkpoint: a fresh start of the same command, which ends where the first
  // run ended (same parameters, its own wall times).
  ASSERT_TRUE(WriteFileAtomically(c.output() + ".ckpt", "not a checkpoint").ok());
  ASSERT_EQ(std::remove(c.output().c_str()), 0);
  ASSERT_TRUE(Train(c).ok());
  auto retrained = ReadModelFile(c.output());
  ASSERT_TRUE(retrained.ok()) << retrained.status().ToString();
  EXPECT_TRUE(retrained->parameters() == first->parameters());
  EXPECT_NE(wall_times(*retrained), wall_times(*first));
}

// The summary without its wall times, which no two runs share.
std::string SummaryWithoutWallTimes(ModelFile f) {
  for (EpochRecord& r : *f.mutable_summary()->mutable_history()) r.clear_wall_seconds();
  return f.summary().SerializeAsString();
}

// stop_after_steps ends an invocation inside an epoch (and at an epoch's end) with a
// checkpoint and no model; running the same command with auto_resume until the model appears
// gives the uninterrupted run's model: parameters, training losses, validation metrics and
// the config stored, for a plain run, one with a parameter average and GST's history table,
// and an ensemble whose step budget runs out inside and between members.
TEST(ResumeTest, StopAfterStepsResumesInsideAnEpochToTheSameModel) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 6, 2, 40, 24).ok());
  struct Variant {
    const char* name;
    bool gst_ema;
    int members;
    int64_t budget;  // steps per invocation
  };
  for (const Variant& v : {Variant{"plain", false, 1, 2}, Variant{"plain_boundary", false, 1, 5},
                           Variant{"gst_ema", true, 1, 3}, Variant{"ensemble", false, 2, 4}}) {
    SCOPED_TRACE(v.name);
    TrainConfig c = ResumeConfig(data, dir.File(std::string(v.name) + ".full.tpm"));
    c.set_epochs(3);
    c.set_patience(0);
    c.set_steps_per_epoch(5);  // 15 steps per model
    c.set_auto_resume(true);
    c.set_checkpoint_interval_seconds(3600);  // only stop_after_steps writes inside an epoch
    c.set_ensemble_members(v.members);
    if (v.gst_ema) {
      c.mutable_model()->set_segment_size(12);
      c.set_gst(TrainConfig::GST_ON);
      c.set_gst_keep_probability(0.5);
      c.set_gst_finetune_epochs(1);
      c.set_ema_decay(0.9);
    }
    auto full = Train(c);
    ASSERT_TRUE(full.ok()) << full.status().ToString();
    EXPECT_FALSE(full->stopped);
    EXPECT_EQ(full->steps_run, 15 * v.members);

    TrainConfig part = c;
    part.set_output(dir.File(std::string(v.name) + ".part.tpm"));
    part.set_stop_after_steps(v.budget);
    int invocations = 0;
    bool inside_an_epoch = false;
    while (!FileSize(part.output()).ok()) {
      ASSERT_LT(++invocations, 40) << "the run does not end";
      auto r = Train(part);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      if (FileSize(part.output()).ok()) {
        EXPECT_FALSE(r->stopped);
        break;
      }
      ASSERT_TRUE(r->stopped);
      EXPECT_EQ(r->steps_run, v.budget);
      auto ckpt = ReadModelFile(r->checkpoint, kFileKindCheckpoint);
      ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
      EXPECT_EQ(ckpt->train_config().stop_after_steps(), 0) << "the limit is not stored";
      inside_an_epoch = inside_an_epoch || ckpt->checkpoint().steps_into_epoch() > 0;
    }
    EXPECT_EQ(invocations, (15 * v.members + v.budget - 1) / v.budget);
    // A budget of 5 stops at the ends of the 5-step epochs, the others inside them too.
    EXPECT_EQ(inside_an_epoch, v.budget % 5 != 0);
    auto a = ReadModelFile(c.output());
    auto b = ReadModelFile(part.output());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(a->parameters() == b->parameters());
    ASSERT_EQ(a->ensemble_size(), b->ensemble_size());
    for (int m = 0; m < a->ensemble_size(); ++m) {
      EXPECT_TRUE(a->ensemble(m).parameters() == b->ensemble(m).parameters()) << "member " << m;
    }
    EXPECT_EQ(SummaryWithoutWallTimes(*a), SummaryWithoutWallTimes(*b));
    TrainConfig ca = a->train_config(), cb = b->train_config();
    ca.clear_output();
    cb.clear_output();
    EXPECT_EQ(ca.SerializeAsString(), cb.SerializeAsString());
  }
}

// The interval is checked after every step: with an epoch longer than the interval, checkpoints
// are written inside the epoch; 0 writes after every epoch only.
TEST(ResumeTest, CheckpointIntervalWritesInsideLongEpochs) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 6, 2, 40, 24).ok());
  TrainConfig c = ResumeConfig(data, dir.File("m.tpm"));
  c.set_epochs(2);
  c.set_steps_per_epoch(6);
  for (double interval : {1e-9, 0.0, 3600.0}) {
    SCOPED_TRACE(interval);
    c.set_checkpoint_interval_seconds(interval);
    auto r = Train(c);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    // Due after every step: 5 inside each epoch and 1 after it. Otherwise after every epoch
    // (0), or after the last one only.
    EXPECT_EQ(r->checkpoints_written, interval == 1e-9 ? 12 : interval == 0 ? 2 : 1);
  }
  c.set_checkpoint_interval_seconds(1e-9);
  c.set_stop_after_steps(4);
  auto r = Train(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->stopped);
  EXPECT_EQ(r->checkpoints_written, 4);
  auto ckpt = ReadModelFile(dir.File("m.tpm.ckpt"), kFileKindCheckpoint);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  EXPECT_EQ(ckpt->checkpoint().epochs_done(), 0);
  EXPECT_EQ(ckpt->checkpoint().steps_into_epoch(), 4);
  EXPECT_EQ(ckpt->checkpoint().optimizer_step(), 4);
}

}  // namespace
}  // namespace tpugraphs::train
