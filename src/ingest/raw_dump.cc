#include "tpugraphs/ingest/raw_dump.h"

#include <google/protobuf/arena.h>
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <unordered_map>

#include "raw_dump_internal.h"
#include "tpu_graphs/tuning.pb.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/ingest/hlo_graph.h"
#include "tpugraphs/ingest/hlo_text.h"
#include "tpugraphs/ingest/layout_candidates.h"
#include "tpugraphs/ingest/node_features.h"
#include "tpugraphs/ingest/raw_dump_stream.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::ingest {

namespace {

bool IsGzip(std::string_view b) {
  return b.size() >= 2 && static_cast<uint8_t>(b[0]) == 0x1f && static_cast<uint8_t>(b[1]) == 0x8b;
}

// RFC 1950 header: compression method 8, window <= 32 KiB, header checksum a multiple of 31.
bool LooksLikeZlib(std::string_view b) {
  if (b.size() < 2) return false;
  const unsigned cmf = static_cast<uint8_t>(b[0]), flg = static_cast<uint8_t>(b[1]);
  return (cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && ((cmf << 8) | flg) % 31 == 0;
}

// Inflates a gzip (possibly several concatenated members) or zlib stream; windowBits 15 + 32
// lets zlib tell the two headers apart itself.
StatusOr<std::string> Inflate(std::string_view in, const std::string& path, uint64_t limit) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return InternalError(path + ": inflateInit2 failed");
  std::string out;
  out.resize(std::min<uint64_t>(std::max<uint64_t>(in.size() * 4, 1 << 16), limit));
  size_t consumed = 0;
  size_t produced = 0;
  Status status;
  while (true) {
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + consumed));
    zs.avail_in = static_cast<uInt>(std::min<size_t>(in.size() - consumed, 1u << 30));
    if (produced == out.size()) {
      if (out.size() >= limit) {
        status = ResourceExhaustedError(
            path + ": decompressed data exceeds " + std::to_string(limit) +
            " bytes (the cap on decompressed dumps; protobuf cannot parse more than 2 GiB); "
            "refusing to inflate further");
        break;
      }
      out.resize(std::min<uint64_t>(uint64_t{out.size()} * 2, limit));
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - produced, 1u << 30));
    const uInt in_before = zs.avail_in, out_before = zs.avail_out;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    consumed += in_before - zs.avail_in;
    produced += out_before - zs.avail_out;
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow (as `cat a.gz b.gz` produces).
      if (consumed < in.size() && IsGzip(in.substr(consumed))) {
        inflateReset(&zs);
        continue;
      }
      if (consumed < in.size()) {
        status = DataLossError(path + ": " + std::to_string(in.size() - consumed) +
                               " unexpected bytes after the end of the compressed stream");
      }
      break;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && consumed == in.size()) {
      status = DataLossError(path + ": compressed stream is truncated");
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      status =
          DataLossError(path + ": corrupted compressed data (" +
                        std::string(zs.msg ? zs.msg : "zlib error " + std::to_string(rc)) + ")");
      break;
    }
  }
  inflateEnd(&zs);
  if (!status.ok()) return status;
  out.resize(produced);
  return out;
}

// An opcode string as XLA writes them: lower-case words joined by '-'.
bool PlausibleOpcode(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) return false;
  }
  return true;
}

}  // namespace

namespace internal {

// Structural test that bytes parsed as an HloModuleProto really are one: computations with
// instructions whose opcodes look like opcodes. Random bytes or another message read with the
// wrong schema essentially never pass.
bool PlausibleModule(const xla::HloModuleProto& m) {
  if (m.computations_size() == 0) return false;
  for (const auto& comp : m.computations()) {
    if (comp.instructions_size() == 0) return false;
    for (const auto& inst : comp.instructions()) {
      if (!PlausibleOpcode(inst.opcode())) return false;
    }
  }
  return true;
}

bool HasUnknownFields(const google::protobuf::Message& m) {
  return !m.GetReflection()->GetUnknownFields(m).empty();
}

// Arena blocks for messages of hundreds of kilobytes: protobuf's default blocks grow only to
// 8 KiB, which means thousands of block allocations (and frees) for one module.
google::protobuf::ArenaOptions LargeBlockArenaOptions() {
  google::protobuf::ArenaOptions o;
  o.start_block_size = size_t{64} << 10;
  o.max_block_size = size_t{1} << 20;
  return o;
}

}  // namespace internal

