// Every recipe under tools/configs/ parses with the trainer's own loader and passes its
// validation, as `tpugraphs train --config FILE --dataset D --output M` would see it. The files
// are found by listing the directory, so a new recipe is covered without editing this test.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tpugraphs/train/train_config.h"

namespace tpugraphs::train {
namespace {

std::vector<std::string> RecipeFiles() {
  std::vector<std::string> files;
  const std::filesystem::path dir = ::tpugraphs::testing::SourcePath("tools/configs");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".textproto") {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(RecipeFilesTest, EveryRecipeParsesAndValidates) {
  const std::vector<std::string> files = RecipeFiles();
  // The recipes the scripts and docs name must be among them.
  for (const char* name : {"tile.textproto", "layout.textproto", "layout-large.textproto",
                           "layout-collection.textproto"}) {
    EXPECT_TRUE(std::any_of(
        files.begin(), files.end(),
        [&](const std::string& f) { return std::filesystem::path(f).filename() == name; }))
        << name << " not found in tools/configs/";
  }
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    StatusOr<TrainConfig> config = ReadTrainConfigFile(file);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    // What the command line adds to a recipe: the dataset and the model path.
    EXPECT_TRUE(config->dataset().empty()) << "a recipe names no dataset";
    config->set_dataset("data.tpug");
    config->set_output("model.tpm");
    Status valid = ValidateTrainConfig(*config);
    EXPECT_TRUE(valid.ok()) << valid.ToString();
  }
}

// The collection recipe is the layout recipe with the loss and the splits of its header and
// nothing else: an edit to one of the two that the other misses fails here (and the frontier's
// lines of `layout.textproto --mse-weight 0.1 --train-split train,valid --carve-valid-fraction 0`
// stay the collection recipe's figures).
TEST(RecipeFilesTest, TheCollectionRecipeIsTheLayoutRecipeWithItsTwoChanges) {
  StatusOr<TrainConfig> layout =
      ReadTrainConfigFile(::tpugraphs::testing::SourcePath("tools/configs/layout.textproto"));
  StatusOr<TrainConfig> collection = ReadTrainConfigFile(
      ::tpugraphs::testing::SourcePath("tools/configs/layout-collection.textproto"));
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_TRUE(collection.ok()) << collection.status().ToString();
  EXPECT_NE(layout->DebugString(), collection->DebugString());
  layout->mutable_loss()->set_mse_weight(0.1f);
  layout->set_train_split("train,valid");
  layout->set_carve_valid_fraction(0);
  EXPECT_EQ(layout->DebugString(), collection->DebugString());
}

// The loader rejects what broke the tile recipe once (a block repeated after a half-edited
// comment), naming the file and the line: the check above can fail.
TEST(RecipeFilesTest, ABrokenRecipeIsRejectedWithItsLine) {
  ::tpugraphs::testing::TempDir dir;
  const std::string path = dir.File("broken.textproto");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("epochs: 2\nmodel {\n  tile_join: TILE_JOIN_EARLY\n}: the 24 config features\n", f);
    std::fclose(f);
  }
  StatusOr<TrainConfig> config = ReadTrainConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find(path), std::string::npos) << config.status().ToString();
  EXPECT_NE(config.status().message().find("line 4"), std::string::npos)
      << config.status().ToString();
}

}  // namespace
}  // namespace tpugraphs::train
