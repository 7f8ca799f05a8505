// Bad raw dumps: each gives a clear error naming the file, never a crash. The bad inputs are
// made from the real dumps through the protobuf API or by cutting bytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "ingest/raw_test_util.h"
#include "tpugraphs/ingest/raw_dump.h"

namespace tpugraphs::ingest {
namespace {

using ::testing::HasSubstr;

class RawErrors : public ::testing::Test {
 protected:
  // Writes `bytes` to a temp file, loads it and returns the error message (fails if it loads).
  std::string LoadError(const std::string& bytes, StatusCode expected_code) {
    const std::string path = dir_.File("bad.pb");
    testing::WriteBytes(path, bytes);
    auto graphs = LoadRawDump(path, {});
    EXPECT_FALSE(graphs.ok());
    if (graphs.ok()) return "";
    EXPECT_EQ(graphs.status().code(), expected_code) << graphs.status().ToString();
    EXPECT_THAT(graphs.status().message(), HasSubstr(path));
    return graphs.status().message();
  }

  tpugraphs::testing::TempDir dir_;
};

TEST_F(RawErrors, TruncatedProtobuf) {
  const std::string bytes = testing::ReadBytes(testing::LayoutDumpPath());
  for (size_t keep : {bytes.size() - 1, bytes.size() / 2, size_t{7}}) {
    EXPECT_THAT(LoadError(bytes.substr(0, keep), StatusCode::kInvalidArgument),
                HasSubstr("not a raw XLA dump"));
  }
  const std::string tile = testing::ReadBytes(testing::TileDumpPath());
  EXPECT_THAT(LoadError(tile.substr(0, tile.size() - 100), StatusCode::kInvalidArgument),
              HasSubstr("truncated"));
}

TEST_F(RawErrors, AnotherKindOfFile) {
  EXPECT_THAT(LoadError("This is a text file.\nNot a protobuf.\n", StatusCode::kInvalidArgument),
              HasSubstr("not a raw XLA dump"));
  std::string random(4096, '\0');
  uint64_t x = 88172645463325252ull;
  for (char& c : random) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  EXPECT_THAT(LoadError(random, StatusCode::kInvalidArgument), HasSubstr("not a raw XLA dump"));
  EXPECT_THAT(LoadError("", StatusCode::kInvalidArgument), HasSubstr("not a raw XLA dump"));
}

TEST_F(RawErrors, MissingFile) {
  auto graphs = LoadRawDump(dir_.File("nope.pb"), {});
  ASSERT_FALSE(graphs.ok());
  EXPECT_THAT(graphs.status().message(), HasSubstr("nope.pb"));
}

TEST_F(RawErrors, ConfigIndexToNodeOutOfRange) {
  auto m = testing::ParseLayoutDump();
  m.set_config_index_to_node(5, 3163);
  EXPECT_THAT(LoadError(m.SerializeAsString(), StatusCode::kOutOfRange),
              HasSubstr("config_index_to_node[5] = 3163"));
}

TEST_F(RawErrors, LayoutConfigWithFourTensors) {
  auto m = testing::ParseLayoutDump();
  auto* node =
      m.mutable_runs(0)->mutable_module_config()->mutable_layout_config()->mutable_nodes(7);
  while (node->tensors_size() < 4) node->add_tensors()->add_dims(0);
  EXPECT_THAT(LoadError(m.SerializeAsString(), StatusCode::kInvalidArgument),
              HasSubstr("4 tensors"));
}

TEST_F(RawErrors, LayoutValueDoesNotFitAByte) {
  auto m = testing::ParseLayoutDump();
  bool changed = false;
  for (auto& node :
       *m.mutable_runs(3)->mutable_module_config()->mutable_layout_config()->mutable_nodes()) {
    for (auto& tensor : *node.mutable_tensors()) {
      if (!changed && tensor.dims_size() > 0) {
        tensor.set_dims(0, 300);
        changed = true;
      }
    }
  }
  ASSERT_TRUE(changed);
  EXPECT_THAT(LoadError(m.SerializeAsString(), StatusCode::kInvalidArgument), HasSubstr("300"));
}

TEST_F(RawErrors, UnknownOperandId) {
  auto m = testing::ParseLayoutDump();
  m.mutable_module()->mutable_computations(10)->mutable_instructions(2)->add_operand_ids(999999);
  EXPECT_THAT(LoadError(m.SerializeAsString(), StatusCode::kInvalidArgument),
              HasSubstr("operand id 999999"));
}

TEST_F(RawErrors, UnknownCalledComputationId) {
  auto m = testing::ParseLayoutDump();
  m.mutable_module()->mutable_computations(10)->mutable_instructions(2)->add_called_computation_ids(
      777777);
  EXPECT_THAT(LoadError(m.SerializeAsString(), StatusCode::kInvalidArgument),
              HasSubstr("computation id 777777"));
}

TEST_F(RawErrors, DuplicateEdgeFromCallingTheSameComputationTwice) {
  auto m = testing::ParseLayoutDump();
  auto* module = m.mutable_module();
  // Find an instruction that calls a computation and make it call that computation again.
  for (auto& comp : *module->mutable_computations()) {
    for (auto& inst : *comp.mutable_instructions()) {
      if (inst.called_computation_ids_size() == 1) {
        inst.add_called_computation_ids(inst.called_computation_ids(0));
        EXPECT_THAT(LoadError(m.SerializeAsString(), StatusCode::kInvalidArgument),
                    HasSubstr("duplicate edge"));
        return;
      }
    }
  }
  FAIL() << "no calling instruction found";
}

TEST_F(RawErrors, NodeCountDiffersFromConfigIndexToNode) {
  auto m = testing::ParseLayoutDump();
  m.mutable_runs(0)
      ->mutable_module_config()
      ->mutable_layout_config()
      ->mutable_nodes()
      ->RemoveLast();
  EXPECT_THAT(LoadError(m.SerializeAsString(), StatusCode::kInvalidArgument),
              HasSubstr("configures 61 nodes but config_index_to_node lists 62"));
}

TEST_F(RawErrors, ValidLayoutRunWithoutPositiveRuntime) {
  auto m = testing::ParseLayoutDump();
  m.mutable_runs(4)->mutable_profile()->set_compute_time_ns(0);
  ASSERT_FALSE(m.runs(4).error());
  EXPECT_THAT(LoadError(m.SerializeAsString(), StatusCode::kInvalidArgument),
              HasSubstr("compute_time_ns = 0"));
}

TEST_F(RawErrors, TileKernelWithoutValidDefault) {
  auto t = testing::ParseTileDump();
  for (auto& run : *t.mutable_modules(3)->mutable_runs()) run.set_is_default(false);
  EXPECT_THAT(LoadError(t.SerializeAsString(), StatusCode::kInvalidArgument),
              HasSubstr("fusion.209"));
}

TEST_F(RawErrors, CorruptedGzip) {
  // A gzip header followed by garbage.
  std::string bytes = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage-garbage";
  EXPECT_EQ(LoadError(bytes, StatusCode::kDataLoss).empty(), false);
}

}  // namespace
}  // namespace tpugraphs::ingest