namespace {

// The parsed messages live on an arena: parsing the many small instruction messages of a module
// is markedly faster than with heap allocation, and freeing is one release.
struct ParsedDump {
  RawDumpKind kind = RawDumpKind::kHloModule;
  std::unique_ptr<google::protobuf::Arena> arena;
  tpu_graphs::TuningData* tuning = nullptr;        // kTuningData
  tpu_graphs::ModuleTuningData* module = nullptr;  // every other kind (runs may be empty)
};

template <typename T>
T* ParseOnArena(std::string_view bytes, google::protobuf::Arena* arena, bool* ok) {
  T* message = google::protobuf::Arena::CreateMessage<T>(arena);
  *ok = message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  return message;
}

StatusOr<ParsedDump> DetectAndParse(std::string_view bytes, const std::string& path) {
  if (bytes.size() > kMaxDumpBytes) {
    return ResourceExhaustedError(path + ": " + std::to_string(bytes.size()) +
                                  " bytes is more than a protobuf message can hold (2 GiB)");
  }
  // Expected parse failures (e.g. invalid UTF-8 when reading with the wrong schema) must not
  // reach the user as protobuf log lines.
  google::protobuf::LogSilencer silence;
  ParsedDump out;
  bool ok = false;

  // Most nested interpretation first: a TuningData's field 1 holds ModuleTuningData messages.
  out.arena = std::make_unique<google::protobuf::Arena>(LargeBlockArenaOptions());
  auto* tuning = ParseOnArena<tpu_graphs::TuningData>(bytes, out.arena.get(), &ok);
  if (ok && tuning->modules_size() > 0 &&
      std::all_of(tuning->modules().begin(), tuning->modules().end(),
                  [](const auto& m) { return m.has_module() && PlausibleModule(m.module()); })) {
    out.kind = RawDumpKind::kTuningData;
    out.tuning = tuning;
    return out;
  }

  out.arena = std::make_unique<google::protobuf::Arena>(LargeBlockArenaOptions());
  auto* mtd = ParseOnArena<tpu_graphs::ModuleTuningData>(bytes, out.arena.get(), &ok);
  // An HloProto also has the module in field 1; its field 3 (buffer assignment) read as runs
  // leaves unknown fields and no usable config. Genuine runs have no unknown fields (or, from a
  // newer tuning.proto, at least carry a layout or tile config).
  if (ok && mtd->has_module() && PlausibleModule(mtd->module()) &&
      (mtd->runs_size() > 0 || mtd->config_index_to_node_size() > 0 || mtd->fingerprint() != 0) &&
      (std::none_of(mtd->runs().begin(), mtd->runs().end(),
                    [](const auto& r) { return HasUnknownFields(r); }) ||
       std::any_of(mtd->runs().begin(), mtd->runs().end(), [](const auto& r) {
         return r.module_config().has_layout_config() || r.op_config().has_tile_size_config();
       }))) {
    out.kind = RawDumpKind::kModuleTuningData;
    out.module = mtd;
    return out;
  }

  out.arena = std::make_unique<google::protobuf::Arena>(LargeBlockArenaOptions());
  auto* hlo_proto = ParseOnArena<xla::HloProto>(bytes, out.arena.get(), &ok);
  if (ok && hlo_proto->has_hlo_module() && PlausibleModule(hlo_proto->hlo_module())) {
    out.kind = RawDumpKind::kHloProto;
    out.module =
        google::protobuf::Arena::CreateMessage<tpu_graphs::ModuleTuningData>(out.arena.get());
    out.module->mutable_module()->Swap(hlo_proto->mutable_hlo_module());
    return out;
  }

  out.arena = std::make_unique<google::protobuf::Arena>(LargeBlockArenaOptions());
  out.module =
      google::protobuf::Arena::CreateMessage<tpu_graphs::ModuleTuningData>(out.arena.get());
  if (out.module->mutable_module()->ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) &&
      PlausibleModule(out.module->module())) {
    out.kind = RawDumpKind::kHloModule;
    return out;
  }
  return InvalidArgumentError(
      path + ": not a raw XLA dump: its " + std::to_string(bytes.size()) +
      " bytes (after any decompression) are no complete tpu_graphs.ModuleTuningData, "
      "tpu_graphs.TuningData, xla.HloModuleProto or xla.HloProto message, nor HLO text "
      "starting with 'HloModule' (truncated, corrupted, or another kind of file)");
}

