// `tpugraphs synth --release-shaped S`: a synthetic release tree with the shape of the TpuGraphs
// release ("Fast or Slow?" Kaggle files) at scale S (docs/synth.md, "Release-shaped trees").
//
// The number of train/valid/test graphs of every collection is the release's times S (rounded,
// at least 1 where the release has any); per graph a node count and a configuration count are
// drawn from the release's published distributions (graph sizes and configuration counts are
// not scaled). The graphs are made by RunSynth, ingested and exported, so OUT receives the
// release's npz layout (npz/tile/xla/<split>/, npz/layout/<source>/<search>/<split>/) and
// shape.tsv, one line per graph: collection, split, name, requested nodes ("-" for tile
// kernels), requested configs. Scratch goes to OUT/.work and is removed at the end.
//
// Figures (sources: the TpuGraphs paper, arXiv 2308.13490, Table 1, and per-file counts
// published for the release; tools/make-release-shaped.sh lists them):
//
//   files per split (exact)   train  valid  test
//     tile:xla                5,709    676   844
//     layout:xla:random          69      7     8
//     layout:xla:default         61      7     8   (train a subset of xla:random train; valid and
//     layout:nlp:random         207     20    17    test the same graphs in both searches: here
//     layout:nlp:default        198     20    17    graph i of a source has one seed and size)
//
//   layout nodes per graph, mean / median / min / max (exact):
//     xla train 12,745 / 10,449 / 372 / 43,615
//     xla valid 12,797 / 12,067 / 3,163 / 21,664      xla test 23,561 / 24,077 / 490 / 43,615
//     nlp train  5,758 /  3,296 / 876 / 21,919
//     nlp valid  5,610 /  4,456 / 1,316 / 21,918      nlp test  4,513 /  3,036 / 1,096 / 21,918
//   layout configurations per graph, mean / median / min / max (exact):
//     xla:random  train 14,579 /  8,368 /     20 / 100,040   valid  8,544 /  5,704 /    481 /
//     19,040 xla:default train 17,159 / 10,528 /  1,159 / 100,040   valid  9,432 /  6,120 /  1,965
//     / 19,232 nlp:random  train 65,012 / 67,000 / 11,098 / 100,040   valid 68,731 / 69,680 /
//     10,750 / 100,040 nlp:default train 64,505 / 67,832 / 11,296 / 100,040   valid 70,069 / 73,760
//     / 11,168 / 100,040 every test graph: 1,000
//   tile: 1,842 configurations per kernel on average, from about 8 to 6.9k; the median is not
//     published: ESTIMATE 1,100. Kernels come in batches of up to 8, one RunSynth call and one
//     drawn configuration count per batch; a kernel may get fewer configurations than drawn (at
//     most the distinct tile sizes it admits): shape.tsv holds what was asked.
//
// Draws: a figure with mean >= median is drawn log-normal with that median and mean
// (mu = ln median, sigma^2 = 2 ln(mean / median)); one with mean < median (bunched at the
// 100,040-row cap) is drawn normal with that mean and ESTIMATED standard deviation
// (max - min) / 4; both rounded and clipped to [min, max]. Every draw comes from Rng streams
// derived from the seed (common/rng.h), so the same S and seed give byte-identical trees on any
// platform and thread count.
//
// Thread-safety: the functions are reentrant; the thread pool passed in is used exclusively.
#ifndef TPUGRAPHS_SYNTH_RELEASE_SHAPED_H_
#define TPUGRAPHS_SYNTH_RELEASE_SHAPED_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/rng.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/synth_config.pb.h"

namespace tpugraphs::synth {

// A published per-graph figure: mean, median, min and max.
struct ReleaseFigure {
  double mean = 0, median = 0;
  int64_t min = 0, max = 0;
};

// round(scale * release_count), at least 1 when release_count > 0.
int64_t ScaledReleaseCount(double scale, int64_t release_count);

// k values of `figure` (the draws above), from `rng`.
std::vector<int64_t> DrawReleaseFigure(const ReleaseFigure& figure, int64_t k, Rng& rng);

// One RunSynth call of the tree: `names` graphs of one collection and split (tile: up to 8
// kernels; layout: one program), all with the same requested size.
struct ReleaseShapedBatch {
  std::string collection;          // tile:xla, layout:xla:random, ...
  std::string split;               // train, valid, test
  std::vector<std::string> names;  // file stems in the tree, one per graph
  int64_t nodes = 0;               // layout: requested nodes (after the cap); tile: 0
  int64_t configs = 0;             // requested configurations (after the cap)
  uint64_t seed = 0;               // RunSynth's --seed
};

// Every batch of the tree of config.release_shaped() and config.seed() (caps
// release_max_configs and release_max_nodes applied), in the order of shape.tsv: tile:xla
// train, valid, test; then per source (xla, nlp) and split (train, valid, test) the random and
// the default search. Draws only; writes nothing.
std::vector<ReleaseShapedBatch> PlanReleaseShaped(const SynthConfig& config);

// shape.tsv of a plan: the header and one line per graph.
std::string ReleaseShapeTsv(const std::vector<ReleaseShapedBatch>& plan);

// Graphs written per collection and split, in plan order.
struct ReleaseShapedCount {
  std::string collection, split;
  int64_t graphs = 0;
};

// Writes the tree of PlanReleaseShaped(config) into config.output(): synth, ingest and export
// per collection and split, then shape.tsv. REQUIRES: a config that passed ValidateSynthConfig
// with release_shaped() > 0.
StatusOr<std::vector<ReleaseShapedCount>> WriteReleaseShaped(const SynthConfig& config,
                                                             ThreadPool* pool);

}  // namespace tpugraphs::synth

#endif  // TPUGRAPHS_SYNTH_RELEASE_SHAPED_H_
