// Tests of the dataset container: write -> read equality, subset reads, and corrupted, truncated
// and hostile files (docs/dataset-format.md).
#include "tpugraphs/io/dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "testing/graph_compare.h"
#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/dataset.pb.h"
#include "tpugraphs/io/record_format.h"

namespace tpugraphs::io {
namespace {

using ::tpugraphs::testing::TempDir;

Graph RandomTile(const std::string& name, int64_t n, int64_t m, int64_t c, uint32_t seed) {
  std::mt19937 rng(seed);
  Graph g;
  g.name = name;
  g.collection = "tile:xla";
  g.split = "train";
  g.kind = TaskKind::kTile;
  for (int64_t i = 0; i < n; ++i) g.node_opcode.push_back(static_cast<uint8_t>(rng() % 200));
  for (int64_t i = 0; i < n * kNodeFeatureCount; ++i) {
    g.node_feat.push_back(static_cast<float>(static_cast<int>(rng() % 20001) - 10000) / 7.0f);
  }
  for (int64_t i = 0; i < m; ++i) {
    g.edge_index.push_back(rng() % n);
    g.edge_index.push_back(rng() % n);
  }
  g.num_configs = c;
  for (int64_t i = 0; i < c; ++i) {
    g.config_runtime.push_back(1000 + rng() % 100000);
    g.config_runtime_normalizers.push_back(1 + rng() % 5000);
    for (int k = 0; k < kTileConfigFeatureCount; ++k) g.config_feat.push_back(rng() % 64);
  }
  return g;
}

Graph RandomLayout(const std::string& name, int64_t n, int64_t m, int64_t c, int64_t nc,
                   uint32_t seed) {
  std::mt19937 rng(seed);
  Graph g = RandomTile(name, n, m, 0, seed + 1);
  g.collection = "layout:nlp:random";
  g.split = "valid";
  g.kind = TaskKind::kLayout;
  g.config_runtime_normalizers.clear();
  g.config_feat.clear();
  g.node_splits = {0, n / 3, n};
  g.num_configs = c;
  for (int64_t i = 0; i < nc; ++i) g.node_config_ids.push_back(rng() % n);
  for (int64_t i = 0; i < c; ++i) g.config_runtime.push_back(rng() % 1000000);
  for (int64_t i = 0; i < c * nc * kLayoutConfigFeatureCount; ++i) {
    g.node_config_feat.push_back(static_cast<int8_t>(static_cast<int>(rng() % 8) - 1));
  }
  return g;
}

std::string WriteDataset(const std::string& path, const std::vector<Graph>& graphs,
                         DatasetWriterOptions options = {}) {
  auto w = DatasetWriter::Create(path, options);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  for (const auto& g : graphs) {
    Status s = (*w)->Add(g);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  Status s = (*w)->Finish();
  EXPECT_TRUE(s.ok()) << s.ToString();
  return path;
}

std::string ReadBytes(const std::string& path) { return ReadFileToString(path).value(); }
void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(DatasetTest, WriteReadEqualityTileAndLayout) {
  TempDir tmp;
  std::vector<Graph> graphs = {RandomTile("t0", 37, 60, 11, 1), RandomTile("t1", 5, 0, 0, 2),
                               RandomLayout("l0", 50, 90, 300, 7, 3),
                               RandomLayout("l1", 20, 10, 0, 4, 4)};
  DatasetWriterOptions opt;
  opt.target_block_bytes = 1000;  // several configs per block and several blocks
  std::string path = WriteDataset(tmp.File("d.tpug"), graphs, opt);
  auto r = DatasetReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->num_graphs(), 4);
  for (int i = 0; i < 4; ++i) {
    const GraphInfo& info = (*r)->info(i);
    EXPECT_EQ(info.name, graphs[i].name);
    EXPECT_EQ(info.num_nodes, graphs[i].num_nodes());
    EXPECT_EQ(info.num_edges, graphs[i].num_edges());
    EXPECT_EQ(info.num_configs, graphs[i].num_configs);
    EXPECT_EQ(info.num_config_nodes, graphs[i].num_config_nodes());
    auto g = (*r)->ReadGraph(i);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    testing::ExpectSameGraph(*g, graphs[i]);
  }
  EXPECT_EQ((*r)->Find("layout:nlp:random", "l0"), 2);
  EXPECT_EQ((*r)->Find("tile:xla", "l0"), -1);
  EXPECT_EQ((*r)->configs_per_block(2), 1000 / (7 * 18));
  auto no_cfg = (*r)->ReadGraph(2, /*with_layout_configs=*/false);
  ASSERT_TRUE(no_cfg.ok());
  EXPECT_TRUE(no_cfg->node_config_feat.empty());
  EXPECT_EQ(no_cfg->config_runtime, graphs[2].config_runtime);
}

TEST(DatasetTest, SubsetReadsEqualRows) {
  TempDir tmp;
  Graph g = RandomLayout("big", 30, 40, 257, 5, 9);
  DatasetWriterOptions opt;
  opt.target_block_bytes = 5 * 18 * 16;  // 16 configs per block
  std::string path = WriteDataset(tmp.File("d.tpug"), {g}, opt);
  auto r = DatasetReader::Open(path);
  ASSERT_TRUE(r.ok());
  const int64_t row = 5 * 18;
  std::vector<int64_t> idx = {256, 0, 17, 17, 100, 15, 16, 3};
  auto rows = (*r)->ReadLayoutConfigs(0, idx);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), idx.size() * row);
  for (size_t p = 0; p < idx.size(); ++p) {
    for (int64_t k = 0; k < row; ++k) {
      ASSERT_EQ((*rows)[p * row + k], g.node_config_feat[idx[p] * row + k]) << p << " " << k;
    }
  }
  auto range = (*r)->ReadLayoutConfigRange(0, 14, 50);
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(*range, std::vector<int8_t>(g.node_config_feat.begin() + 14 * row,
                                        g.node_config_feat.begin() + 50 * row));
  EXPECT_FALSE((*r)->ReadLayoutConfigs(0, {257}).ok());
  EXPECT_FALSE((*r)->ReadLayoutConfigs(0, {-1}).ok());
}

