// Streaming the runs of a layout dump gives exactly the graph of the whole-message parse,
// whatever the order of the top-level fields on the wire.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ingest/raw_test_util.h"
#include "testing/test_util.h"
#include "tpu_graphs/tuning.pb.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "tpugraphs/ingest/raw_dump_stream.h"

namespace tpugraphs::ingest {
namespace {

void ExpectSameGraph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.collection, b.collection);
  EXPECT_EQ(a.split, b.split);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.node_opcode, b.node_opcode);
  EXPECT_EQ(a.node_feat, b.node_feat);
  EXPECT_EQ(a.edge_index, b.edge_index);
  EXPECT_EQ(a.node_splits, b.node_splits);
  EXPECT_EQ(a.num_configs, b.num_configs);
  EXPECT_EQ(a.config_runtime, b.config_runtime);
  EXPECT_EQ(a.config_runtime_normalizers, b.config_runtime_normalizers);
  EXPECT_EQ(a.config_feat, b.config_feat);
  EXPECT_EQ(a.node_config_ids, b.node_config_ids);
  EXPECT_EQ(a.node_config_feat, b.node_config_feat);
}

Graph WholeMessageGraph(const std::string& path, const std::string& name) {
  RawDumpOptions options;
  options.name = name;
  options.stream_layout_runs = false;
  auto graphs = LoadRawDump(path, options);
  EXPECT_TRUE(graphs.ok()) << graphs.status().ToString();
  if (!graphs.ok() || graphs->size() != 1) return Graph();
  return std::move((*graphs)[0]);
}

// Appends a varint / a tag / a length-delimited field, as the wire format spells them.
void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void PutBytesField(int field, const std::string& bytes, std::string* out) {
  PutVarint((static_cast<uint64_t>(field) << 3) | 2, out);
  PutVarint(bytes.size(), out);
  out->append(bytes);
}

TEST(RawStream, RealDumpStreamsToTheWholeMessageGraph) {
  const std::string path = testing::LayoutDumpPath();
  const std::string bytes = testing::ReadBytes(path);
  auto streamed = TryStreamLayoutDump(bytes, path, {});
  ASSERT_TRUE(streamed.has_value()) << "the real layout dump must take the streaming path";
  ASSERT_EQ(streamed->size(), 1u);
  const Graph whole = WholeMessageGraph(path, "");
  ASSERT_GT(whole.num_configs, 0);
  EXPECT_GT((*streamed)[0].num_configs, 0);
  ExpectSameGraph((*streamed)[0], whole);

  auto loaded = LoadRawDump(path, {});  // default options stream
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->size(), 1u);
  ExpectSameGraph((*loaded)[0], whole);
}

TEST(RawStream, RunsBeforeModuleAndUnpackedConfigIndices) {
  const tpu_graphs::ModuleTuningData mtd = testing::ParseLayoutDump();
  ASSERT_GT(mtd.runs_size(), 1);
  ASSERT_GT(mtd.config_index_to_node_size(), 0);
  // Reversed field order: config_index_to_node unpacked and interleaved with the runs, then the
  // fingerprint, the module last and split in two occurrences (which merge).
  std::string bytes;
  for (int r = 0; r < mtd.runs_size(); ++r) {
    PutBytesField(3, mtd.runs(r).SerializeAsString(), &bytes);
    if (r < mtd.config_index_to_node_size()) {
      PutVarint((4 << 3) | 0, &bytes);
      PutVarint(mtd.config_index_to_node(r), &bytes);
    }
  }
  for (int i = mtd.runs_size(); i < mtd.config_index_to_node_size(); ++i) {
    PutVarint((4 << 3) | 0, &bytes);
    PutVarint(mtd.config_index_to_node(i), &bytes);
  }
  PutVarint((2 << 3) | 0, &bytes);
  PutVarint(mtd.fingerprint(), &bytes);
  xla::HloModuleProto head = mtd.module(), tail;
  ASSERT_GT(head.computations_size(), 1);
  *tail.add_computations() = head.computations(head.computations_size() - 1);
  head.mutable_computations()->RemoveLast();
  PutBytesField(1, head.SerializeAsString(), &bytes);
  PutBytesField(1, tail.SerializeAsString(), &bytes);

  // The reordered bytes are the same message to protobuf.
  tpu_graphs::ModuleTuningData reparsed;
  ASSERT_TRUE(reparsed.ParseFromString(bytes));
  EXPECT_EQ(reparsed.SerializeAsString(), mtd.SerializeAsString());

  tpugraphs::testing::TempDir dir;
  const std::string path = dir.File("reordered.pb");
  testing::WriteBytes(path, bytes);
  auto streamed = TryStreamLayoutDump(bytes, path, {});
  ASSERT_TRUE(streamed.has_value());
  ASSERT_EQ(streamed->size(), 1u);
  const Graph whole = WholeMessageGraph(path, "");
  ASSERT_GT(whole.num_configs, 0);
  ExpectSameGraph((*streamed)[0], whole);
  // And the same as the real dump in its own order (but for the name, the file stem).
  ExpectSameGraph((*streamed)[0], WholeMessageGraph(testing::LayoutDumpPath(), "reordered"));
}

TEST(RawStream, OtherKindsAreLeftToTheWholeMessagePath) {
  const std::string tile = testing::ReadBytes(testing::TileDumpPath());
  EXPECT_FALSE(TryStreamLayoutDump(tile, testing::TileDumpPath(), {}).has_value());
  const tpu_graphs::ModuleTuningData mtd = testing::ParseLayoutDump();
  const std::string module_only = mtd.module().SerializeAsString();
  EXPECT_FALSE(TryStreamLayoutDump(module_only, "m.pb", {}).has_value());
  // A run whose runtime is not positive is an error, worded by the whole-message path.
  tpu_graphs::ModuleTuningData bad = mtd;
  for (auto& run : *bad.mutable_runs()) {
    if (!run.error() && run.has_profile()) {
      run.mutable_profile()->set_compute_time_ns(0);
      break;
    }
  }
  const std::string bad_bytes = bad.SerializeAsString();
  EXPECT_FALSE(TryStreamLayoutDump(bad_bytes, "bad.pb", {}).has_value());
  tpugraphs::testing::TempDir dir;
  testing::WriteBytes(dir.File("bad.pb"), bad_bytes);
  auto loaded = LoadRawDump(dir.File("bad.pb"), {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().ToString().find("compute_time_ns = 0"), std::string::npos)
      << loaded.status().ToString();
}

}  // namespace
}  // namespace tpugraphs::ingest
