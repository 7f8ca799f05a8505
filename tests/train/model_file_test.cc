#include "tpugraphs/train/model_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/io/record_format.h"
#include "train_test_util.h"

namespace tpugraphs::train {
namespace {

using ::tpugraphs::train::testing::SyntheticGraph;

std::unique_ptr<model::CostModel> SmallModel(TaskKind task) {
  ModelSpec spec;
  spec.set_hidden_dim(8);
  spec.set_num_layers(2);
  spec.set_opcode_embedding_dim(4);
  spec.set_head_hidden_dim(8);
  auto m = model::CostModel::Create(spec, task);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  for (int i = 0; i < 3; ++i) {
    (*m)->transform().Accumulate(
        SyntheticGraph(task, std::string("fit").append(std::to_string(i)), "train", 12, 8, i));
  }
  EXPECT_TRUE((*m)->transform().Finalize().ok());
  (*m)->InitParameters(42);
  return std::move(m).value();
}

ModelFile MakeFile(const model::CostModel& m) {
  ModelFile f;
  StoreModel(m, &f);
  f.mutable_train_config()->set_seed(42);
  f.mutable_train_config()->set_epochs(3);
  f.mutable_data()->set_collection("tile:synth");
  EXPECT_TRUE(AddSelfTests(m, 2, 7, &f).ok());
  return f;
}

std::string WriteBytes(const ::tpugraphs::testing::TempDir& dir, const std::string& bytes) {
  std::string path = dir.File("m.tpm");
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

class ModelFileTest : public ::testing::TestWithParam<TaskKind> {};

TEST_P(ModelFileTest, RoundTripGivesTheSameScores) {
  auto m = SmallModel(GetParam());
  ModelFile f = MakeFile(*m);
  ASSERT_EQ(f.self_test_size(), 2);
  ::tpugraphs::testing::TempDir dir;
  const std::string path = dir.File("model.tpm");
  ASSERT_TRUE(WriteModelFile(path, f, kFileKindModel).ok());
  auto loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->file.train_config().seed(), 42);
  EXPECT_EQ(loaded->file.task(), std::string(TaskKindName(GetParam())));
  ASSERT_EQ(loaded->model->num_parameters(), m->num_parameters());
  for (int64_t i = 0; i < m->num_parameters(); ++i) {
    ASSERT_EQ(loaded->model->parameters()[i], m->parameters()[i]) << i;
  }
  // Scores of an unseen graph agree exactly.
  Graph g = SyntheticGraph(GetParam(), "probe", "valid", 14, 5, 99);
  model::ConfigBatch batch;
  batch.num_configs = 5;
  batch.tile_feat = g.config_feat;
  batch.layout_feat = g.node_config_feat;
  auto pa = m->Prepare(g);
  auto pb = loaded->model->Prepare(g);
  ASSERT_TRUE(pa.ok() && pb.ok());
  std::vector<float> sa(5), sb(5);
  m->Forward(**pa, batch, sa.data(), nullptr);
  loaded->model->Forward(**pb, batch, sb.data(), nullptr);
  EXPECT_EQ(sa, sb);
  // Encoding is deterministic.
  EXPECT_EQ(EncodeModelFile(f, kFileKindModel), EncodeModelFile(f, kFileKindModel));
}

INSTANTIATE_TEST_SUITE_P(Tasks, ModelFileTest,
                         ::testing::Values(TaskKind::kTile, TaskKind::kLayout),
                         [](const auto& info) { return std::string(TaskKindName(info.param)); });

TEST(ModelFileHistoryTest, FilesWithoutHistoryStillLoadAndHistoryRoundTrips) {
  auto m = SmallModel(TaskKind::kLayout);
  ModelFile f = MakeFile(*m);
  // A summary as files had before the per-epoch history existed.
  TrainingSummary* s = f.mutable_summary();
  s->set_epochs_run(2);
  s->set_best_epoch(1);
  s->set_metric_name("valid_kendall");
  s->set_best_metric(0.5);
  s->add_epoch_metric(0.5);
  s->add_epoch_metric(0.25);
  ::tpugraphs::testing::TempDir dir;
  const std::string old_path = dir.File("old.tpm");
  ASSERT_TRUE(WriteModelFile(old_path, f, kFileKindModel).ok());
  auto old_model = LoadModel(old_path);
  ASSERT_TRUE(old_model.ok()) << old_model.status().ToString();
  EXPECT_EQ(old_model->file.summary().history_size(), 0);
  EXPECT_EQ(old_model->file.summary().epoch_metric_size(), 2);

  for (int e = 1; e <= 2; ++e) {
    EpochRecord* r = s->add_history();
    r->set_epoch(e);
    r->set_train_loss(1.0 / e);
    r->set_valid_metric(s->epoch_metric(e - 1));
    r->set_learning_rate(1e-3);
    r->set_grad_norm(0.5 * e);
    r->set_wall_seconds(0.25);
  }
  const std::string new_path = dir.File("new.tpm");
  ASSERT_TRUE(WriteModelFile(new_path, f, kFileKindModel).ok());
  auto loaded = LoadModel(new_path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->file.summary().history_size(), 2);
  EXPECT_EQ(loaded->file.summary().history(1).train_loss(), 0.5);
  EXPECT_EQ(loaded->file.summary().history(1).grad_norm(), 1.0);
  // The history is a new field: the parameters are unchanged and the payload only grew.
  EXPECT_EQ(loaded->file.parameters(), old_model->file.parameters());
  EXPECT_GT(EncodeModelFile(loaded->file, kFileKindModel).size(),
            EncodeModelFile(old_model->file, kFileKindModel).size());
}

TEST(ModelFileErrorsTest, RejectsDamagedFiles) {
  auto m = SmallModel(TaskKind::kTile);
  const std::string good = EncodeModelFile(MakeFile(*m), kFileKindModel);
  ::tpugraphs::testing::TempDir dir;
  auto load_error = [&](const std::string& bytes) {
    auto r = LoadModel(WriteBytes(dir, bytes));
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_TRUE(LoadModel(WriteBytes(dir, good)).ok());

  std::string bad = good;
  bad[0] = 'X';
  EXPECT_NE(load_error(bad).find("bad magic"), std::string::npos);

  // A newer format version (header CRC recomputed so that only the version is "wrong").
  bad = good;
  io::PutU32(bad.data() + 8, kModelFormatVersion + 1);
  io::PutU32(bad.data() + 28, io::Crc32(std::string_view(bad.data(), 28)));
  EXPECT_NE(load_error(bad).find("newer than supported"), std::string::npos);

  // Truncated: inside the payload and inside the header.
  EXPECT_NE(load_error(good.substr(0, good.size() - 10)).find("truncated"), std::string::npos);
  EXPECT_NE(load_error(good.substr(0, 20)).find("truncated"), std::string::npos);

  // A flipped byte in the payload, and one in the header.
  bad = good;
  bad[good.size() / 2] ^= 0x20;
  EXPECT_NE(load_error(bad).find("CRC"), std::string::npos);
  bad = good;
  bad[17] ^= 0x01;
  EXPECT_NE(load_error(bad).find("CRC"), std::string::npos);

  // A checkpoint is not accepted where a model is required, and a dataset is no model.
  const std::string ckpt = EncodeModelFile(MakeFile(*m), kFileKindCheckpoint);
  auto r = DecodeModelFile(ckpt, "x.ckpt", kFileKindModel);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("checkpoint"), std::string::npos);
  std::string dataset_header = io::EncodeFileHeader(io::kFormatVersion, io::kFileKindDataset);
  dataset_header += std::string(100, '\0');
  EXPECT_NE(load_error(dataset_header).find("dataset"), std::string::npos);
}

TEST(ModelFileErrorsTest, SelfTestMismatchIsReported) {
  auto m = SmallModel(TaskKind::kLayout);
  ModelFile f = MakeFile(*m);
  f.mutable_self_test(1)->set_expected_scores(2, f.self_test(1).expected_scores(2) + 0.5f);
  ::tpugraphs::testing::TempDir dir;
  auto r = LoadModel(WriteBytes(dir, EncodeModelFile(f, kFileKindModel)));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("self-test sample 1: config 2"), std::string::npos)
      << r.status().message();

  // Parameters that do not fit the spec.
  f = MakeFile(*m);
  f.set_parameters(f.parameters().substr(4));
  r = LoadModel(WriteBytes(dir, EncodeModelFile(f, kFileKindModel)));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("float32 values"), std::string::npos) << r.status().message();

  // An unknown task.
  f = MakeFile(*m);
  f.set_task("graph");
  r = LoadModel(WriteBytes(dir, EncodeModelFile(f, kFileKindModel)));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown task"), std::string::npos);
}

TEST(ModelFileErrorsTest, MissingFileNamesThePath) {
  auto r = LoadModel("/nonexistent/dir/model.tpm");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/dir/model.tpm"), std::string::npos);
}

}  // namespace
}  // namespace tpugraphs::train
