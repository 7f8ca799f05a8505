// The space and the search of `tpugraphs tune` on synthetic programs priced by synth's cost
// model: every configuration the space makes is valid, the search is deterministic and finds
// what the oracle says is better than the default.
#include "tpugraphs/tune/search_space.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/ingest/load_graphs.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "tpugraphs/synth/ground_truth.h"
#include "tpugraphs/synth/program_generator.h"
#include "tpugraphs/synth/synth.h"
#include "tpugraphs/tune/search.h"

namespace tpugraphs::tune {
namespace {

using tpugraphs::testing::TempDir;

// A synthetic layout program written by synth (configs runs, `search` style) and its graph.
struct Program {
  std::string path;
  Graph graph;
};

Program MakeLayoutProgram(const TempDir& dir, bool default_search, int64_t configs = 30) {
  const xla::HloModuleProto module = synth::GenerateLayoutProgram(400, 5, "p");
  auto analysis = synth::AnalyzeModule(module, "p");
  EXPECT_TRUE(analysis.ok()) << analysis.status().ToString();
  synth::RunOptions o;
  o.configs = configs;
  o.default_search = default_search;
  ThreadPool pool(1);
  Program p;
  p.path = dir.File(default_search ? "default.pb" : "random.pb");
  auto s = synth::WriteLayoutTuningData(module, *analysis, synth::ConfigurableNodes(*analysis), o,
                                        &pool, p.path);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  auto graphs = ingest::LoadRawDump(p.path, {});
  EXPECT_TRUE(graphs.ok()) << graphs.status().ToString();
  p.graph = std::move((*graphs)[0]);
  return p;
}

bool BlockIsPermutationOrUnset(const int8_t* b) {
  std::vector<int> v;
  for (int d = 0; d < 6 && b[d] != -1; ++d) v.push_back(b[d]);
  for (size_t d = v.size(); d < 6; ++d) {
    if (b[d] != -1) return false;
  }
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] != static_cast<int>(i)) return false;
  }
  return true;
}

TEST(SearchSpaceTest, LayoutMovesStayValidAndReachEveryVariable) {
  TempDir dir;
  Program p = MakeLayoutProgram(dir, /*default_search=*/false);
  auto space = SearchSpace::FromGraph(p.graph, p.path);
  ASSERT_TRUE(space.ok()) << space.status().ToString();
  auto truth = synth::GroundTruth::Open(p.path);
  ASSERT_TRUE(truth.ok()) << truth.status().ToString();
  // The ranks the dataset shows are the program's.
  for (const auto& v : space->variables()) {
    EXPECT_EQ(v.rank, (*truth)->TensorRank(v.slots[0].node, v.slots[0].tensor));
  }
  EXPECT_TRUE(space->Check(space->base()).ok());
  Rng rng(3);
  std::set<size_t> changed;
  Config c = space->base();
  for (int i = 0; i < 2000; ++i) {
    Config next = i % 5 == 0 ? space->Random(rng) : space->Mutate(c, rng);
    if (i % 7 == 0) next = space->Crossover(next, c, rng);
    ASSERT_TRUE(space->Check(next).ok()) << space->Check(next).ToString();
    for (size_t k = 0; k < next.layout.size(); k += 6) {
      ASSERT_TRUE(BlockIsPermutationOrUnset(&next.layout[k]));
    }
    for (size_t v = 0; v < space->variables().size(); ++v) {
      if (space->Get(next, v) != space->Get(space->base(), v)) changed.insert(v);
    }
    // The cost model accepts it (a permutation of each tensor's true rank).
    auto ns = (*truth)->LayoutCostNs(next.layout.data(), "candidate");
    ASSERT_TRUE(ns.ok()) << ns.status().ToString();
    c = next;
  }
  EXPECT_EQ(changed.size(), space->variables().size());
}

