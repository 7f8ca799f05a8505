#include <gtest/gtest.h>

#include <cstdlib>

#include "testing/test_util.h"
#include "tpugraphs/ingest/export.h"
#include "tpugraphs/ingest/ingest.h"
#include "tpugraphs/synth/synth.h"

namespace tpugraphs::synth {
namespace {

using tpugraphs::testing::TempDir;

// One synthesised graph, ingested and exported: its summary and its release .npz.
struct Exported {
  SynthGraphSummary summary;
  std::string npz;
};

Exported SynthAndExport(const std::string& task, const std::string& dir) {
  SynthConfig c = DefaultSynthConfig();
  c.set_task(task);
  c.set_graphs(1);
  c.set_min_nodes(200);
  c.set_max_nodes(400);
  c.set_configs(20);
  c.set_seed(7);
  c.set_output(dir + "/raw");
  EXPECT_TRUE(ValidateSynthConfig(&c).ok());
  ThreadPool pool(2);
  auto summaries = RunSynth(c, &pool);
  EXPECT_TRUE(summaries.ok()) << summaries.status().message();
  IngestConfig ic;
  ic.add_inputs(dir + "/raw");
  ic.set_output(dir + "/data.tpug");
  EXPECT_TRUE(ingest::RunIngest(ic).ok());
  ingest::ExportOptions eo;
  eo.dataset = dir + "/data.tpug";
  eo.output_dir = dir + "/tree";
  auto exported = ingest::ExportDataset(eo);
  EXPECT_TRUE(exported.ok()) << exported.status().message();
  EXPECT_EQ(exported->files.size(), 1u);
  return {summaries->at(0), exported->files.at(0)};
}

TEST(ScoreConfigFileTest, LayoutScoresAreTheRecordedNoiseFreeCosts) {
  TempDir dir;
  const Exported e = SynthAndExport("layout", dir.path());
  auto scores = ScoreConfigFile(e.npz, e.summary.path);
  ASSERT_TRUE(scores.ok()) << scores.status().message();
  EXPECT_EQ(scores->task, TaskKind::kLayout);
  EXPECT_EQ(scores->noise_free_ns, e.summary.noise_free_ns);
}

TEST(ScoreConfigFileTest, TileScoresWithinOneNanosecond) {
  TempDir dir;
  const Exported e = SynthAndExport("tile", dir.path());
  auto scores = ScoreConfigFile(e.npz, e.summary.path);
  ASSERT_TRUE(scores.ok()) << scores.status().message();
  EXPECT_EQ(scores->task, TaskKind::kTile);
  ASSERT_EQ(scores->noise_free_ns.size(), e.summary.noise_free_ns.size());
  for (size_t i = 0; i < scores->noise_free_ns.size(); ++i) {
    EXPECT_LE(std::llabs(scores->noise_free_ns[i] - e.summary.noise_free_ns[i]), 1) << i;
  }
}

TEST(ScoreConfigFileTest, ErrorsNameBothFiles) {
  TempDir layout_dir, tile_dir;
  const Exported layout = SynthAndExport("layout", layout_dir.path());
  const Exported tile = SynthAndExport("tile", tile_dir.path());
  auto wrong = ScoreConfigFile(tile.npz, layout.summary.path);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("no node_config_feat"), std::string::npos);
  EXPECT_NE(wrong.status().message().find(layout.summary.path), std::string::npos);
  wrong = ScoreConfigFile(layout.npz, tile.summary.path);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("no config_feat"), std::string::npos);
  EXPECT_FALSE(ScoreConfigFile(layout_dir.File("missing.npz"), layout.summary.path).ok());
}

}  // namespace
}  // namespace tpugraphs::synth
