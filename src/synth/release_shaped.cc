#include "tpugraphs/synth/release_shaped.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/ingest/export.h"
#include "tpugraphs/ingest/ingest.h"
#include "tpugraphs/synth/synth.h"

namespace tpugraphs::synth {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kTileBatch = 8;       // kernels per RunSynth call (one drawn configs count)
constexpr int64_t kTestConfigs = 1000;  // every layout test graph of the release

// The split names and their indices in the seeds (1-based, as in the tree's seed scheme).
constexpr const char* kSplits[] = {"train", "valid", "test"};

// tile:xla per split: the release's kernel count.
constexpr int64_t kTileCounts[] = {5709, 676, 844};
constexpr ReleaseFigure kTileConfigs = {1842, 1100, 8, 6900};

// One split of a layout source: graph counts of the two searches, nodes per graph and
// configurations per graph of each search (test graphs: kTestConfigs).
struct LayoutSplitShape {
  int64_t random_graphs, default_graphs;
  ReleaseFigure nodes;
  ReleaseFigure random_configs, default_configs;
  bool test;
};

struct LayoutSourceShape {
  const char* source;
  uint64_t index;  // in the seeds
  LayoutSplitShape splits[3];
};

constexpr LayoutSourceShape kLayoutSources[] = {
    {"xla",
     1,
     {{69,
       61,
       {12745, 10449, 372, 43615},
       {14579, 8368, 20, 100040},
       {17159, 10528, 1159, 100040},
       false},
      {7,
       7,
       {12797, 12067, 3163, 21664},
       {8544, 5704, 481, 19040},
       {9432, 6120, 1965, 19232},
       false},
      {8, 8, {23561, 24077, 490, 43615}, {}, {}, true}}},
    {"nlp",
     2,
     {{207,
       198,
       {5758, 3296, 876, 21919},
       {65012, 67000, 11098, 100040},
       {64505, 67832, 11296, 100040},
       false},
      {20,
       20,
       {5610, 4456, 1316, 21918},
       {68731, 69680, 10750, 100040},
       {70069, 73760, 11168, 100040},
       false},
      {17, 17, {4513, 3036, 1096, 21918}, {}, {}, true}}},
};

int64_t Cap(int64_t v, int64_t cap) { return cap > 0 ? std::min(v, cap) : v; }

// tile:xla: per split, batches of up to kTileBatch kernels, one drawn configuration count each.
void PlanTile(const SynthConfig& c, std::vector<ReleaseShapedBatch>* plan) {
  const uint64_t tile_seed = c.seed() * 1000;
  for (uint64_t s = 0; s < 3; ++s) {
    const uint64_t split_index = s + 1;
    const int64_t kernels = ScaledReleaseCount(c.release_shaped(), kTileCounts[s]);
    Rng rng(DeriveSeed(c.seed(), "release-shaped-tile-configs", split_index));
    const std::vector<int64_t> configs =
        DrawReleaseFigure(kTileConfigs, (kernels + kTileBatch - 1) / kTileBatch, rng);
    for (int64_t batch = 0, left = kernels; left > 0; ++batch, left -= kTileBatch) {
      ReleaseShapedBatch b;
      b.collection = "tile:xla";
      b.split = kSplits[s];
      b.configs = Cap(configs[batch], c.release_max_configs());
      b.seed = tile_seed + 100 * split_index + static_cast<uint64_t>(batch);
      for (int64_t j = 0; j < std::min(left, kTileBatch); ++j) {
        char name[96];
        std::snprintf(name, sizeof(name), "%s_b%lld_kernel_%05lld", kSplits[s],
                      static_cast<long long>(batch), static_cast<long long>(j));
        b.names.push_back(name);
      }
      plan->push_back(std::move(b));
    }
  }
}

// One split of a layout source: graph i has one size and seed in both searches.
void PlanLayoutSplit(const SynthConfig& c, const LayoutSourceShape& source, uint64_t s,
                     std::vector<ReleaseShapedBatch>* plan) {
  const LayoutSplitShape& shape = source.splits[s];
  const uint64_t split_index = s + 1;
  const int64_t k_random = ScaledReleaseCount(c.release_shaped(), shape.random_graphs);
  const int64_t k_default = ScaledReleaseCount(c.release_shaped(), shape.default_graphs);
  const uint64_t split_seed = c.seed() * 1000 + source.index * 10 + split_index;
  Rng node_rng(DeriveSeed(c.seed(), "release-shaped-nodes", source.index, split_index));
  const std::vector<int64_t> nodes =
      DrawReleaseFigure(shape.nodes, std::max(k_random, k_default), node_rng);
  for (uint64_t search_index = 0; search_index < 2; ++search_index) {
    const bool random = search_index == 0;
    const int64_t count = random ? k_random : k_default;
    std::vector<int64_t> configs(count, kTestConfigs);
    if (!shape.test) {
      Rng config_rng(DeriveSeed(c.seed(), "release-shaped-configs", source.index * 10 + split_index,
                                search_index));
      configs = DrawReleaseFigure(random ? shape.random_configs : shape.default_configs, count,
                                  config_rng);
    }
    for (int64_t i = 0; i < count; ++i) {
      ReleaseShapedBatch b;
      b.collection = std::string("layout:") + source.source + (random ? ":random" : ":default");
      b.split = kSplits[s];
      char name[96];
      std::snprintf(name, sizeof(name), "%s_%s_%03lld", source.source, kSplits[s],
                    static_cast<long long>(i));
      b.names.push_back(name);
      b.nodes = Cap(nodes[i], c.release_max_nodes());
      b.configs = Cap(configs[i], c.release_max_configs());
      b.seed = split_seed * 1000 + static_cast<uint64_t>(i);
      plan->push_back(std::move(b));
    }
  }
}

// The SynthConfig of one batch, validated (task noise default resolved); `output` a directory
// (tile) or the program's .pb file (layout).
StatusOr<SynthConfig> BatchSynthConfig(const ReleaseShapedBatch& b, const std::string& output) {
  SynthConfig c = DefaultSynthConfig();
  const bool tile = b.collection.rfind("tile:", 0) == 0;
  c.set_task(tile ? "tile" : "layout");
  c.set_graphs(static_cast<int64_t>(b.names.size()));
  if (!tile) {
    c.set_min_nodes(b.nodes);
    c.set_max_nodes(b.nodes);
    c.set_layout_search(b.collection.substr(b.collection.rfind(':') + 1));
  }
  c.set_configs(b.configs);
  c.set_error_rate(0);
  c.set_seed(b.seed);
  c.set_output(output);
  Status valid = ValidateSynthConfig(&c);
  if (!valid.ok()) {
    return InvalidArgumentError("release-shaped " + b.collection + " " + b.split + " " +
                                b.names.front() + ": " + valid.message());
  }
  return c;
}

// Synthesises one batch into `dir` as <name>.pb files.
Status WriteBatch(const ReleaseShapedBatch& b, const fs::path& dir, const fs::path& scratch,
                  ThreadPool* pool) {
  if (b.nodes > 0) {  // layout: the single program straight to its file
    TPUG_ASSIGN_OR_RETURN(SynthConfig c,
                          BatchSynthConfig(b, (dir / (b.names.front() + ".pb")).string()));
    return RunSynth(c, pool).status();
  }
  std::error_code ec;
  fs::remove_all(scratch, ec);
  TPUG_ASSIGN_OR_RETURN(SynthConfig c, BatchSynthConfig(b, scratch.string()));
  TPUG_ASSIGN_OR_RETURN(auto summaries, RunSynth(c, pool));
  for (size_t j = 0; j < summaries.size(); ++j) {
    fs::rename(summaries[j].path, dir / (b.names[j] + ".pb"), ec);
    if (ec) return IoError("cannot move " + summaries[j].path + ": " + ec.message());
  }
  fs::remove_all(scratch, ec);
  return Status::Ok();
}

// The .pb files of one collection and split into the release tree under `out`.
Status IngestAndExport(const std::string& collection, const std::string& split, const fs::path& dir,
                       const fs::path& work, const std::string& out, int threads) {
  const std::string dataset = (work / "group.tpug").string();
  IngestConfig ic;
  ic.add_inputs(dir.string());
  ic.set_output(dataset);
  ic.set_collection(collection);
  ic.set_split(split);
  ic.set_threads(threads);
  TPUG_RETURN_IF_ERROR(ingest::RunIngest(ic).status());
  ingest::ExportOptions eo;
  eo.dataset = dataset;
  eo.output_dir = out;
  eo.threads = threads;
  TPUG_RETURN_IF_ERROR(ingest::ExportDataset(eo).status());
  std::error_code ec;
  fs::remove(dataset, ec);
  return Status::Ok();
}

}  // namespace

