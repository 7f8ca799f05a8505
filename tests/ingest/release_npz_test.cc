// Tests of release .npz <-> Graph: path inference, loading with checks, streamed loading into a
// dataset, writing release dtypes, and writing (and exporting) layout configs in bounded chunks.
#include "tpugraphs/ingest/release_npz.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/ingest/export.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/io/npz.h"

namespace tpugraphs::ingest {
namespace {

using ::tpugraphs::testing::RealDataPath;
using ::tpugraphs::testing::RunPython;
using ::tpugraphs::testing::TempDir;

TEST(ReleasePathTest, InfersCollectionAndSplit) {
  auto t = InferFromReleasePath("/data/tpugraphs/npz/tile/xla/valid/abc.npz");
  EXPECT_EQ(t.collection, "tile:xla");
  EXPECT_EQ(t.split, "valid");
  auto l = InferFromReleasePath("npz/layout/nlp/default/train/bert.npz");
  EXPECT_EQ(l.collection, "layout:nlp:default");
  EXPECT_EQ(l.split, "train");
  EXPECT_EQ(InferFromReleasePath("x/npz/layout/nlp/default/bert.npz").collection, "");
  EXPECT_EQ(InferFromReleasePath("x/npz/tile/xla/other/a.npz").collection, "");
  EXPECT_EQ(InferFromReleasePath("a.npz").collection, "");
  auto raw = InferFromReleasePath("data/sample/pb/layout/synth/random/valid/prog_3.pb");
  EXPECT_EQ(raw.collection, "layout:synth:random");
  EXPECT_EQ(raw.split, "valid");
  auto raw_tile = InferFromReleasePath("out/pb/tile/synth/test/kernels_0.pb");
  EXPECT_EQ(raw_tile.collection, "tile:synth");
  EXPECT_EQ(raw_tile.split, "test");
  EXPECT_EQ(InferFromReleasePath("npz/tile/XLA/test/a.npz").collection, "");  // not lower-case
}

TEST(ReleaseNpzTest, LoadsRealTileFile) {
  const std::string path = RealDataPath("npz/tile_test/0a8a2b247d7a20b9dcab1daf50066a4d.npz");
  auto g = LoadReleaseNpz(path, "", "test", "");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->name, "0a8a2b247d7a20b9dcab1daf50066a4d");
  EXPECT_EQ(g->collection, "tile:xla");
  EXPECT_EQ(g->num_nodes(), 15);
  EXPECT_EQ(g->num_edges(), 15);
  EXPECT_EQ(g->num_configs, 807);
  // ingest-spec 8.3: the callee-root edge [14, 10] of this file, and hidden test labels.
  bool found = false;
  for (int64_t e = 0; e < g->num_edges(); ++e) {
    found |= g->edge_index[2 * e] == 14 && g->edge_index[2 * e + 1] == 10;
  }
  EXPECT_TRUE(found);
  for (int64_t i = 0; i < g->num_configs; ++i) {
    EXPECT_EQ(g->config_runtime[i], 0);
    EXPECT_EQ(g->config_runtime_normalizers[i], 1);
  }
}

// A layout file with values chosen by the test (argv: path, config value expression).
void MakeLayout(const std::string& path, const std::string& values_expr, int c = 23, int nc = 5) {
  auto r = RunPython(
      "import sys, numpy as np\n"
      "rng = np.random.default_rng(3); n, m, c, nc = 17, 20, " +
          std::to_string(c) + ", " + std::to_string(nc) +
          "\n"
          "v = rng.integers(-1, 7, (c, nc, 18)).astype('<f4')\n" +
          values_expr +
          "\nnp.savez(sys.argv[1], node_feat=rng.normal(size=(n, 140)).astype('<f4'),\n"
          "  node_opcode=rng.integers(0, 100, n).astype('u1'),\n"
          "  edge_index=rng.integers(0, n, (m, 2)), node_config_ids=np.arange(nc),\n"
          "  node_config_feat=v, config_runtime=rng.integers(1, 10**6, c),\n"
          "  node_splits=np.array([[0, 5, n]]))\n",
      {path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(ReleaseNpzTest, StreamedLoadEqualsWholeLoad) {
  TempDir tmp;
  const std::string path = tmp.File("lay.npz");
  MakeLayout(path, "");
  auto whole = LoadReleaseNpz(path, "layout:xla:random", "train", "lay");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->node_splits, (std::vector<int64_t>{0, 5, 17}));
  io::DatasetWriterOptions opt;
  opt.target_block_bytes = 5 * 18 * 4;
  auto w = io::DatasetWriter::Create(tmp.File("d.tpug"), opt);
  ASSERT_TRUE(w.ok());
  // Chunks of 7 values: every chunk boundary falls inside a config.
  Status s = StreamReleaseNpz(path, "layout:xla:random", "train", "lay", w->get(), 7);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE((*w)->Finish().ok());
  auto r = io::DatasetReader::Open(tmp.File("d.tpug"));
  ASSERT_TRUE(r.ok());
  auto back = (*r)->ReadGraph(0);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->node_config_feat, whole->node_config_feat);
  EXPECT_EQ(back->node_feat, whole->node_feat);
  EXPECT_EQ(back->config_runtime, whole->config_runtime);
}

TEST(ReleaseNpzTest, NonIntegralOrOutOfRangeConfigValuesAreErrors) {
  TempDir tmp;
  MakeLayout(tmp.File("frac.npz"), "v[3, 2, 7] = 0.5");
  auto g = LoadReleaseNpz(tmp.File("frac.npz"), "layout:xla:random", "", "");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("frac.npz"), std::string::npos) << g.status().message();
  MakeLayout(tmp.File("big.npz"), "v[1, 0, 0] = 300");
  g = LoadReleaseNpz(tmp.File("big.npz"), "layout:xla:random", "", "");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("big.npz"), std::string::npos);
  // Streaming drops the partly written graph and leaves the writer usable.
  auto w = io::DatasetWriter::Create(tmp.File("d.tpug"));
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(
      StreamReleaseNpz(tmp.File("big.npz"), "layout:xla:random", "", "big", w->get(), 64).ok());
  MakeLayout(tmp.File("ok.npz"), "");
  EXPECT_TRUE(
      StreamReleaseNpz(tmp.File("ok.npz"), "layout:xla:random", "", "ok", w->get(), 64).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  auto r = io::DatasetReader::Open(tmp.File("d.tpug"));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)->num_graphs(), 1);
  EXPECT_EQ((*r)->info(0).name, "ok");
}

