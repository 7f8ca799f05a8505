// `ingest --mark-absent-dimensions`: -1 in the slots beyond each rank-bearing list. Checked by
// hand on one instruction, and on the real dumps and HLO text of tests/data/real: the lengths
// derived from the official features (what a release .npz allows) give the same rows as the
// lengths read from the instructions.
#include "tpugraphs/ingest/absent_dimensions.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tpugraphs/ingest/hlo_graph.h"
#include "tpugraphs/ingest/ingest.h"
#include "tpugraphs/ingest/node_features.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "tpugraphs/ingest/release_npz.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs::ingest {
namespace {

using tpugraphs::testing::RealDataPath;

// f32[3,4]{1,0} with a 2-d window and one slice dimension: every kind of list, some empty.
xla::HloInstructionProto SampleInstruction() {
  xla::HloInstructionProto inst;
  inst.set_opcode("reduce-window");
  xla::ShapeProto* shape = inst.mutable_shape();
  shape->set_element_type(xla::F32);
  shape->add_dimensions(3);
  shape->add_dimensions(4);
  shape->mutable_layout()->add_minor_to_major(1);
  shape->mutable_layout()->add_minor_to_major(0);
  for (int i = 0; i < 2; ++i) {
    xla::WindowDimension* d = inst.mutable_window()->add_dimensions();
    d->set_size(2);
    d->set_stride(1);
  }
  xla::HloInstructionProto::SliceDimensions* s = inst.add_slice_dimensions();
  s->set_start(0);
  s->set_limit(3);
  s->set_stride(1);
  return inst;
}

TEST(AbsentDimensionsTest, MarksTheSlotsBeyondEachListByHand) {
  const xla::HloInstructionProto inst = SampleInstruction();
  std::vector<float> official(kNodeFeatureCount), marked;
  FeaturizeInstruction(inst, false, official.data());
  marked = official;
  const DimensionCounts c = CountsOfInstruction(inst);
  EXPECT_EQ(c.shape, 2);
  EXPECT_EQ(c.minor_to_major, 2);
  EXPECT_EQ(c.window, 2);
  EXPECT_EQ(c.input_spatial, 0);
  EXPECT_EQ(c.slice, 1);
  EXPECT_EQ(c.dynamic_slice, 0);
  MarkAbsentDimensions(c, marked.data());
  // shape dims 3, 4 then absent; sum and product as before.
  EXPECT_EQ(marked[21], 3.0f);
  EXPECT_EQ(marked[22], 4.0f);
  for (int i = 23; i <= 26; ++i) EXPECT_EQ(marked[i], -1.0f) << i;
  EXPECT_EQ(marked[27], 7.0f);
  EXPECT_EQ(marked[28], 12.0f);
  // minor_to_major {1, 0}: 0 is dimension 0 here, -1 beyond.
  EXPECT_EQ(marked[134], 1.0f);
  EXPECT_EQ(marked[135], 0.0f);
  for (int i = 136; i <= 139; ++i) EXPECT_EQ(marked[i], -1.0f) << i;
  // Window fields: two slots each, padding_low 0 is a real value.
  EXPECT_EQ(marked[37], 2.0f);
  EXPECT_EQ(marked[53], 0.0f);
  EXPECT_EQ(marked[54], 0.0f);
  EXPECT_EQ(marked[55], -1.0f);
  EXPECT_EQ(marked[85], 0.0f);  // reversal false, a real flag
  EXPECT_EQ(marked[87], -1.0f);
  EXPECT_EQ(marked[91], 0.0f);  // counts of true / false stay
  EXPECT_EQ(marked[92], 2.0f);
  // No convolution: every spatial slot absent; the scalars stay 0.
  for (int i = 95; i <= 98; ++i) EXPECT_EQ(marked[i], -1.0f) << i;
  for (int i = 101; i <= 104; ++i) EXPECT_EQ(marked[i], -1.0f) << i;
  EXPECT_EQ(marked[93], 0.0f);
  // One slice dimension starting at 0.
  EXPECT_EQ(marked[109], 0.0f);
  EXPECT_EQ(marked[110], -1.0f);
  EXPECT_EQ(marked[114], -1.0f);
  EXPECT_EQ(marked[117], 3.0f);
  EXPECT_EQ(marked[118], -1.0f);
  EXPECT_EQ(marked[121], -1.0f);
  EXPECT_EQ(marked[122], -1.0f);
  // Every other column is the official one; the changed ones are the documented columns.
  for (int j = 0; j < kNodeFeatureCount; ++j) {
    if (marked[j] != official[j]) {
      EXPECT_TRUE(IsAbsentDimensionColumn(j)) << j;
    }
    if (!IsAbsentDimensionColumn(j)) {
      EXPECT_EQ(marked[j], official[j]) << j;
    }
  }
  // inst.dimensions and padding_config are not rank-bearing lists here.
  EXPECT_FALSE(IsAbsentDimensionColumn(31));
  EXPECT_FALSE(IsAbsentDimensionColumn(125));
  EXPECT_FALSE(IsAbsentDimensionColumn(27));
  // The features tell the same lengths, before and after marking.
  EXPECT_EQ(CountsFromFeatures(official.data()), c);
  EXPECT_EQ(CountsFromFeatures(marked.data()), c);
}

TEST(AbsentDimensionsTest, AnArrayWithoutALayoutHasNoMinorToMajor) {
  xla::HloInstructionProto inst;
  inst.set_opcode("add");
  inst.mutable_shape()->set_element_type(xla::F32);
  for (int d : {5, 6, 7}) inst.mutable_shape()->add_dimensions(d);
  std::vector<float> row(kNodeFeatureCount);
  FeaturizeInstruction(inst, false, row.data());
  EXPECT_EQ(CountsOfInstruction(inst).minor_to_major, 0);
  EXPECT_EQ(CountsFromFeatures(row.data()).minor_to_major, 0);
  EXPECT_EQ(CountsFromFeatures(row.data()).shape, 3);
  // A tuple: no dims, no layout.
  xla::HloInstructionProto tuple;
  tuple.set_opcode("tuple");
  tuple.mutable_shape()->set_element_type(xla::TUPLE);
  FeaturizeInstruction(tuple, false, row.data());
  EXPECT_EQ(CountsFromFeatures(row.data()), DimensionCounts{});
  EXPECT_EQ(CountsOfInstruction(tuple), DimensionCounts{});
}

// The graph of `path` (a raw dump or HLO text) ingested both ways.
void LoadBothWays(const std::string& path, Graph* official, Graph* marked) {
  RawDumpOptions o;
  o.collection = "layout:xla:custom";
  auto a = LoadRawDump(path, o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  o.mark_absent_dimensions = true;
  auto b = LoadRawDump(path, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(a->size(), 1u);
  ASSERT_EQ(b->size(), 1u);
  *official = std::move((*a)[0]);
  *marked = std::move((*b)[0]);
}

TEST(AbsentDimensionsTest, DerivedFromTheOfficialFeaturesAsReadFromRealPrograms) {
  const std::vector<std::string> files = {
      "raw/module_tuning_data_layout.pb",
      "hlo_text/openxla_cpu_benchmark_graphsage_tf.hlo",
      "hlo_text/openxla_cpu_benchmark_ssd_mobilenet_tf.hlo",
      "hlo_text/openxla_mnist_training_loop.hlo",
      "hlo_text/pt_neuron_SyncTensorsGraph.21.hlo.txt",
      "hlo_text/pt_neuron_SyncTensorsGraph.316.hlo.txt",
  };
  int64_t nodes = 0, changed_slots = 0;
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    Graph official, marked;
    LoadBothWays(RealDataPath(f), &official, &marked);
    EXPECT_FALSE(official.absent_dimensions_marked);
    EXPECT_TRUE(marked.absent_dimensions_marked);
    ASSERT_EQ(official.node_feat.size(), marked.node_feat.size());
    EXPECT_EQ(official.node_opcode, marked.node_opcode);
    EXPECT_EQ(official.edge_index, marked.edge_index);
    Graph derived = official;
    DeriveAbsentDimensions(&derived);
    EXPECT_TRUE(derived.absent_dimensions_marked);
    int64_t mismatched_rows = 0;
    for (int64_t v = 0; v < official.num_nodes(); ++v) {
      const float* o = official.node_feat.data() + v * kNodeFeatureCount;
      const float* m = marked.node_feat.data() + v * kNodeFeatureCount;
      const float* d = derived.node_feat.data() + v * kNodeFeatureCount;
      bool same = true;
      for (int j = 0; j < kNodeFeatureCount; ++j) {
        same &= m[j] == d[j];
        if (!IsAbsentDimensionColumn(j)) {
          ASSERT_EQ(m[j], o[j]) << "node " << v << " column " << j;
        } else if (m[j] != o[j]) {
          ASSERT_EQ(o[j], 0.0f) << "node " << v << " column " << j;
          ASSERT_EQ(m[j], -1.0f) << "node " << v << " column " << j;
          ++changed_slots;
        }
      }
      mismatched_rows += same ? 0 : 1;
    }
    EXPECT_EQ(mismatched_rows, 0);
    nodes += official.num_nodes();
    // Deriving again changes nothing.
    Graph again = marked;
    again.absent_dimensions_marked = false;
    DeriveAbsentDimensions(&again);
    EXPECT_EQ(again.node_feat, marked.node_feat);
  }
  EXPECT_GT(nodes, 1000);
  EXPECT_GT(changed_slots, nodes);  // most nodes have slots beyond their rank
}

// The .npz ingest path (whole and streamed): the release's U-Net file with the option gives the
// official rows with the derived slots marked, and the dataset records it.
TEST(AbsentDimensionsTest, IngestMarksReleaseFilesWholeAndStreamed) {
  const std::string npz = RealDataPath("npz/release/layout/xla/default/valid/unet_3d.4x4.bf16.npz");
  auto loaded = LoadReleaseNpz(npz, "layout:xla:default", "valid", "unet");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  Graph expected = *loaded;
  DeriveAbsentDimensions(&expected);
  // An independent check of the shape dims: -1 exactly where the rank ends.
  for (int64_t v = 0; v < loaded->num_nodes(); ++v) {
    const float* o = loaded->node_feat.data() + v * kNodeFeatureCount;
    const float* e = expected.node_feat.data() + v * kNodeFeatureCount;
    int rank = 0;
    while (rank < 6 && o[21 + rank] >= 1) ++rank;
    for (int i = 0; i < 6; ++i) ASSERT_EQ(e[21 + i], i < rank ? o[21 + i] : -1.0f);
  }
  tpugraphs::testing::TempDir dir;
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "streamed" : "whole");
    IngestConfig c;
    c.add_inputs(npz);
    c.set_collection("layout:xla:default");
    c.set_output(dir.File(stream ? "s.tpug" : "w.tpug"));
    c.set_mark_absent_dimensions(true);
    if (stream) c.set_stream_threshold_values(1);
    auto summary = RunIngest(c);
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    auto reader = io::DatasetReader::Open(c.output());
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    auto g = (*reader)->ReadGraph(0, false);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_TRUE(g->absent_dimensions_marked);
    EXPECT_EQ(g->node_feat, expected.node_feat);
  }
  // Without the option the dataset holds the official features and says so.
  IngestConfig c;
  c.add_inputs(npz);
  c.set_collection("layout:xla:default");
  c.set_output(dir.File("o.tpug"));
  ASSERT_TRUE(RunIngest(c).ok());
  auto reader = io::DatasetReader::Open(c.output());
  ASSERT_TRUE(reader.ok());
  auto g = (*reader)->ReadGraph(0, false);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->absent_dimensions_marked);
  EXPECT_EQ(g->node_feat, loaded->node_feat);
}

}  // namespace
}  // namespace tpugraphs::ingest