// With a block cache, reads return the same rows; a block is decoded once while it fits, and
// the least recently used blocks go first when they do not.
TEST(DatasetTest, BlockCacheServesTheSameRows) {
  TempDir tmp;
  Graph g = RandomLayout("big", 30, 40, 257, 5, 9);
  DatasetWriterOptions opt;
  opt.target_block_bytes = 5 * 18 * 16;  // 16 configs per block: 17 blocks
  std::string path = WriteDataset(tmp.File("d.tpug"), {g}, opt);
  auto r = DatasetReader::Open(path);
  ASSERT_TRUE(r.ok());
  const int64_t row = 5 * 18, block_bytes = 16 * row;
  const std::vector<int64_t> idx = {256, 0, 17, 17, 100, 15, 16, 3};  // blocks 16, 0, 1, 6
  auto expect_rows = [&](const std::vector<int8_t>& rows) {
    ASSERT_EQ(rows.size(), idx.size() * row);
    for (size_t p = 0; p < idx.size(); ++p) {
      for (int64_t k = 0; k < row; ++k) {
        ASSERT_EQ(rows[p * row + k], g.node_config_feat[idx[p] * row + k]) << p << " " << k;
      }
    }
  };
  // No cache (the default): every read decodes its blocks.
  ASSERT_TRUE((*r)->ReadLayoutConfigs(0, idx).ok());
  ASSERT_TRUE((*r)->ReadLayoutConfigs(0, idx).ok());
  EXPECT_EQ((*r)->blocks_decoded(), 8);
  EXPECT_EQ((*r)->blocks_cached(), 0);
  // Room for every block: the second read comes from memory.
  (*r)->SetBlockCacheBytes(64 * block_bytes);
  for (int pass = 0; pass < 2; ++pass) {
    auto rows = (*r)->ReadLayoutConfigs(0, idx);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    expect_rows(*rows);
  }
  EXPECT_EQ((*r)->blocks_decoded(), 12);
  EXPECT_EQ((*r)->blocks_cached(), 4);
  auto range = (*r)->ReadLayoutConfigRange(0, 14, 50);  // blocks 0-3: 0 and 1 cached
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(*range, std::vector<int8_t>(g.node_config_feat.begin() + 14 * row,
                                        g.node_config_feat.begin() + 50 * row));
  EXPECT_EQ((*r)->blocks_decoded(), 14);
  EXPECT_EQ((*r)->blocks_cached(), 6);
  // Room for two blocks: shrinking keeps the two most recent (3 and 2); reading 3, then 2
  // leaves 3 the least recent, so block 0, decoded again, takes its place.
  (*r)->SetBlockCacheBytes(2 * block_bytes);
  ASSERT_TRUE((*r)->ReadLayoutConfigs(0, {50}).ok());
  ASSERT_TRUE((*r)->ReadLayoutConfigs(0, {40}).ok());
  EXPECT_EQ((*r)->blocks_cached(), 8);
  ASSERT_TRUE((*r)->ReadLayoutConfigs(0, {0}).ok());
  EXPECT_EQ((*r)->blocks_decoded(), 15);
  // Blocks 0 and 2 are held now, 3 is gone.
  ASSERT_TRUE((*r)->ReadLayoutConfigs(0, {2, 35}).ok());
  EXPECT_EQ((*r)->blocks_cached(), 10);
  ASSERT_TRUE((*r)->ReadLayoutConfigs(0, {50}).ok());
  EXPECT_EQ((*r)->blocks_decoded(), 16);
  // Off again: nothing is served from memory.
  (*r)->SetBlockCacheBytes(0);
  ASSERT_TRUE((*r)->ReadLayoutConfigs(0, {50}).ok());
  EXPECT_EQ((*r)->blocks_cached(), 10);
  EXPECT_EQ((*r)->blocks_decoded(), 17);
}