TEST(ReleaseNpzTest, ShapeAndCollectionChecks) {
  TempDir tmp;
  MakeLayout(tmp.File("lay.npz"), "");
  auto g = LoadReleaseNpz(tmp.File("lay.npz"), "", "", "");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("--collection"), std::string::npos);
  g = LoadReleaseNpz(tmp.File("lay.npz"), "layout:xla:random", "bogus", "");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("split"), std::string::npos);
  MakeLayout(tmp.File("w17.npz"), "v = v[:, :, :17].copy()");
  g = LoadReleaseNpz(tmp.File("w17.npz"), "layout:xla:random", "", "");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("w17.npz: node_config_feat has 17 columns, expected 18"),
            std::string::npos)
      << g.status().message();
  MakeLayout(tmp.File("nc.npz"), "v = v[:, :4].copy()");
  g = LoadReleaseNpz(tmp.File("nc.npz"), "layout:xla:random", "", "");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("node_config_ids has 5"), std::string::npos)
      << g.status().message();
}

TEST(ReleaseNpzTest, WritesReleaseDtypes) {
  TempDir tmp;
  MakeLayout(tmp.File("lay.npz"), "");
  auto g = LoadReleaseNpz(tmp.File("lay.npz"), "layout:xla:random", "", "");
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(WriteReleaseNpz(*g, tmp.File("out.npz"), true).ok());
  auto npz = io::NpzReader::Open(tmp.File("out.npz"));
  ASSERT_TRUE(npz.ok());
  auto h = (*npz)->Header("node_splits");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(h->dtype, io::DType::kInt64);
  auto f = (*npz)->Header("node_config_feat");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->dtype, io::DType::kFloat32);
  EXPECT_EQ(f->shape, (std::vector<int64_t>{23, 5, 18}));
  EXPECT_EQ((*npz)->Header("node_opcode")->dtype, io::DType::kUInt8);
  // A graph read without its configs cannot be exported.
  Graph head = *g;
  head.node_config_feat.clear();
  EXPECT_FALSE(WriteReleaseNpz(head, tmp.File("x.npz"), true).ok());
  EXPECT_FALSE(std::filesystem::exists(tmp.File("x.npz")));
}

}  // namespace
}  // namespace tpugraphs::ingest

