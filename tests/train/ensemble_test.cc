// Ensembles trained by `train` (TrainConfig.ensemble_members): one file holding members that are
// exactly the models each member's run trains alone, scored as `evaluate --model A --model B`
// scores the separate files.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/eval/evaluate.h"
#include "tpugraphs/eval/scorer.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/io/record_format.h"
#include "tpugraphs/train/model_file.h"
#include "tpugraphs/train/model_scorer.h"
#include "tpugraphs/train/train_config.h"
#include "tpugraphs/train/trainer.h"
#include "train_test_util.h"

namespace tpugraphs::train {
namespace {

using ::tpugraphs::testing::TempDir;

TrainConfig EnsembleConfig(const std::string& dataset, const std::string& output) {
  return testing::SmallTrainConfig(dataset, output);
}

// Member `m` of the ensemble `c` describes, trained alone into `output`.
TrainConfig MemberAlone(TrainConfig c, int m, const std::string& output) {
  c.set_output(output);
  if (m > 0) {
    c.set_ensemble_member(m);
  } else {
    c.set_ensemble_members(1);  // member 0 alone is the single model of the seed
  }
  return c;
}

// Every configuration's score of graph i.
std::vector<double> ScoresOf(eval::ConfigScorer& scorer, const io::DatasetReader& r, int64_t i) {
  auto g = r.ReadGraph(i, true);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  std::vector<int64_t> all(g->num_configs);
  std::iota(all.begin(), all.end(), 0);
  eval::ScoringInput input{*g, &r, i};
  auto s = scorer.Score(input, all);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : std::vector<double>();
}

TEST(EnsembleTest, TheFileHoldsTheMembersTrainedAloneAndScoresAsTheirEnsemble) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 5, 3).ok());
  TrainConfig c = EnsembleConfig(data, dir.File("ens.tpm"));
  c.set_ensemble_members(3);
  auto r = Train(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->member_metrics.size(), 3u);
  // Only the ensemble file is left: the member files and their checkpoints are gone.
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"data.tpug", "ens.tpm"}));
  auto bytes = ReadFileToString(c.output());
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(io::GetU32(bytes->data() + 8), 2u);  // format version 2 in the header
  auto file = DecodeModelFile(*bytes, "ens", kFileKindModel);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->format_version(), 2u);
  ASSERT_EQ(file->ensemble_size(), 2);
  EXPECT_EQ(file->train_config().ensemble_members(), 3);
  EXPECT_EQ(file->train_config().output(), c.output());
  EXPECT_DOUBLE_EQ(file->summary().ensemble_metric(), r->best_metric);

  // Each member is the model its run trains alone.
  std::vector<std::string> alone;
  for (int m = 0; m < 3; ++m) {
    TrainConfig mc = MemberAlone(c, m, dir.File("m" + std::to_string(m) + ".tpm"));
    auto rm = Train(mc);
    ASSERT_TRUE(rm.ok()) << rm.status().ToString();
    EXPECT_TRUE(rm->member_metrics.empty());
    // The ensemble's figure for the member is the member's own validation result.
    EXPECT_DOUBLE_EQ(r->member_metrics[m], rm->best_metric) << m;
    auto f = ReadModelFile(mc.output());
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->format_version(), 1u);
    EXPECT_EQ(f->parameters(), m == 0 ? file->parameters() : file->ensemble(m - 1).parameters())
        << m;
    alone.push_back(mc.output());
  }
  EXPECT_NE(file->parameters(), file->ensemble(0).parameters());
  EXPECT_NE(file->ensemble(0).parameters(), file->ensemble(1).parameters());

  // Scoring the file is scoring the three files as an ensemble (mean of standardised scores).
  auto reader = io::DatasetReader::Open(data);
  ASSERT_TRUE(reader.ok());
  auto one = ModelScorer::Load(c.output(), 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ((*one)->num_members(), 3);
  std::vector<std::unique_ptr<eval::ConfigScorer>> members;
  for (const std::string& path : alone) {
    auto s = ModelScorer::Load(path, 1);
    ASSERT_TRUE(s.ok());
    members.push_back(std::move(s).value());
  }
  eval::EnsembleScorer three(std::move(members), eval::EnsembleCombine::kStandardizedMean);
  for (int64_t i = 0; i < (*reader)->num_graphs(); ++i) {
    EXPECT_EQ(ScoresOf(**one, **reader, i), ScoresOf(three, **reader, i)) << i;
  }
  // The members score side by side (a task per member and chunk): the same scores on 1, 2 and 3
  // threads.
  for (int threads : {2, 3}) {
    auto side = ModelScorer::Load(c.output(), threads);
    ASSERT_TRUE(side.ok());
    for (int64_t i = 0; i < (*reader)->num_graphs(); ++i) {
      EXPECT_EQ(ScoresOf(**one, **reader, i), ScoresOf(**side, **reader, i)) << i << " " << threads;
    }
  }
  // Configuration values read from the file as the scoring goes (`predict`, `evaluate`): the same
  // scores, and the members share each chunk's values, so the three-member file decodes the
  // dataset's blocks as often as member 0's file alone does (each member decoding its own copy
  // made it three times as often).
  for (int threads : {1, 3}) {
    auto ensemble = ModelScorer::Load(c.output(), threads);
    auto single = ModelScorer::Load(alone[0], threads);
    ASSERT_TRUE(ensemble.ok() && single.ok());
    for (int64_t i = 0; i < (*reader)->num_graphs(); ++i) {
      auto loaded = (*reader)->ReadGraph(i, true);
      ASSERT_TRUE(loaded.ok());
      std::vector<int64_t> all(loaded->num_configs);
      std::iota(all.begin(), all.end(), 0);
      int64_t decoded[2] = {0, 0};
      std::vector<double> scores[2];
      for (int which : {0, 1}) {
        auto fresh = io::DatasetReader::Open(data);  // no block decoded yet, no cache
        ASSERT_TRUE(fresh.ok());
        auto g = (*fresh)->ReadGraph(i, false);
        ASSERT_TRUE(g.ok()) << g.status().ToString();
        ASSERT_TRUE(g->node_config_feat.empty());
        const int64_t before = (*fresh)->blocks_decoded();
        eval::ScoringInput input{*g, fresh->get(), i};
        auto s = (which == 0 ? **ensemble : **single).Score(input, all);
        ASSERT_TRUE(s.ok()) << s.status().ToString();
        decoded[which] = (*fresh)->blocks_decoded() - before;
        scores[which] = *s;
      }
      EXPECT_EQ(scores[0], ScoresOf(**one, **reader, i)) << i << " " << threads;
      EXPECT_GT(decoded[1], 0) << i;
      EXPECT_EQ(decoded[0], decoded[1]) << i << " " << threads;
    }
  }
  // A graph prepared once (with each member's configuration-independent pass) and scored in
  // several calls, as `tune` scores its batches: each member's scores of one call, bit for bit;
  // another graph's preparation is refused.
  {
    auto g0 = (*reader)->ReadGraph(0, true);
    auto g1 = (*reader)->ReadGraph(1, true);
    ASSERT_TRUE(g0.ok() && g1.ok());
    eval::ScoringInput input{*g0, reader->get(), 0};
    std::vector<int64_t> all(g0->num_configs);
    std::iota(all.begin(), all.end(), 0);
    const int64_t graphs_before = (*one)->phases().graphs;
    auto whole = (*one)->ScoreMembers(input, all);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    auto prepared = (*one)->Prepare(*g0);
    ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
    std::vector<std::vector<double>> parts(3);
    for (size_t b = 0; b < all.size(); b += 2) {
      std::vector<int64_t> batch(all.begin() + b, all.begin() + std::min(all.size(), b + 2));
      auto s = (*one)->ScoreMembers(**prepared, input, batch);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      for (int m = 0; m < 3; ++m) parts[m].insert(parts[m].end(), (*s)[m].begin(), (*s)[m].end());
    }
    EXPECT_EQ(parts, *whole);
    // Prepared twice: for the one call, and once for the calls of the batches.
    EXPECT_EQ((*one)->phases().graphs, graphs_before + 2);
    eval::ScoringInput other{*g1, reader->get(), 1};
    auto refused = (*one)->ScoreMembers(**prepared, other, {0});
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("preparation of"), std::string::npos)
        << refused.status().message();
  }
  // The ensemble's validation metric is evaluate's on the validation graphs.
  auto kendalls = testing::EvaluatedKendalls(**reader, **one, "valid");
  ASSERT_TRUE(kendalls.ok()) << kendalls.status().ToString();
  ASSERT_EQ(kendalls->size(), 3u);
  EXPECT_NEAR(r->best_metric, std::accumulate(kendalls->begin(), kendalls->end(), 0.0) / 3, 1e-9);

  // A version-1 header cannot carry an ensemble, nor can a member hold a checkpoint.
  ModelFile v1 = *file;
  v1.set_format_version(1);
  auto bad = DecodeModelFile(EncodeModelFile(v1, kFileKindModel), "v1", kFileKindModel);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ensemble"), std::string::npos) << bad.status().message();
  // A member of another task is refused when the file is loaded, naming the member.
  ModelFile mixed = *file;
  mixed.mutable_ensemble(1)->set_task("tile");
  ASSERT_TRUE(WriteModelFile(dir.File("mixed.tpm"), mixed, kFileKindModel).ok());
  auto refused = ModelScorer::Load(dir.File("mixed.tpm"), 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("mixed.tpm: ensemble member 2"), std::string::npos)
      << refused.status().message();
  ModelFile nested = *file;
  nested.mutable_ensemble(0)->mutable_checkpoint()->set_epochs_done(1);
  bad = DecodeModelFile(EncodeModelFile(nested, kFileKindModel), "nested", kFileKindModel);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("member"), std::string::npos) << bad.status().message();
}

