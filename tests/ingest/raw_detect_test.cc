// Kind detection from content, compression, and graph-only inputs.
#include <gtest/gtest.h>
#include <zlib.h>

#include "ingest/raw_test_util.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::ingest {
namespace {

// Compresses with zlib (window_bits 15) or gzip (15 + 16).
std::string Compress(const std::string& in, int window_bits) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, in.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

class RawDetect : public ::testing::Test {
 protected:
  StatusOr<std::vector<Graph>> LoadBytes(const std::string& name, const std::string& bytes) {
    testing::WriteBytes(dir_.File(name), bytes);
    return LoadRawDump(dir_.File(name), {});
  }
  tpugraphs::testing::TempDir dir_;
};

TEST_F(RawDetect, GzipAndZlibCompressedDumps) {
  const std::string layout = testing::ReadBytes(testing::LayoutDumpPath());
  const std::string tile = testing::ReadBytes(testing::TileDumpPath());
  auto reference = LoadRawDump(testing::LayoutDumpPath(), {});
  ASSERT_TRUE(reference.ok());
  for (int bits : {15, 15 + 16}) {
    SCOPED_TRACE(bits);
    auto graphs = LoadBytes("layout.pb", Compress(layout, bits));
    ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
    ASSERT_EQ(graphs->size(), 1u);
    EXPECT_EQ((*graphs)[0].node_feat, (*reference)[0].node_feat);
    EXPECT_EQ((*graphs)[0].edge_index, (*reference)[0].edge_index);
    EXPECT_EQ((*graphs)[0].node_config_feat, (*reference)[0].node_config_feat);
    auto tiles = LoadBytes("tile.pb.gz", Compress(tile, bits));
    ASSERT_TRUE(tiles.ok()) << tiles.status().ToString();
    EXPECT_EQ(tiles->size(), 15u);
  }
  // Concatenated gzip members (`cat a.gz b.gz`) inflate to the concatenated bytes.
  const size_t half = tile.size() / 2;
  auto tiles =
      LoadBytes("cat.gz", Compress(tile.substr(0, half), 31) + Compress(tile.substr(half), 31));
  ASSERT_TRUE(tiles.ok()) << tiles.status().ToString();
  EXPECT_EQ(tiles->size(), 15u);
}

TEST_F(RawDetect, DecompressionIsCapped) {
  // 2 MiB of zeros deflate to a few KiB; with a 1 MiB cap inflating stops with a clear error.
  testing::WriteBytes(dir_.File("bomb.gz"), Compress(std::string(2 << 20, '\0'), 31));
  RawDumpOptions options;
  options.max_decompressed_bytes = 1 << 20;
  auto graphs = LoadRawDump(dir_.File("bomb.gz"), options);
  ASSERT_FALSE(graphs.ok());
  EXPECT_EQ(graphs.status().code(), StatusCode::kResourceExhausted) << graphs.status().ToString();
  EXPECT_NE(graphs.status().message().find("bomb.gz: decompressed data exceeds 1048576 bytes"),
            std::string::npos)
      << graphs.status().message();
  // The same file within the default cap inflates and is then rejected as no dump.
  graphs = LoadRawDump(dir_.File("bomb.gz"), {});
  ASSERT_FALSE(graphs.ok());
  EXPECT_EQ(graphs.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RawDetect, TruncatedGzipIsDataLoss) {
  const std::string gz = Compress(testing::ReadBytes(testing::TileDumpPath()), 31);
  auto graphs = LoadBytes("t.gz", gz.substr(0, gz.size() / 2));
  ASSERT_FALSE(graphs.ok());
  EXPECT_EQ(graphs.status().code(), StatusCode::kDataLoss) << graphs.status().ToString();
  EXPECT_NE(graphs.status().message().find("truncated"), std::string::npos);
}

TEST_F(RawDetect, BareHloModuleIsAGraphWithItsStatedLayoutAsTheOnlyConfig) {
  auto m = testing::ParseLayoutDump();
  const std::string bytes = m.module().SerializeAsString();
  auto kind = DetectRawDumpKind(bytes, "m.pb");
  ASSERT_TRUE(kind.ok()) << kind.status().ToString();
  EXPECT_EQ(*kind, RawDumpKind::kHloModule);
  auto graphs = LoadBytes("unet.pb", bytes);
  ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
  const Graph& g = (*graphs)[0];
  EXPECT_EQ(g.name, "unet");
  EXPECT_EQ(g.num_nodes(), 3163);
  EXPECT_EQ(g.num_edges(), 5112);
  EXPECT_EQ(g.num_configs, 1);
  EXPECT_EQ(g.config_runtime, std::vector<int64_t>{0});
  EXPECT_EQ(g.node_config_ids,
            std::vector<int64_t>(m.config_index_to_node().begin(), m.config_index_to_node().end()));
  EXPECT_EQ(g.node_splits.size(), 8u);
}

TEST_F(RawDetect, HloProtoWrapperWithBufferAssignment) {
  auto m = testing::ParseLayoutDump();
  xla::HloProto proto;
  *proto.mutable_hlo_module() = m.module();
  std::string bytes = proto.SerializeAsString();
  // Field 3 (buffer_assignment, not in our subset): a message with a logical buffer
  // {id: 1, size: 64} and a buffer allocation {index: 0, size: 64}.
  const std::string logical_buffer = std::string("\x08\x01\x10\x40", 4);
  const std::string allocation = std::string("\x08\x00\x10\x40", 4);
  std::string assignment = "\x0a" + std::string(1, static_cast<char>(logical_buffer.size())) +
                           logical_buffer + "\x1a" +
                           std::string(1, static_cast<char>(allocation.size())) + allocation;
  bytes += "\x1a" + std::string(1, static_cast<char>(assignment.size())) + assignment;
  auto kind = DetectRawDumpKind(bytes, "p.pb");
  ASSERT_TRUE(kind.ok()) << kind.status().ToString();
  EXPECT_EQ(*kind, RawDumpKind::kHloProto);
  auto graphs = LoadBytes("p.pb", bytes);
  ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
  EXPECT_EQ((*graphs)[0].num_nodes(), 3163);
  EXPECT_EQ((*graphs)[0].num_configs, 1);
  EXPECT_EQ((*graphs)[0].num_config_nodes(), 62);
}

TEST_F(RawDetect, UnknownFieldsFromNewerXlaAreSkipped) {
  auto m = testing::ParseLayoutDump();
  // Append unknown fields (numbers 90+, as newer XLA adds) to an instruction and the module.
  auto* inst = m.mutable_module()->mutable_computations(0)->mutable_instructions(0);
  inst->GetReflection()->MutableUnknownFields(inst)->AddVarint(91, 7);
  inst->GetReflection()->MutableUnknownFields(inst)->AddLengthDelimited(95, "metadata");
  auto* module = m.mutable_module();
  module->GetReflection()->MutableUnknownFields(module)->AddLengthDelimited(99, "x");
  auto graphs = LoadBytes("new.pb", m.SerializeAsString());
  ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
  auto reference = LoadRawDump(testing::LayoutDumpPath(), {});
  ASSERT_TRUE(reference.ok());
  EXPECT_EQ((*graphs)[0].node_feat, (*reference)[0].node_feat);
  EXPECT_EQ((*graphs)[0].num_configs, 112);
}

TEST_F(RawDetect, RunsWithFieldsFromANewerTuningProtoStayLayoutRuns) {
  auto m = testing::ParseLayoutDump();
  for (auto& run : *m.mutable_runs()) {
    run.GetReflection()->MutableUnknownFields(&run)->AddVarint(17, 1);
  }
  const std::string bytes = m.SerializeAsString();
  auto kind = DetectRawDumpKind(bytes, "n.pb");
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(*kind, RawDumpKind::kModuleTuningData);
  auto graphs = LoadBytes("n.pb", bytes);
  ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
  EXPECT_EQ((*graphs)[0].num_configs, 112);
}

TEST_F(RawDetect, LayoutWithoutValidDefaultKeepsTheGraphWithZeroConfigs) {
  auto m = testing::ParseLayoutDump();
  for (auto& run : *m.mutable_runs()) run.set_is_default(false);
  auto graphs = LoadBytes("nodefault.pb", m.SerializeAsString());
  ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
  EXPECT_EQ((*graphs)[0].num_configs, 0);
  EXPECT_TRUE((*graphs)[0].node_config_feat.empty());
  EXPECT_EQ((*graphs)[0].num_config_nodes(), 62);
}

TEST_F(RawDetect, CollectionMustMatchTheDump) {
  RawDumpOptions options;
  options.collection = "layout:nlp:random";
  options.name = "bert";
  testing::WriteBytes(dir_.File("a.pb"), testing::ReadBytes(testing::LayoutDumpPath()));
  auto graphs = LoadRawDump(dir_.File("a.pb"), options);
  ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
  EXPECT_EQ((*graphs)[0].collection, "layout:nlp:random");
  EXPECT_EQ((*graphs)[0].name, "bert");
  options.collection = "tile:xla";
  graphs = LoadRawDump(dir_.File("a.pb"), options);
  ASSERT_FALSE(graphs.ok());
  EXPECT_NE(graphs.status().message().find("a.pb: a layout dump"), std::string::npos)
      << graphs.status().message();
  options.collection = "no such collection";
  EXPECT_FALSE(LoadRawDump(dir_.File("a.pb"), options).ok());
}

}  // namespace
}  // namespace tpugraphs::ingest