namespace tpugraphs::ingest {
namespace {

// A layout graph whose node_feat and node_config_feat members are over 1 MiB each, so that
// LoadReleaseNpz reads members in parallel when given threads.
Graph LargeLayoutGraph() {
  std::mt19937 rng(11);
  Graph g;
  g.kind = TaskKind::kLayout;
  g.collection = "layout:xla:random";
  g.split = "train";
  g.name = "big";
  const int64_t n = 3000, m = 6000, c = 400, nc = 200;
  for (int64_t i = 0; i < n; ++i) g.node_opcode.push_back(static_cast<uint8_t>(rng() % 120));
  for (int64_t i = 0; i < n * kNodeFeatureCount; ++i) {
    g.node_feat.push_back(static_cast<float>(rng() % 1000) * 0.125f);
  }
  for (int64_t i = 0; i < m; ++i) {
    const int64_t a = static_cast<int64_t>(rng() % (n - 1));
    g.edge_index.push_back(a);
    g.edge_index.push_back(a + 1);
  }
  g.node_splits = {0, n / 2, n};
  for (int64_t i = 0; i < nc; ++i) g.node_config_ids.push_back(i * 7);
  g.num_configs = c;
  for (int64_t i = 0; i < c; ++i)
    g.config_runtime.push_back(1000 + static_cast<int64_t>(rng() % 9000));
  for (int64_t i = 0; i < c * nc * kLayoutConfigFeatureCount; ++i) {
    g.node_config_feat.push_back(static_cast<int8_t>(static_cast<int>(rng() % 7) - 1));
  }
  return g;
}

TEST(ReleaseNpzTest, ParallelMembersAndBothInflatersGiveTheSameGraph) {
  TempDir tmp;
  const std::string path = tmp.File("big.npz");
  const Graph g = LargeLayoutGraph();
  ASSERT_TRUE(WriteReleaseNpz(g, path, /*compress=*/true).ok());
  const io::InflateBackend saved = io::DefaultInflateBackend();
  std::vector<io::InflateBackend> backends = {io::InflateBackend::kZlib};
  if (io::LibdeflateAvailable()) backends.push_back(io::InflateBackend::kLibdeflate);
  for (io::InflateBackend b : backends) {
    io::SetDefaultInflateBackend(b);
    for (int threads : {1, 2, 4}) {
      auto got = LoadReleaseNpz(path, "layout:xla:random", "train", "big", threads);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const std::string what =
          std::string(io::InflateBackendName(b)) + ", threads " + std::to_string(threads);
      EXPECT_EQ(got->node_feat, g.node_feat) << what;
      EXPECT_EQ(got->node_opcode, g.node_opcode) << what;
      EXPECT_EQ(got->edge_index, g.edge_index) << what;
      EXPECT_EQ(got->node_splits, g.node_splits) << what;
      EXPECT_EQ(got->node_config_ids, g.node_config_ids) << what;
      EXPECT_EQ(got->config_runtime, g.config_runtime) << what;
      EXPECT_EQ(got->node_config_feat, g.node_config_feat) << what;
    }
  }
  io::SetDefaultInflateBackend(saved);
}

TEST(ReleaseNpzTest, DamagedMemberGivesTheSameErrorForAnyThreadCount) {
  TempDir tmp;
  const std::string path = tmp.File("big.npz");
  ASSERT_TRUE(WriteReleaseNpz(LargeLayoutGraph(), path, /*compress=*/true).ok());
  auto bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok());
  // Damage a byte in the middle of the file (inside a member's deflate stream).
  (*bytes)[bytes->size() / 2] = static_cast<char>((*bytes)[bytes->size() / 2] ^ 0x5A);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  }
  auto one = LoadReleaseNpz(path, "layout:xla:random", "train", "big", 1);
  auto two = LoadReleaseNpz(path, "layout:xla:random", "train", "big", 2);
  ASSERT_FALSE(one.ok());
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(one.status().ToString(), two.status().ToString());
  EXPECT_NE(one.status().message().find(path), std::string::npos) << one.status().ToString();
}