TEST(EnsembleTest, MembersShareTheHoldoutSplit) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 3, 0, 16, 40).ok());
  TrainConfig c = EnsembleConfig(data, dir.File("ens.tpm"));
  c.set_holdout_config_fraction(0.3);
  c.set_valid_split("");
  c.set_ensemble_members(2);
  auto r = Train(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Each member alone validates on the master seed's held-out configurations, which the
  // ensemble's validation uses too: the figures agree, and so does the ridge reference (computed
  // once for the ensemble).
  for (int m = 0; m < 2; ++m) {
    auto rm = Train(MemberAlone(c, m, dir.File("m" + std::to_string(m) + ".tpm")));
    ASSERT_TRUE(rm.ok()) << rm.status().ToString();
    EXPECT_DOUBLE_EQ(r->member_metrics[m], rm->best_metric) << m;
    EXPECT_EQ(rm->reference_name, "ridge");
    EXPECT_EQ(r->reference_name, "ridge");
    EXPECT_DOUBLE_EQ(r->reference_metric, rm->reference_metric);
  }
}

TEST(EnsembleTest, WithoutValidationGraphsTheFileHasNoEnsembleMetric) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kTile, 4, 0).ok());
  TrainConfig c = EnsembleConfig(data, dir.File("ens.tpm"));
  c.set_ensemble_members(2);
  auto r = Train(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->metric_name, "train_loss");
  EXPECT_TRUE(r->member_metrics.empty());
  auto alone = Train(MemberAlone(c, 0, dir.File("m0.tpm")));
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_DOUBLE_EQ(r->best_metric, alone->best_metric);  // member 0's training loss
  auto file = ReadModelFile(c.output());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->ensemble_size(), 1);
  EXPECT_FALSE(file->summary().has_ensemble_metric());
}

