// End-to-end tests of `tpugraphs train` and of `evaluate/predict --model` on small synthetic
// datasets written by the test.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "../train/train_test_util.h"
#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/hash.h"
#include "tpugraphs/common/proto_fields.h"
#include "tpugraphs/train/model_file.h"
#include "tpugraphs/train/train_config.h"
#include "tpugraphs/train_config.pb.h"

namespace tpugraphs {
namespace {

using ::tpugraphs::testing::CommandResult;
using ::tpugraphs::testing::RunCli;
using ::tpugraphs::testing::TempDir;

std::vector<std::string> SmallModelFlags() {
  return {"--hidden-dim",      "8", "--num-layers",   "2", "--opcode-embedding-dim", "4",
          "--head-hidden-dim", "8", "--batch-graphs", "3", "--configs-per-graph",    "8"};
}

TEST(TrainCliTest, EveryOptionHasAFlagWithItsDefault) {
  CommandResult r = RunCli({"train", "--help"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto check = [&](const google::protobuf::Descriptor* d) {
    for (int i = 0; i < d->field_count(); ++i) {
      const auto* f = d->field(i);
      if (f->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE) continue;
      if (f->name() == "threads") continue;  // the global -j/--threads
      std::string flag = "--";
      for (char c : f->name()) flag += c == '_' ? '-' : c;
      EXPECT_NE(r.out.find(flag + " "), std::string::npos) << flag << " missing from --help";
    }
  };
  check(TrainConfig::descriptor());
  check(ModelSpec::descriptor());
  check(LossSpec::descriptor());
  EXPECT_NE(r.out.find("--learning-rate VALUE"), std::string::npos);
  EXPECT_NE(r.out.find("[default: 0.002]"), std::string::npos);
  EXPECT_NE(r.out.find("{adamw|adam}"), std::string::npos);
}

TEST(TrainCliTest, TrainEvaluatePredict) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(train::testing::WriteSyntheticDataset(data, TaskKind::kLayout, 6, 2).ok());
  // Options from a config file, one of them overridden by a flag.
  std::ofstream(dir.File("cfg.textproto")) << "epochs: 50\nseed: 5\nmodel { hidden_dim: 8 }\n";
  std::vector<std::string> args = {
      "-j",        "2",  "train",    "--config",        dir.File("cfg.textproto"),
      "--dataset", data, "--output", dir.File("m.tpm"), "--epochs",
      "3"};
  for (const auto& a : SmallModelFlags()) args.push_back(a);
  CommandResult r = RunCli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("model\t" + dir.File("m.tpm")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("epochs\t3\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("valid_kendall\t"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("epoch=3 train_loss="), std::string::npos) << r.err;
  auto f = train::ReadModelFile(dir.File("m.tpm"), train::kFileKindModel);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->train_config().seed(), 5);
  EXPECT_EQ(f->train_config().epochs(), 3);
  EXPECT_EQ(f->model_spec().hidden_dim(), 8);

  r = RunCli(
      {"evaluate", "--data", data, "--model", dir.File("m.tpm"), "--split", "valid", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("layout:synth:random"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model:"), std::string::npos) << r.out;

  r = RunCli({"predict", "--data", data, "--model", dir.File("m.tpm"), "--split", "valid", "-o",
              dir.File("sub.csv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto csv = ReadFileToString(dir.File("sub.csv"));
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(csv->rfind("ID,TopConfigs\n", 0), 0u);
  EXPECT_NE(csv->find("layout:synth:random:g6,"), std::string::npos) << *csv;
}

// valid_every_epochs: only every k-th epoch and the last are validated; the best epoch is one
// of them, patience counts epochs (validated or not) and a run stops only at a validation, and
// the other epochs say they were not validated.
TEST(TrainCliTest, ValidEveryEpochsValidatesEveryKthEpochAndTheLast) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(train::testing::WriteSyntheticDataset(data, TaskKind::kLayout, 6, 2).ok());
  auto train = [&](const std::string& epochs, const std::string& patience) {
    std::vector<std::string> args = {"train",
                                     "--dataset",
                                     data,
                                     "--output",
                                     dir.File("m.tpm"),
                                     "--epochs",
                                     epochs,
                                     "--valid-every-epochs",
                                     "3",
                                     "--patience",
                                     patience,
                                     "--seed",
                                     "2"};
    for (const auto& a : SmallModelFlags()) args.push_back(a);
    return RunCli(args);
  };
  CommandResult r = train("7", "0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int e = 1; e <= 7; ++e) {
    const std::string head = "epoch=" + std::to_string(e) + " train_loss=";
    const size_t at = r.err.find(head);
    ASSERT_NE(at, std::string::npos) << r.err;
    const std::string line = r.err.substr(at, r.err.find('\n', at) - at);
    const bool validated = e == 3 || e == 6 || e == 7;
    EXPECT_EQ(line.find("valid_kendall=") != std::string::npos, validated) << line;
    EXPECT_EQ(line.find("(not validated)") != std::string::npos, !validated) << line;
  }
  auto f = train::ReadModelFile(dir.File("m.tpm"), train::kFileKindModel);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const int best = f->summary().best_epoch();
  EXPECT_TRUE(best == 3 || best == 6 || best == 7) << best;
  EXPECT_EQ(f->summary().epochs_run(), 7);

  // Patience 1: the run reaches epoch 6 at least (the first validation after the best) and
  // stops only at a validation.
  r = train("30", "1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto g = train::ReadModelFile(dir.File("m.tpm"), train::kFileKindModel);
  ASSERT_TRUE(g.ok());
  EXPECT_GE(g->summary().epochs_run(), 6);
  EXPECT_EQ(g->summary().epochs_run() % 3, 0) << "stopped between two validations";

  // Patience 4 counts epochs: the run stops at the first validation 4 or more epochs after the
  // best one (4 validations would be 12 epochs), and says so.
  r = train("90", "4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto h = train::ReadModelFile(dir.File("m.tpm"), train::kFileKindModel);
  ASSERT_TRUE(h.ok());
  const int run = h->summary().epochs_run(), since = run - h->summary().best_epoch();
  ASSERT_LT(run, 90) << "no early stop to check";
  EXPECT_EQ(run % 3, 0) << run;
  EXPECT_GE(since, 4) << run;
  EXPECT_LT(since, 4 + 3) << run;
  EXPECT_NE(r.err.find("did not improve for " + std::to_string(since) + " epochs"),
            std::string::npos)
      << r.err;

  r = RunCli(
      {"train", "--dataset", data, "--output", dir.File("x.tpm"), "--valid-every-epochs", "0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--valid-every-epochs must be >= 1"), std::string::npos) << r.err;
  EXPECT_FALSE(std::ifstream(dir.File("x.tpm")).good());
}

// Parses `predict --format scores` output into (graph, config) -> score.
std::map<std::pair<std::string, int64_t>, double> ParseScores(const std::string& text) {
  std::map<std::pair<std::string, int64_t>, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("collection\t", 0) == 0) continue;
    std::istringstream f(line);
    std::string collection, graph, index, score;
    std::getline(f, collection, '\t');
    std::getline(f, graph, '\t');
    std::getline(f, index, '\t');
    std::getline(f, score, '\t');
    out[{graph, std::stoll(index)}] = std::stod(score);
  }
  return out;
}

TEST(TrainCliTest, SeveralModelsPredictAsTheMeanOfTheirStandardisedScores) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(train::testing::WriteSyntheticDataset(data, TaskKind::kLayout, 6, 2).ok());
  std::vector<std::map<std::pair<std::string, int64_t>, double>> single;
  std::vector<std::string> models;
  for (int seed : {1, 2}) {
    const std::string m = dir.File("m" + std::to_string(seed) + ".tpm");
    std::vector<std::string> args = {"-q", "train",  "--dataset",          data,       "--output",
                                     m,    "--seed", std::to_string(seed), "--epochs", "2"};
    for (const auto& a : SmallModelFlags()) args.push_back(a);
    ASSERT_EQ(RunCli(args).exit_code, 0);
    CommandResult r = RunCli({"-q", "predict", "--data", data, "--model", m, "--split", "valid",
                              "--format", "scores", "-o", dir.File("s.tsv")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    single.push_back(ParseScores(*ReadFileToString(dir.File("s.tsv"))));
    models.push_back(m);
  }
  CommandResult r =
      RunCli({"-q", "predict", "--data", data, "--model", models[0], "--model", models[1],
              "--split", "valid", "--format", "scores", "-o", dir.File("e.tsv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ensemble = ParseScores(*ReadFileToString(dir.File("e.tsv")));
  ASSERT_EQ(ensemble.size(), single[0].size());
  ASSERT_FALSE(ensemble.empty());
  // Expected: per graph, each model's scores standardised (population sd), then averaged.
  std::map<std::string, std::vector<int64_t>> graphs;
  for (const auto& [key, v] : ensemble) graphs[key.first].push_back(key.second);
  for (const auto& [graph, configs] : graphs) {
    std::vector<double> want(configs.size(), 0.0);
    for (const auto& s : single) {
      double mean = 0, var = 0;
      for (int64_t c : configs) mean += s.at({graph, c}) / configs.size();
      for (int64_t c : configs) var += std::pow(s.at({graph, c}) - mean, 2) / configs.size();
      for (size_t i = 0; i < configs.size(); ++i) {
        want[i] += (s.at({graph, configs[i]}) - mean) / std::sqrt(var) / 2;
      }
    }
    for (size_t i = 0; i < configs.size(); ++i) {
      // The scores file prints 9 significant digits.
      EXPECT_NEAR(ensemble.at({graph, configs[i]}), want[i], 1e-6) << graph << " " << configs[i];
    }
  }
  EXPECT_EQ(RunCli({"predict", "--data", data, "--model", models[0], "--model", models[1],
                    "--ensemble", "median", "-o", dir.File("x.tsv")})
                .exit_code,
            2);
}

TEST(TrainCliTest, ShippedLayoutConfigLoadsAndFlagsOverrideIt) {
  // tools/configs/layout.textproto is what tools/train-all-collections.sh starts layout runs from.
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(train::testing::WriteSyntheticDataset(data, TaskKind::kLayout, 6, 2).ok());
  std::vector<std::string> args = {
      "train",           "--config", testing::SourcePath("tools/configs/layout.textproto"),
      "--dataset",       data,       "--output",
      dir.File("m.tpm"), "--epochs", "2"};
  // The small model's flags but those whose recipe values are checked below.
  const std::vector<std::string> small = SmallModelFlags();
  for (size_t i = 0; i + 1 < small.size(); i += 2) {
    if (small[i] == "--batch-graphs" || small[i] == "--num-layers") continue;
    args.push_back(small[i]);
    args.push_back(small[i + 1]);
  }
  CommandResult r = RunCli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto f = train::ReadModelFile(dir.File("m.tpm"), train::kFileKindModel);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->train_config().epochs(), 2);        // the flag
  EXPECT_EQ(f->train_config().batch_graphs(), 2);  // the file
  EXPECT_FLOAT_EQ(f->train_config().learning_rate(), 0.002f);
  EXPECT_EQ(f->train_config().patience(), 0);
  EXPECT_DOUBLE_EQ(f->train_config().min_config_passes(), 1.5);
  EXPECT_EQ(f->model_spec().prune_hops(), 2);  // model fields from the file's model block
  EXPECT_EQ(f->model_spec().config_node_head_pooling(), ModelSpec::NODE_HEAD_POOLING_LOGSUMEXP);
  EXPECT_TRUE(f->model_spec().config_loop_depth());
  EXPECT_TRUE(f->model_spec().layout_size_features());
  EXPECT_FALSE(f->model_spec().layout_flow_features());
  // An ensemble of 8 models without message passing, in one file.
  EXPECT_EQ(f->model_spec().num_layers(), 0);
  EXPECT_EQ(f->train_config().ensemble_members(), 8);
  ASSERT_EQ(f->ensemble_size(), 7);
  EXPECT_EQ(f->ensemble(6).train_config().ensemble_member(), 7);
  EXPECT_NE(r.out.find("member_7_valid_kendall\t"), std::string::npos) << r.out;
}

// ClearDefaultFields: a setting written out at its default and one left unset are the same
// message; a submessage left with only defaults is cleared; other values stay.
TEST(TrainCliTest, ClearDefaultFieldsMakesEqualSettingsEqualMessages) {
  TrainConfig a;
  a.set_learning_rate(0.5f);
  a.mutable_model()->set_hidden_dim(ModelSpec().hidden_dim());  // the default, written out
  a.set_epochs(TrainConfig().epochs());
  a.mutable_loss();  // present, empty
  TrainConfig b;
  b.set_learning_rate(0.5f);
  EXPECT_NE(a.SerializeAsString(), b.SerializeAsString());
  ClearDefaultFields(&a);
  ClearDefaultFields(&b);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString()) << a.DebugString();
  EXPECT_FALSE(a.has_model());
  EXPECT_FALSE(a.has_loss());
  EXPECT_FALSE(a.has_epochs());
  EXPECT_TRUE(a.has_learning_rate());
  a.mutable_model()->set_hidden_dim(ModelSpec().hidden_dim() + 1);
  ClearDefaultFields(&a);
  EXPECT_EQ(a.model().hidden_dim(), ModelSpec().hidden_dim() + 1);
}

// `train --print-config`: the recipe and the flags resolved, defaults left out; it trains
// nothing. A flag at the recipe's (or the proto's) value prints the same text, another value
// prints its own, and the text reads back as the config the run would train with.
TEST(TrainCliTest, PrintConfigResolvesTheRecipeAndTheFlags) {
  TempDir dir;
  const std::string recipe = testing::SourcePath("tools/configs/layout-large.textproto");
  auto print = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"train", "--config", recipe};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("--print-config");
    CommandResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string plain = print({});
  // The proto's default of a field the recipe leaves unset, and the recipe's own values.
  EXPECT_EQ(print({"--head-hidden-dim", std::to_string(ModelSpec().head_hidden_dim())}), plain);
  EXPECT_EQ(print({"--prune-hops", "1", "--hidden-dim", "32"}), plain);
  const std::string hidden48 = print({"--hidden-dim", "48", "--output", dir.File("m.tpm")});
  EXPECT_NE(hidden48, plain);
  EXPECT_NE(hidden48.find("hidden_dim: 48"), std::string::npos) << hidden48;
  EXPECT_EQ(hidden48.rfind("# settings digest: ", 0), 0u) << hidden48;
  EXPECT_NE(hidden48.substr(0, 36), plain.substr(0, 36));  // "# settings digest: " + 16 hex
  EXPECT_FALSE(FileSize(dir.File("m.tpm")).ok());          // nothing trained
  auto want = train::ReadTrainConfigFile(recipe);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  want->mutable_model()->set_hidden_dim(48);
  want->set_output(dir.File("m.tpm"));
  ClearDefaultFields(&*want);
  const std::string path = dir.File("printed.textproto");
  ASSERT_TRUE(WriteFileAtomically(path, hidden48).ok());
  auto got = train::ReadTrainConfigFile(path);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->SerializeAsString(), want->SerializeAsString()) << hidden48;
  char digest[40];
  std::snprintf(digest, sizeof(digest), "# settings digest: %016llx\n",
                static_cast<unsigned long long>(Fnv1a(want->SerializeAsString())));
  EXPECT_EQ(hidden48.substr(0, 36), digest);
  // A recipe that does not parse is an error naming it, as for a run.
  ASSERT_TRUE(WriteFileAtomically(dir.File("bad.textproto"), "epochs: x\n").ok());
  CommandResult bad = RunCli({"train", "--config", dir.File("bad.textproto"), "--print-config"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("bad.textproto"), std::string::npos) << bad.err;
}

// The recipe for large layout collections is the layout recipe with one three-layer model of
// width 32 over the 1-hop neighbourhood (both validated every 5th epoch), without the layout
// recipe's rank-aware minor_to_major (measured on xla only): the two files may differ in
// nothing else.
TEST(TrainCliTest, LargeLayoutRecipeIsTheRecipeWithOneThreeLayerModelOfWidth32AtOneHop) {
  auto base = train::ReadTrainConfigFile(testing::SourcePath("tools/configs/layout.textproto"));
  auto large =
      train::ReadTrainConfigFile(testing::SourcePath("tools/configs/layout-large.textproto"));
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  ASSERT_TRUE(large.ok()) << large.status().ToString();
  EXPECT_EQ(large->model().num_layers(), 3);
  EXPECT_EQ(large->model().hidden_dim(), 32);
  EXPECT_EQ(large->ensemble_members(), 1);
  EXPECT_EQ(large->model().prune_hops(), 1);
  EXPECT_EQ(large->valid_every_epochs(), 5);
  EXPECT_EQ(base->model().num_layers(), 0);
  EXPECT_EQ(base->model().hidden_dim(), 64);
  EXPECT_EQ(base->ensemble_members(), 8);
  EXPECT_EQ(base->model().prune_hops(), 2);
  EXPECT_EQ(base->valid_every_epochs(), 5);
  EXPECT_TRUE(base->model().layout_rank_aware());
  EXPECT_FALSE(large->model().layout_rank_aware());
  large->mutable_model()->set_layout_rank_aware(true);
  large->mutable_model()->set_num_layers(base->model().num_layers());
  large->mutable_model()->set_prune_hops(base->model().prune_hops());
  large->set_ensemble_members(base->ensemble_members());
  large->mutable_model()->clear_hidden_dim();
  EXPECT_EQ(large->SerializeAsString(), base->SerializeAsString())
      << "layout-large.textproto:\n"
      << large->DebugString() << "layout.textproto:\n"
      << base->DebugString();
}

// The same run gives the same model whatever else differs in the process: the thread count,
// the log level, the length of the command line. (Where a heap buffer started modulo 64 used to
// change the last bits of vectorised sums: on this real graph `train` and `-j 0 train` wrote
// different models after two epochs.) Two members of the recipe's ensemble, not its eight: each
// member is one such run, and eight took 119 s under ASan + UBSan.
TEST(TrainCliTest, SameRunSameModelWhateverTheCommandLine) {
  TempDir tmp;
  const std::string data = tmp.File("u.tpug");
  CommandResult r =
      RunCli({"-q", "ingest",
              testing::RealDataPath("npz/release/layout/xla/default/valid/unet_3d.4x4.bf16.npz"),
              "--collection", "layout:xla:default", "-o", data});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string first;
  const std::vector<std::vector<std::string>> prefixes = {
      {}, {"-j", "0"}, {"--threads", "2", "-v"}};
  for (size_t i = 0; i < prefixes.size(); ++i) {
    // Built by appending: GCC 12 reports a false -Wrestrict on "m" + std::to_string(i) here.
    std::string stem = "m";
    stem += std::to_string(i);
    const std::string model = tmp.File(stem + ".tpm");
    std::vector<std::string> args = prefixes[i];
    for (const char* a : {"train", "--config"}) args.push_back(a);
    args.push_back(testing::SourcePath("tools/configs/layout.textproto"));
    for (const std::string& a :
         {std::string("--dataset"), data, std::string("--holdout-config-fraction"),
          std::string("0.3"), std::string("--train-split"), std::string(""),
          std::string("--valid-split"), std::string(""), std::string("--epochs"), std::string("2"),
          std::string("--ensemble-members"), std::string("2"), std::string("--output"), model}) {
      args.push_back(a);
    }
    r = RunCli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto file = train::ReadModelFile(model);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    if (i == 0) {
      first = file->parameters();
      ASSERT_FALSE(first.empty());
    } else {
      EXPECT_TRUE(file->parameters() == first) << "prefix " << i;
    }
  }
}

// A step's work is spread as tasks of (graph, chunk of its configurations) over the threads;
// the chunks follow the data alone, so -j 1, 2 and 3 write the same model (three-layer recipe,
// two graphs per step, several chunks each).
TEST(TrainCliTest, ChunkTasksGiveTheSameModelAtAnyThreadCount) {
  TempDir tmp;
  const std::string data = tmp.File("d.tpug");
  ASSERT_EQ(testing::MakeReleaseShapedLayoutDataset(tmp.path(), 3, data), "");
  std::string first;
  for (const std::string j : {"1", "2", "3"}) {
    const std::string model = tmp.File("m" + j + ".tpm");
    CommandResult r = RunCli({"-v",
                              "-j",
                              j,
                              "train",
                              "--config",
                              testing::SourcePath("tools/configs/layout-large.textproto"),
                              "--dataset",
                              data,
                              "--train-split",
                              "train",
                              "--valid-split",
                              "",
                              "--carve-valid-fraction",
                              "0",
                              "--min-config-passes",
                              "0",
                              "--epochs",
                              "2",
                              "--steps-per-epoch",
                              "3",
                              "--checkpoint-interval-seconds",
                              "0",
                              "--output",
                              model});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Several tasks per graph: the comparison covers the sums over chunks.
    const size_t at = r.err.find("first step: ");
    ASSERT_NE(at, std::string::npos) << r.err;
    const int tasks = std::atoi(r.err.c_str() + at + 12);
    EXPECT_GT(tasks, 2) << r.err.substr(at, 120);
    auto file = train::ReadModelFile(model);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    if (first.empty()) {
      first = file->parameters();
      ASSERT_FALSE(first.empty());
    } else {
      EXPECT_TRUE(file->parameters() == first) << "-j " << j;
    }
  }
}

TEST(TrainCliTest, BadInputGivesExitCodesAndNoOutput) {
  TempDir dir;
  const std::string data = dir.File("data.tpug");
  ASSERT_TRUE(train::testing::WriteSyntheticDataset(data, TaskKind::kTile, 3, 1).ok());
  // A bad value names the flag; usage errors exit 2.
  CommandResult r =
      RunCli({"train", "--dataset", data, "--output", dir.File("m.tpm"), "--optimizer", "sgd"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--optimizer"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("adamw"), std::string::npos) << r.err;
  r = RunCli({"train", "--dataset", data, "--output", dir.File("m.tpm"), "--epochs", "0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--epochs must be >= 1"), std::string::npos) << r.err;
  // A missing config file is an error, not a warning.
  r = RunCli({"train", "--config", dir.File("nope.textproto"), "--dataset", data, "--output",
              dir.File("m.tpm")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("nope.textproto"), std::string::npos) << r.err;
  // A broken config file names the line.
  std::ofstream(dir.File("bad.textproto")) << "epochs: 3\nlearning_rat: 1\n";
  r = RunCli({"train", "--config", dir.File("bad.textproto"), "--dataset", data, "--output",
              dir.File("m.tpm")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;
  // A dataset that is not one.
  std::ofstream(dir.File("junk.tpug")) << "hello";
  r = RunCli({"train", "--dataset", dir.File("junk.tpug"), "--output", dir.File("m.tpm")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("junk.tpug"), std::string::npos) << r.err;
  // A damaged model file is refused by evaluate.
  std::ofstream(dir.File("bad.tpm")) << "TPUGRAPH garbage";
  r = RunCli({"evaluate", "--data", data, "--model", dir.File("bad.tpm")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.tpm"), std::string::npos) << r.err;
  // Nothing but the inputs is left in the directory.
  std::vector<std::string> left = dir.List();
  EXPECT_EQ(left, (std::vector<std::string>{"bad.textproto", "bad.tpm", "data.tpug", "junk.tpug"}));
}

}  // namespace
}  // namespace tpugraphs
