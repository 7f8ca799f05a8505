// Invariants that hold in the real release files (npz/tile_test) also hold for our output: the
// same numpy checker runs on both the release files and .npz files exported from our ingest of
// the raw dumps.
#include <gtest/gtest.h>

#include <filesystem>

#include "ingest/raw_test_util.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "tpugraphs/ingest/release_npz.h"

namespace tpugraphs::ingest {
namespace {

// Prints "OK <file>" per file or raises with the first violated invariant.
constexpr char kChecker[] = R"PY(
import sys, numpy as np
for path in sys.argv[1:]:
    z = np.load(path)
    nf, op, e = z["node_feat"], z["node_opcode"], z["edge_index"]
    assert nf.dtype == np.float32 and nf.ndim == 2 and nf.shape[1] == 140, (path, nf.dtype, nf.shape)
    assert op.dtype == np.uint8 and op.shape == (nf.shape[0],), path
    assert e.dtype == np.int64 and e.ndim == 2 and e.shape[1] == 2, path
    # edges: strictly lexicographically sorted, producer (v) < consumer (u)
    assert (e[:, 1] < e[:, 0]).all(), path
    keys = e[:, 0] * (nf.shape[0] + 1) + e[:, 1]
    assert (np.diff(keys) > 0).all(), path
    assert (nf[:, 1] == 0).all(), path  # element_size_in_bits
    assert (nf[:, 2:21].sum(axis=1) == 1).all(), path  # one element-type slot
    scalar = (nf[:, 21:28] == 0).all(axis=1)
    assert (nf[scalar, 28] == 1).all(), path
    nowin = (nf[:, 37:44] == 0).all(axis=1)
    for c in (44, 52, 60, 68, 76, 84):
        assert (nf[nowin, c] == 1).all(), (path, c)
    assert (nf[nowin, 91:93] == 0).all(), path
    noslice = (nf[:, 117:120] == 0).all(axis=1)
    for c in (112, 116, 120):
        assert (nf[noslice, c] == 1).all(), (path, c)
    nodyn = (nf[:, 121:124] == 0).all(axis=1)
    assert (nf[nodyn, 124] == 1).all(), path
    notpad = op != 62
    assert (nf[notpad, 128] == 1).all() and (nf[notpad, 132] == 1).all(), path
    if "config_feat" in z:
        cf = z["config_feat"]
        assert cf.dtype == np.float32 and cf.shape[1] == 24, path
        assert z["config_runtime"].dtype == np.int64, path
        assert z["config_runtime_normalizers"].dtype == np.int64, path
        for g in range(3):
            empty = (cf[:, 8 * g:8 * g + 7] == 0).all(axis=1)
            assert (cf[empty, 8 * g + 7] == 0).all(), (path, g)
    print("OK", path, nf.shape[0], e.shape[0])
)PY";

TEST(RawReleaseInvariants, HoldInTheReleaseFilesAndInOurExports) {
  std::vector<std::string> release;
  for (const auto& entry :
       std::filesystem::directory_iterator(tpugraphs::testing::RealDataPath("npz/tile_test"))) {
    if (entry.path().extension() == ".npz") release.push_back(entry.path().string());
  }
  ASSERT_GE(release.size(), 3u);
  auto real = tpugraphs::testing::RunPython(kChecker, release);
  ASSERT_EQ(real.exit_code, 0) << real.out << real.err;

  tpugraphs::testing::TempDir dir;
  std::vector<std::string> ours;
  for (const std::string& dump : {testing::TileDumpPath(), testing::LayoutDumpPath()}) {
    auto graphs = LoadRawDump(dump, {});
    ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
    for (const Graph& g : *graphs) {
      ours.push_back(dir.File(g.name + ".npz"));
      ASSERT_TRUE(WriteReleaseNpz(g, ours.back(), /*compress=*/true).ok());
    }
  }
  ASSERT_EQ(ours.size(), 16u);
  auto mine = tpugraphs::testing::RunPython(kChecker, ours);
  ASSERT_EQ(mine.exit_code, 0) << mine.out << mine.err;
  EXPECT_NE(mine.out.find("module_tuning_data_layout.npz 3163 5112"), std::string::npos)
      << mine.out;
}

TEST(RawReleaseInvariants, ExportedLayoutArraysMatchTheSpecShapes) {
  auto graphs = LoadRawDump(testing::LayoutDumpPath(), {});
  ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
  tpugraphs::testing::TempDir dir;
  const std::string path = dir.File("unet3d.npz");
  ASSERT_TRUE(WriteReleaseNpz((*graphs)[0], path, true).ok());
  auto r = tpugraphs::testing::RunPython(R"PY(
import sys, numpy as np
z = np.load(sys.argv[1])
print(z["node_feat"].shape, z["edge_index"].shape, z["node_config_feat"].shape,
      z["node_config_feat"].dtype, z["config_runtime"].shape, z["node_splits"].tolist(),
      z["node_config_ids"].dtype, z["node_config_ids"][:3].tolist(),
      int(z["config_runtime"].min()), int(z["config_runtime"].max()),
      len({c.tobytes() for c in z["node_config_feat"]}))
)PY",
                                         {path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "(3163, 140) (5112, 2) (112, 62, 18) float32 (112,) "
            "[[0, 449, 453, 467, 471, 498, 502, 3163]] int64 [443, 461, 488] 910876401 "
            "925642328 91\n");
}

}  // namespace
}  // namespace tpugraphs::ingest
