#include "tpugraphs/synth/release_shaped.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/synth/synth.h"

namespace tpugraphs::synth {
namespace {

namespace fs = std::filesystem;
using tpugraphs::testing::TempDir;

SynthConfig ReleaseConfig(double scale, uint64_t seed, const std::string& output = "") {
  SynthConfig c = DefaultSynthConfig();
  c.set_release_shaped(scale);
  c.set_seed(seed);
  c.set_output(output);
  return c;
}

// The release's graph counts per collection and split (release_shaped.h).
const std::map<std::pair<std::string, std::string>, int64_t>& ReleaseCounts() {
  static const auto* counts = new std::map<std::pair<std::string, std::string>, int64_t>{
      {{"tile:xla", "train"}, 5709},
      {{"tile:xla", "valid"}, 676},
      {{"tile:xla", "test"}, 844},
      {{"layout:xla:random", "train"}, 69},
      {{"layout:xla:random", "valid"}, 7},
      {{"layout:xla:random", "test"}, 8},
      {{"layout:xla:default", "train"}, 61},
      {{"layout:xla:default", "valid"}, 7},
      {{"layout:xla:default", "test"}, 8},
      {{"layout:nlp:random", "train"}, 207},
      {{"layout:nlp:random", "valid"}, 20},
      {{"layout:nlp:random", "test"}, 17},
      {{"layout:nlp:default", "train"}, 198},
      {{"layout:nlp:default", "valid"}, 20},
      {{"layout:nlp:default", "test"}, 17}};
  return *counts;
}

std::map<std::pair<std::string, std::string>, int64_t> PlanCounts(
    const std::vector<ReleaseShapedBatch>& plan) {
  std::map<std::pair<std::string, std::string>, int64_t> counts;
  for (const auto& b : plan)
    counts[{b.collection, b.split}] += static_cast<int64_t>(b.names.size());
  return counts;
}

// Every regular file below `root` (relative path -> bytes).
std::map<std::string, std::string> TreeFiles(const std::string& root) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    auto bytes = ReadFileToString(e.path().string());
    EXPECT_TRUE(bytes.ok()) << e.path();
    files[fs::relative(e.path(), root).string()] = bytes.ok() ? *bytes : "";
  }
  return files;
}

TEST(ReleaseShapedTest, CountsScaleWithS) {
  EXPECT_EQ(ScaledReleaseCount(1, 5709), 5709);
  EXPECT_EQ(ScaledReleaseCount(0.004, 5709), 23);  // 22.8
  EXPECT_EQ(ScaledReleaseCount(0.05, 5709), 285);  // 285.45
  EXPECT_EQ(ScaledReleaseCount(0.004, 69), 1);     // 0.28 rounds to 0, at least 1
  EXPECT_EQ(ScaledReleaseCount(0.1, 7), 1);        // 0.7
  EXPECT_EQ(ScaledReleaseCount(0.1, 17), 2);       // 1.7
  EXPECT_EQ(ScaledReleaseCount(2, 17), 34);
  EXPECT_EQ(ScaledReleaseCount(0.5, 0), 0);
  for (double scale : {0.004, 0.05, 0.3, 1.0}) {
    SCOPED_TRACE(scale);
    const auto counts = PlanCounts(PlanReleaseShaped(ReleaseConfig(scale, 1)));
    ASSERT_EQ(counts.size(), ReleaseCounts().size());
    for (const auto& [key, release] : ReleaseCounts()) {
      EXPECT_EQ(counts.at(key), ScaledReleaseCount(scale, release))
          << key.first << " " << key.second;
    }
  }
  // S = 1 is the release.
  EXPECT_EQ(PlanCounts(PlanReleaseShaped(ReleaseConfig(1, 3))), ReleaseCounts());
}