TEST(DatasetTest, SubsetReadDoesNotTouchOtherBlocks) {
  // Corrupt a block the request does not need: the read still succeeds; reading it fails.
  TempDir tmp;
  Graph g = RandomLayout("g", 10, 5, 64, 2, 5);
  DatasetWriterOptions opt;
  opt.target_block_bytes = 2 * 18 * 8;  // 8 blocks of 8 configs
  opt.compression_level = 0;
  std::string path = WriteDataset(tmp.File("d.tpug"), {g}, opt);
  std::string bytes = ReadBytes(path);
  // Locate block 7's values: the stored values of configs 56..63 appear verbatim (no zlib).
  std::string needle(reinterpret_cast<const char*>(g.node_config_feat.data()) + 56 * 36, 8 * 36);
  size_t pos = bytes.rfind(needle);
  ASSERT_NE(pos, std::string::npos);
  bytes[pos + 5] ^= 0x40;
  WriteBytes(path, bytes);
  auto r = DatasetReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE((*r)->ReadLayoutConfigs(0, {0, 9, 40}).ok());
  auto bad = (*r)->ReadLayoutConfigs(0, {60});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("CRC mismatch"), std::string::npos);
  EXPECT_NE(bad.status().message().find("config block 7"), std::string::npos);
}

TEST(DatasetTest, StreamingAppendInPieces) {
  TempDir tmp;
  Graph g = RandomLayout("s", 12, 20, 101, 3, 11);
  Graph head = g;
  head.node_config_feat.clear();
  DatasetWriterOptions opt;
  opt.target_block_bytes = 3 * 18 * 10;
  auto w = DatasetWriter::Create(tmp.File("d.tpug"), opt);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->BeginGraph(head).ok());
  const int64_t row = 3 * 18;
  int64_t done = 0;
  for (int64_t piece : {1, 0, 7, 33, 10, 50}) {
    ASSERT_TRUE((*w)->AppendLayoutConfigs(g.node_config_feat.data() + done * row, piece).ok());
    done += piece;
  }
  EXPECT_FALSE((*w)->AppendLayoutConfigs(g.node_config_feat.data(), 1).ok());  // 102 > 101
  ASSERT_TRUE((*w)->Finish().ok());
  auto r = DatasetReader::Open(tmp.File("d.tpug"));
  ASSERT_TRUE(r.ok());
  auto back = (*r)->ReadGraph(0);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  testing::ExpectSameGraph(*back, g);
}

