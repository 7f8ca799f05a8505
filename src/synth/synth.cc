#include "tpugraphs/synth/synth.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/eval/metrics.h"
#include "tpugraphs/synth/program_generator.h"

namespace tpugraphs::synth {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxGraphs = 1000000;
constexpr int64_t kMaxNodes = 10000000;
constexpr int64_t kMaxConfigs = 10000000;
constexpr int64_t kConfigBatch = 2048;  // runs priced and serialised per batch (bounded memory)

void AppendVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Appends a length-delimited field (wire type 2).
void AppendBytesField(std::string* out, int field, std::string_view bytes) {
  AppendVarint(out, (static_cast<uint64_t>(field) << 3) | 2);
  AppendVarint(out, bytes.size());
  out->append(bytes.data(), bytes.size());
}

std::string Serialize(const google::protobuf::MessageLite& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

void SetProfile(tpu_graphs::ConfigProfile* run, double ns) {
  const int64_t t = std::max<int64_t>(2, std::llround(ns));
  auto* p = run->mutable_profile();
  p->set_compute_cycle_count(std::llround(static_cast<double>(t) * 0.94));  // 940 MHz clock
  p->set_compute_time_ns(t);
  p->set_compute_and_transfer_time_ns(t + 1500);
}

// Positions (in [1, total)) of the error runs among `total` runs.
std::vector<char> ErrorMask(int64_t configs, double error_rate, uint64_t seed, uint64_t g) {
  const int64_t errors =
      static_cast<int64_t>(std::floor(error_rate * static_cast<double>(configs)));
  std::vector<char> mask(configs + errors, 0);
  if (errors == 0) return mask;
  Rng rng(DeriveSeed(seed, "error-runs", g));
  for (int64_t p : rng.SampleWithoutReplacement(configs + errors - 1, errors)) mask[p + 1] = 1;
  return mask;
}

// Layout search distribution per tensor: "compiler default" (empty dims), the tensor's current
// layout written out, or a new permutation.
constexpr double kEmptyLayoutProb = 0.06;
constexpr double kKeepLayoutProb = 0.72;

// A random minor-to-major permutation of a tensor: the minor and second-minor dimensions are
// drawn with weights favouring dimensions that fill the (8, 128) tile (as a search that knows
// about tiling would), the others stay in descending order.
TensorLayout RandomLayout(Rng& rng, const std::vector<int64_t>& dims,
                          const std::vector<int64_t>& fallback) {
  const size_t rank = dims.size();
  if (rank == 0) return {};
  const double u = rng.Uniform();
  if (u < kEmptyLayoutProb) return {};
  if (u < kEmptyLayoutProb + kKeepLayoutProb) return fallback;
  std::vector<int64_t> rest;
  for (size_t d = 0; d < rank; ++d) rest.push_back(static_cast<int64_t>(rank - 1 - d));
  TensorLayout out;
  for (int pick = 0; pick < 2 && !rest.empty(); ++pick) {
    double total = 0;
    std::vector<double> w;
    for (int64_t d : rest) {
      // Cubed tile utilisation of the dimension in this position: a search with a sensible prior
      // rarely puts a dimension minor that wastes most of the 128 lanes.
      const double tile = pick == 0 ? 128.0 : 8.0;
      const double d_size = static_cast<double>(std::max<int64_t>(dims[d], 1));
      const double util = d_size / (std::ceil(d_size / tile) * tile);
      w.push_back(util * util * util);
      total += w.back();
    }
    if (total == 0) {  // only tiny dimensions left: any of them
      for (double& x : w) x = 1.0;
      total = static_cast<double>(w.size());
    }
    double r = rng.Uniform() * total;
    size_t idx = 0;
    while (idx + 1 < w.size() && r >= w[idx]) r -= w[idx++];
    out.push_back(rest[idx]);
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(idx));
  }
  for (int64_t d : rest) out.push_back(d);
  return out;
}

std::vector<NodeLayout> RandomLayoutConfig(const ModuleAnalysis& a, const LayoutCostModel& model,
                                           bool default_search, Rng& rng) {
  const auto& nodes = model.configurable();
  std::vector<NodeLayout> config(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& node = a.nodes[nodes[i]];
    const int nt = model.NumTensors(i);
    config[i].resize(nt);
    if (default_search && rng.Uniform() < 0.85) continue;  // all tensors "compiler default"
    config[i][0] = RandomLayout(rng, node.dims, node.m2m);
    for (int t = 1; t < nt; ++t) {
      const NodeInfo& op = a.nodes[node.operands[t - 1]];
      config[i][t] = RandomLayout(rng, op.dims, op.m2m);
    }
  }
  return config;
}

void FillLayoutConfig(const std::vector<NodeLayout>& config, tpu_graphs::ConfigProfile* run) {
  auto* lc = run->mutable_module_config()->mutable_layout_config();
  for (const NodeLayout& node : config) {
    auto* n = lc->add_nodes();
    for (const TensorLayout& t : node) {
      auto* tensor = n->add_tensors();
      for (int64_t d : t) tensor->add_dims(static_cast<int32_t>(d));
    }
  }
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool IsWord(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

}  // namespace

SynthConfig DefaultSynthConfig() {
  SynthConfig c;
  c.set_task("layout");
  c.set_graphs(10);
  c.set_min_nodes(200);
  c.set_max_nodes(2000);
  c.set_configs(100);
  c.set_seed(1);
  c.set_layout_search("random");
  c.set_noise_sigma(-1);
  c.set_error_rate(0.02);
  c.set_source("synth");
  return c;
}

namespace {

// The release-shaped fields (synth/release_shaped.h).
Status ValidateReleaseShaped(const SynthConfig& c) {
  auto bad = [](const std::string& msg) { return InvalidArgumentError(msg); };
  if (!(c.release_shaped() >= 0 && c.release_shaped() <= 100)) {
    return bad("--release-shaped must be in (0, 100], got " + std::to_string(c.release_shaped()));
  }
  if (c.release_max_configs() != 0 &&
      (c.release_max_configs() < 2 || c.release_max_configs() > kMaxConfigs)) {
    return bad("--cap-configs must be 0 (none) or in [2, " + std::to_string(kMaxConfigs) +
               "], got " + std::to_string(c.release_max_configs()));
  }
  if (c.release_max_nodes() != 0 &&
      (c.release_max_nodes() < 30 || c.release_max_nodes() > kMaxNodes)) {
    return bad("--cap-nodes must be 0 (none) or in [30, " + std::to_string(kMaxNodes) + "], got " +
               std::to_string(c.release_max_nodes()));
  }
  if (c.release_shaped() > 0 && !c.from().empty()) {
    return bad("--release-shaped makes its own programs; it does not take --from");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateSynthConfig(SynthConfig* c) {
  auto bad = [](const std::string& msg) { return InvalidArgumentError(msg); };
  TPUG_RETURN_IF_ERROR(ValidateReleaseShaped(*c));
  if (c->task() != "tile" && c->task() != "layout") {
    return bad("--task must be 'tile' or 'layout', got '" + c->task() + "'");
  }
  if (c->from().empty() && (c->graphs() < 1 || c->graphs() > kMaxGraphs)) {
    return bad("--graphs must be in [1, " + std::to_string(kMaxGraphs) + "], got " +
               std::to_string(c->graphs()));
  }
  if (c->min_nodes() < 30 || c->max_nodes() > kMaxNodes || c->min_nodes() > c->max_nodes()) {
    return bad(
        "--min-nodes/--max-nodes must satisfy 30 <= min <= max <= " + std::to_string(kMaxNodes) +
        ", got " + std::to_string(c->min_nodes()) + " and " + std::to_string(c->max_nodes()));
  }
  if (c->configs() < 2 || c->configs() > kMaxConfigs) {
    return bad("--configs must be in [2, " + std::to_string(kMaxConfigs) + "], got " +
               std::to_string(c->configs()));
  }
  if (!c->splits().empty()) {
    if (c->splits_size() != 3) return bad("--splits needs three fractions train,valid,test");
    double sum = 0;
    for (double f : c->splits()) {
      if (!(f >= 0 && f <= 1)) return bad("--splits fractions must be in [0, 1]");
      sum += f;
    }
    if (std::abs(sum - 1.0) > 1e-6) return bad("--splits fractions must sum to 1");
  }
  if (c->output().empty()) return bad("--output is required");
  if (c->layout_search() != "random" && c->layout_search() != "default") {
    return bad("--search must be 'random' or 'default', got '" + c->layout_search() + "'");
  }
  if (!(c->noise_sigma() < 0) && !(c->noise_sigma() <= 1.0)) {
    return bad("--noise must be in [0, 1] (or < 0 for the task default)");
  }
  if (c->noise_sigma() < 0) c->set_noise_sigma(c->task() == "tile" ? 0.02 : 0.005);
  if (!(c->error_rate() >= 0 && c->error_rate() <= 0.5)) {
    return bad("--error-rate must be in [0, 0.5]");
  }
  if (!IsWord(c->source())) {
    return bad("--source must be a lower-case word ([a-z0-9_]+), got '" + c->source() + "'");
  }
  return Status::Ok();
}

StatusOr<SynthGraphSummary> WriteLayoutTuningData(const xla::HloModuleProto& module,
                                                  const ModuleAnalysis& analysis,
                                                  const std::vector<int64_t>& configurable,
                                                  const RunOptions& options, ThreadPool* pool,
                                                  const std::string& path) {
  if (configurable.empty()) {
    return InvalidArgumentError(path + ": module '" + module.name() +
                                "' has no configurable node (convolution, dot or reshape)");
  }
  TpuConstants constants;
  constants.cross_node_terms = options.cross_node_terms;
  LayoutCostModel model(analysis, configurable, constants);
  SynthGraphSummary summary;
  summary.path = path;
  summary.name = module.name();
  summary.nodes = static_cast<int64_t>(analysis.nodes.size());
  summary.configurable = static_cast<int64_t>(configurable.size());
  summary.configs = options.configs;
  summary.best_ns = INT64_MAX;
  const std::vector<char> error_mask =
      ErrorMask(options.configs, options.error_rate, options.seed, options.graph_index);
  const int64_t total = static_cast<int64_t>(error_mask.size());
  summary.error_runs = total - options.configs;

  AtomicFileWriter out;
  TPUG_RETURN_IF_ERROR(out.Open(path));
  std::string head;
  {
    std::string bytes;
    google::protobuf::io::StringOutputStream sos(&bytes);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    module.SerializeToCodedStream(&cos);
    cos.Trim();
    AppendBytesField(&head, 1, bytes);
  }
  const uint64_t fingerprint = DeriveSeed(options.seed, "fingerprint", options.graph_index);
  AppendVarint(&head, (2 << 3) | 0);
  AppendVarint(&head, fingerprint);
  TPUG_RETURN_IF_ERROR(out.Append(head));
  head.clear();
  head.shrink_to_fit();

  Progress progress("synth " + module.name(), total, "configs");
  std::vector<std::string> chunk;
  std::vector<int64_t> runtimes, noise_free;
  for (int64_t begin = 0; begin < total; begin += kConfigBatch) {
    const int64_t end = std::min(total, begin + kConfigBatch);
    chunk.assign(end - begin, std::string());
    runtimes.assign(end - begin, 0);
    noise_free.assign(end - begin, 0);
    pool->ParallelFor(end - begin, 16, [&](int64_t, int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t j = begin + r;
        Rng rng(DeriveSeed(options.seed, "layout-config", options.graph_index, j));
        std::vector<NodeLayout> config;
        if (j == 0) {
          config.resize(configurable.size());
          for (size_t i = 0; i < configurable.size(); ++i) config[i].resize(model.NumTensors(i));
        } else {
          config = RandomLayoutConfig(analysis, model, options.default_search, rng);
        }
        tpu_graphs::ConfigProfile run;
        FillLayoutConfig(config, &run);
        if (error_mask[j]) {
          run.set_error(true);
          run.mutable_profile();
        } else {
          const double clean = model.RuntimeNs(config);
          const double ns =
              clean * NoiseFactor(DeriveSeed(options.seed, "noise", options.graph_index, j),
                                  options.noise_sigma);
          SetProfile(&run, ns);
          runtimes[r] = run.profile().compute_time_ns();
          noise_free[r] = static_cast<int64_t>(std::llround(clean));
          if (j == 0) run.set_is_default(true);
        }
        std::string bytes = Serialize(run);
        std::string& s = chunk[r];
        AppendBytesField(&s, 3, bytes);
      }
      progress.Add(e - b);
    });
    for (int64_t r = 0; r < end - begin; ++r) {
      TPUG_RETURN_IF_ERROR(out.Append(chunk[r]));
      if (error_mask[begin + r]) continue;
      summary.measured_ns.push_back(runtimes[r]);
      summary.noise_free_ns.push_back(noise_free[r]);
      if (begin + r == 0) summary.default_ns = runtimes[r];
      summary.best_ns = std::min(summary.best_ns, runtimes[r]);
      summary.worst_ns = std::max(summary.worst_ns, runtimes[r]);
    }
  }
  std::string packed;
  for (int64_t v : configurable) AppendVarint(&packed, static_cast<uint64_t>(v));
  std::string tail;
  AppendBytesField(&tail, 4, packed);
  TPUG_RETURN_IF_ERROR(out.Append(tail));
  TPUG_RETURN_IF_ERROR(out.Commit());
  progress.Finish();
  return summary;
}

namespace {

// Candidate tile sizes along one dimension of size d in layout position `pos` (0 = most minor):
// powers of two from the hardware tile (128 lanes, 8 sublanes, 1 elsewhere) up to d, d itself,
// and non-dividing sizes 3 * 2^k that cost padding waste.
std::vector<int64_t> TileCandidates(int64_t d, size_t pos, bool fine) {
  const int64_t lo = fine ? 1
                          : std::min<int64_t>(std::max<int64_t>(d, 1), pos == 0   ? 128
                                                                       : pos == 1 ? 8
                                                                                  : 1);
  std::set<int64_t> c;
  for (int64_t p = lo; p < d; p *= 2) c.insert(p);
  c.insert(std::max<int64_t>(d, 1));
  for (int64_t p = 3 * lo; p < d; p *= 2) c.insert(p);
  return {c.begin(), c.end()};
}

int64_t NumTiles(const std::vector<int64_t>& dims, const std::vector<int64_t>& tile) {
  double n = 1;
  for (size_t i = 0; i < dims.size(); ++i) n *= std::ceil(static_cast<double>(dims[i]) / tile[i]);
  return static_cast<int64_t>(std::min(n, 1e18));
}

std::vector<int64_t> DefaultTile(const std::vector<int64_t>& dims, const std::vector<int64_t>& m2m,
                                 int64_t lanes, int64_t sublanes) {
  std::vector<int64_t> t(dims.size(), 1);
  for (size_t pos = 0; pos < m2m.size() && pos < 2; ++pos) {
    const int64_t d = dims[m2m[pos]];
    t[m2m[pos]] = std::min<int64_t>(d, pos == 0 ? lanes : sublanes);
  }
  return t;
}

}  // namespace

StatusOr<tpu_graphs::ModuleTuningData> SynthesizeTileRuns(const xla::HloModuleProto& module,
                                                          const RunOptions& options,
                                                          const std::string& what) {
  TPUG_ASSIGN_OR_RETURN(ModuleAnalysis analysis, AnalyzeModule(module, what));
  TPUG_ASSIGN_OR_RETURN(TileCostModel model, TileCostModel::Create(analysis, what));
  const auto& out_dims = model.output_dims();
  const auto& kdims = model.kernel_dims();
  Rng rng(DeriveSeed(options.seed, "tile-configs", options.graph_index));
  // Distinct configurations: the default first, then random draws until enough or exhausted.
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> configs;
  std::set<std::pair<std::vector<int64_t>, std::vector<int64_t>>> seen;
  TpuConstants k;
  // The compiler's heuristic default: start from one hardware tile and double dims (minor
  // first) while there are too many tiles and the working set fits half the fast memory.
  std::vector<int64_t> default_out =
      DefaultTile(out_dims, model.output_m2m(), k.lane_tile, k.sublane_tile);
  for (bool grown = true;
       grown && NumTiles(out_dims, default_out) > static_cast<int64_t>(k.max_tiles / 4);) {
    grown = false;
    for (size_t p = 0; p < model.output_m2m().size() && !grown; ++p) {
      const int64_t d = model.output_m2m()[p];
      if (d < 0 || d >= static_cast<int64_t>(out_dims.size()) || default_out[d] >= out_dims[d])
        continue;
      std::vector<int64_t> bigger = default_out;
      bigger[d] = std::min(out_dims[d], 2 * bigger[d]);
      tpu_graphs::TileSizeConfig probe;
      for (int64_t v : bigger) probe.add_output_bounds(v);
      if (model.WorkingSetBytes(probe) > k.fast_memory_bytes / 2) continue;
      default_out = bigger;
      grown = true;
    }
  }
  std::vector<int64_t> default_kernel = kdims.empty() ? std::vector<int64_t>{} : kdims;
  configs.push_back({default_out, default_kernel});
  seen.insert(configs.back());
  // Position of each dim in its layout decides its hardware tile.
  auto positions = [](const std::vector<int64_t>& m2m, size_t rank) {
    std::vector<size_t> pos(rank, 2);
    for (size_t p = 0; p < m2m.size() && p < rank; ++p) {
      if (m2m[p] >= 0 && static_cast<size_t>(m2m[p]) < rank) pos[m2m[p]] = p;
    }
    return pos;
  };
  const auto out_pos = positions(model.output_m2m(), out_dims.size());
  std::vector<int64_t> kernel_m2m(kdims.size());
  for (size_t i = 0; i < kdims.size(); ++i)
    kernel_m2m[i] = static_cast<int64_t>(kdims.size() - 1 - i);
  const auto k_pos = positions(kernel_m2m, kdims.size());
  std::vector<std::vector<int64_t>> out_cand, k_cand;
  // Hardware-aligned candidates first; tiny kernels with fewer than two such configurations also
  // get sub-tile sizes (a search must compare at least two).
  for (bool fine : {false, true}) {
    out_cand.clear();
    k_cand.clear();
    for (size_t i = 0; i < out_dims.size(); ++i)
      out_cand.push_back(TileCandidates(out_dims[i], out_pos[i], fine));
    for (size_t i = 0; i < kdims.size(); ++i)
      k_cand.push_back(TileCandidates(kdims[i], k_pos[i], fine));
    for (int64_t attempt = 0;
         attempt < 30 * options.configs && static_cast<int64_t>(configs.size()) < options.configs;
         ++attempt) {
      std::vector<int64_t> o, kb;
      for (const auto& c : out_cand) o.push_back(c[rng.UniformInt(c.size())]);
      for (const auto& c : k_cand) kb.push_back(c[rng.UniformInt(c.size())]);
      if (NumTiles(out_dims, o) * NumTiles(kdims, kb) > static_cast<int64_t>(k.max_tiles)) continue;
      if (seen.insert({o, kb}).second) configs.push_back({o, kb});
    }
    if (configs.size() >= 2) break;
  }
  const int64_t n = static_cast<int64_t>(configs.size());
  const std::vector<char> error_mask =
      ErrorMask(n, options.error_rate, options.seed, options.graph_index);
  tpu_graphs::ModuleTuningData data;
  *data.mutable_module() = module;
  data.set_fingerprint(DeriveSeed(options.seed, "fingerprint", options.graph_index));
  int64_t next = 0;
  for (size_t r = 0; r < error_mask.size(); ++r) {
    auto* run = data.add_runs();
    auto* tile = run->mutable_op_config()->mutable_tile_size_config();
    if (error_mask[r]) {
      // A failed measurement of a random configuration: error set, profile present but empty.
      std::vector<int64_t> o;
      for (const auto& c : out_cand) o.push_back(c[rng.UniformInt(c.size())]);
      for (int64_t v : o) tile->add_output_bounds(v);
      for (int64_t v : kdims) tile->add_kernel_bounds(v);
      run->set_error(true);
      run->mutable_profile();
      continue;
    }
    const auto& [o, kb] = configs[next];
    for (int64_t v : kb) tile->add_kernel_bounds(v);
    for (int64_t v : o) tile->add_output_bounds(v);
    const double ns = model.RuntimeNs(*tile) *
                      NoiseFactor(DeriveSeed(options.seed, "noise", options.graph_index, next),
                                  options.noise_sigma);
    SetProfile(run, ns);
    if (next == 0) run->set_is_default(true);
    ++next;
  }
  return data;
}

Status ReadModules(const std::string& path, std::vector<xla::HloModuleProto>* modules,
                   std::vector<int64_t>* config_index_to_node, bool* is_tuning_data) {
  TPUG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  modules->clear();
  config_index_to_node->clear();
  *is_tuning_data = false;
  {
    tpu_graphs::ModuleTuningData m;
    if (m.ParseFromString(bytes) && m.has_module() && m.module().computations_size() > 0) {
      modules->push_back(m.module());
      config_index_to_node->assign(m.config_index_to_node().begin(),
                                   m.config_index_to_node().end());
      return Status::Ok();
    }
  }
  {
    tpu_graphs::TuningData t;
    if (t.ParseFromString(bytes) && t.modules_size() > 0) {
      bool all = true;
      for (const auto& m : t.modules()) all = all && m.module().computations_size() > 0;
      if (all) {
        for (const auto& m : t.modules()) modules->push_back(m.module());
        *is_tuning_data = true;
        return Status::Ok();
      }
    }
  }
  {
    xla::HloModuleProto m;
    if (m.ParseFromString(bytes) && m.computations_size() > 0) {
      modules->push_back(std::move(m));
      return Status::Ok();
    }
  }
  {
    xla::HloProto h;
    if (h.ParseFromString(bytes) && h.hlo_module().computations_size() > 0) {
      modules->push_back(h.hlo_module());
      return Status::Ok();
    }
  }
  return InvalidArgumentError(path +
                              ": not a ModuleTuningData, TuningData, HloModuleProto or HloProto "
                              "with at least one computation");
}

namespace {

std::string SplitOf(int64_t g, const std::vector<std::string>& splits) { return splits[g]; }

// Split of every graph: a seeded shuffle, then train/valid/test blocks of the given fractions.
std::vector<std::string> AssignSplits(const SynthConfig& c, int64_t graphs) {
  std::vector<std::string> out(graphs, "train");
  if (c.splits().empty()) return out;
  std::vector<int64_t> order(graphs);
  for (int64_t g = 0; g < graphs; ++g) order[g] = g;
  Rng rng(DeriveSeed(c.seed(), "splits"));
  rng.Shuffle(order);
  const int64_t b1 = std::llround(c.splits(0) * static_cast<double>(graphs));
  const int64_t b2 = std::llround((c.splits(0) + c.splits(1)) * static_cast<double>(graphs));
  for (int64_t i = 0; i < graphs; ++i) {
    out[order[i]] = i < b1 ? "train" : i < b2 ? "valid" : "test";
  }
  return out;
}

std::string Stem(const std::string& path) { return fs::path(path).stem().string(); }

int64_t LogUniform(Rng& rng, int64_t lo, int64_t hi) {
  const double l = std::log(static_cast<double>(lo)), h = std::log(static_cast<double>(hi));
  return std::clamp<int64_t>(std::llround(std::exp(l + (h - l) * rng.Uniform())), lo, hi);
}

}  // namespace

// Tile runs: the measured value with run `i`'s noise factor divided back out (SynthesizeTileRuns
// draws the factor of the i-th valid run from DeriveSeed(seed, "noise", graph, i)).
void AddTileNoiseFree(const SynthConfig& c, int64_t g, int64_t i, int64_t measured,
                      SynthGraphSummary* s) {
  const double factor =
      NoiseFactor(DeriveSeed(c.seed(), "noise", static_cast<uint64_t>(g), i), c.noise_sigma());
  s->measured_ns.push_back(measured);
  s->noise_free_ns.push_back(static_cast<int64_t>(std::llround(measured / factor)));
}

void SetNoiseFreeKendall(std::vector<SynthGraphSummary>* summaries) {
  for (SynthGraphSummary& s : *summaries) {
    std::vector<double> a(s.noise_free_ns.begin(), s.noise_free_ns.end());
    std::vector<double> b(s.measured_ns.begin(), s.measured_ns.end());
    s.noise_free_kendall = eval::KendallTauB(a, b);
  }
}

namespace {

// What one RunSynth call makes: the graphs, their names, splits and output paths.
struct SynthPlan {
  const SynthConfig* config = nullptr;
  std::vector<xla::HloModuleProto> from_modules;  // the graphs of `from` (empty: generate)
  std::vector<int64_t> from_config_nodes;         // `from`'s config_index_to_node, if any
  bool tile = false;
  int64_t graphs = 0;
  bool single_file = false;  // output names one .pb file
  std::vector<std::string> splits;
  StagedDirectory staged;  // directory output: every file is written below it, then committed

  bool generated() const { return config->from().empty(); }

  // Path of graph g below the output directory.
  std::string RelativePath(int64_t g, const std::string& name) const {
    const SynthConfig& c = *config;
    fs::path p = "pb";
    if (tile) {
      p /= fs::path("tile") / c.source() / SplitOf(g, splits);
    } else {
      p /= fs::path("layout") / c.source() / c.layout_search() / SplitOf(g, splits);
    }
    return (p / (name + ".pb")).string();
  }

  // Where graph g's file ends up once the output is committed.
  std::string FinalPath(int64_t g, const std::string& name) const {
    return single_file ? config->output() : staged.FinalPath(RelativePath(g, name));
  }

  // Graph g's name: program_NNNNN / kernel_NNNNN, or the stem of `from`.
  std::string Name(int64_t g) const {
    if (!generated()) {
      const std::string stem = Lower(Stem(config->from()));
      return graphs == 1 ? stem : stem + "_" + std::to_string(g);
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s_%05lld", tile ? "kernel" : "program",
                  static_cast<long long>(g));
    return std::string(buf);
  }

  // What error messages about graph g name: its generated name, or the `from` file.
  std::string What(int64_t g) const { return generated() ? Name(g) : config->from(); }

  // The options of graph g's runs.
  RunOptions Options(int64_t g) const {
    RunOptions o;
    o.configs = config->configs();
    o.noise_sigma = config->noise_sigma();
    o.error_rate = config->error_rate();
    o.default_search = config->layout_search() == "default";
    o.cross_node_terms = !config->no_cross_node_terms();
    o.seed = config->seed();
    o.graph_index = static_cast<uint64_t>(g);
    return o;
  }
};

// Reads `from` (if any), decides the task, graph count, output kind and splits.
Status PlanSynth(const SynthConfig& c, SynthPlan* plan) {
  plan->config = &c;
  bool from_tile = false;
  if (!c.from().empty()) {
    TPUG_RETURN_IF_ERROR(
        ReadModules(c.from(), &plan->from_modules, &plan->from_config_nodes, &from_tile));
  }
  plan->tile = c.from().empty() ? c.task() == "tile" : (from_tile || c.task() == "tile");
  plan->graphs = c.from().empty() ? c.graphs() : static_cast<int64_t>(plan->from_modules.size());
  plan->single_file = c.output().size() > 3 && c.output().substr(c.output().size() - 3) == ".pb";
  if (plan->single_file && plan->graphs != 1 && !plan->tile) {
    return InvalidArgumentError("--output " + c.output() + " is a single .pb file but " +
                                std::to_string(plan->graphs) +
                                " graphs are made; give a directory");
  }
  plan->splits = AssignSplits(c, plan->graphs);
  return Status::Ok();
}

// The output's directory (single file) or the staging directory and its subdirectories, so that
// a bad --output fails before any work.
Status PrepareOutput(SynthPlan* plan) {
  if (plan->single_file) {
    const fs::path dir = fs::path(plan->config->output()).parent_path();
    std::error_code ec;
    if (!dir.empty()) fs::create_directories(dir, ec);
    if (ec) return IoError("cannot create directory " + dir.string() + ": " + ec.message());
    return Status::Ok();
  }
  TPUG_RETURN_IF_ERROR(plan->staged.Begin(plan->config->output()));
  for (int64_t g = 0; g < plan->graphs; ++g) {
    TPUG_RETURN_IF_ERROR(plan->staged.Path(plan->RelativePath(g, "x")).status());
  }
  return Status::Ok();
}

// Tile kernel g: generated from (seed, g), or the g-th kernel of `from`.
xla::HloModuleProto TileKernel(const SynthPlan& plan, int64_t g) {
  return plan.generated()
             ? GenerateTileKernel(DeriveSeed(plan.config->seed(), "kernel", g), plan.Name(g))
             : plan.from_modules[g];
}

std::string SerializeDeterministic(const google::protobuf::Message& m) {
  std::string bytes;
  google::protobuf::io::StringOutputStream sos(&bytes);
  {
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&cos);
  }
  return bytes;
}

// Fills the node count and run figures of kernel g's summary from its runs.
void SummarizeTileRuns(const SynthConfig& c, int64_t g, const tpu_graphs::ModuleTuningData& mtd,
                       SynthGraphSummary* s) {
  for (const auto& comp : mtd.module().computations()) s->nodes += comp.instructions_size();
  s->best_ns = INT64_MAX;
  for (const auto& run : mtd.runs()) {
    if (run.error()) {
      ++s->error_runs;
      continue;
    }
    const int64_t t = run.profile().compute_time_ns();
    AddTileNoiseFree(c, g, s->configs, t, s);
    ++s->configs;
    if (run.is_default()) s->default_ns = t;
    s->best_ns = std::min(s->best_ns, t);
    s->worst_ns = std::max(s->worst_ns, t);
  }
}

// Tile, single .pb output: every kernel in one TuningData.
StatusOr<std::vector<SynthGraphSummary>> WriteTileFile(const SynthPlan& plan) {
  const SynthConfig& c = *plan.config;
  std::vector<SynthGraphSummary> summaries(plan.graphs);
  tpu_graphs::TuningData all;
  for (int64_t g = 0; g < plan.graphs; ++g) {
    xla::HloModuleProto m = TileKernel(plan, g);
    TPUG_ASSIGN_OR_RETURN(auto data, SynthesizeTileRuns(m, plan.Options(g), plan.What(g)));
    *all.add_modules() = std::move(data);
    summaries[g].path = c.output();
    summaries[g].name = m.name();
  }
  RemoveStaleTemporaries(c.output());  // left by a killed earlier run
  TPUG_RETURN_IF_ERROR(WriteFileAtomically(c.output(), SerializeDeterministic(all)));
  for (int64_t g = 0; g < plan.graphs; ++g) {
    summaries[g].split = plan.splits[g];
    SummarizeTileRuns(c, g, all.modules(g), &summaries[g]);
  }
  return summaries;
}

// Tile, directory output: one kernel per work item, each written to its own staged file.
StatusOr<std::vector<SynthGraphSummary>> WriteTileKernels(SynthPlan& plan, ThreadPool* pool) {
  std::vector<SynthGraphSummary> summaries(plan.graphs);
  std::vector<Status> statuses(plan.graphs);
  Progress progress("synth tile kernels", plan.graphs, "kernels");
  pool->ParallelFor(plan.graphs, 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g) {
      const std::string name = plan.Name(g);
      auto data = SynthesizeTileRuns(TileKernel(plan, g), plan.Options(g), plan.What(g));
      if (!data.ok()) {
        statuses[g] = data.status();
        continue;
      }
      tpu_graphs::TuningData file;
      *file.add_modules() = std::move(data).value();
      auto staged_path = plan.staged.Path(plan.RelativePath(g, name));
      statuses[g] = staged_path.ok()
                        ? WriteFileAtomically(*staged_path, SerializeDeterministic(file))
                        : staged_path.status();
      SynthGraphSummary& s = summaries[g];
      s.path = plan.FinalPath(g, name);
      s.split = plan.splits[g];
      s.name = name;
      SummarizeTileRuns(*plan.config, g, file.modules(0), &s);
      progress.Add(1);
    }
  });
  for (const Status& s : statuses) TPUG_RETURN_IF_ERROR(s);
  progress.Finish();
  TPUG_RETURN_IF_ERROR(plan.staged.Commit());
  return summaries;
}

// Layout program g: generated at a size drawn from (seed, g), or the g-th module of `from`.
xla::HloModuleProto LayoutProgram(SynthPlan& plan, int64_t g) {
  const SynthConfig& c = *plan.config;
  if (!plan.generated()) return std::move(plan.from_modules[g]);
  Rng size_rng(DeriveSeed(c.seed(), "program-size", g));
  const int64_t target = LogUniform(size_rng, c.min_nodes(), c.max_nodes());
  return GenerateLayoutProgram(target, DeriveSeed(c.seed(), "program", g), plan.Name(g));
}

// The configurable nodes of a layout program: `from`'s own config_index_to_node when they are
// convolution/dot/reshape nodes, else every such node of the analysis.
std::vector<int64_t> ChooseConfigurable(const SynthPlan& plan, const ModuleAnalysis& analysis) {
  std::vector<int64_t> configurable = ConfigurableNodes(analysis);
  if (plan.from_config_nodes.empty()) return configurable;
  bool ok = true;
  for (int64_t v : plan.from_config_nodes) {
    ok = ok && v >= 0 && v < static_cast<int64_t>(analysis.nodes.size()) &&
         !analysis.nodes[v].operands.empty() &&
         (analysis.nodes[v].cls == OpClass::kConvolution ||
          analysis.nodes[v].cls == OpClass::kDot || analysis.nodes[v].cls == OpClass::kReshape);
  }
  if (ok) return plan.from_config_nodes;
  spdlog::warn(
      "{}: config_index_to_node does not point at convolution/dot/reshape nodes; "
      "using all of them instead",
      plan.config->from());
  return configurable;
}

// Layout: one program at a time, its runs priced in parallel and streamed to its file.
StatusOr<std::vector<SynthGraphSummary>> WriteLayoutPrograms(SynthPlan& plan, ThreadPool* pool) {
  std::vector<SynthGraphSummary> summaries(plan.graphs);
  for (int64_t g = 0; g < plan.graphs; ++g) {
    const std::string name = plan.Name(g);
    const xla::HloModuleProto module = LayoutProgram(plan, g);
    TPUG_ASSIGN_OR_RETURN(ModuleAnalysis analysis, AnalyzeModule(module, plan.What(g)));
    const std::vector<int64_t> configurable = ChooseConfigurable(plan, analysis);
    std::string path = plan.config->output();
    if (!plan.single_file) {
      TPUG_ASSIGN_OR_RETURN(path, plan.staged.Path(plan.RelativePath(g, name)));
    }
    TPUG_ASSIGN_OR_RETURN(summaries[g], WriteLayoutTuningData(module, analysis, configurable,
                                                              plan.Options(g), pool, path));
    summaries[g].path = plan.FinalPath(g, name);
    summaries[g].split = plan.splits[g];
    summaries[g].name = name;
  }
  if (!plan.single_file) TPUG_RETURN_IF_ERROR(plan.staged.Commit());
  return summaries;
}

}  // namespace

StatusOr<std::vector<SynthGraphSummary>> RunSynth(const SynthConfig& c, ThreadPool* pool) {
  SynthPlan plan;
  TPUG_RETURN_IF_ERROR(PlanSynth(c, &plan));
  TPUG_RETURN_IF_ERROR(PrepareOutput(&plan));
  std::vector<SynthGraphSummary> summaries;
  if (plan.tile && plan.single_file) {
    TPUG_ASSIGN_OR_RETURN(summaries, WriteTileFile(plan));
  } else if (plan.tile) {
    TPUG_ASSIGN_OR_RETURN(summaries, WriteTileKernels(plan, pool));
  } else {
    TPUG_ASSIGN_OR_RETURN(summaries, WriteLayoutPrograms(plan, pool));
  }
  SetNoiseFreeKendall(&summaries);
  return summaries;
}

Status WriteNoiseFreeCosts(const SynthConfig& c, const std::vector<SynthGraphSummary>& summaries,
                           const std::string& path) {
  const bool tile = c.task() == "tile";
  const std::string collection =
      tile ? "tile:" + c.source() : "layout:" + c.source() + ":" + c.layout_search();
  std::string text =
      "# tpugraphs synth noise-free costs v1\n"
      "collection\tgraph\tsplit\tconfig\tmeasured_ns\tnoise_free_ns\n";
  for (const SynthGraphSummary& s : summaries) {
    for (size_t i = 0; i < s.measured_ns.size(); ++i) {
      text += collection + "\t" + s.name + "\t" + s.split + "\t" + std::to_string(i) + "\t" +
              std::to_string(s.measured_ns[i]) + "\t" + std::to_string(s.noise_free_ns[i]) + "\n";
    }
  }
  return WriteFileAtomically(path, text);
}

}  // namespace tpugraphs::synth