TEST(ReleaseShapedTest, PlanDrawsWithinTheFiguresAndCaps) {
  const auto plan = PlanReleaseShaped(ReleaseConfig(1, 5));
  std::map<std::string, std::vector<int64_t>> tile_configs;
  for (const auto& b : plan) {
    SCOPED_TRACE(b.collection + " " + b.split + " " + b.names.front());
    if (b.collection == "tile:xla") {
      EXPECT_EQ(b.nodes, 0);
      EXPECT_GE(b.configs, 8);
      EXPECT_LE(b.configs, 6900);
      EXPECT_LE(b.names.size(), 8u);
      tile_configs[b.split].push_back(b.configs);
      continue;
    }
    ASSERT_EQ(b.names.size(), 1u);
    EXPECT_GE(b.nodes, 372);
    EXPECT_LE(b.nodes, 43615);
    if (b.split == "test") {
      EXPECT_EQ(b.configs, 1000);
    } else {
      EXPECT_GE(b.configs, 20);
      EXPECT_LE(b.configs, 100040);
    }
  }
  // Tile batches: all but the last of a split hold 8 kernels.
  EXPECT_EQ(tile_configs["train"].size(), (5709u + 7) / 8);
  // Graph i of a source and split: the same size and seed in both searches.
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, uint64_t>> random;
  for (const auto& b : plan) {
    if (b.collection.ends_with(":random")) random[{b.split, b.names[0]}] = {b.nodes, b.seed};
  }
  int64_t paired = 0;
  for (const auto& b : plan) {
    if (!b.collection.ends_with(":default")) continue;
    const auto it = random.find({b.split, b.names[0]});
    ASSERT_NE(it, random.end()) << b.names[0];
    EXPECT_EQ(it->second, std::make_pair(b.nodes, b.seed)) << b.names[0];
    ++paired;
  }
  EXPECT_EQ(paired, 61 + 7 + 8 + 198 + 20 + 17);
  // The caps.
  SynthConfig capped = ReleaseConfig(0.05, 5);
  capped.set_release_max_configs(40);
  capped.set_release_max_nodes(300);
  for (const auto& b : PlanReleaseShaped(capped)) {
    EXPECT_LE(b.configs, 40);
    EXPECT_LE(b.nodes, 300);
    if (b.collection != "tile:xla") {
      EXPECT_GT(b.nodes, 0);
    }
  }
}

TEST(ReleaseShapedTest, DrawsFollowTheFigures) {
  // Log-normal (mean >= median): the median is the figure's, values clipped to [min, max].
  Rng rng(DeriveSeed(11, "release-shaped-test"));
  std::vector<int64_t> v = DrawReleaseFigure({1842, 1100, 8, 6900}, 20000, rng);
  ASSERT_EQ(v.size(), 20000u);
  EXPECT_EQ(*std::min_element(v.begin(), v.end()) >= 8, true);
  EXPECT_EQ(*std::max_element(v.begin(), v.end()), 6900);  // about 3.5 % are clipped there
  std::nth_element(v.begin(), v.begin() + 10000, v.end());
  EXPECT_NEAR(static_cast<double>(v[10000]), 1100, 0.04 * 1100);
  // Normal (mean < median, bunched at the cap): the mean is the figure's.
  v = DrawReleaseFigure({65012, 67000, 11098, 100040}, 20000, rng);
  double sum = 0;
  for (int64_t x : v) {
    EXPECT_GE(x, 11098);
    EXPECT_LE(x, 100040);
    sum += static_cast<double>(x);
  }
  EXPECT_NEAR(sum / 20000, 65012, 0.03 * 65012);
  // Unclipped log-normal: the mean too.
  v = DrawReleaseFigure({12745, 10449, 1, 100000000}, 40000, rng);
  sum = 0;
  for (int64_t x : v) sum += static_cast<double>(x);
  EXPECT_NEAR(sum / 40000, 12745, 0.03 * 12745);
}