TEST(DatasetTest, IncompleteStreamedGraphIsAnError) {
  TempDir tmp;
  Graph g = RandomLayout("s", 12, 20, 10, 3, 11);
  Graph head = g;
  head.node_config_feat.clear();
  auto w = DatasetWriter::Create(tmp.File("d.tpug"));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->BeginGraph(head).ok());
  ASSERT_TRUE((*w)->AppendLayoutConfigs(g.node_config_feat.data(), 4).ok());
  Status s = (*w)->Finish();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("declares 10 layout configs but 4"), std::string::npos);
  w->reset();
  EXPECT_TRUE(tmp.List().empty());  // nothing left behind
}

TEST(DatasetTest, AbortedGraphIsInvisible) {
  TempDir tmp;
  Graph a = RandomLayout("a", 12, 20, 10, 3, 1), b = RandomTile("b", 4, 3, 2, 2);
  Graph head = a;
  head.node_config_feat.clear();
  auto w = DatasetWriter::Create(tmp.File("d.tpug"));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->BeginGraph(head).ok());
  ASSERT_TRUE((*w)->AppendLayoutConfigs(a.node_config_feat.data(), 4).ok());
  (*w)->AbortGraph();
  ASSERT_TRUE((*w)->Add(b).ok());
  ASSERT_TRUE((*w)->Add(a).ok());  // the name is free again
  ASSERT_TRUE((*w)->Finish().ok());
  auto r = DatasetReader::Open(tmp.File("d.tpug"));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)->num_graphs(), 2);
  testing::ExpectSameGraph((*r)->ReadGraph(1).value(), a);
}

TEST(DatasetTest, NothingVisibleBeforeFinish) {
  TempDir tmp;
  {
    auto w = DatasetWriter::Create(tmp.File("d.tpug"));
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add(RandomTile("t", 3, 2, 1, 1)).ok());
    EXPECT_FALSE(std::filesystem::exists(tmp.File("d.tpug")));
  }
  EXPECT_TRUE(tmp.List().empty());
}

TEST(DatasetTest, RejectsInvalidAndDuplicateGraphs) {
  TempDir tmp;
  auto w = DatasetWriter::Create(tmp.File("d.tpug"));
  ASSERT_TRUE(w.ok());
  Graph g = RandomTile("t", 3, 2, 1, 1);
  ASSERT_TRUE((*w)->Add(g).ok());
  Status dup = (*w)->Add(g);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.message().find("duplicate graph 't'"), std::string::npos);
  Graph bad = RandomTile("u", 3, 2, 1, 1);
  bad.edge_index[0] = 3;
  EXPECT_FALSE((*w)->Add(bad).ok());
  Graph layout = RandomLayout("l", 3, 2, 2, 1, 1);
  layout.node_config_feat.clear();
  Status missing = (*w)->Add(layout);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("layout configs are missing"), std::string::npos);
}

TEST(DatasetTest, EmptyDataset) {
  TempDir tmp;
  std::string path = WriteDataset(tmp.File("e.tpug"), {});
  auto r = DatasetReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->num_graphs(), 0);
  EXPECT_EQ((*r)->Find("tile:xla", "x"), -1);
  EXPECT_FALSE((*r)->ReadGraph(0).ok());
}

