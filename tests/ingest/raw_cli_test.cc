// `tpugraphs ingest` on raw dumps end to end: good dumps give a dataset that exports to the
// release arrays; every kind of bad dump gives exit code 1, a message naming the file, and no
// output file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "ingest/raw_test_util.h"

namespace tpugraphs::ingest {
namespace {

using ::testing::HasSubstr;
using tpugraphs::testing::RunCli;
using tpugraphs::testing::RunPython;
using tpugraphs::testing::TempDir;

TEST(RawCli, IngestAndExportTheRealDumps) {
  TempDir dir;
  const std::string ds = dir.File("raw.tpug");
  auto r = RunCli({"ingest", testing::LayoutDumpPath(), testing::TileDumpPath(), "--split", "train",
                   "--output", ds});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(ds));
  const std::string out = dir.File("release");
  r = RunCli({"export", ds, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string layout = out + "/npz/layout/xla/custom/train/module_tuning_data_layout.npz";
  const std::string tile = out + "/npz/tile/xla/train/op_tuning_data_fusion.181.npz";
  auto py = RunPython(R"PY(
import sys, numpy as np
a = np.load(sys.argv[1]); t = np.load(sys.argv[2])
print(a["node_feat"].shape, a["edge_index"][:3].tolist(), a["node_config_feat"].shape,
      a["node_splits"].tolist())
print(t["node_opcode"].tolist(), t["edge_index"].tolist(), t["config_runtime"].tolist(),
      t["config_runtime_normalizers"].tolist(), t["config_feat"][0].tolist())
)PY",
                      {layout, tile});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  EXPECT_EQ(py.out,
            "(3163, 140) [[2, 0], [2, 1], [5, 3]] (112, 62, 18) "
            "[[0, 449, 453, 467, 471, 498, 502, 3163]]\n"
            "[24, 24, 77, 24, 13, 20, 41] [[2, 0], [2, 1], [4, 3], [5, 2], [5, 4], [6, 5]] "
            "[1447, 12302, 6991, 3178, 2384] [1447, 1447, 1447, 1447, 1447] "
            "[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 32.0, 0.0, 0.0, 0.0, 0.0, 34.0, 64.0, "
            "0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]\n");
}

struct BadCase {
  std::string name;
  std::function<std::string()> bytes;
  std::string message;
};

std::string Mutated(const std::function<void(tpu_graphs::ModuleTuningData*)>& f) {
  auto m = testing::ParseLayoutDump();
  f(&m);
  return m.SerializeAsString();
}

TEST(RawCli, BadDumpsFailWithExitCodeOneAndWriteNothing) {
  const std::vector<BadCase> cases = {
      {"truncated",
       [] {
         const std::string b = testing::ReadBytes(testing::LayoutDumpPath());
         return b.substr(0, b.size() - 1000);
       },
       "not a raw XLA dump"},
      {"text", [] { return std::string("hello, I am a text file\n"); }, "not a raw XLA dump"},
      {"c2n_out_of_range",
       [] { return Mutated([](auto* m) { m->set_config_index_to_node(0, 5000); }); },
       "config_index_to_node[0] = 5000"},
      {"four_tensors",
       [] {
         return Mutated([](auto* m) {
           auto* node =
               m->mutable_runs(0)->mutable_module_config()->mutable_layout_config()->mutable_nodes(
                   0);
           while (node->tensors_size() < 4) node->add_tensors();
         });
       },
       "4 tensors"},
      {"bad_operand",
       [] {
         return Mutated([](auto* m) {
           m->mutable_module()->mutable_computations(0)->mutable_instructions(2)->add_operand_ids(
               123456789);
         });
       },
       "operand id 123456789"},
      {"bad_callee",
       [] {
         return Mutated([](auto* m) {
           m->mutable_module()
               ->mutable_computations(0)
               ->mutable_instructions(2)
               ->add_called_computation_ids(4242424);
         });
       },
       "computation id 4242424"},
      {"node_count_mismatch",
       [] { return Mutated([](auto* m) { m->mutable_config_index_to_node()->RemoveLast(); }); },
       "config_index_to_node lists 61"},
      {"nonpositive_runtime",
       [] {
         return Mutated(
             [](auto* m) { m->mutable_runs(0)->mutable_profile()->set_compute_time_ns(-5); });
       },
       "compute_time_ns = -5"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    const std::string input = dir.File(c.name + ".pb");
    testing::WriteBytes(input, c.bytes());
    const std::string out = dir.File("out.tpug");
    auto r = RunCli({"ingest", input, "--output", out});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr("error"));
    EXPECT_THAT(r.err, HasSubstr(input));
    EXPECT_THAT(r.err, HasSubstr(c.message));
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_EQ(dir.List(), std::vector<std::string>{c.name + ".pb"});  // no temporaries either
  }
}

}  // namespace
}  // namespace tpugraphs::ingest
