#include "tpugraphs/synth/program_generator.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "tpugraphs/synth/cost_model.h"

namespace tpugraphs::synth {
namespace {

// Checks the structural rules the featurizer relies on (ingest-spec section 4) and returns the
// number of instructions.
int64_t ExpectStructurallyValid(const xla::HloModuleProto& m) {
  std::set<int64_t> ids, comp_ids;
  int64_t n = 0;
  for (const auto& c : m.computations()) {
    EXPECT_TRUE(comp_ids.insert(c.id()).second) << "duplicate computation id " << c.id();
    std::set<int64_t> defined;
    bool root_found = false;
    for (const auto& inst : c.instructions()) {
      EXPECT_TRUE(ids.insert(inst.id()).second) << "duplicate instruction id " << inst.id();
      for (int64_t op : inst.operand_ids()) {
        EXPECT_TRUE(defined.count(op))
            << c.name() << ": " << inst.name() << " uses " << op << " before its definition";
      }
      for (int64_t cc : inst.called_computation_ids()) {
        EXPECT_TRUE(comp_ids.count(cc) && cc != c.id())
            << inst.name() << " calls computation " << cc << " that does not precede it";
      }
      const auto& shape = inst.shape();
      if (shape.element_type() == xla::TUPLE) {
        EXPECT_GT(shape.tuple_shapes_size(), 0);
      } else {
        EXPECT_EQ(shape.layout().minor_to_major_size(), shape.dimensions_size()) << inst.name();
        std::set<int64_t> perm(shape.layout().minor_to_major().begin(),
                               shape.layout().minor_to_major().end());
        EXPECT_EQ(static_cast<int>(perm.size()), shape.dimensions_size());
        for (int64_t d : shape.dimensions()) EXPECT_GT(d, 0) << inst.name();
      }
      if (inst.opcode() == "convolution") {
        EXPECT_TRUE(inst.has_window());
        EXPECT_TRUE(inst.has_convolution_dimension_numbers());
        EXPECT_GE(inst.feature_group_count(), 1);
        EXPECT_EQ(inst.batch_group_count(), 1);
        EXPECT_EQ(inst.window().dimensions_size(),
                  inst.convolution_dimension_numbers().input_spatial_dimensions_size());
      }
      if (inst.opcode() == "reduce") {
        EXPECT_EQ(inst.called_computation_ids_size(), 1);
      }
      if (inst.opcode() == "transpose") {
        EXPECT_EQ(inst.dimensions_size(), inst.shape().dimensions_size());
      }
      defined.insert(inst.id());
      root_found = root_found || inst.id() == c.root_id();
      ++n;
    }
    EXPECT_TRUE(root_found) << c.name() << " root_id " << c.root_id();
  }
  EXPECT_EQ(m.entry_computation_id(), m.computations(m.computations_size() - 1).id());
  return n;
}

TEST(ProgramGeneratorTest, LayoutProgramIsStructurallyValidAndNearTargetSize) {
  for (int64_t target : {60, 500, 3000}) {
    SCOPED_TRACE(target);
    xla::HloModuleProto m = GenerateLayoutProgram(target, 7 + target, "p");
    const int64_t n = ExpectStructurallyValid(m);
    EXPECT_GE(n, target - 3);
    EXPECT_LE(n, target + 60);  // one block may overshoot
    auto analysis = AnalyzeModule(m, "p");
    ASSERT_TRUE(analysis.ok()) << analysis.status().message();
    EXPECT_FALSE(ConfigurableNodes(analysis.value()).empty());
  }
}

TEST(ProgramGeneratorTest, LayoutProgramHasTheOpMixOfRealPrograms) {
  xla::HloModuleProto m = GenerateLayoutProgram(5000, 3, "p");
  std::map<std::string, int> ops;
  int while_bodies = 0, while_conds = 0, fused = 0, reducers = 0;
  for (const auto& c : m.computations()) {
    while_bodies += c.name().find("while_body") != std::string::npos;
    while_conds += c.name().find("while_cond") != std::string::npos;
    fused += c.name().find("fused_computation") != std::string::npos;
    reducers += c.name().find("scalar_add_computation") != std::string::npos;
    for (const auto& inst : c.instructions()) ops[inst.opcode()]++;
  }
  for (const char* op : {"parameter", "convolution", "dot", "reshape", "transpose", "broadcast",
                         "reduce", "fusion", "while", "get-tuple-element", "tuple", "constant",
                         "add", "multiply", "select", "compare", "convert"}) {
    EXPECT_GT(ops[op], 0) << op;
  }
  EXPECT_GT(while_bodies, 0);
  EXPECT_EQ(while_bodies, while_conds);
  EXPECT_EQ(while_bodies, ops["while"]);
  EXPECT_GT(fused, 0);
  EXPECT_GT(reducers, 0);
  // Configurable nodes are a small fraction, as in the real U-Net (62 of 3163).
  auto analysis = AnalyzeModule(m, "p").value();
  const double frac =
      static_cast<double>(ConfigurableNodes(analysis).size()) / analysis.nodes.size();
  EXPECT_GT(frac, 0.01);
  EXPECT_LT(frac, 0.12);
}

TEST(ProgramGeneratorTest, SameSeedSameProgramDifferentSeedDifferent) {
  const std::string a = GenerateLayoutProgram(800, 11, "p").SerializeAsString();
  EXPECT_EQ(a, GenerateLayoutProgram(800, 11, "p").SerializeAsString());
  EXPECT_NE(a, GenerateLayoutProgram(800, 12, "p").SerializeAsString());
  EXPECT_EQ(GenerateTileKernel(5, "k").SerializeAsString(),
            GenerateTileKernel(5, "k").SerializeAsString());
}

TEST(ProgramGeneratorTest, TileKernelsLookLikeRealKernels) {
  int fusions = 0, copies = 0, convs = 0, dots = 0, reduces = 0;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    xla::HloModuleProto m = GenerateTileKernel(seed, "k");
    const int64_t n = ExpectStructurallyValid(m);
    EXPECT_GE(n, 2);
    EXPECT_LE(n, 80);
    const auto& entry = m.computations(m.computations_size() - 1);
    const auto& root = entry.instructions(entry.instructions_size() - 1);
    EXPECT_EQ(root.id(), entry.root_id());
    fusions += root.opcode() == "fusion";
    copies += root.opcode() == "copy";
    for (const auto& c : m.computations()) {
      for (const auto& inst : c.instructions()) {
        convs += inst.opcode() == "convolution";
        dots += inst.opcode() == "dot";
        reduces += inst.opcode() == "reduce";
      }
    }
    // All entry instructions but the root are parameters.
    for (int i = 0; i + 1 < entry.instructions_size(); ++i) {
      EXPECT_EQ(entry.instructions(i).opcode(), "parameter");
    }
  }
  EXPECT_GT(fusions, 30);
  EXPECT_GT(copies, 0);
  EXPECT_GT(convs, 0);
  EXPECT_GT(dots, 0);
  EXPECT_GT(reduces, 0);
}

}  // namespace
}  // namespace tpugraphs::synth
