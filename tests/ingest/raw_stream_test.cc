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

using testing::ExpectSameGraph;
using testing::PutBytesField;
using testing::PutVarint;

Graph WholeMessageGraph(const std::string& path, const std::string& name) {
  RawDumpOptions options;
  options.name = name;
  options.stream_layout_runs = false;
  auto graphs = LoadRawDump(path, options);
  EXPECT_TRUE(graphs.ok()) << graphs.status().ToString();
  if (!graphs.ok() || graphs->size() != 1) return Graph();
  return std::move((*graphs)[0]);
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

namespace tpugraphs::ingest {
namespace {

// Loads `bytes` with the runs streamed and with the whole-message parse and expects the same
// outcome: the same graph, or the same error. Returns whether the dump was accepted.
bool ExpectWholeMessageOutcome(const std::string& name, const std::string& bytes) {
  SCOPED_TRACE(name);
  tpugraphs::testing::TempDir dir;
  const std::string path = dir.File("v.pb");
  testing::WriteBytes(path, bytes);
  RawDumpOptions whole_options;
  whole_options.stream_layout_runs = false;
  auto whole = LoadRawDump(path, whole_options);
  auto streamed = LoadRawDump(path, {});
  EXPECT_EQ(whole.ok(), streamed.ok()) << (whole.ok() ? streamed : whole).status().ToString();
  if (!whole.ok() || !streamed.ok()) {
    EXPECT_EQ(whole.status().ToString(), streamed.status().ToString());
    return false;
  }
  EXPECT_EQ(whole->size(), 1u);
  EXPECT_EQ(streamed->size(), 1u);
  if (whole->size() == 1 && streamed->size() == 1) ExpectSameGraph((*streamed)[0], (*whole)[0]);
  return true;
}

// A run's wire bytes with every TensorLayoutConfig.dims written unpacked (one varint field per
// value, which parsers must accept as well as the packed form protobuf writes).
std::string RunWithUnpackedDims(const tpu_graphs::ConfigProfile& run) {
  std::string layout;
  for (const auto& node : run.module_config().layout_config().nodes()) {
    std::string node_bytes;
    for (const auto& tensor : node.tensors()) {
      std::string tensor_bytes;
      for (int32_t d : tensor.dims()) {
        PutVarint((1 << 3) | 0, &tensor_bytes);
        PutVarint(static_cast<uint64_t>(static_cast<int64_t>(d)), &tensor_bytes);
      }
      PutBytesField(1, tensor_bytes, &node_bytes);
    }
    PutBytesField(1, node_bytes, &layout);
  }
  std::string module_config, out;
  PutBytesField(1, layout, &module_config);
  PutBytesField(2, module_config, &out);
  PutBytesField(4, run.profile().SerializeAsString(), &out);
  PutVarint((5 << 3) | 0, &out);
  PutVarint(run.is_default() ? 1 : 0, &out);
  return out;
}

// The streamed load (whose runs are decoded from the wire when their shape is plain) and the
// whole-message parse agree on every variant of the runs: the same graph, or the same error.
TEST(RawStream, RunVariantsGiveTheWholeMessageOutcome) {
  const tpu_graphs::ModuleTuningData mtd = testing::ParseLayoutDump();
  int valid = -1;
  for (int r = 0; r < mtd.runs_size() && valid < 0; ++r) {
    if (!mtd.runs(r).error() && mtd.runs(r).has_profile()) valid = r;
  }
  ASSERT_GE(valid, 0);
  // A tensor of that run with dims, to vary.
  int node_i = -1, tensor_i = -1;
  const auto& nodes = mtd.runs(valid).module_config().layout_config().nodes();
  for (int k = 0; k < nodes.size() && node_i < 0; ++k) {
    for (int t = 0; t < nodes.Get(k).tensors_size(); ++t) {
      if (nodes.Get(k).tensors(t).dims_size() > 0) {
        node_i = k;
        tensor_i = t;
        break;
      }
    }
  }
  ASSERT_GE(node_i, 0);
  auto first_tensor = [&](tpu_graphs::ModuleTuningData* m) {
    return m->mutable_runs(valid)
        ->mutable_module_config()
        ->mutable_layout_config()
        ->mutable_nodes(node_i)
        ->mutable_tensors(tensor_i);
  };
  std::vector<std::string> names, dumps;
  auto add = [&](const std::string& name, const std::string& bytes) {
    names.push_back(name);
    dumps.push_back(bytes);
  };
  add("as is", mtd.SerializeAsString());
  {
    // Replace run `valid` by its unpacked-dims encoding (runs are field 3 of the dump).
    tpu_graphs::ModuleTuningData rest = mtd;
    rest.clear_runs();
    std::string bytes = rest.SerializeAsString();
    for (int r = 0; r < mtd.runs_size(); ++r) {
      PutBytesField(3,
                    r == valid ? RunWithUnpackedDims(mtd.runs(r)) : mtd.runs(r).SerializeAsString(),
                    &bytes);
    }
    add("unpacked dims", bytes);
  }
  {
    tpu_graphs::ModuleTuningData m = mtd;
    first_tensor(&m)->add_dims(-1);
    for (int i = 0; i < 8; ++i) first_tensor(&m)->add_dims(i % 3);  // more than 6 dims
    add("negative and extra dims", m.SerializeAsString());
  }
  {
    tpu_graphs::ModuleTuningData m = mtd;
    first_tensor(&m)->set_dims(0, 200);  // does not fit int8
    add("dim out of range", m.SerializeAsString());
  }
  {
    tpu_graphs::ModuleTuningData m = mtd;
    auto* node =
        m.mutable_runs(valid)->mutable_module_config()->mutable_layout_config()->mutable_nodes(0);
    while (node->tensors_size() <= 3) node->add_tensors()->add_dims(1);
    add("four tensors", m.SerializeAsString());
  }
  {
    tpu_graphs::ModuleTuningData m = mtd;
    m.mutable_runs(valid)->set_error(true);
    m.mutable_runs(valid)->set_is_default(false);
    add("error run", m.SerializeAsString());
  }
  {
    tpu_graphs::ModuleTuningData m = mtd;
    m.mutable_runs(valid)->clear_profile();
    add("no profile", m.SerializeAsString());
  }
  {
    tpu_graphs::ModuleTuningData m = mtd;
    m.mutable_runs(valid)
        ->mutable_module_config()
        ->mutable_layout_config()
        ->mutable_nodes()
        ->RemoveLast();
    add("one node short", m.SerializeAsString());
  }
  {
    tpu_graphs::ModuleTuningData rest = mtd;
    rest.clear_runs();
    std::string bytes = rest.SerializeAsString();
    for (int r = 0; r < mtd.runs_size(); ++r) {
      std::string run = mtd.runs(r).SerializeAsString();
      if (r == valid) {
        PutVarint((9 << 3) | 0, &run);  // an unknown field
        PutVarint(7, &run);
      }
      PutBytesField(3, run, &bytes);
    }
    add("unknown field", bytes);
  }
  {
    // is_default = 1 with its tag spelled in 6 bytes, which protobuf refuses (it reads tags of
    // at most 5 bytes): the bytes are no ModuleTuningData to the whole-message parse (which
    // reads them as a graph-only module), so the run decoder must not take them either.
    tpu_graphs::ModuleTuningData rest = mtd;
    rest.clear_runs();
    std::string bytes = rest.SerializeAsString();
    for (int r = 0; r < mtd.runs_size(); ++r) {
      std::string run = mtd.runs(r).SerializeAsString();
      if (r == valid) run.append("\xa8\x80\x80\x80\x80\x00\x01", 7);
      PutBytesField(3, run, &bytes);
    }
    add("six-byte tag", bytes);
  }
  for (size_t v = 0; v < names.size(); ++v) ExpectWholeMessageOutcome(names[v], dumps[v]);
}

// Nesting close to protobuf's recursion limit (100 levels from the top-level message, so 99
// inside the module) and a top-level tag encoded in 6 bytes (protobuf reads at most 5): the
// streamed path must accept or refuse exactly what the whole-message path does.
TEST(RawStream, RecursionLimitAndLongTopLevelTagsGiveTheWholeMessageOutcome) {
  const tpu_graphs::ModuleTuningData mtd = testing::ParseLayoutDump();
  std::vector<std::pair<std::string, std::string>> cases;
  for (int depth = 94; depth <= 99; ++depth) {
    tpu_graphs::ModuleTuningData m = mtd;
    xla::ShapeProto* shape =
        m.mutable_module()->mutable_computations(0)->mutable_instructions(0)->mutable_shape();
    for (int d = 0; d < depth; ++d) shape = shape->add_tuple_shapes();
    shape->set_element_type(xla::F32);
    cases.emplace_back("depth " + std::to_string(depth), m.SerializeAsString());
  }
  std::string long_tag = mtd.SerializeAsString();
  long_tag.append("\x90\x80\x80\x80\x80\x00\x05", 7);  // fingerprint (2, varint): 6-byte tag
  cases.emplace_back("six-byte top-level tag", long_tag);
  int refused = 0;
  for (const auto& [name, bytes] : cases) refused += !ExpectWholeMessageOutcome(name, bytes);
  EXPECT_GT(refused, 0);  // the limit is inside the range
  EXPECT_LT(refused, static_cast<int>(cases.size()));
}

}  // namespace
}  // namespace tpugraphs::ingest
