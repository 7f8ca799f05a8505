// Fine-tuning (TrainConfig.init_from): a run that starts from a trained model's parameters,
// architecture and feature transform.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "testing/test_util.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/train/model_file.h"
#include "tpugraphs/train/trainer.h"
#include "train_test_util.h"

namespace tpugraphs::train {
namespace {

using ::tpugraphs::testing::TempDir;

TEST(InitFromTest, StartsFromTheFilesParametersArchitectureAndTransform) {
  TempDir dir;
  const std::string first = dir.File("first.tpug"), second = dir.File("second.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(first, TaskKind::kLayout, 5, 2).ok());
  ASSERT_TRUE(testing::WriteSyntheticDataset(second, TaskKind::kLayout, 4, 2, 24, 30).ok());
  TrainConfig base = testing::SmallTrainConfig(first, dir.File("base.tpm"));
  base.mutable_model()->set_hidden_dim(12);
  ASSERT_TRUE(Train(base).ok());
  auto base_file = ReadModelFile(base.output());
  ASSERT_TRUE(base_file.ok());

  // A step so small that the parameters cannot move: the fine-tuned model is the base model.
  TrainConfig tune = testing::SmallTrainConfig(second, dir.File("tuned.tpm"));
  tune.set_init_from(base.output());
  tune.mutable_model()->set_hidden_dim(99);  // replaced by the file's architecture
  tune.set_learning_rate(1e-30);
  tune.set_warmup_steps(0);
  tune.set_weight_decay(0);
  tune.set_epochs(1);
  auto r = Train(tune);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto tuned = ReadModelFile(tune.output());
  ASSERT_TRUE(tuned.ok());
  EXPECT_EQ(tuned->model_spec().SerializeAsString(), base_file->model_spec().SerializeAsString());
  EXPECT_EQ(tuned->feature_transform().SerializeAsString(),
            base_file->feature_transform().SerializeAsString());
  EXPECT_EQ(tuned->parameters(), base_file->parameters());
  EXPECT_EQ(tuned->train_config().init_from(), base.output());

  // With a real step it trains on: the parameters move away from the base model's.
  tune.set_learning_rate(0.003);
  tune.set_epochs(3);
  tune.set_output(dir.File("tuned3.tpm"));
  ASSERT_TRUE(Train(tune).ok());
  auto moved = ReadModelFile(tune.output());
  ASSERT_TRUE(moved.ok());
  EXPECT_NE(moved->parameters(), base_file->parameters());
  EXPECT_EQ(moved->model_spec().hidden_dim(), 12);

  // The same run from a fresh initialisation differs from the fine-tuned one.
  TrainConfig fresh = tune;
  fresh.clear_init_from();
  fresh.mutable_model()->set_hidden_dim(12);
  fresh.set_output(dir.File("fresh.tpm"));
  ASSERT_TRUE(Train(fresh).ok());
  auto fresh_file = ReadModelFile(fresh.output());
  ASSERT_TRUE(fresh_file.ok());
  EXPECT_NE(fresh_file->parameters(), moved->parameters());
}

TEST(InitFromTest, AModelOfTheOtherTaskOrAnEnsembleIsAClearError) {
  TempDir dir;
  const std::string layout = dir.File("layout.tpug"), tile = dir.File("tile.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(layout, TaskKind::kLayout, 4, 1).ok());
  ASSERT_TRUE(testing::WriteSyntheticDataset(tile, TaskKind::kTile, 4, 1).ok());
  TrainConfig t = testing::SmallTrainConfig(tile, dir.File("tile.tpm"));
  ASSERT_TRUE(Train(t).ok());
  TrainConfig c = testing::SmallTrainConfig(layout, dir.File("out.tpm"));
  c.set_init_from(t.output());
  auto r = Train(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tile.tpm: --init-from is a tile model"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(c.output()));

  TrainConfig e = testing::SmallTrainConfig(layout, dir.File("ens.tpm"));
  e.set_ensemble_members(2);
  ASSERT_TRUE(Train(e).ok());
  c.set_init_from(e.output());
  r = Train(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is an ensemble of 2 models: fine-tune it with "
                                      "--ensemble-members 2"),
            std::string::npos)
      << r.status().message();

  c.set_init_from(dir.File("missing.tpm"));
  r = Train(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing.tpm"), std::string::npos) << r.status().message();
}

TEST(InitFromTest, AnEnsembleFineTunesEachMemberFromItsOwn) {
  TempDir dir;
  const std::string first = dir.File("first.tpug"), second = dir.File("second.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(first, TaskKind::kLayout, 5, 2).ok());
  ASSERT_TRUE(testing::WriteSyntheticDataset(second, TaskKind::kLayout, 4, 2, 24, 30).ok());
  TrainConfig base = testing::SmallTrainConfig(first, dir.File("base.tpm"));
  base.set_ensemble_members(2);
  ASSERT_TRUE(Train(base).ok());
  auto base_file = ReadModelFile(base.output());
  ASSERT_TRUE(base_file.ok());
  ASSERT_EQ(base_file->ensemble_size(), 1);
  ASSERT_NE(base_file->parameters(), base_file->ensemble(0).parameters());

  // A vanishing step: each member of the result is the file's member of the same number.
  TrainConfig tune = testing::SmallTrainConfig(second, dir.File("tuned.tpm"));
  tune.set_init_from(base.output());
  tune.set_ensemble_members(2);
  tune.set_learning_rate(1e-30);
  tune.set_warmup_steps(0);
  tune.set_weight_decay(0);
  tune.set_epochs(1);
  auto r = Train(tune);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto tuned = ReadModelFile(tune.output());
  ASSERT_TRUE(tuned.ok());
  ASSERT_EQ(tuned->ensemble_size(), 1);
  EXPECT_EQ(tuned->parameters(), base_file->parameters());
  EXPECT_EQ(tuned->ensemble(0).parameters(), base_file->ensemble(0).parameters());
  EXPECT_EQ(tuned->ensemble(0).feature_transform().SerializeAsString(),
            base_file->ensemble(0).feature_transform().SerializeAsString());

  // A real step moves both members.
  tune.set_learning_rate(0.003);
  tune.set_epochs(2);
  tune.set_output(dir.File("tuned2.tpm"));
  ASSERT_TRUE(Train(tune).ok());
  auto moved = ReadModelFile(tune.output());
  ASSERT_TRUE(moved.ok());
  EXPECT_NE(moved->parameters(), base_file->parameters());
  EXPECT_NE(moved->ensemble(0).parameters(), base_file->ensemble(0).parameters());
}

}  // namespace
}  // namespace tpugraphs::train