// Crossover copies each variable's list from one parent to every slot of the variable, and
// Distance compares the lists without building them: both agree with Get, list by list.
void ExpectCrossoverAndDistanceFollowGet(const SearchSpace& space) {
  const size_t n = space.variables().size();
  ASSERT_GT(n, 1u);
  Rng rng(11);
  int64_t from_a = 0, from_b = 0, distances_seen = 0;
  for (int i = 0; i < 300; ++i) {
    const Config a = space.Random(rng);
    const Config b = i % 3 == 0 ? space.Mutate(a, rng) : space.Random(rng);
    const Config x = space.Crossover(a, b, rng);
    ASSERT_TRUE(space.Check(x).ok()) << space.Check(x).ToString();
    for (size_t v = 0; v < n; ++v) {
      const std::vector<int64_t> got = space.Get(x, v);
      const bool is_a = got == space.Get(a, v), is_b = got == space.Get(b, v);
      ASSERT_TRUE(is_a || is_b) << "variable " << v;
      from_a += is_a && !is_b;
      from_b += is_b && !is_a;
      for (const LayoutSlot& s : space.variables()[v].slots) {  // every slot holds the list
        const int8_t* block = &x.layout[s.node * kLayoutConfigFeatureCount + s.tensor * 6];
        for (size_t d = 0; d < 6; ++d) {
          EXPECT_EQ(block[d], d < got.size() ? got[d] : -1) << "variable " << v;
        }
      }
    }
    for (const Config* other : {&a, &b}) {
      int64_t expected = 0;
      for (size_t v = 0; v < n; ++v) expected += space.Get(x, v) != space.Get(*other, v);
      EXPECT_EQ(space.Distance(x, *other), expected);
      distances_seen += expected > 0;
    }
  }
  // Both parents contribute, and the distances compared were not all zero.
  EXPECT_GT(from_a, 0);
  EXPECT_GT(from_b, 0);
  EXPECT_GT(distances_seen, 100);
}

TEST(SearchSpaceTest, CrossoverAndDistanceFollowTheListsOfADatasetsSpace) {
  TempDir dir;
  Program p = MakeLayoutProgram(dir, /*default_search=*/false);
  auto space = SearchSpace::FromGraph(p.graph, p.path);
  ASSERT_TRUE(space.ok()) << space.status().ToString();
  ExpectCrossoverAndDistanceFollowGet(*space);
}