TEST(EnsembleTest, RunningAgainReusesFinishedMembersOfTheSameRun) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kTile, 5, 2).ok());
  TrainConfig c = EnsembleConfig(data, dir.File("ens.tpm"));
  c.set_ensemble_members(3);
  // Member 1 as an interrupted run left it, altered so that reuse shows: its parameters halved
  // (with self tests that match them).
  const std::string member1 = EnsembleMemberPathOf(c.output(), 1);
  ASSERT_TRUE(Train(MemberAlone(c, 1, member1)).ok());
  auto loaded = LoadModel(member1);
  ASSERT_TRUE(loaded.ok());
  model::CostModel& m1 = *loaded->model;
  for (int64_t i = 0; i < m1.num_parameters(); ++i) m1.parameters()[i] *= 0.5f;
  ModelFile planted = loaded->file;
  StoreModel(m1, &planted);
  planted.clear_self_test();
  ASSERT_TRUE(AddSelfTests(m1, 2, 5, &planted).ok());
  TrainConfig as_stored = planted.train_config();
  as_stored.set_output(member1);  // as the member's own run records it
  *planted.mutable_train_config() = as_stored;
  ASSERT_TRUE(WriteModelFile(member1, planted, kFileKindModel).ok());
  // Member 2 from another run (another learning rate): retrained.
  const std::string member2 = EnsembleMemberPathOf(c.output(), 2);
  TrainConfig other = MemberAlone(c, 2, member2);
  other.set_learning_rate(1e-2);
  ASSERT_TRUE(Train(other).ok());
  auto stale = ReadModelFile(member2);
  ASSERT_TRUE(stale.ok());

  auto r = Train(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto file = ReadModelFile(c.output());
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(file->ensemble_size(), 2);
  EXPECT_EQ(file->ensemble(0).parameters(), planted.parameters());
  EXPECT_NE(file->ensemble(1).parameters(), stale->parameters());
  auto fresh = Train(MemberAlone(c, 2, dir.File("m2.tpm")));
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(file->ensemble(1).parameters(), ReadModelFile(dir.File("m2.tpm"))->parameters());
  EXPECT_FALSE(std::filesystem::exists(member1));
  EXPECT_FALSE(std::filesystem::exists(member2));
}