StatusOr<std::string> ReadDumpBytes(const std::string& path, uint64_t limit) {
  TPUG_ASSIGN_OR_RETURN(uint64_t size, FileSize(path));
  if (size > kMaxDumpBytes) {
    return ResourceExhaustedError(path + ": " + std::to_string(size) +
                                  " bytes is more than a protobuf message can hold (2 GiB)");
  }
  TPUG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  if (IsGzip(bytes)) return Inflate(bytes, path, limit);
  if (LooksLikeZlib(bytes)) {
    // 0x78 0x9c... could in principle also start a protobuf (field 15, varint); prefer zlib and
    // fall back to the raw bytes only when inflating fails and the raw bytes are a dump.
    StatusOr<std::string> inflated = Inflate(bytes, path, limit);
    if (inflated.ok()) return inflated;
    if (DetectAndParse(bytes, path).ok()) return bytes;
    return inflated.status();
  }
  return bytes;
}

}  // namespace

namespace internal {

std::string FileStem(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

Status ResolveCollection(const RawDumpOptions& options, const std::string& path,
                         std::string_view default_collection, Graph* g) {
  g->collection = options.collection.empty() ? std::string(default_collection) : options.collection;
  Status s = ValidateCollection(g->collection);
  if (!s.ok()) return s.WithContext(path);
  g->kind = TaskKindOfCollection(g->collection);
  s = ValidateSplit(options.split);
  if (!s.ok()) return s.WithContext(path);
  g->split = options.split;
  return Status::Ok();
}

}  // namespace internal

namespace {

// Layout graph (ingest-spec section 5) from a ModuleTuningData whose runs are module configs.
Status FillLayoutConfigs(const tpu_graphs::ModuleTuningData& mtd, const std::string& path,
                         Graph* g) {
  const int64_t n = g->num_nodes();
  const auto& c2n = mtd.config_index_to_node();
  g->node_config_ids.clear();
  g->node_config_ids.reserve(c2n.size());
  for (int i = 0; i < c2n.size(); ++i) {
    const uint64_t node = c2n.Get(i);
    if (node >= static_cast<uint64_t>(n)) {
      return OutOfRangeError(
          path + ": config_index_to_node[" + std::to_string(i) + "] = " + std::to_string(node) +
          " is not a node index (the module has " + std::to_string(n) + " nodes)");
    }
    g->node_config_ids.push_back(static_cast<int64_t>(node));
  }
  g->config_node_names = InstructionNamesOfNodes(mtd.module(), g->node_config_ids);

  // Valid runs: module_config, no error, profile present (TDI 172-220).
  std::vector<int> valid;
  int default_run = -1;
  for (int r = 0; r < mtd.runs_size(); ++r) {
    const auto& run = mtd.runs(r);
    if (run.config_case() != tpu_graphs::ConfigProfile::kModuleConfig || run.error() ||
        !run.has_profile()) {
      continue;
    }
    if (run.profile().compute_time_ns() <= 0) {
      return InvalidArgumentError(path + ": run " + std::to_string(r) +
                                  " is valid (no error flag) but has compute_time_ns = " +
                                  std::to_string(run.profile().compute_time_ns()) +
                                  "; a measured runtime must be positive");
    }
    if (default_run < 0 && run.is_default()) default_run = r;
    valid.push_back(r);
  }
  if (!valid.empty() && c2n.empty()) {
    return InvalidArgumentError(path + ": " + std::to_string(valid.size()) +
                                " layout runs but config_index_to_node is empty");
  }
  const size_t nc = static_cast<size_t>(c2n.size());
  std::vector<int8_t> feat(valid.size() * nc * kLayoutConfigFeatureCount);
  std::vector<int64_t> runtime;
  runtime.reserve(valid.size());
  for (size_t j = 0; j < valid.size(); ++j) {
    const auto& run = mtd.runs(valid[j]);
    const auto& nodes = run.module_config().layout_config().nodes();
    if (static_cast<size_t>(nodes.size()) != nc) {
      return InvalidArgumentError(path + ": run " + std::to_string(valid[j]) + " configures " +
                                  std::to_string(nodes.size()) +
                                  " nodes but config_index_to_node "
                                  "lists " +
                                  std::to_string(nc));
    }
    for (size_t k = 0; k < nc; ++k) {
      TPUG_RETURN_IF_ERROR(FeaturizeLayoutNode(
          nodes.Get(static_cast<int>(k)),
          path + ": run " + std::to_string(valid[j]) + ", config node " + std::to_string(k),
          &feat[(j * nc + k) * kLayoutConfigFeatureCount]));
    }
    runtime.push_back(run.profile().compute_time_ns());
  }
  if (!valid.empty() && default_run < 0) {
    spdlog::warn(
        "{}: none of the {} valid layout runs is the default configuration; the "
        "release drops all configs of such a module, so the graph has 0 configs",
        path, valid.size());
    valid.clear();
    feat.clear();
    runtime.clear();
  }
  g->num_configs = static_cast<int64_t>(valid.size());
  g->config_runtime = std::move(runtime);
  g->config_runtime_normalizers.clear();
  g->config_feat.clear();
  g->node_config_feat = std::move(feat);
  return Status::Ok();
}

TileKernels TileKernelsOfMessages(const std::vector<const tpu_graphs::ModuleTuningData*>& mtds) {
  TileKernels out;
  for (const tpu_graphs::ModuleTuningData* mtd : mtds) {
    TileKernel k;
    k.module = &mtd->module();
    k.has_module = mtd->has_module();
    k.first_run = out.runs.size();
    k.num_runs = static_cast<size_t>(mtd->runs_size());
    out.kernels.push_back(k);
    for (const auto& run : mtd->runs()) {
      TileRun r;
      r.op_config = run.config_case() == tpu_graphs::ConfigProfile::kOpConfig;
      r.has_tile_size_config = run.op_config().has_tile_size_config();
      r.error = run.error();
      r.is_default = run.is_default();
      r.compute_time_ns = run.profile().compute_time_ns();
      out.runs.push_back(r);
      out.run_feat.resize(out.run_feat.size() + kTileConfigFeatureCount);
      FeaturizeTileConfig(run.op_config().tile_size_config(),
                          &out.run_feat[out.run_feat.size() - kTileConfigFeatureCount]);
    }
  }
  return out;
}

// One tile kernel's configs (ingest-spec section 6); `normalizer` is already resolved.
void FillTileConfigs(const TileKernels& all, const TileKernel& kernel, int64_t normalizer,
                     Graph* g) {
  g->config_feat.clear();
  g->config_runtime.clear();
  for (size_t r = kernel.first_run; r < kernel.first_run + kernel.num_runs; ++r) {
    const TileRun& run = all.runs[r];
    if (run.error || run.compute_time_ns <= 1) continue;
    g->config_runtime.push_back(run.compute_time_ns);
    const float* feat = &all.run_feat[r * kTileConfigFeatureCount];
    g->config_feat.insert(g->config_feat.end(), feat, feat + kTileConfigFeatureCount);
  }
  g->num_configs = static_cast<int64_t>(g->config_runtime.size());
  g->config_runtime_normalizers.assign(g->config_runtime.size(), normalizer);
}

// Kernel filter of the tile loader (TDI 244-305): empty string if kept, else why not.
std::string TileSkipReason(const TileKernels& all, const TileKernel& kernel) {
  if (kernel.num_runs <= 1) return "it has " + std::to_string(kernel.num_runs) + " run(s)";
  if (!kernel.has_module) return "it has no module";
  for (size_t r = kernel.first_run; r < kernel.first_run + kernel.num_runs; ++r) {
    if (!all.runs[r].op_config || !all.runs[r].has_tile_size_config) {
      return "a run has no tile_size_config";
    }
  }
  return "";
}

// Normalizer of one kernel: runtime of its first valid default run, or -1.
int64_t TileDefaultRuntime(const TileKernels& all, const TileKernel& kernel) {
  for (size_t r = kernel.first_run; r < kernel.first_run + kernel.num_runs; ++r) {
    const TileRun& run = all.runs[r];
    if (!run.error && run.compute_time_ns > 1 && run.is_default) return run.compute_time_ns;
  }
  return -1;
}

}  // namespace

namespace internal {

StatusOr<std::vector<Graph>> LoadTileKernels(const TileKernels& all, const std::string& path,
                                             const RawDumpOptions& options, bool single) {
  const std::string prefix = options.name.empty() ? FileStem(path) : options.name;
  // Normalizers keyed by module name, the last kernel of a name winning (TDI 294-302, 387).
  std::unordered_map<std::string, int64_t> normalizer_of_name;
  std::vector<const TileKernel*> kept;
  std::vector<std::string> where;
  for (size_t i = 0; i < all.kernels.size(); ++i) {
    const TileKernel& kernel = all.kernels[i];
    const std::string kernel_what =
        path + ": kernel " + std::to_string(i) + " (" + kernel.module->name() + ")";
    const std::string reason = TileSkipReason(all, kernel);
    if (!reason.empty()) {
      spdlog::info("{}: skipped: {}", kernel_what, reason);
      continue;
    }
    const int64_t normalizer = TileDefaultRuntime(all, kernel);
    if (normalizer <= 0) {
      return InvalidArgumentError(kernel_what +
                                  ": no valid run (no error, runtime > 1 ns) is the default "
                                  "configuration, so runtimes cannot be normalized");
    }
    normalizer_of_name[kernel.module->name()] = normalizer;
    kept.push_back(&kernel);
    where.push_back(kernel_what);
  }
  std::vector<Graph> graphs;
  graphs.reserve(kept.size());
  std::unordered_map<std::string, int> name_count;
  for (size_t i = 0; i < kept.size(); ++i) {
    const TileKernel& kernel = *kept[i];
    const xla::HloModuleProto& module = *kernel.module;
    Graph g;
    TPUG_RETURN_IF_ERROR(ResolveCollection(options, path, "tile:xla", &g));
    if (!g.is_tile()) {
      return InvalidArgumentError(path +
                                  ": a tile dump (kernels with tile_size_config runs) "
                                  "cannot go into the layout collection " +
                                  g.collection);
    }
    std::string name = single ? prefix : prefix + "_" + module.name();
    if (const int seen = name_count[name]++; seen > 0) {
      name.push_back('_');
      name.append(std::to_string(seen + 1));
    }
    g.name = std::move(name);
    TPUG_RETURN_IF_ERROR(BuildProgramGraph(module, where[i], &g, options.mark_absent_dimensions));
    g.node_splits.clear();  // tile files have no node_splits
    FillTileConfigs(all, kernel, normalizer_of_name.at(module.name()), &g);
    TPUG_RETURN_IF_ERROR(ValidateGraph(g, where[i]));
    graphs.push_back(std::move(g));
  }
  if (graphs.empty()) {
    spdlog::warn(
        "{}: no kernel passed the tile filters (more than one run, a module, a "
        "tile_size_config on every run); nothing to ingest",
        path);
  }
  return graphs;
}

}  // namespace internal

namespace {

LayoutCandidateOptions CandidateOptions(const RawDumpOptions& options) {
  LayoutCandidateOptions o;
  o.alternatives = options.layout_candidates;
  o.seed = options.layout_seed;
  return o;
}

// An HLO text module: one graph named after the module; in a layout collection its
// configurations are the stated layouts and the asked-for alternatives.
StatusOr<std::vector<Graph>> LoadHloTextGraph(std::string_view text, const std::string& path,
                                              const RawDumpOptions& options) {
  // On an arena: the many small instruction, shape and layout messages are allocated in blocks.
  google::protobuf::Arena arena;
  auto& module = *google::protobuf::Arena::CreateMessage<xla::HloModuleProto>(&arena);
  std::vector<std::string> warnings;
  TPUG_RETURN_IF_ERROR(ParseHloText(text, path, &module, &warnings));
  for (const std::string& w : warnings) spdlog::warn("{}", w);
  std::vector<Graph> graphs(1);
  Graph& g = graphs[0];
  TPUG_RETURN_IF_ERROR(ResolveCollection(options, path, "layout:xla:custom", &g));
  g.name = options.name.empty() ? module.name() : options.name;
  TPUG_RETURN_IF_ERROR(BuildProgramGraph(module, path, &g, options.mark_absent_dimensions));
  if (g.is_tile()) {
    g.node_splits.clear();
  } else {
    TPUG_RETURN_IF_ERROR(AddLayoutCandidates(module, path, CandidateOptions(options), &g));
  }
  TPUG_RETURN_IF_ERROR(ValidateGraph(g, path));
  return graphs;
}

}  // namespace

std::string_view RawDumpKindName(RawDumpKind kind) {
  switch (kind) {
    case RawDumpKind::kModuleTuningData:
      return "ModuleTuningData";
    case RawDumpKind::kTuningData:
      return "TuningData";
    case RawDumpKind::kHloModule:
      return "HloModuleProto";
    case RawDumpKind::kHloProto:
      return "HloProto";
    case RawDumpKind::kHloText:
      return "HLO text";
  }
  return "unknown";
}

StatusOr<RawDumpKind> DetectRawDumpKind(std::string_view bytes, const std::string& path) {
  if (LooksLikeHloText(bytes)) return RawDumpKind::kHloText;
  TPUG_ASSIGN_OR_RETURN(ParsedDump parsed, DetectAndParse(bytes, path));
  return parsed.kind;
}

StatusOr<std::vector<Graph>> LoadRawDump(const std::string& path, const RawDumpOptions& options) {
  TPUG_ASSIGN_OR_RETURN(
      std::string bytes,
      ReadDumpBytes(path, std::min(options.max_decompressed_bytes, kMaxDumpBytes)));
  if (LooksLikeHloText(bytes)) return LoadHloTextGraph(bytes, path, options);
  if (options.stream_layout_runs) {
    if (auto graphs = TryStreamLayoutDump(bytes, path, options)) return std::move(*graphs);
  }
  if (options.stream_tile_runs) {
    if (auto graphs = TryStreamTileDump(bytes, path, options)) return std::move(*graphs);
  }
  TPUG_ASSIGN_OR_RETURN(ParsedDump parsed, DetectAndParse(bytes, path));
  bytes.clear();
  bytes.shrink_to_fit();

  if (parsed.kind == RawDumpKind::kTuningData) {
    std::vector<const tpu_graphs::ModuleTuningData*> kernels;
    for (const auto& m : parsed.tuning->modules()) kernels.push_back(&m);
    return LoadTileKernels(TileKernelsOfMessages(kernels), path, options, /*single=*/false);
  }

  const tpu_graphs::ModuleTuningData& mtd = *parsed.module;
  int num_module = 0, num_op = 0;
  for (const auto& run : mtd.runs()) {
    num_module += run.config_case() == tpu_graphs::ConfigProfile::kModuleConfig;
    num_op += run.config_case() == tpu_graphs::ConfigProfile::kOpConfig;
  }
  if (num_op > 0 && num_module > 0) {
    return InvalidArgumentError(path + ": ModuleTuningData mixes " + std::to_string(num_module) +
                                " layout (module_config) and " + std::to_string(num_op) +
                                " tile (op_config) runs");
  }
  if (num_op > 0) {
    // A single kernel's ModuleTuningData: the tile rules, as if it were a one-kernel TuningData.
    return LoadTileKernels(TileKernelsOfMessages({&mtd}), path, options, /*single=*/true);
  }

  std::vector<Graph> graphs(1);
  Graph& g = graphs[0];
  TPUG_RETURN_IF_ERROR(ResolveCollection(options, path, "layout:xla:custom", &g));
  if (g.is_tile() && (num_module > 0 || mtd.config_index_to_node_size() > 0)) {
    return InvalidArgumentError(path +
                                ": a layout dump (ModuleTuningData with layout runs) "
                                "cannot go into the tile collection " +
                                g.collection);
  }
  g.name = options.name.empty() ? FileStem(path) : options.name;
  TPUG_RETURN_IF_ERROR(BuildProgramGraph(mtd.module(), path, &g, options.mark_absent_dimensions));
  TPUG_RETURN_IF_ERROR(FillLayoutConfigs(mtd, path, &g));
  const bool graph_only = mtd.runs_size() == 0 && mtd.config_index_to_node_size() == 0;
  if (graph_only && g.is_layout()) {
    TPUG_RETURN_IF_ERROR(AddLayoutCandidates(mtd.module(), path, CandidateOptions(options), &g));
  } else if (mtd.runs_size() == 0) {
    spdlog::warn("{}: {} holds a graph but no measured runs; ingested with 0 configs", path,
                 RawDumpKindName(parsed.kind));
  }
  if (g.is_tile()) g.node_splits.clear();
  Status s = ValidateGraph(g, path);
  if (!s.ok()) return s;
  return graphs;
}

}  // namespace tpugraphs::ingest