TEST(ReleaseShapedTest, SameSeedSameTreeOtherSeedOtherTree) {
  TempDir a, b, c;
  ThreadPool pool(2), pool1(1);
  auto write = [](const std::string& out, uint64_t seed, ThreadPool* p) {
    SynthConfig config = ReleaseConfig(0.001, seed, out);
    config.set_release_max_configs(12);
    config.set_release_max_nodes(200);
    EXPECT_TRUE(ValidateSynthConfig(&config).ok());
    auto counts = WriteReleaseShaped(config, p);
    EXPECT_TRUE(counts.ok()) << counts.status().message();
    return counts.ok() ? *counts : std::vector<ReleaseShapedCount>{};
  };
  const auto counts = write(a.path(), 4, &pool);
  write(b.path(), 4, &pool1);
  write(c.path(), 5, &pool);
  // S = 0.001: tile 6/1/1 kernels, every layout collection and split 1 graph.
  ASSERT_EQ(counts.size(), 15u);
  EXPECT_EQ(counts[0].graphs, 6);
  EXPECT_EQ(counts[1].graphs, 1);
  const auto files_a = TreeFiles(a.path()), files_b = TreeFiles(b.path()),
             files_c = TreeFiles(c.path());
  EXPECT_FALSE(fs::exists(a.File(".work")));
  EXPECT_EQ(files_a.size(), 6u + 1 + 1 + 12 + 1);  // the .npz files and shape.tsv
  EXPECT_TRUE(files_a.count("shape.tsv"));
  EXPECT_TRUE(files_a.count("npz/layout/nlp/default/test/nlp_test_000.npz"));
  EXPECT_TRUE(files_a.count("npz/tile/xla/train/train_b0_kernel_00005_kernel_00005.npz"));
  // Same seed, another thread count: byte-identical files.
  ASSERT_EQ(files_a.size(), files_b.size());
  for (const auto& [path, bytes] : files_a) {
    ASSERT_TRUE(files_b.count(path)) << path;
    EXPECT_TRUE(files_b.at(path) == bytes) << path;
  }
  // Another seed: the same layout of files, other contents.
  ASSERT_EQ(files_a.size(), files_c.size());
  int64_t differ = 0;
  for (const auto& [path, bytes] : files_a) {
    ASSERT_TRUE(files_c.count(path)) << path;
    differ += files_c.at(path) != bytes;
  }
  EXPECT_GE(differ, static_cast<int64_t>(files_a.size()) - 1);
  // shape.tsv: a header and one line per file, as planned.
  SynthConfig config = ReleaseConfig(0.001, 4, a.path());
  config.set_release_max_configs(12);
  config.set_release_max_nodes(200);
  EXPECT_EQ(files_a.at("shape.tsv"), ReleaseShapeTsv(PlanReleaseShaped(config)));
  std::istringstream lines(files_a.at("shape.tsv"));
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "collection\tsplit\tname\tnodes\tconfigs");
  int64_t rows = 0;
  while (std::getline(lines, line)) ++rows;
  EXPECT_EQ(rows, 6 + 1 + 1 + 12);
}

TEST(ReleaseShapedTest, ValidationNamesTheFlags) {
  SynthConfig c = ReleaseConfig(-1, 1, "out");
  EXPECT_NE(ValidateSynthConfig(&c).message().find("--release-shaped"), std::string::npos);
  c = ReleaseConfig(0.1, 1, "out");
  c.set_release_max_configs(1);
  EXPECT_NE(ValidateSynthConfig(&c).message().find("--cap-configs"), std::string::npos);
  c = ReleaseConfig(0.1, 1, "out");
  c.set_release_max_nodes(10);
  EXPECT_NE(ValidateSynthConfig(&c).message().find("--cap-nodes"), std::string::npos);
  c = ReleaseConfig(0.1, 1, "out");
  c.set_from("x.pb");
  EXPECT_NE(ValidateSynthConfig(&c).message().find("--from"), std::string::npos);
  c = ReleaseConfig(0.1, 1, "out");
  EXPECT_TRUE(ValidateSynthConfig(&c).ok());
}

}  // namespace
}  // namespace tpugraphs::synth
