// A generated layout program (`synth`) seen both ways: as the graph ingest builds from it and as
// the synthetic cost model's analysis of the module, for tests that check what the model reads
// from a graph against what the cost model computes from the HLO.
#ifndef TPUGRAPHS_TESTS_MODEL_GENERATED_PROGRAM_H_
#define TPUGRAPHS_TESTS_MODEL_GENERATED_PROGRAM_H_

#include <gtest/gtest.h>

#include <cstdint>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/ingest/hlo_graph.h"
#include "tpugraphs/synth/cost_model.h"
#include "tpugraphs/synth/program_generator.h"

namespace tpugraphs::model::testutil {

struct GeneratedProgram {
  Graph graph;  // a layout graph without configurable nodes or configurations
  synth::ModuleAnalysis analysis;
};

// `synth::GenerateLayoutProgram(nodes, seed)`; a failure to build either view fails the test.
inline GeneratedProgram MakeGeneratedProgram(int64_t nodes, uint64_t seed) {
  const xla::HloModuleProto m = synth::GenerateLayoutProgram(nodes, seed, "p");
  GeneratedProgram p;
  p.graph.kind = TaskKind::kLayout;
  const Status built = ingest::BuildProgramGraph(m, "p", &p.graph);
  EXPECT_TRUE(built.ok()) << built.ToString();
  auto a = synth::AnalyzeModule(m, "p");
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  if (a.ok()) p.analysis = std::move(a).value();
  return p;
}

}  // namespace tpugraphs::model::testutil

#endif  // TPUGRAPHS_TESTS_MODEL_GENERATED_PROGRAM_H_
