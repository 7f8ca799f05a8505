// The search of `tpugraphs tune` (docs/tune.md, "The search"): an evolutionary local search over
// a SearchSpace, with every batch of candidates scored at once by a CandidateScorer (a trained
// model through the scoring code `evaluate` uses, or the synthetic cost model as an oracle).
//
//   1. Score the default configuration (the graph's configuration 0) and up to `dataset_seeds`
//      of the graph's other distinct, valid configurations (evenly spaced in dataset order).
//   2. Until `budget` configurations are scored: make a batch of `batch` new, never scored
//      candidates. Each picks a parent by a binary tournament among the `elite` best scored so
//      far; with probability 1/4 crosses it with a second such parent; then mutates 1 to 3
//      decisions (SearchSpace::Mutate). Score the batch.
//   Candidates are ranked by score + uncertainty x spread (spread: the ensemble members'
//   disagreement, CandidateScorer::ScoreWithSpread), in steps 2 and 3.
//   With max_distance >= 0, a candidate (neighbours of the default included) farther than that
//   many decisions from every seed of step 1 is not scored (it counts as a failed draw).
//   3. Keep the `top` best (lowest score), or with `measure` > 0 a measurement set: the
//      `measure_best` best (1 unless a closed loop asks for more), the default, and then, among
//      the 3 x measure best, repeatedly the one farthest (in decisions changed) from those
//      already chosen, ties to the better score. Configurations in `exclude` are never chosen.
// Strategy "random" replaces steps 1-2 by the default plus budget - 1 uniform draws.
//
// The budget counts every configuration scored (seeds included). Everything random comes from
// one Rng seeded with DeriveSeed(seed, "tune:" + graph id), and scorers are deterministic whatever
// their thread count, so the result depends only on (graph, scorer, options).
//
// Thread-safety: RunSearch is reentrant; the scorer is used from the calling thread.
#ifndef TPUGRAPHS_TUNE_SEARCH_H_
#define TPUGRAPHS_TUNE_SEARCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/tune/search_space.h"

namespace tpugraphs::train {
class ModelScorer;
}
namespace tpugraphs::synth {
class GroundTruth;
}

namespace tpugraphs::tune {

class CandidateScorer {
 public:
  virtual ~CandidateScorer() = default;
  virtual std::string name() const = 0;
  // One finite score per configuration, lower = faster. Scores of different calls compare.
  virtual StatusOr<std::vector<double>> Score(const std::vector<Config>& configs) = 0;
  // The scores and, per configuration, how much the scorer's members disagree on it (the
  // standard deviation of an ensemble's standardised member scores; 0 for a single model or the
  // oracle). The default: Score with no spread.
  struct WithSpread {
    std::vector<double> score;
    std::vector<double> spread;
  };
  virtual StatusOr<WithSpread> ScoreWithSpread(const std::vector<Config>& configs);
};

// A model file's scorer on graph `g` (the graph's own configurations are not used). Each call
// puts the batch into a copy of g and scores it with ModelScorer::ScoreMembers, the chunked,
// thread-count-independent scoring of `evaluate`. An ensemble's members are standardised with
// the mean and standard deviation of their scores in the first call (the seeds), kept for every
// later call, and averaged (the ensemble's own combination, with statistics that do not change
// between batches). ScoreWithSpread also gives, per configuration, the standard deviation of the
// members' standardised scores.
StatusOr<std::unique_ptr<CandidateScorer>> MakeModelCandidateScorer(train::ModelScorer* model,
                                                                    const Graph& g);
// The synthetic cost model's noise-free runtime in ns (synth/ground_truth.h) on graph `g`, which
// must have been ingested from that program (same configurable nodes).
StatusOr<std::unique_ptr<CandidateScorer>> MakeOracleCandidateScorer(
    const synth::GroundTruth* truth, const Graph& g);

struct SearchOptions {
  int64_t budget = 2000;
  int64_t top = 10;
  int64_t measure = 0;  // > 0: choose a measurement set of this size instead of `top`
  uint64_t seed = 1;
  int64_t batch = 64;
  int64_t elite = 32;
  int64_t dataset_seeds = -1;  // < 0: budget / 4
  // Candidates are ranked (search and output) by score + uncertainty x spread: with > 0, a
  // configuration the ensemble's members disagree on counts as slower (pessimistic selection).
  double uncertainty = 0;
  // >= 0: a trust region: only candidates within this many changed decisions of the default or
  // of one of the graph's own (seeding) configurations are scored; < 0: no limit.
  int64_t max_distance = -1;
  // The trust region's centres: "configs" (the default and the dataset seeds) or "default".
  std::string trust_anchors = "configs";
  std::string strategy = "evolution";  // or "random"
  bool progress = true;
  // The measurement set (measure > 0) starts with this many of the best (then the default, then
  // diverse near-best ones): 1 for `tune --measure`; the loop's exploitation share.
  int64_t measure_best = 1;
  // Configurations scored right after the default (evolution: before the dataset's own), e.g.
  // those a closed loop measured; they count in the budget. Origin "measured".
  std::vector<Config> extra_seeds;
  // With max_distance >= 0 and this non-empty: the trust region's centres instead of those
  // trust_anchors names (a closed loop's best measured configurations).
  std::vector<Config> anchors;
  // HashConfig of configurations never to choose (top or measurement set), e.g. those measured
  // already; they are still scored and may parent new candidates.
  std::unordered_set<uint64_t> exclude;
};
Status ValidateSearchOptions(const SearchOptions& o);

struct ScoredConfig {
  Config config;
  double score = 0;    // the ranked value: the scorer's score + uncertainty x spread
  std::string origin;  // "default", "measured", "dataset:<index>", "search", "random"
  double spread = 0;   // the scorer's member disagreement on it
};

struct SearchResult {
  std::vector<ScoredConfig> chosen;  // top (best first) or the measurement set
  ScoredConfig default_config;
  int64_t scored = 0;                   // configurations scored (<= budget)
  int64_t dataset_configs = 0;          // of them, the graph's own configurations
  int64_t invalid_dataset_configs = 0;  // graph configurations outside the space (not used)
  double best_dataset_score = 0;        // best score among the scored dataset configurations
  double seconds = 0;
  double scorer_seconds = 0;  // of seconds, inside the scorer's calls (the rest: the search's own)
};

StatusOr<SearchResult> RunSearch(const SearchSpace& space, const Graph& g, CandidateScorer& scorer,
                                 const SearchOptions& options);

}  // namespace tpugraphs::tune

#endif  // TPUGRAPHS_TUNE_SEARCH_H_
