// `Train` with Graph Segment Training (docs/gst.md): learning, determinism, option checks.
#include <gtest/gtest.h>

#include <filesystem>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/model/cost_model.h"
#include "tpugraphs/train/model_file.h"
#include "tpugraphs/train/trainer.h"
#include "train_test_util.h"

namespace tpugraphs::train {
namespace {

using ::tpugraphs::testing::TempDir;

TrainConfig GstConfig(const std::string& dataset, const std::string& output) {
  TrainConfig c;
  c.set_dataset(dataset);
  c.set_output(output);
  c.set_epochs(40);
  c.set_batch_graphs(2);
  c.set_configs_per_graph(16);
  c.set_warmup_steps(2);
  c.set_learning_rate(1e-2);
  c.set_patience(0);
  c.mutable_model()->set_hidden_dim(8);
  c.mutable_model()->set_num_layers(2);
  c.mutable_model()->set_opcode_embedding_dim(4);
  c.mutable_model()->set_head_hidden_dim(8);
  c.mutable_model()->set_segment_size(12);  // graphs of 48-52 nodes: 4-5 segments
  c.set_gst(TrainConfig::GST_ON);
  c.set_gst_keep_probability(0.5);
  c.set_gst_finetune_epochs(5);
  c.set_seed(17);
  return c;
}

TEST(GstTrainTest, LearnsTheSyntheticLayoutRule) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 8, 3, 48, 40).ok());
  TrainConfig c = GstConfig(data, dir.File("model.tpm"));
  auto r = Train(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->metric_name, "valid_kendall");
  // Runtimes are a sum of per-node effects of the first two layout values (3 configurable nodes
  // in different segments); held-out graphs, validated segment by segment.
  EXPECT_GT(r->best_metric, 0.4);
  auto loaded = LoadModel(c.output());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->file.train_config().gst(), TrainConfig::GST_ON);
}

TEST(GstTrainTest, SameSeedGivesTheSameModelFileWhateverTheThreadCount) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 6, 2, 40, 24).ok());
  // Batches of 2 graphs (a task per graph) and of 1 (its segments are the tasks).
  for (int batch_graphs : {2, 1}) {
    std::vector<TrainResult> results;
    std::vector<ModelFile> files;
    for (int t = 0; t < 3; ++t) {
      TrainConfig c = GstConfig(data, dir.File("m.tpm"));
      c.set_epochs(4);
      c.set_batch_graphs(batch_graphs);
      c.set_gst_finetune_epochs(1);
      c.set_gst_segments_per_step(2);
      c.set_threads(t + 1);
      auto r = Train(c);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      results.push_back(*r);
      auto f = ReadModelFile(c.output());
      ASSERT_TRUE(f.ok());
      f->mutable_train_config()->clear_threads();  // recorded in the config
      for (EpochRecord& e : *f->mutable_summary()->mutable_history()) e.clear_wall_seconds();
      files.push_back(*f);
      std::filesystem::remove(c.output());
    }
    for (int t = 1; t < 3; ++t) {
      EXPECT_EQ(results[0].epoch_loss, results[t].epoch_loss) << batch_graphs << " " << t;
      EXPECT_EQ(results[0].epoch_metric, results[t].epoch_metric) << batch_graphs << " " << t;
      EXPECT_EQ(files[0].parameters(), files[t].parameters()) << batch_graphs << " " << t;
      EXPECT_EQ(EncodeModelFile(files[0], kFileKindModel),
                EncodeModelFile(files[t], kFileKindModel));
    }
  }
}

TEST(GstTrainTest, FineTuningChangesOnlyTheHead) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 4, 1, 40, 16).ok());
  TrainConfig c = GstConfig(data, dir.File("ft.tpm"));
  c.set_epochs(3);
  c.set_gst_finetune_epochs(3);  // every epoch fine-tunes the head only
  ASSERT_TRUE(Train(c).ok());
  auto loaded = LoadModel(c.output());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const model::CostModel& trained = *loaded->model;
  // The same initialisation as the trainer's.
  auto fresh = model::CostModel::Create(trained.spec(), TaskKind::kLayout);
  ASSERT_TRUE(fresh.ok());
  FeatureTransformProto tp;
  trained.transform().ToProto(&tp);
  ASSERT_TRUE((*fresh)->transform().FromProto(tp).ok());
  (*fresh)->InitParameters(DeriveSeed(17, "init"));
  const int64_t head = trained.head_parameter_offset();
  ASSERT_GT(head, 0);
  for (int64_t p = 0; p < head; ++p) {
    ASSERT_EQ(trained.parameters()[p], (*fresh)->parameters()[p]) << "parameter " << p;
  }
  int64_t changed = 0;
  for (int64_t p = head; p < trained.num_parameters(); ++p) {
    changed += trained.parameters()[p] != (*fresh)->parameters()[p];
  }
  EXPECT_GT(changed, 0);
}

TEST(GstTrainTest, OptionErrorsNameTheFlag) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 2, 1, 20, 8).ok());
  auto expect_error = [&](TrainConfig c, const std::string& needle) {
    auto r = Train(c);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_FALSE(std::filesystem::exists(c.output()));
  };
  TrainConfig c = GstConfig(data, dir.File("x.tpm"));
  c.mutable_model()->set_segment_size(0);
  expect_error(c, "--segment-size");
  c = GstConfig(data, dir.File("x.tpm"));
  c.set_gst_keep_probability(0);
  expect_error(c, "--gst-keep-probability");
  c = GstConfig(data, dir.File("x.tpm"));
  c.set_gst_segments_per_step(0);
  expect_error(c, "--gst-segments-per-step");
  c = GstConfig(data, dir.File("x.tpm"));
  c.set_gst_finetune_epochs(41);
  expect_error(c, "--gst-finetune-epochs");
  // The layout recipes' per-configurable-node head is not segmented: refused before training,
  // naming the option (it used to fail in the first step with an internal error).
  c = GstConfig(data, dir.File("x.tpm"));
  c.mutable_model()->set_config_node_head(16);
  expect_error(c, "--config-node-head 0");
  const std::string tile = dir.File("tile.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(tile, TaskKind::kTile, 2, 1).ok());
  c = GstConfig(tile, dir.File("x.tpm"));
  expect_error(c, "layout collections only");
}

}  // namespace
}  // namespace tpugraphs::train