// The file the writer made before node_config_feat was streamed: every array added whole, the
// configs converted to one float32 vector first.
Status WriteWholeArrays(const Graph& g, const std::string& path, bool compress) {
  const int64_t n = g.num_nodes(), m = g.num_edges(), c = g.num_configs, nc = g.num_config_nodes();
  TPUG_ASSIGN_OR_RETURN(auto npz, io::NpzWriter::Create(path, compress));
  TPUG_RETURN_IF_ERROR(npz->Add<float>("node_feat", {n, kNodeFeatureCount}, g.node_feat.data()));
  TPUG_RETURN_IF_ERROR(npz->Add<uint8_t>("node_opcode", {n}, g.node_opcode.data()));
  TPUG_RETURN_IF_ERROR(npz->Add<int64_t>("edge_index", {m, 2}, g.edge_index.data()));
  TPUG_RETURN_IF_ERROR(npz->Add<int64_t>("node_config_ids", {nc}, g.node_config_ids.data()));
  const std::vector<float> values(g.node_config_feat.begin(), g.node_config_feat.end());
  TPUG_RETURN_IF_ERROR(
      npz->Add<float>("node_config_feat", {c, nc, kLayoutConfigFeatureCount}, values.data()));
  TPUG_RETURN_IF_ERROR(npz->Add<int64_t>("config_runtime", {c}, g.config_runtime.data()));
  TPUG_RETURN_IF_ERROR(npz->Add<int64_t>(
      "node_splits", {1, static_cast<int64_t>(g.node_splits.size())}, g.node_splits.data()));
  return npz->Finish();
}

std::string FileBytes(const std::string& path) {
  auto s = ReadFileToString(path);
  return s.ok() ? *s : std::string("<unreadable>");
}

// node_config_feat is converted and written in 4 MiB steps (the graph's 1.44M values take two
// steps), or taken from a source in ranges: the bytes are those of the whole-array writer.
TEST(ReleaseNpzTest, ChunkedConfigsWriteTheBytesOfWholeArrays) {
  TempDir tmp;
  const Graph g = LargeLayoutGraph();
  Graph head = g;
  head.node_config_feat.clear();
  const int64_t row = g.num_config_nodes() * kLayoutConfigFeatureCount;
  for (bool compress : {true, false}) {
    SCOPED_TRACE(compress ? "deflated" : "stored");
    ASSERT_TRUE(WriteWholeArrays(g, tmp.File("whole.npz"), compress).ok());
    const std::string want = FileBytes(tmp.File("whole.npz"));
    ASSERT_TRUE(WriteReleaseNpz(g, tmp.File("chunked.npz"), compress).ok());
    EXPECT_TRUE(FileBytes(tmp.File("chunked.npz")) == want);
    int64_t next = 0;
    std::vector<int8_t> range;
    auto source = [&](int64_t begin, int64_t end) -> StatusOr<const int8_t*> {
      EXPECT_EQ(begin, next);
      EXPECT_LE(end - begin, 7);
      next = end;
      range.assign(g.node_config_feat.begin() + begin * row,
                   g.node_config_feat.begin() + end * row);
      return range.data();
    };
    Status s = WriteReleaseNpzStreamed(head, tmp.File("streamed.npz"), compress, 7, source);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(next, g.num_configs);
    EXPECT_TRUE(FileBytes(tmp.File("streamed.npz")) == want);
  }
  // A source error comes back as it is and leaves no file.
  auto failing = [](int64_t begin, int64_t) -> StatusOr<const int8_t*> {
    if (begin >= 100) return DataLossError("block " + std::to_string(begin) + " is damaged");
    static const std::vector<int8_t> zeros(100 * 200 * 18, 0);
    return zeros.data();
  };
  Status s = WriteReleaseNpzStreamed(head, tmp.File("failed.npz"), true, 100, failing);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "block 100 is damaged");
  EXPECT_FALSE(std::filesystem::exists(tmp.File("failed.npz")));
}