// ensemble_member_alone: every member trained as its own run (as separate processes would),
// in any order, then the ensemble's command: the file equals the one run's (wall times aside),
// and the members' files are reused, not retrained.
// An ensemble file's bytes less what differs between equal runs: the paths, the wall times and,
// with `side_by_side`, TrainConfig.members_side_by_side; in its own model and in every member.
std::string Stripped(ModelFile f, bool side_by_side = false) {
  auto strip_one = [&](ModelFile* g) {
    g->mutable_train_config()->clear_output();
    if (side_by_side) g->mutable_train_config()->clear_members_side_by_side();
    for (EpochRecord& e : *g->mutable_summary()->mutable_history()) e.clear_wall_seconds();
  };
  strip_one(&f);
  for (ModelFile& g : *f.mutable_ensemble()) strip_one(&g);
  return f.SerializeAsString();
}

TEST(EnsembleTest, MembersTrainedAloneThenTheEnsemblesCommandEqualOneRun) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 5, 2, 40, 24).ok());
  TrainConfig c = EnsembleConfig(data, dir.File("one.tpm"));
  c.set_ensemble_members(3);
  c.set_seed(31);
  ASSERT_TRUE(Train(c).ok());

  TrainConfig split = c;
  split.set_output(dir.File("split.tpm"));
  for (int m : {2, 0, 1}) {
    TrainConfig alone = split;
    alone.set_ensemble_member(m);
    alone.set_ensemble_member_alone(true);
    auto r = Train(alone);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->output, EnsembleMemberPathOf(split.output(), m));
    EXPECT_TRUE(std::filesystem::exists(r->output));
    EXPECT_FALSE(std::filesystem::exists(split.output()));
    // Run again: found finished, not retrained.
    auto again = Train(alone);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->steps_run, 0);
  }
  auto r = Train(split);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->steps_run, 0) << "the ensemble's run retrained a member";
  auto a = ReadModelFile(c.output());
  auto b = ReadModelFile(split.output());
  ASSERT_TRUE(a.ok() && b.ok());
  // Paths and wall times aside, in the file's own model and in every member.
  EXPECT_TRUE(Stripped(*a) == Stripped(*b))
      << "the ensemble files differ beyond paths and wall times";

  TrainConfig clock = split;
  clock.set_seed(-1);
  clock.set_ensemble_member_alone(true);
  EXPECT_FALSE(Train(clock).ok()) << "members alone need a fixed seed";
}

// The info lines logged while `f` runs (through SetLogHandler).
template <typename F>
std::vector<std::string> LoggedLines(F f) {
  std::mutex mu;
  std::vector<std::string> lines;
  SetLogHandler(
      [&](int, const std::string& line) {
        std::lock_guard<std::mutex> lock(mu);
        lines.push_back(line);
      },
      2);
  f();
  SetLogHandler(nullptr, 0);
  return lines;
}

int CountContaining(const std::vector<std::string>& lines, const std::string& part) {
  int n = 0;
  for (const std::string& l : lines) n += l.find(part) != std::string::npos;
  return n;
}