int64_t ScaledReleaseCount(double scale, int64_t release_count) {
  if (release_count <= 0) return 0;
  const auto c = static_cast<int64_t>(std::floor(scale * static_cast<double>(release_count) + 0.5));
  return std::max<int64_t>(c, 1);
}

std::vector<int64_t> DrawReleaseFigure(const ReleaseFigure& f, int64_t k, Rng& rng) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(k, 0)));
  const bool lognormal = f.mean >= f.median;
  const double sigma = lognormal ? std::sqrt(2 * std::log(f.mean / f.median))
                                 : static_cast<double>(f.max - f.min) / 4;
  for (int64_t i = 0; i < k; ++i) {
    const double z = rng.Normal();
    const double v = lognormal ? std::exp(std::log(f.median) + sigma * z) : f.mean + sigma * z;
    const double clipped =
        std::clamp(std::floor(v + 0.5), static_cast<double>(f.min), static_cast<double>(f.max));
    out.push_back(static_cast<int64_t>(clipped));
  }
  return out;
}

std::vector<ReleaseShapedBatch> PlanReleaseShaped(const SynthConfig& config) {
  std::vector<ReleaseShapedBatch> plan;
  PlanTile(config, &plan);
  for (const LayoutSourceShape& source : kLayoutSources) {
    for (uint64_t s = 0; s < 3; ++s) PlanLayoutSplit(config, source, s, &plan);
  }
  return plan;
}