// ExportDataset reads layout configs a few blocks at a time while writing: the files are those
// of the whole-array writer for any thread count, and a damaged config block found midway fails
// the graph with the reader's message and leaves nothing behind.
TEST(ExportTest, StreamedLayoutConfigsGiveTheWholeArrayFiles) {
  TempDir tmp;
  Graph a = LargeLayoutGraph();
  Graph b = LargeLayoutGraph();
  b.name = "big2";
  b.split = "valid";
  for (int8_t& v : b.node_config_feat) v = static_cast<int8_t>(v == 5 ? -1 : v + 1);
  io::DatasetWriterOptions opt;
  opt.target_block_bytes = 3 * 200 * 18;  // 3 configs per block: many blocks per read
  {
    auto w = io::DatasetWriter::Create(tmp.File("d.tpug"), opt);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add(a).ok());
    ASSERT_TRUE((*w)->Add(b).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  for (bool compress : {true, false}) {
    ASSERT_TRUE(WriteWholeArrays(a, tmp.File("a.npz"), compress).ok());
    ASSERT_TRUE(WriteWholeArrays(b, tmp.File("b.npz"), compress).ok());
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(compress ? "deflated" : "stored") + ", threads " +
                   std::to_string(threads));
      ExportOptions o;
      o.dataset = tmp.File("d.tpug");
      o.output_dir = tmp.File("out" + std::to_string(compress) + std::to_string(threads));
      o.compress = compress;
      o.threads = threads;
      auto summary = ExportDataset(o);
      ASSERT_TRUE(summary.ok()) << summary.status().ToString();
      ASSERT_EQ(summary->files.size(), 2u);
      EXPECT_TRUE(FileBytes(summary->files[0]) == FileBytes(tmp.File("a.npz")));
      EXPECT_TRUE(FileBytes(summary->files[1]) == FileBytes(tmp.File("b.npz")));
    }
  }
  // Damage the last config block of the second graph (the records before the index and footer).
  auto bytes = ReadFileToString(tmp.File("d.tpug"));
  ASSERT_TRUE(bytes.ok());
  auto r = io::DatasetReader::Open(tmp.File("d.tpug"));
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE((*r)->ReadGraph(1).ok());
  std::string damaged = *bytes;
  const size_t at = damaged.size() * 97 / 100;
  damaged[at] = static_cast<char>(damaged[at] ^ 0x5A);
  ASSERT_TRUE(WriteFileAtomically(tmp.File("bad.tpug"), damaged).ok());
  auto bad = io::DatasetReader::Open(tmp.File("bad.tpug"));
  ASSERT_TRUE(bad.ok());
  ASSERT_TRUE((*bad)->ReadGraph(1, /*with_layout_configs=*/false).ok());
  auto whole = (*bad)->ReadGraph(1);
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.status().message().find("config block"), std::string::npos)
      << whole.status().ToString();
  ExportOptions o;
  o.dataset = tmp.File("bad.tpug");
  o.output_dir = tmp.File("bad_out");
  o.compress = false;  // as a.npz was last written
  o.threads = 2;
  auto failed = ExportDataset(o);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().ToString(), whole.status().ToString());
  EXPECT_FALSE(std::filesystem::exists(tmp.File("bad_out")));
  o.keep_going = true;
  auto kept = ExportDataset(o);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->graphs, 1);
  ASSERT_EQ(kept->skipped.size(), 1u);
  EXPECT_EQ(kept->skipped[0].name, "big2");
  EXPECT_EQ(kept->skipped[0].reason, whole.status().message());
  EXPECT_TRUE(FileBytes(kept->files[0]) == FileBytes(tmp.File("a.npz")));
  // Not even the directory of the skipped graph (the failure came after it was made).
  EXPECT_FALSE(std::filesystem::exists(tmp.File("bad_out/npz/layout/xla/random/valid")));
  EXPECT_TRUE(std::filesystem::exists(tmp.File("bad_out/npz/layout/xla/random/train/big.npz")));
}

}  // namespace
}  // namespace tpugraphs::ingest