// An ensemble file at --output of the same seed and settings lends its members to a run with
// another --ensemble-members: a single model grows into an ensemble, and an ensemble shrinks,
// with only the missing members trained; the files equal fresh runs' beyond paths and times.
TEST(EnsembleTest, AnEnsembleGrowsAndShrinksWithoutRetrainingItsMembers) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(data, TaskKind::kLayout, 5, 2, 40, 24).ok());
  TrainConfig c = EnsembleConfig(data, dir.File("fresh3.tpm"));
  c.set_seed(17);
  c.set_ensemble_members(3);
  auto fresh3 = Train(c);
  ASSERT_TRUE(fresh3.ok()) << fresh3.status().ToString();
  TrainConfig c2 = c;
  c2.set_ensemble_members(2);
  c2.set_output(dir.File("fresh2.tpm"));
  auto fresh2 = Train(c2);
  ASSERT_TRUE(fresh2.ok()) << fresh2.status().ToString();
  auto same = [&](const std::string& a, const std::string& b) {
    auto fa = ReadModelFile(a);
    auto fb = ReadModelFile(b);
    EXPECT_TRUE(fa.ok() && fb.ok());
    return fa.ok() && fb.ok() && Stripped(*fa) == Stripped(*fb);
  };

  // Grow: the seed's single model is member 0; members 1 and 2 are trained.
  TrainConfig grow = c;
  grow.set_output(dir.File("grow.tpm"));
  grow.set_ensemble_members(1);
  auto single = Train(grow);
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  grow.set_ensemble_members(3);
  std::vector<std::string> lines = LoggedLines([&] {
    auto grown = Train(grow);
    ASSERT_TRUE(grown.ok()) << grown.status().ToString();
    EXPECT_EQ(grown->steps_run, fresh3->steps_run - single->steps_run);
    EXPECT_DOUBLE_EQ(grown->best_metric, fresh3->best_metric);
  });
  EXPECT_EQ(CountContaining(lines, "reusing model 1 of the 1 in " + grow.output()), 1);
  EXPECT_TRUE(same(grow.output(), c.output())) << "grown from a single model";

  // Shrink: a copy of the 3 members' file, asked for 2, trains nothing.
  TrainConfig shrink = c2;
  shrink.set_output(dir.File("shrink.tpm"));
  std::filesystem::copy_file(c.output(), shrink.output());
  lines = LoggedLines([&] {
    auto shrunk = Train(shrink);
    ASSERT_TRUE(shrunk.ok()) << shrunk.status().ToString();
    EXPECT_EQ(shrunk->steps_run, 0);
    EXPECT_DOUBLE_EQ(shrunk->best_metric, fresh2->best_metric);
  });
  EXPECT_EQ(CountContaining(lines, "of the 3 in " + shrink.output()), 2);
  EXPECT_TRUE(same(shrink.output(), c2.output())) << "shrunk from 3 members";
  auto shrunk_file = ReadModelFile(shrink.output());
  ASSERT_TRUE(shrunk_file.ok());
  EXPECT_EQ(shrunk_file->ensemble_size(), 1);
  EXPECT_EQ(shrunk_file->train_config().ensemble_members(), 2);

  // A dataset written after the file (re-ingested at the same path) makes it lend nothing.
  TrainConfig stale = c2;
  stale.set_output(dir.File("stale.tpm"));
  std::filesystem::copy_file(c.output(), stale.output());
  std::filesystem::last_write_time(
      data, std::filesystem::last_write_time(stale.output()) + std::chrono::seconds(2));
  lines = LoggedLines([&] {
    auto retrained = Train(stale);
    ASSERT_TRUE(retrained.ok()) << retrained.status().ToString();
    EXPECT_EQ(retrained->steps_run, fresh2->steps_run);
  });
  EXPECT_EQ(CountContaining(lines, "reusing"), 0);
  EXPECT_TRUE(same(stale.output(), c2.output())) << "retrained after the dataset changed";

  // Another seed's file lends nothing: every member is trained, as a fresh run would.
  TrainConfig other = c2;
  other.set_seed(18);
  other.set_output(dir.File("other.tpm"));
  std::filesystem::copy_file(c.output(), other.output());
  auto retrained = Train(other);
  ASSERT_TRUE(retrained.ok()) << retrained.status().ToString();
  EXPECT_EQ(retrained->steps_run, fresh2->steps_run);
  other.set_output(dir.File("other-fresh.tpm"));
  ASSERT_TRUE(Train(other).ok());
  EXPECT_TRUE(same(dir.File("other.tpm"), other.output())) << "another seed's members were used";
}

