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

TrainConfig SmallConfig(const std::string& dataset, const std::string& output) {
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
  TrainConfig c = SmallConfig(data, dir.File("full.tpm"));
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
  TrainConfig c = SmallConfig(data, dir.File("m.tpm"));
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

// auto_resume (the same command run again after a kill): the run's own checkpoint is taken
// when the same command wrote it, and a checkpoint of another command or an unreadable one is
// passed over with a fresh start.
TEST(ResumeTest, AutoResumeTakesOnlyTheSameCommandsCheckpoint) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 6, 2, 40, 24).ok());
  TrainConfig c = SmallConfig(data, dir.File("m.tpm"));
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

}  // namespace
}  // namespace tpugraphs::train