TEST(DatasetTest, WrongMagic) {
  TempDir tmp;
  WriteBytes(tmp.File("x.tpug"), std::string(100, 'x'));
  auto r = DatasetReader::Open(tmp.File("x.tpug"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a tpugraphs dataset"), std::string::npos);
  EXPECT_NE(r.status().message().find("x.tpug"), std::string::npos);
  WriteBytes(tmp.File("short"), "TPU");
  EXPECT_NE(DatasetReader::Open(tmp.File("short")).status().message().find("not a tpugraphs"),
            std::string::npos);
}

TEST(DatasetTest, NewerVersion) {
  TempDir tmp;
  std::string path = WriteDataset(tmp.File("d.tpug"), {RandomTile("t", 3, 2, 1, 1)});
  std::string bytes = ReadBytes(path);
  bytes.replace(0, kFileHeaderSize, EncodeFileHeader(3, kFileKindDataset));
  WriteBytes(path, bytes);
  auto r = DatasetReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("format v3 is newer than supported v1"), std::string::npos)
      << r.status().message();
}

TEST(DatasetTest, TruncatedAtManyCutPoints) {
  TempDir tmp;
  std::string path = WriteDataset(tmp.File("d.tpug"),
                                  {RandomTile("t", 9, 8, 3, 1), RandomLayout("l", 9, 8, 40, 2, 2)});
  const std::string bytes = ReadBytes(path);
  std::vector<size_t> cuts = {0,
                              7,
                              8,
                              31,
                              32,
                              33,
                              100,
                              bytes.size() / 2,
                              bytes.size() - 33,
                              bytes.size() - 32,
                              bytes.size() - 1};
  for (size_t cut : cuts) {
    WriteBytes(tmp.File("cut.tpug"), bytes.substr(0, cut));
    auto r = DatasetReader::Open(tmp.File("cut.tpug"));
    ASSERT_FALSE(r.ok()) << "cut at " << cut;
    EXPECT_NE(r.status().message().find("cut.tpug"), std::string::npos) << r.status().message();
  }
}

TEST(DatasetTest, FlippedByteInEveryRecordIsDetected) {
  TempDir tmp;
  Graph t = RandomTile("tiley", 9, 8, 3, 1);
  Graph l = RandomLayout("layouty", 9, 8, 40, 2, 2);
  std::string path = WriteDataset(tmp.File("d.tpug"), {t, l});
  const std::string bytes = ReadBytes(path);
  // Flip each byte in turn (stepping through the file) and check that no read returns wrong
  // data silently: either Open fails or reading the graphs fails or the data is unchanged
  // (bytes of the header's reserved area are not covered by anything but the header CRC).
  int detected = 0;
  // Every byte of the header and footer, and every 11th byte in between.
  std::vector<size_t> positions;
  for (size_t pos = 0; pos < bytes.size(); ++pos) {
    if (pos < kFileHeaderSize || pos + kFooterSize >= bytes.size() || pos % 11 == 0) {
      positions.push_back(pos);
    }
  }
  for (size_t pos : positions) {
    std::string bad = bytes;
    bad[pos] ^= 0x10;
    WriteBytes(tmp.File("bad.tpug"), bad);
    auto r = DatasetReader::Open(tmp.File("bad.tpug"));
    if (!r.ok()) {
      ++detected;
      continue;
    }
    auto g0 = (*r)->ReadGraph(0), g1 = (*r)->ReadGraph(1);
    if (!g0.ok() || !g1.ok()) {
      ++detected;
      const Status& s = !g0.ok() ? g0.status() : g1.status();
      EXPECT_NE(s.message().find("bad.tpug"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("graph '"), std::string::npos) << s.message();
      continue;
    }
    ADD_FAILURE() << "flip at " << pos << " of " << bytes.size() << " went unnoticed";
  }
  EXPECT_GT(detected, 0);
}

TEST(DatasetTest, FlippedByteNamesGraphAndCrc) {
  TempDir tmp;
  Graph t = RandomTile("tiley", 9, 8, 3, 1);
  DatasetWriterOptions opt;
  opt.compression_level = 0;
  std::string path = WriteDataset(tmp.File("d.tpug"), {t}, opt);
  std::string bytes = ReadBytes(path);
  bytes[kFileHeaderSize + kFrameHeaderSize + 40] ^= 1;  // inside the graph record payload
  WriteBytes(path, bytes);
  auto r = DatasetReader::Open(path);
  ASSERT_TRUE(r.ok());
  auto g = (*r)->ReadGraph(0);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(g.status().message().find(path), std::string::npos);
  EXPECT_NE(g.status().message().find("graph 'tiley'"), std::string::npos);
  EXPECT_NE(g.status().message().find("CRC mismatch"), std::string::npos) << g.status().message();
}

TEST(DatasetTest, HugeDeclaredRecordLength) {
  TempDir tmp;
  std::string path = WriteDataset(tmp.File("d.tpug"), {RandomTile("t", 9, 8, 3, 1)});
  std::string bytes = ReadBytes(path);
  // The graph record's stored length field (frame bytes 8..15) claims 2^62 bytes.
  PutU64(bytes.data() + kFileHeaderSize + 8, uint64_t{1} << 62);
  WriteBytes(path, bytes);
  auto r = DatasetReader::Open(path);
  ASSERT_TRUE(r.ok());
  auto g = (*r)->ReadGraph(0);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("exceeds"), std::string::npos) << g.status().message();
  // And a decoded size far beyond what the stored bytes can expand to.
  std::string fresh = ReadBytes(WriteDataset(tmp.File("e.tpug"), {RandomTile("t", 9, 8, 3, 1)}));
  // The CRC is recomputed so that the size checks, not the CRC, must catch it.
  for (uint64_t claimed : {uint64_t{1} << 40, uint64_t{1} << 30}) {
    char* frame = fresh.data() + kFileHeaderSize;
    PutU64(frame + 16, claimed);
    const uint64_t stored = GetU64(frame + 8);
    uint32_t crc = Crc32(std::string_view(frame + 4, kFrameHeaderSize - 4));
    PutU32(frame, Crc32(std::string_view(frame + kFrameHeaderSize, stored), crc));
    WriteBytes(tmp.File("e.tpug"), fresh);
    auto r2 = DatasetReader::Open(tmp.File("e.tpug"));
    ASSERT_TRUE(r2.ok());
    auto g2 = (*r2)->ReadGraph(0);
    ASSERT_FALSE(g2.ok());
    const std::string& msg = g2.status().message();
    EXPECT_TRUE(msg.find("exceeds the limit") != std::string::npos ||
                msg.find("is impossible for") != std::string::npos)
        << msg;
  }
}

TEST(DatasetTest, ForgedIndexCountsAreRejected) {
  // A CRC-valid index whose counts no file of this size can hold (hostile input).
  TempDir tmp;
  for (int variant = 0; variant < 3; ++variant) {
    dataset::DatasetIndex index;
    auto* e = index.add_graphs();
    e->set_name("g");
    e->set_collection("layout:xla:random");
    e->set_kind(dataset::TASK_KIND_LAYOUT);
    e->set_num_nodes(variant == 0 ? (int64_t{1} << 60) : 10);
    e->set_num_configs(variant == 1 ? (int64_t{1} << 61) : 5);
    e->set_num_config_nodes(variant == 2 ? 11 : 2);
    e->set_graph_offset(kFileHeaderSize);
    e->set_configs_per_block(5);
    e->add_block_offsets(kFileHeaderSize);
    std::string file = EncodeFileHeader(kFormatVersion, kFileKindDataset);
    const uint64_t index_offset = file.size();
    std::string frame = EncodeFrame(RecordType::kIndex, index.SerializeAsString(), 0).value();
    file += frame + EncodeFooter(index_offset, frame.size());
    WriteBytes(tmp.File("forged.tpug"), file);
    auto r = DatasetReader::Open(tmp.File("forged.tpug"));
    ASSERT_FALSE(r.ok()) << variant;
    EXPECT_NE(r.status().message().find("impossible"), std::string::npos) << r.status().message();
  }
}

TEST(DatasetTest, ConcurrentReadsAgree) {
  TempDir tmp;
  Graph g = RandomLayout("c", 40, 50, 500, 6, 3);
  DatasetWriterOptions opt;
  opt.target_block_bytes = 6 * 18 * 20;
  std::string path = WriteDataset(tmp.File("d.tpug"), {g}, opt);
  auto r = DatasetReader::Open(path);
  ASSERT_TRUE(r.ok());
  const DatasetReader& reader = **r;
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) {
        int64_t k = (t * 97 + rep * 31) % 500;
        auto rows = reader.ReadLayoutConfigs(0, {k});
        if (rows.ok() &&
            std::equal(rows->begin(), rows->end(), g.node_config_feat.begin() + k * 6 * 18)) {
          ++ok[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(4, 20));
}

}  // namespace
}  // namespace tpugraphs::io