TEST(EnsembleTest, MembersSideBySideTrainTheSameMembers) {
  TempDir dir;
  const std::string one = dir.File("one.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(one, TaskKind::kLayout, 1, 0, 40, 80).ok());
  TrainConfig c = EnsembleConfig(one, dir.File("seq.tpm"));
  c.set_ensemble_members(3);
  c.set_holdout_config_fraction(0.3);
  c.set_carve_valid_fraction(0.25);
  c.set_threads(2);
  c.set_members_side_by_side(1);
  StatusOr<TrainResult> seq = InternalError("not run");
  std::vector<std::string> lines = LoggedLines([&] { seq = Train(c); });
  ASSERT_TRUE(seq.ok()) << seq.status().ToString();
  EXPECT_EQ(CountContaining(lines, "at a time"), 0);
  EXPECT_EQ(CountContaining(lines, "ensemble member 2/3: training"), 1);

  // Automatic on one training graph: two at a time on the two threads, each line of a member's
  // run prefixed once with the member.
  TrainConfig side = c;
  side.set_output(dir.File("side.tpm"));
  side.set_members_side_by_side(0);
  StatusOr<TrainResult> r = InternalError("not run");
  lines = LoggedLines([&] { r = Train(side); });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(CountContaining(lines, "member 2/3: training (2 members at a time, 1 threads each)"),
            1);
  EXPECT_GT(CountContaining(lines, "member 3/3: epoch=3 "), 0);
  EXPECT_EQ(CountContaining(lines, "member 1/3: member 1/3:"), 0);
  EXPECT_EQ(r->member_metrics, seq->member_metrics);
  EXPECT_EQ(r->best_metric, seq->best_metric);
  EXPECT_EQ(r->epochs_run, seq->epochs_run);
  EXPECT_EQ(r->steps_run, seq->steps_run);
  // Only the ensemble files are left.
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"one.tpug", "seq.tpm", "side.tpm"}));

  // The files differ in their paths, wall times and this option alone.
  auto strip = [](const std::string& path) {
    auto f = ReadModelFile(path);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? Stripped(*f, true) : std::string();
  };
  const std::string want = strip(c.output());
  EXPECT_TRUE(strip(side.output()) == want) << "members side by side trained other members";

  // Three at a time on two threads: one thread each.
  TrainConfig three = side;
  three.set_output(dir.File("three.tpm"));
  three.set_members_side_by_side(3);
  lines = LoggedLines([&] { r = Train(three); });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(CountContaining(lines, "(3 members at a time, 1 threads each)"), 3);
  EXPECT_TRUE(strip(three.output()) == want);

  // A member that cannot be written fails the run with its path, the others side by side
  // notwithstanding, and no ensemble file is written.
  TrainConfig blocked = side;
  blocked.set_output(dir.File("blocked.tpm"));
  std::filesystem::create_directory(EnsembleMemberPathOf(blocked.output(), 1));
  lines = LoggedLines([&] { r = Train(blocked); });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("blocked.tpm.member-1"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(blocked.output()));

  // Several training graphs: automatic is one after another.
  const std::string several = dir.File("several.tpug");
  ASSERT_TRUE(testing::WriteSyntheticDataset(several, TaskKind::kLayout, 3, 0, 40, 80).ok());
  TrainConfig many = side;
  many.set_dataset(several);
  many.set_output(dir.File("many.tpm"));
  lines = LoggedLines([&] { r = Train(many); });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(CountContaining(lines, "at a time"), 0);
  EXPECT_EQ(CountContaining(lines, "ensemble member 3/3: training"), 1);
}

TEST(EnsembleTest, OptionsAreChecked) {
  TrainConfig c;
  c.set_dataset("d");
  c.set_output("o");
  {
    TrainConfig bad = c;
    bad.set_members_side_by_side(-1);
    Status s = ValidateTrainConfig(bad);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("--members-side-by-side"), std::string::npos) << s.message();
  }
  for (int n : {0, kMaxEnsembleMembers + 1}) {
    TrainConfig bad = c;
    bad.set_ensemble_members(n);
    Status s = ValidateTrainConfig(bad);
    ASSERT_FALSE(s.ok()) << n;
    EXPECT_NE(s.message().find("--ensemble-members"), std::string::npos) << s.message();
  }
  for (int m : {-1, 3}) {
    TrainConfig bad = c;
    bad.set_ensemble_members(3);
    bad.set_ensemble_member(m);
    Status s = ValidateTrainConfig(bad);
    ASSERT_FALSE(s.ok()) << m;
    EXPECT_NE(s.message().find("--ensemble-member "), std::string::npos) << s.message();
  }
  // --resume continues one model; an ensemble resumes by running the command again.
  TempDir dir;
  TrainConfig resume = c;
  resume.set_output(dir.File("ens.tpm"));
  resume.set_ensemble_members(2);
  resume.set_resume(dir.File("ens.tpm.ckpt"));
  auto r = Train(resume);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("same command again"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(dir.List().empty());
}

}  // namespace
}  // namespace tpugraphs::train