std::string ReleaseShapeTsv(const std::vector<ReleaseShapedBatch>& plan) {
  std::string text = "collection\tsplit\tname\tnodes\tconfigs\n";
  for (const ReleaseShapedBatch& b : plan) {
    const std::string nodes = b.nodes > 0 ? std::to_string(b.nodes) : "-";
    for (const std::string& name : b.names) {
      text += b.collection + "\t" + b.split + "\t" + name + "\t" + nodes + "\t" +
              std::to_string(b.configs) + "\n";
    }
  }
  return text;
}

StatusOr<std::vector<ReleaseShapedCount>> WriteReleaseShaped(const SynthConfig& config,
                                                             ThreadPool* pool) {
  const std::vector<ReleaseShapedBatch> plan = PlanReleaseShaped(config);
  const std::string& out = config.output();
  const fs::path work = fs::path(out) / ".work";
  std::error_code ec;
  fs::remove_all(work, ec);
  fs::create_directories(work, ec);
  if (ec) return IoError("cannot create directory " + work.string() + ": " + ec.message());
  std::vector<ReleaseShapedCount> counts;
  // Batches of one collection and split are adjacent in the plan: each run of them is
  // synthesised into one directory, then ingested and exported together.
  for (size_t first = 0; first < plan.size();) {
    size_t end = first;
    ReleaseShapedCount count{plan[first].collection, plan[first].split, 0};
    while (end < plan.size() && plan[end].collection == count.collection &&
           plan[end].split == count.split) {
      ++end;
    }
    std::string group = count.collection + "_" + count.split;
    std::replace(group.begin(), group.end(), ':', '_');
    const fs::path dir = work / "pb" / group;
    fs::create_directories(dir, ec);
    if (ec) return IoError("cannot create directory " + dir.string() + ": " + ec.message());
    for (size_t i = first; i < end; ++i) {
      TPUG_RETURN_IF_ERROR(WriteBatch(plan[i], dir, work / "raw", pool));
      count.graphs += static_cast<int64_t>(plan[i].names.size());
    }
    TPUG_RETURN_IF_ERROR(
        IngestAndExport(count.collection, count.split, dir, work, out, pool->num_threads()));
    fs::remove_all(dir, ec);
    spdlog::info("release-shaped {} {}: {} graphs", count.collection, count.split, count.graphs);
    counts.push_back(std::move(count));
    first = end;
  }
  TPUG_RETURN_IF_ERROR(
      WriteFileAtomically((fs::path(out) / "shape.tsv").string(), ReleaseShapeTsv(plan)));
  fs::remove_all(work, ec);
  return counts;
}

}  // namespace tpugraphs::synth
