// The official release as the reference for raw-dump ingest: the release's own .npz of the U-Net
// graph (npz/release/layout/xla/default/valid/unet_3d.4x4.bf16.npz) against our ingest of its
// raw autotuning dump (raw/module_tuning_data_layout.pb). The graph arrays must be identical and
// every configuration of the dump must be one of the release file's configurations. Checked
// through our npz reader and, independently, by numpy reading both files.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "ingest/raw_test_util.h"
#include "testing/test_util.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "tpugraphs/ingest/release_npz.h"

namespace tpugraphs::ingest {
namespace {

using ::tpugraphs::testing::RealDataPath;
using ::tpugraphs::testing::RunPython;
using ::tpugraphs::testing::TempDir;

std::string ReleaseUnetPath() {
  return RealDataPath("npz/release/layout/xla/default/valid/unet_3d.4x4.bf16.npz");
}

struct Pair {
  Graph raw, release;
};

void LoadBoth(Pair* p) {
  RawDumpOptions o;
  o.collection = "layout:xla:default";
  auto raw = LoadRawDump(testing::LayoutDumpPath(), o);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  ASSERT_EQ(raw->size(), 1u);
  p->raw = std::move((*raw)[0]);
  auto rel = LoadReleaseNpz(ReleaseUnetPath(), "layout:xla:default", "valid", "");
  ASSERT_TRUE(rel.ok()) << rel.status().ToString();
  p->release = std::move(*rel);
}

TEST(ReleaseReferenceTest, RawUnetDumpGivesTheReleaseGraphArrays) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(LoadBoth(&p));
  // The sizes recorded in PROVENANCE.md.
  EXPECT_EQ(p.release.num_nodes(), 3163);
  EXPECT_EQ(p.release.num_config_nodes(), 62);
  EXPECT_EQ(p.release.num_configs, 1965);
  EXPECT_EQ(p.raw.num_nodes(), p.release.num_nodes());
  EXPECT_TRUE(p.raw.node_opcode == p.release.node_opcode);
  EXPECT_TRUE(p.raw.edge_index == p.release.edge_index);
  EXPECT_TRUE(p.raw.node_config_ids == p.release.node_config_ids);
  EXPECT_TRUE(p.raw.node_splits == p.release.node_splits);
  ASSERT_EQ(p.raw.node_feat.size(), p.release.node_feat.size());
  int64_t differing = 0, first = -1;
  for (size_t i = 0; i < p.raw.node_feat.size(); ++i) {
    // Bit patterns, so that -0.0 and 0.0 (or NaNs) would count as different.
    uint32_t a, b;
    std::memcpy(&a, &p.raw.node_feat[i], 4);
    std::memcpy(&b, &p.release.node_feat[i], 4);
    if (a != b && differing++ == 0) first = static_cast<int64_t>(i);
  }
  EXPECT_EQ(differing, 0) << "first at node " << first / kNodeFeatureCount << " feature "
                          << first % kNodeFeatureCount;
}

TEST(ReleaseReferenceTest, EveryRawConfigurationIsAReleaseConfiguration) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(LoadBoth(&p));
  const size_t row = static_cast<size_t>(p.release.num_config_nodes()) * kLayoutConfigFeatureCount;
  ASSERT_EQ(p.release.node_config_feat.size(), row * p.release.num_configs);
  ASSERT_EQ(p.raw.node_config_feat.size(), row * p.raw.num_configs);
  ASSERT_GT(p.raw.num_configs, 0);
  std::set<std::vector<int8_t>> release_rows;
  for (int64_t c = 0; c < p.release.num_configs; ++c) {
    auto it = p.release.node_config_feat.begin() + c * row;
    release_rows.insert(std::vector<int8_t>(it, it + row));
  }
  int64_t missing = 0;
  for (int64_t c = 0; c < p.raw.num_configs; ++c) {
    auto it = p.raw.node_config_feat.begin() + c * row;
    missing += release_rows.count(std::vector<int8_t>(it, it + row)) == 0;
  }
  EXPECT_EQ(missing, 0) << "of " << p.raw.num_configs << " raw configurations";
}

// The same two checks with numpy reading the release file and our export of the raw dump.
TEST(ReleaseReferenceTest, NumpyAgreesOnTheExportedRawDump) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(LoadBoth(&p));
  TempDir tmp;
  ASSERT_TRUE(WriteReleaseNpz(p.raw, tmp.File("raw.npz"), true).ok());
  auto py = RunPython(R"PY(
import sys, numpy as np
rel, ours = np.load(sys.argv[1]), np.load(sys.argv[2])
for k in ('node_feat', 'node_opcode', 'edge_index', 'node_config_ids', 'node_splits'):
    a, b = rel[k], ours[k]
    assert a.dtype == b.dtype, (k, a.dtype, b.dtype)
    assert a.shape == b.shape, (k, a.shape, b.shape)
    assert a.tobytes() == b.tobytes(), (k, 'values differ')
fa, fb = rel['node_config_feat'], ours['node_config_feat']
assert fa.dtype == fb.dtype and fa.shape[1:] == fb.shape[1:], (fa.dtype, fb.dtype, fa.shape, fb.shape)
rows = {r.tobytes() for r in fa.reshape(fa.shape[0], -1)}
missing = sum(r.tobytes() not in rows for r in fb.reshape(fb.shape[0], -1))
assert missing == 0, (missing, fb.shape[0])
print('OK', fa.shape[0], fb.shape[0])
)PY",
                      {ReleaseUnetPath(), tmp.File("raw.npz")});
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
  EXPECT_EQ(py.out.rfind("OK 1965 ", 0), 0u) << py.out << py.err;
}

}  // namespace
}  // namespace tpugraphs::ingest