// From a program, one array read by two instructions is one variable of several slots.
TEST(SearchSpaceTest, CrossoverAndDistanceFollowTheListsOfAProgramsSpace) {
  TempDir dir;
  const std::string path = dir.File("chain.hlo");
  ASSERT_TRUE(WriteFileAtomically(path, R"(HloModule chain

ENTRY main (p: f32[8,128], w: f32[128,16], v: f32[16,32]) -> f32[8,32] {
  p = f32[8,128]{1,0} parameter(0)
  w = f32[128,16]{1,0} parameter(1)
  v = f32[16,32]{1,0} parameter(2)
  d = f32[8,16]{1,0} dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  e = f32[8,16]{1,0} dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[8,16]{1,0} add(d, e)
  ROOT r = f32[8,32]{1,0} dot(s, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
)")
                  .ok());
  auto in = ingest::LoadGraphs(path, {});
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_EQ(in->graphs.size(), 1u);
  auto space = SearchSpace::FromModule(in->graphs[0], in->module, path);
  ASSERT_TRUE(space.ok()) << space.status().ToString();
  size_t shared = 0;
  for (const auto& var : space->variables()) shared += var.slots.size() > 1;
  ASSERT_GT(shared, 0u) << "no variable of several slots: the program does not test the copy";
  ExpectCrossoverAndDistanceFollowGet(*space);
}

TEST(SearchSpaceTest, RestrictedSpaceKeepsEachTensorToTheDatasetsLayouts) {
  TempDir dir;
  Program p = MakeLayoutProgram(dir, /*default_search=*/true);
  auto space = SearchSpace::FromGraph(p.graph, p.path, /*restrict_to_dataset=*/true);
  ASSERT_TRUE(space.ok()) << space.status().ToString();
  auto full = SearchSpace::FromGraph(p.graph, p.path);
  ASSERT_TRUE(full.ok());
  EXPECT_LE(space->num_decisions(), full->num_decisions());
  const int64_t row = p.graph.num_config_nodes() * 18;
  Rng rng(5);
  Config c = space->base();
  for (int i = 0; i < 500; ++i) {
    c = i % 3 == 0 ? space->Random(rng) : space->Mutate(c, rng);
    ASSERT_TRUE(space->Check(c).ok()) << space->Check(c).ToString();
    ASSERT_TRUE(full->Check(c).ok());
    // Every block is one some dataset configuration has for that tensor.
    for (int64_t b = 0; b < row; b += 6) {
      bool seen = false;
      for (int64_t k = 0; k < p.graph.num_configs && !seen; ++k) {
        seen = std::equal(c.layout.begin() + b, c.layout.begin() + b + 6,
                          p.graph.node_config_feat.begin() + k * row + b);
      }
      ASSERT_TRUE(seen) << "block " << b;
    }
  }
}

TEST(SearchSpaceTest, CheckRejectsWhatIsNotAPermutation) {
  TempDir dir;
  Program p = MakeLayoutProgram(dir, false);
  auto space = SearchSpace::FromGraph(p.graph, p.path);
  ASSERT_TRUE(space.ok());
  const LayoutVariable& v = space->variables()[0];
  Config bad = space->base();
  int8_t* b = &bad.layout[v.slots[0].node * 18 + v.slots[0].tensor * 6];
  b[0] = 0;
  b[1] = 0;  // a repeated dimension
  EXPECT_FALSE(space->Check(bad).ok());
  b[1] = static_cast<int8_t>(v.rank);  // out of range
  EXPECT_FALSE(space->Check(bad).ok());
}

TEST(SearchTest, OracleSearchBeatsDefaultAndIsDeterministic) {
  TempDir dir;
  for (bool default_search : {false, true}) {
    Program p = MakeLayoutProgram(dir, default_search);
    auto space = SearchSpace::FromGraph(p.graph, p.path);
    ASSERT_TRUE(space.ok());
    auto truth = synth::GroundTruth::Open(p.path);
    ASSERT_TRUE(truth.ok());
    SearchOptions o;
    o.budget = 300;
    o.top = 5;
    o.progress = false;
    std::vector<SearchResult> runs;
    for (int rep = 0; rep < 2; ++rep) {
      auto scorer = MakeOracleCandidateScorer(truth->get(), p.graph);
      ASSERT_TRUE(scorer.ok()) << scorer.status().ToString();
      auto r = RunSearch(*space, p.graph, **scorer, o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      runs.push_back(std::move(*r));
    }
    EXPECT_EQ(runs[0].scored, 300);
    ASSERT_EQ(runs[0].chosen.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_TRUE(runs[0].chosen[i].config == runs[1].chosen[i].config);
      EXPECT_EQ(runs[0].chosen[i].score, runs[1].chosen[i].score);
      if (i > 0) {
        EXPECT_LE(runs[0].chosen[i - 1].score, runs[0].chosen[i].score);
      }
    }
    // Strictly better than the default and at least as good as every dataset configuration.
    EXPECT_LT(runs[0].chosen[0].score, runs[0].default_config.score);
    EXPECT_LE(runs[0].chosen[0].score, runs[0].best_dataset_score);
    EXPECT_EQ(runs[0].default_config.origin, "default");
  }
}

TEST(SearchTest, MeasureSetHoldsBestDefaultAndDistinctConfigs) {
  TempDir dir;
  Program p = MakeLayoutProgram(dir, false);
  auto space = SearchSpace::FromGraph(p.graph, p.path);
  auto truth = synth::GroundTruth::Open(p.path);
  ASSERT_TRUE(space.ok() && truth.ok());
  auto scorer = MakeOracleCandidateScorer(truth->get(), p.graph);
  ASSERT_TRUE(scorer.ok());
  SearchOptions o;
  o.budget = 200;
  o.measure = 6;
  o.progress = false;
  auto r = RunSearch(*space, p.graph, **scorer, o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->chosen.size(), 6u);
  std::set<uint64_t> hashes;
  bool has_default = false;
  double best = r->chosen[0].score;
  for (const auto& c : r->chosen) {
    hashes.insert(HashConfig(c.config));
    has_default = has_default || c.config == space->base();
    EXPECT_GE(c.score, best);
  }
  EXPECT_EQ(hashes.size(), 6u);
  EXPECT_TRUE(has_default);
}

// An ensemble stand-in: the oracle's cost as the score and a made-up member disagreement per
// configuration (from its hash); it records every configuration it scored.
class SpreadScorer : public CandidateScorer {
 public:
  explicit SpreadScorer(std::unique_ptr<CandidateScorer> base) : base_(std::move(base)) {}
  std::string name() const override { return "spread"; }
  StatusOr<std::vector<double>> Score(const std::vector<Config>& configs) override {
    return base_->Score(configs);
  }
  StatusOr<WithSpread> ScoreWithSpread(const std::vector<Config>& configs) override {
    TPUG_ASSIGN_OR_RETURN(std::vector<double> s, base_->Score(configs));
    WithSpread out{s, {}};
    for (const Config& c : configs) {
      out.spread.push_back(1e-3 + static_cast<double>(HashConfig(c) % 100003) / 100003.0);
      seen.emplace_back(c, out.spread.back());
    }
    return out;
  }
  std::vector<std::pair<Config, double>> seen;

 private:
  std::unique_ptr<CandidateScorer> base_;
};

TEST(SearchTest, UncertaintyPenalisesMemberDisagreement) {
  TempDir dir;
  Program p = MakeLayoutProgram(dir, false);
  auto space = SearchSpace::FromGraph(p.graph, p.path);
  auto truth = synth::GroundTruth::Open(p.path);
  ASSERT_TRUE(space.ok() && truth.ok());
  SearchOptions o;
  o.budget = 200;
  o.top = 3;
  o.progress = false;
  for (double lambda : {0.0, 1e12}) {
    o.uncertainty = lambda;
    auto base = MakeOracleCandidateScorer(truth->get(), p.graph);
    ASSERT_TRUE(base.ok());
    SpreadScorer scorer(std::move(*base));
    auto r = RunSearch(*space, p.graph, scorer, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(scorer.seen.size(), 200u);
    auto oracle = MakeOracleCandidateScorer(truth->get(), p.graph);
    ASSERT_TRUE(oracle.ok());
    std::vector<Config> configs;
    for (const auto& [c, spread] : scorer.seen) configs.push_back(c);
    auto costs = (*oracle)->Score(configs);
    ASSERT_TRUE(costs.ok());
    size_t least_cost = 0, least_spread = 0;
    for (size_t i = 1; i < configs.size(); ++i) {
      if ((*costs)[i] < (*costs)[least_cost]) least_cost = i;
      if (scorer.seen[i].second < scorer.seen[least_spread].second) least_spread = i;
    }
    const size_t want = lambda == 0 ? least_cost : least_spread;
    EXPECT_TRUE(r->chosen[0].config == configs[want]) << "lambda " << lambda;
    EXPECT_EQ(r->chosen[0].spread, scorer.seen[want].second);
    EXPECT_EQ(r->chosen[0].score, (*costs)[want] + lambda * scorer.seen[want].second);
  }
  o.uncertainty = -1;
  EXPECT_FALSE(ValidateSearchOptions(o).ok());
}

TEST(SearchTest, MaxDistanceKeepsCandidatesNearTheDatasetAndTheDefault) {
  TempDir dir;
  Program p = MakeLayoutProgram(dir, false);
  auto space = SearchSpace::FromGraph(p.graph, p.path);
  auto truth = synth::GroundTruth::Open(p.path);
  ASSERT_TRUE(space.ok() && truth.ok());
  // The default and the graph's own configurations.
  std::vector<Config> anchors = {space->base()};
  const int64_t row = p.graph.num_config_nodes() * kLayoutConfigFeatureCount;
  for (int64_t c = 1; c < p.graph.num_configs; ++c) {
    Config cfg;
    cfg.layout.assign(p.graph.node_config_feat.begin() + c * row,
                      p.graph.node_config_feat.begin() + (c + 1) * row);
    anchors.push_back(cfg);
  }
  SearchOptions o;
  o.budget = 200;
  o.top = 20;
  o.progress = false;
  for (int64_t d : {0, 2}) {
    o.max_distance = d;
    auto scorer = MakeOracleCandidateScorer(truth->get(), p.graph);
    ASSERT_TRUE(scorer.ok());
    auto r = RunSearch(*space, p.graph, **scorer, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_FALSE(r->chosen.empty());
    if (d == 0) {
      EXPECT_LE(r->scored, p.graph.num_configs);  // nothing else was scored
    }
    for (const auto& c : r->chosen) {
      int64_t nearest = INT64_MAX;
      for (const Config& a : anchors) nearest = std::min(nearest, space->Distance(c.config, a));
      EXPECT_LE(nearest, d) << c.origin;
      if (d == 0) {
        EXPECT_TRUE(c.origin == "default" || c.origin.rfind("dataset:", 0) == 0) << c.origin;
      }
    }
    if (d == 2) {  // the search still moves: some chosen configuration is new
      bool searched = false;
      for (const auto& c : r->chosen) searched = searched || c.origin == "search";
      EXPECT_TRUE(searched);
    }
  }
  // Centred on the default alone: every chosen configuration is within 1 decision of it.
  o.max_distance = 1;
  o.trust_anchors = "default";
  auto scorer = MakeOracleCandidateScorer(truth->get(), p.graph);
  ASSERT_TRUE(scorer.ok());
  auto r = RunSearch(*space, p.graph, **scorer, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r->chosen.empty());
  for (const auto& c : r->chosen) EXPECT_LE(space->Distance(c.config, space->base()), 1);
  o.trust_anchors = "nowhere";
  EXPECT_FALSE(ValidateSearchOptions(o).ok());
  o.trust_anchors = "configs";
  o.max_distance = -2;
  EXPECT_FALSE(ValidateSearchOptions(o).ok());
}

// What a closed loop asks of the search (tune/loop.h): measured configurations scored as seeds
// but never chosen again, the measurement set's best share, and a trust region around given
// anchors.
TEST(SearchTest, LoopSeedsExclusionsBestShareAndAnchors) {
  TempDir dir;
  Program p = MakeLayoutProgram(dir, false);
  auto space = SearchSpace::FromGraph(p.graph, p.path);
  auto truth = synth::GroundTruth::Open(p.path);
  ASSERT_TRUE(space.ok() && truth.ok());
  SearchOptions o;
  o.budget = 150;
  o.measure = 6;
  o.progress = false;
  auto scorer = MakeOracleCandidateScorer(truth->get(), p.graph);
  ASSERT_TRUE(scorer.ok());
  auto first = RunSearch(*space, p.graph, **scorer, o);
  ASSERT_TRUE(first.ok());
  // Round 2: the first set is measured; it seeds the search and is excluded from the choice.
  SearchOptions o2 = o;
  o2.measure_best = 4;
  for (const auto& c : first->chosen) {
    o2.extra_seeds.push_back(c.config);
    o2.exclude.insert(HashConfig(c.config));
  }
  o2.budget = o.budget + static_cast<int64_t>(o2.extra_seeds.size());
  auto second = RunSearch(*space, p.graph, **scorer, o2);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_EQ(second->chosen.size(), 6u);
  for (const auto& c : second->chosen) {
    EXPECT_EQ(o2.exclude.count(HashConfig(c.config)), 0u) << c.origin;
    EXPECT_FALSE(c.config == space->base());  // the default was measured in round 1
  }
  // The set is listed best first.
  for (size_t i = 1; i < second->chosen.size(); ++i) {
    EXPECT_LE(second->chosen[i - 1].score, second->chosen[i].score);
  }
  // Anchors: every new candidate chosen lies within 1 decision of the best measured one.
  SearchOptions o3 = o2;
  o3.anchors = {first->chosen[0].config};
  o3.max_distance = 1;
  auto third = RunSearch(*space, p.graph, **scorer, o3);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  ASSERT_FALSE(third->chosen.empty());
  for (const auto& c : third->chosen) {
    if (c.origin != "search") continue;
    EXPECT_LE(space->Distance(c.config, first->chosen[0].config), 1);
  }
  // Without seeds, exclusions or anchors the options give the search they always gave.
  auto again = RunSearch(*space, p.graph, **scorer, o);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->chosen.size(), first->chosen.size());
  for (size_t i = 0; i < again->chosen.size(); ++i) {
    EXPECT_TRUE(again->chosen[i].config == first->chosen[i].config);
  }
}

TEST(SearchSpaceTest, TileBoundsAreAllowedSizes) {
  TempDir dir;
  const std::string path = dir.File("k.pb");
  synth::RunOptions o;
  o.configs = 30;
  const xla::HloModuleProto kernel = synth::GenerateTileKernel(7, "k");
  auto runs = synth::SynthesizeTileRuns(kernel, o, "k");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  tpu_graphs::TuningData data;
  *data.add_modules() = *runs;
  ASSERT_TRUE(WriteFileAtomically(path, data.SerializeAsString()).ok());
  auto graphs = ingest::LoadRawDump(path, {});
  ASSERT_TRUE(graphs.ok()) << graphs.status().ToString();
  const Graph& g = (*graphs)[0];
  auto truth = synth::GroundTruth::Open(path);
  ASSERT_TRUE(truth.ok()) << truth.status().ToString();
  // The space from the dataset alone finds the kernel's true output and kernel dims.
  auto from_graph = SearchSpace::FromGraph(g, path);
  ASSERT_TRUE(from_graph.ok()) << from_graph.status().ToString();
  EXPECT_EQ(from_graph->tile_groups()[1].dims, (*truth)->tile_output_dims());
  EXPECT_EQ(from_graph->tile_groups()[0].dims, (*truth)->tile_kernel_dims());
  auto space = SearchSpace::FromTileDims(g, (*truth)->tile_output_dims(),
                                         (*truth)->tile_kernel_dims(), path);
  ASSERT_TRUE(space.ok()) << space.status().ToString();
  Rng rng(1);
  Config c = space->base();
  for (int i = 0; i < 500; ++i) {
    c = i % 4 == 0 ? space->Random(rng) : space->Mutate(c, rng);
    ASSERT_TRUE(space->Check(c).ok()) << space->Check(c).ToString();
    const auto b = space->TileBounds(c);
    for (size_t gi = 0; gi < 2; ++gi) {
      for (size_t d = 0; d < b[gi].size(); ++d) {
        EXPECT_GE(b[gi][d], 1);
        EXPECT_LE(b[gi][d], space->tile_groups()[gi].dims[d]);
      }
    }
    EXPECT_TRUE((*truth)->TileCostNs(c.tile.data(), "candidate").ok());
  }
}

}  // namespace
}  // namespace tpugraphs::tune
