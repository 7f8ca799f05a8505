#include "tpugraphs/ingest/raw_dump.h"

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/wire_format_lite.h>
#include <spdlog/spdlog.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

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

// protobuf's parser takes at most 2 GiB - 1 bytes, so that is also the cap on what we inflate:
// a larger decompressed dump could not be parsed anyway, and the cap stops decompression bombs.
constexpr uint64_t kMaxDumpBytes = (uint64_t{1} << 31) - 1;

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

// What the tile rules (ingest-spec section 6) read of one ConfigProfile. Filled either from a
// parsed message (TileKernelsOfMessages) or straight from the wire (DecodeTileDump); the rules
// below see only this, so both give the same graphs.
struct TileRun {
  bool op_config = false;             // config_case() == kOpConfig
  bool has_tile_size_config = false;  // op_config().has_tile_size_config()
  bool error = false;
  bool is_default = false;
  int64_t compute_time_ns = 0;  // profile().compute_time_ns(); 0 without a profile
};

// One kernel (a ModuleTuningData): its module and a range of TileKernels::runs.
struct TileKernel {
  const xla::HloModuleProto* module = nullptr;  // the default instance when !has_module
  bool has_module = false;
  size_t first_run = 0;
  size_t num_runs = 0;
};

// The kernels of a dump, their runs in file order, and kTileConfigFeatureCount features per run
// (FeaturizeTileConfig of op_config().tile_size_config()).
struct TileKernels {
  std::vector<TileKernel> kernels;
  std::vector<TileRun> runs;
  std::vector<float> run_feat;
};

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
    TPUG_RETURN_IF_ERROR(BuildProgramGraph(module, where[i], &g));
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

// False when `part` certainly does not read as a ModuleTuningData with a plausible module, found
// from its field-1 pieces alone (read as an HloModuleProto, as a whole parse would merge them)
// without parsing the rest: a real HloModuleProto read that way is a module name, which costs
// nothing, where a whole parse would read every computation as a run with unknown fields.
// true when it may (then the caller parses the whole part) or the walk is inconclusive.
bool MayReadAsKernel(std::string_view part, google::protobuf::Arena* arena) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(part.data()),
                                            static_cast<int>(part.size()));
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  std::vector<std::string_view> module_pieces;
  while (true) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) {
      if (in.CurrentPosition() != static_cast<int>(part.size())) return true;
      break;
    }
    if (tag == WireFormatLite::MakeTag(1, WireFormatLite::WIRETYPE_LENGTH_DELIMITED)) {
      uint32_t len = 0;
      if (!in.ReadVarint32(&len)) return true;
      const int start = in.CurrentPosition();
      if (len > part.size() - static_cast<size_t>(start) || !in.Skip(static_cast<int>(len))) {
        return true;
      }
      module_pieces.push_back(part.substr(static_cast<size_t>(start), len));
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return true;
    }
  }
  if (module_pieces.empty()) return false;  // no module at all
  auto& module = *google::protobuf::Arena::CreateMessage<xla::HloModuleProto>(arena);
  for (std::string_view piece : module_pieces) {
    google::protobuf::io::CodedInputStream piece_in(reinterpret_cast<const uint8_t*>(piece.data()),
                                                    static_cast<int>(piece.size()));
    piece_in.SetTotalBytesLimit(std::numeric_limits<int>::max());
    if (!module.MergeFromCodedStream(&piece_in) || !piece_in.ConsumedEntireMessage()) {
      return true;
    }
  }
  return PlausibleModule(module);
}

// ---------------------------------------------------------------------------------------------
// A layout run (ConfigProfile with a module_config) decoded straight from the wire, without
// protobuf objects: the run loop's hot path. Only the plain shape is handled (each field of
// ConfigProfile, HloModuleConfig, LayoutConfig, NodeLayoutConfig and TensorLayoutConfig that
// the run filter and FeaturizeLayoutNode read, nothing else, messages at most once); any other
// field, repeated message, or malformed byte makes DecodeLayoutRun return false, and the caller
// parses that run with protobuf as before, so results and outcomes do not change.
struct DecodedLayoutRun {
  bool has_module_config = false;
  bool has_layout_config = false;
  bool error = false;
  bool has_profile = false;
  bool is_default = false;
  int64_t compute_time_ns = 0;
  size_t num_nodes = 0;
  bool bad_node = false;  // FeaturizeLayoutNode would fail on some node
};

// Reads the wire format as protobuf's parser (ParseContext) does, but refuses more: a tag or a
// length takes at most 5 bytes (protobuf rejects longer ones too), a tag must fit 32 bits (where
// protobuf would truncate it) and a length must be at most INT_MAX - 16 (protobuf's own bound);
// a varint value takes at most 10 bytes, its bits past 64 dropped as protobuf does. So whatever
// this reader accepts, protobuf accepts with the same values.
class WireReader {
 public:
  explicit WireReader(std::string_view b)
      : p_(reinterpret_cast<const uint8_t*>(b.data())), end_(p_ + b.size()) {}
  bool done() const { return p_ == end_; }
  bool Varint(uint64_t* v) { return VarintOfAtMost(10, v); }
  // A tag with field number >= 1; false at a malformed tag.
  bool Tag(uint32_t* field, uint32_t* wire) {
    uint64_t t = 0;
    if (!VarintOfAtMost(5, &t) || t > 0xFFFFFFFFu || (t >> 3) == 0) return false;
    *field = static_cast<uint32_t>(t >> 3);
    *wire = static_cast<uint32_t>(t & 7);
    return true;
  }
  bool Bytes(std::string_view* piece) {
    uint64_t len = 0;
    if (!VarintOfAtMost(5, &len) || len > static_cast<uint64_t>(end_ - p_) ||
        len > 0x7FFFFFFFu - 16) {
      return false;
    }
    *piece = std::string_view(reinterpret_cast<const char*>(p_), static_cast<size_t>(len));
    p_ += len;
    return true;
  }

 private:
  bool VarintOfAtMost(int max_bytes, uint64_t* v) {
    uint64_t result = 0;
    for (int i = 0; i < max_bytes; ++i) {
      if (p_ == end_) return false;
      const uint8_t byte = *p_++;
      result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);  // 7 * i <= 63
      if ((byte & 0x80) == 0) {
        *v = result;
        return true;
      }
    }
    return false;  // too long
  }

  const uint8_t* p_;
  const uint8_t* end_;
};

constexpr uint32_t kVarint = 0, kLen = 2;

// Appends the values of a repeated int64 field occurrence: one varint for wire type 0, or a
// length and then varints filling it exactly for wire type 2 (packed). `values` null: checks
// the bytes only (iteration_bounds, which no feature reads).
bool ReadRepeatedInt64(WireReader* in, uint32_t wire, std::vector<int64_t>* values) {
  uint64_t v = 0;
  if (wire == kVarint) {
    if (!in->Varint(&v)) return false;
    if (values != nullptr) values->push_back(static_cast<int64_t>(v));
    return true;
  }
  std::string_view packed;
  if (wire != kLen || !in->Bytes(&packed)) return false;
  WireReader pk(packed);
  while (!pk.done()) {
    if (!pk.Varint(&v)) return false;
    if (values != nullptr) values->push_back(static_cast<int64_t>(v));
  }
  return true;
}

// Byte ranges of the top-level fields of a ModuleTuningData, found without parsing them.
struct TopLevelScan {
  std::vector<std::string_view> module_parts;  // field 1 (repeated occurrences merge)
  std::vector<std::string_view> runs;          // field 3
  // field 4 (repeated uint64, packed or not), as read into int64: values >= 2^63 come out
  // negative, and are as out of range as they were.
  std::vector<int64_t> config_index_to_node;
};

// Walks the top-level fields. false if the wire format is broken or has any field or wire type
// other than those of ModuleTuningData (then the whole-message path decides).
bool ScanTopLevel(std::string_view bytes, TopLevelScan* out) {
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wire = 0;
    if (!in.Tag(&field, &wire)) return false;
    std::string_view piece;
    uint64_t value = 0;
    if (field == 1 && wire == kLen) {
      if (!in.Bytes(&piece)) return false;
      out->module_parts.push_back(piece);
    } else if (field == 2 && wire == kVarint) {
      if (!in.Varint(&value)) return false;
    } else if (field == 3 && wire == kLen) {
      if (!in.Bytes(&piece)) return false;
      out->runs.push_back(piece);
    } else if (field == 4) {
      if (!ReadRepeatedInt64(&in, wire, &out->config_index_to_node)) return false;
    } else {
      return false;
    }
  }
  return true;
}

// Appends one node's int8 row (FeaturizeLayoutNode's layout) to `rows`.
bool DecodeLayoutNode(std::string_view node, std::vector<int8_t>* rows, bool* bad) {
  constexpr int kTensors = 3, kDims = 6;
  const size_t at = rows->size();
  rows->resize(at + kLayoutConfigFeatureCount, int8_t{-1});
  WireReader in(node);
  int tensor = 0;
  while (!in.done()) {
    uint32_t field = 0, wire = 0;
    std::string_view tensor_bytes;
    if (!in.Tag(&field, &wire) || field != 1 || wire != kLen || !in.Bytes(&tensor_bytes)) {
      return false;
    }
    WireReader t(tensor_bytes);
    int dim = 0;
    auto take = [&](uint64_t raw) {
      const int32_t v = static_cast<int32_t>(static_cast<uint32_t>(raw));
      if (tensor < kTensors && dim < kDims) {
        if (v < std::numeric_limits<int8_t>::min() || v > std::numeric_limits<int8_t>::max()) {
          *bad = true;
        } else {
          (*rows)[at + tensor * kDims + dim] = static_cast<int8_t>(v);
        }
      }
      ++dim;
    };
    while (!t.done()) {
      uint32_t f = 0, w = 0;
      if (!t.Tag(&f, &w) || f != 1) return false;
      uint64_t v = 0;
      if (w == kVarint) {
        if (!t.Varint(&v)) return false;
        take(v);
      } else if (w == kLen) {
        std::string_view packed;
        if (!t.Bytes(&packed)) return false;
        WireReader pk(packed);
        while (!pk.done()) {
          if (!pk.Varint(&v)) return false;
          take(v);
        }
      } else {
        return false;
      }
    }
    ++tensor;
  }
  if (tensor > kTensors) *bad = true;
  return true;
}

bool DecodeLayoutRun(std::string_view bytes, std::vector<int8_t>* rows, DecodedLayoutRun* out) {
  *out = DecodedLayoutRun();
  rows->clear();
  WireReader in(bytes);
  std::string_view module_config, profile;
  while (!in.done()) {
    uint32_t field = 0, wire = 0;
    if (!in.Tag(&field, &wire)) return false;
    uint64_t v = 0;
    if (field == 2 && wire == kLen && !out->has_module_config) {
      if (!in.Bytes(&module_config)) return false;
      out->has_module_config = true;
    } else if (field == 3 && wire == kVarint) {
      if (!in.Varint(&v)) return false;
      out->error = v != 0;
    } else if (field == 4 && wire == kLen && !out->has_profile) {
      if (!in.Bytes(&profile)) return false;
      out->has_profile = true;
    } else if (field == 5 && wire == kVarint) {
      if (!in.Varint(&v)) return false;
      out->is_default = v != 0;
    } else {
      return false;
    }
  }
  if (out->has_profile) {
    xla::ExecutionProfile p;
    if (!p.ParseFromArray(profile.data(), static_cast<int>(profile.size()))) return false;
    out->compute_time_ns = p.compute_time_ns();
  }
  if (!out->has_module_config) return true;
  WireReader mc(module_config);
  std::string_view layout_config;
  while (!mc.done()) {
    uint32_t field = 0, wire = 0;
    if (!mc.Tag(&field, &wire) || field != 1 || wire != kLen || out->has_layout_config ||
        !mc.Bytes(&layout_config)) {
      return false;
    }
    out->has_layout_config = true;
  }
  WireReader lc(layout_config);
  while (!lc.done()) {
    uint32_t field = 0, wire = 0;
    std::string_view node;
    if (!lc.Tag(&field, &wire) || field != 1 || wire != kLen || !lc.Bytes(&node) ||
        !DecodeLayoutNode(node, rows, &out->bad_node)) {
      return false;
    }
    ++out->num_nodes;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// A tile dump (TuningData) decoded from the wire: only each kernel's module is parsed with
// protobuf; its runs go straight into TileRun values and feature rows, without protobuf objects
// (which were most of the time: several small messages and repeated fields per run). Decoding
// follows protobuf's parse of these messages field for field: a scalar that occurs several times
// keeps its last value, a repeated scalar appends every occurrence (packed or not), and repeated
// occurrences of a message field merge, i.e. read as one message made of all their fields in
// order. Anything else (a field number or wire type these messages do not have, which protobuf
// would keep as an unknown field; a module_config, which would switch the config oneof; bytes
// protobuf may reject) makes the decoding fail, and the caller leaves the dump to the
// whole-message parse.

// Scratch space of one dump's decoding, reused from kernel to kernel and run to run.
struct TileDecodeScratch {
  std::vector<int64_t> bounds[3];  // kernel_bounds, output_bounds, input_bounds of one run
  std::vector<std::string_view> module_parts;
};

// TileSizeConfig: kernel_bounds = 1, output_bounds = 2, input_bounds = 3, iteration_bounds = 4,
// all repeated int64.
bool DecodeTileSizeConfig(std::string_view bytes, TileDecodeScratch* scratch) {
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wire = 0;
    if (!in.Tag(&field, &wire) || field > 4 ||
        !ReadRepeatedInt64(&in, wire, field <= 3 ? &scratch->bounds[field - 1] : nullptr)) {
      return false;
    }
  }
  return true;
}

// HloOpConfig: tile_size_config = 1. Every occurrence merges into the one config.
bool DecodeHloOpConfig(std::string_view bytes, TileRun* run, TileDecodeScratch* scratch) {
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wire = 0;
    std::string_view config;
    if (!in.Tag(&field, &wire) || field != 1 || wire != kLen || !in.Bytes(&config) ||
        !DecodeTileSizeConfig(config, scratch)) {
      return false;
    }
    run->has_tile_size_config = true;
  }
  return true;
}

// xla.ExecutionProfile: fields 1 to 7, all varints (bool or int64); compute_time_ns = 4.
bool DecodeExecutionProfile(std::string_view bytes, int64_t* compute_time_ns) {
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wire = 0;
    uint64_t v = 0;
    if (!in.Tag(&field, &wire) || field > 7 || wire != kVarint || !in.Varint(&v)) return false;
    if (field == 4) *compute_time_ns = static_cast<int64_t>(v);
  }
  return true;
}

// ConfigProfile: op_config = 1, error = 3 (bool), profile = 4, is_default = 5 (bool); a bool is
// true when its varint is not 0. Appends the run and its feature row to `out`.
bool DecodeTileRun(std::string_view bytes, TileKernels* out, TileDecodeScratch* scratch) {
  TileRun run;
  for (auto& b : scratch->bounds) b.clear();
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wire = 0;
    if (!in.Tag(&field, &wire)) return false;
    uint64_t v = 0;
    std::string_view message;
    if (field == 1 && wire == kLen) {
      if (!in.Bytes(&message) || !DecodeHloOpConfig(message, &run, scratch)) return false;
      run.op_config = true;
    } else if (field == 3 && wire == kVarint) {
      if (!in.Varint(&v)) return false;
      run.error = v != 0;
    } else if (field == 4 && wire == kLen) {
      if (!in.Bytes(&message) || !DecodeExecutionProfile(message, &run.compute_time_ns)) {
        return false;
      }
    } else if (field == 5 && wire == kVarint) {
      if (!in.Varint(&v)) return false;
      run.is_default = v != 0;
    } else {
      return false;
    }
  }
  out->runs.push_back(run);
  out->run_feat.resize(out->run_feat.size() + kTileConfigFeatureCount);
  FeaturizeTileBounds(scratch->bounds[0], scratch->bounds[1], scratch->bounds[2],
                      &out->run_feat[out->run_feat.size() - kTileConfigFeatureCount]);
  return true;
}

// ModuleTuningData: module = 1, fingerprint = 2 (uint64), runs = 3, config_index_to_node = 4
// (repeated uint64, packed or not); the tile rules read neither 2 nor 4. The module's
// occurrences are merged by protobuf on `arena` with `module_depth` as the recursion budget,
// the depth left to the module inside a whole TuningData parse. A kernel without a module or
// with an implausible one fails: such bytes are not detected as a TuningData.
bool DecodeTileKernel(std::string_view bytes, int module_depth, google::protobuf::Arena* arena,
                      TileKernels* out, TileDecodeScratch* scratch) {
  TileKernel kernel;
  kernel.first_run = out->runs.size();
  scratch->module_parts.clear();
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wire = 0;
    if (!in.Tag(&field, &wire)) return false;
    uint64_t v = 0;
    std::string_view piece;
    if (field == 1 && wire == kLen) {
      if (!in.Bytes(&piece)) return false;
      scratch->module_parts.push_back(piece);
    } else if (field == 2 && wire == kVarint) {
      if (!in.Varint(&v)) return false;
    } else if (field == 3 && wire == kLen) {
      if (!in.Bytes(&piece) || !DecodeTileRun(piece, out, scratch)) return false;
    } else if (field == 4) {
      if (!ReadRepeatedInt64(&in, wire, nullptr)) return false;
    } else {
      return false;
    }
  }
  kernel.num_runs = out->runs.size() - kernel.first_run;
  if (scratch->module_parts.empty()) return false;
  auto* module = google::protobuf::Arena::CreateMessage<xla::HloModuleProto>(arena);
  for (std::string_view part : scratch->module_parts) {
    google::protobuf::io::CodedInputStream part_in(reinterpret_cast<const uint8_t*>(part.data()),
                                                   static_cast<int>(part.size()));
    part_in.SetTotalBytesLimit(std::numeric_limits<int>::max());
    part_in.SetRecursionLimit(module_depth);
    if (!module->MergeFromCodedStream(&part_in) || !part_in.ConsumedEntireMessage()) {
      return false;
    }
  }
  if (!PlausibleModule(*module)) return false;
  kernel.module = module;
  kernel.has_module = true;
  out->kernels.push_back(kernel);
  return true;
}

// TuningData: modules = 1, repeated. true when `bytes` would parse as a TuningData that
// DetectAndParse takes for one (at least one kernel, each with a plausible module), with the
// kernels decoded into `out`; false when the whole-message path must decide.
bool DecodeTileDump(std::string_view bytes, google::protobuf::Arena* arena, TileKernels* out) {
  // protobuf parses a message nested n deep only if n <= the recursion limit: a TileSizeConfig
  // is 4 deep (TuningData > ModuleTuningData > ConfigProfile > HloOpConfig > TileSizeConfig),
  // the module 2, so its own nested messages get the limit minus 2.
  const int limit = google::protobuf::io::CodedInputStream::GetDefaultRecursionLimit();
  if (limit < 4) return false;
  TileDecodeScratch scratch;
  WireReader in(bytes);
  while (!in.done()) {
    uint32_t field = 0, wire = 0;
    std::string_view kernel;
    if (!in.Tag(&field, &wire) || field != 1 || wire != kLen || !in.Bytes(&kernel) ||
        !DecodeTileKernel(kernel, limit - 2, arena, out, &scratch)) {
      return false;
    }
  }
  return !out->kernels.empty();
}

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
  TPUG_RETURN_IF_ERROR(BuildProgramGraph(module, path, &g));
  if (g.is_tile()) {
    g.node_splits.clear();
  } else {
    TPUG_RETURN_IF_ERROR(AddLayoutCandidates(module, path, CandidateOptions(options), &g));
  }
  TPUG_RETURN_IF_ERROR(ValidateGraph(g, path));
  return graphs;
}

}  // namespace

std::optional<std::vector<Graph>> TryStreamLayoutDump(std::string_view bytes,
                                                      const std::string& path,
                                                      const RawDumpOptions& options) {
  if (bytes.size() > kMaxDumpBytes) return std::nullopt;
  google::protobuf::LogSilencer silence;
  TopLevelScan scan;
  if (!ScanTopLevel(bytes, &scan) || scan.module_parts.empty() || scan.runs.empty()) {
    return std::nullopt;
  }
  // The module and the probe below live on an arena: heap allocation and freeing of the many
  // small instruction, shape and unknown-field objects cost more than the parse itself.
  google::protobuf::Arena module_arena(LargeBlockArenaOptions());
  // Detection tries TuningData first; its field 1 is the same as ours, holding ModuleTuningData.
  // If every module part would read as a ModuleTuningData with a plausible module, the bytes
  // are a TuningData to the whole-message path: leave them to it.
  {
    bool all_plausible = true;
    for (std::string_view part : scan.module_parts) {
      if (!MayReadAsKernel(part, &module_arena)) {
        all_plausible = false;
        break;
      }
      auto& as_kernel =
          *google::protobuf::Arena::CreateMessage<tpu_graphs::ModuleTuningData>(&module_arena);
      if (!as_kernel.ParseFromArray(part.data(), static_cast<int>(part.size())) ||
          !as_kernel.has_module() || !PlausibleModule(as_kernel.module())) {
        all_plausible = false;
        break;
      }
    }
    if (all_plausible) return std::nullopt;
  }
  module_arena.Reset();
  // Repeated occurrences of a message field merge, as parsing them in order does.
  auto& module = *google::protobuf::Arena::CreateMessage<xla::HloModuleProto>(&module_arena);
  for (std::string_view part : scan.module_parts) {
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(part.data()),
                                              static_cast<int>(part.size()));
    in.SetTotalBytesLimit(std::numeric_limits<int>::max());
    // The module is one level below the ModuleTuningData, whose parse allows 100 levels.
    in.SetRecursionLimit(google::protobuf::io::CodedInputStream::GetDefaultRecursionLimit() - 1);
    if (!module.MergeFromCodedStream(&in) || !in.ConsumedEntireMessage()) return std::nullopt;
  }
  if (!PlausibleModule(module)) return std::nullopt;

  std::vector<Graph> graphs(1);
  Graph& g = graphs[0];
  if (!ResolveCollection(options, path, "layout:xla:custom", &g).ok() || g.is_tile()) {
    return std::nullopt;
  }
  g.name = options.name.empty() ? FileStem(path) : options.name;
  if (!BuildProgramGraph(module, path, &g).ok()) return std::nullopt;

  const int64_t n = g.num_nodes();
  const auto& c2n = scan.config_index_to_node;
  g.node_config_ids.clear();
  g.node_config_ids.reserve(c2n.size());
  for (int64_t node : c2n) {
    if (node < 0 || node >= n) return std::nullopt;
    g.node_config_ids.push_back(node);
  }
  g.config_node_names = InstructionNamesOfNodes(module, g.node_config_ids);
  module_arena.Reset();  // the module is not used below; free it before the runs
  const size_t nc = c2n.size();

  // The layout run filter and default rule of ingest-spec section 5 (as FillLayoutConfigs),
  // one ConfigProfile at a time.
  // Each run is parsed onto an arena that is reset before the next one: arena parsing of the
  // many small tensor messages is faster than heap allocation, and the first block is reused.
  // The block is left uninitialised: the arena does not need zeroed memory.
  constexpr size_t kRunBlockBytes = size_t{1} << 20;
  std::unique_ptr<char[]> arena_block(new char[kRunBlockBytes]);
  google::protobuf::ArenaOptions arena_options = LargeBlockArenaOptions();
  arena_options.initial_block = arena_block.get();
  arena_options.initial_block_size = kRunBlockBytes;
  google::protobuf::Arena arena(arena_options);
  bool any_unknown = false, any_config = false, any_default = false;
  size_t num_valid = 0;
  std::vector<int8_t> feat;
  std::vector<int64_t> runtime;
  // Every run kept is at most one row block; reserving avoids the copy of a doubling vector.
  // A run's nodes take at least 2 bytes each on the wire, so 2x the input bounds a sane reserve.
  const uint64_t rows_bound = uint64_t{scan.runs.size()} * nc * kLayoutConfigFeatureCount;
  if (rows_bound <= 2 * uint64_t{bytes.size()}) feat.reserve(rows_bound);
  runtime.reserve(scan.runs.size());
  std::vector<int8_t> run_rows;
  DecodedLayoutRun fast;
  for (size_t r = 0; r < scan.runs.size(); ++r) {
    if (DecodeLayoutRun(scan.runs[r], &run_rows, &fast)) {
      // The steps below on the decoded fields (no unknown fields, never an op_config).
      any_config = any_config || fast.has_layout_config;
      if (!fast.has_module_config || fast.error || !fast.has_profile) continue;
      if (fast.compute_time_ns <= 0 || nc == 0) return std::nullopt;
      if (fast.num_nodes != nc) return std::nullopt;
      any_default = any_default || fast.is_default;
      if (fast.bad_node) return std::nullopt;
      feat.insert(feat.end(), run_rows.begin(), run_rows.end());
      runtime.push_back(fast.compute_time_ns);
      ++num_valid;
      continue;
    }
    arena.Reset();
    auto& run = *google::protobuf::Arena::CreateMessage<tpu_graphs::ConfigProfile>(&arena);
    if (!run.ParseFromArray(scan.runs[r].data(), static_cast<int>(scan.runs[r].size()))) {
      return std::nullopt;
    }
    if (run.config_case() == tpu_graphs::ConfigProfile::kOpConfig) return std::nullopt;
    any_unknown = any_unknown || HasUnknownFields(run);
    any_config = any_config || run.module_config().has_layout_config() ||
                 run.op_config().has_tile_size_config();
    if (run.config_case() != tpu_graphs::ConfigProfile::kModuleConfig || run.error() ||
        !run.has_profile()) {
      continue;
    }
    if (run.profile().compute_time_ns() <= 0 || nc == 0) return std::nullopt;
    const auto& nodes = run.module_config().layout_config().nodes();
    if (static_cast<size_t>(nodes.size()) != nc) return std::nullopt;
    any_default = any_default || run.is_default();
    const size_t at = feat.size();
    feat.resize(at + nc * kLayoutConfigFeatureCount);
    for (size_t k = 0; k < nc; ++k) {
      if (!FeaturizeLayoutNode(nodes.Get(static_cast<int>(k)), path,
                               &feat[at + k * kLayoutConfigFeatureCount])
               .ok()) {
        return std::nullopt;
      }
    }
    runtime.push_back(run.profile().compute_time_ns());
    ++num_valid;
  }
  // The kind test of DetectAndParse for ModuleTuningData (runs are present here).
  if (any_unknown && !any_config) return std::nullopt;
  if (num_valid > 0 && !any_default) {
    spdlog::warn(
        "{}: none of the {} valid layout runs is the default configuration; the "
        "release drops all configs of such a module, so the graph has 0 configs",
        path, num_valid);
    feat.clear();
    runtime.clear();
  }
  g.num_configs = static_cast<int64_t>(runtime.size());
  g.config_runtime = std::move(runtime);
  g.config_runtime_normalizers.clear();
  g.config_feat.clear();
  g.node_config_feat = std::move(feat);
  if (!ValidateGraph(g, path).ok()) return std::nullopt;
  return graphs;
}

std::optional<StatusOr<std::vector<Graph>>> TryStreamTileDump(std::string_view bytes,
                                                              const std::string& path,
                                                              const RawDumpOptions& options) {
  if (bytes.size() > kMaxDumpBytes) return std::nullopt;
  google::protobuf::Arena arena(LargeBlockArenaOptions());
  TileKernels kernels;
  {
    // As in DetectAndParse: a module that fails to parse must not log.
    google::protobuf::LogSilencer silence;
    if (!DecodeTileDump(bytes, &arena, &kernels)) return std::nullopt;
  }
  return LoadTileKernels(kernels, path, options, /*single=*/false);
}

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
  TPUG_RETURN_IF_ERROR(BuildProgramGraph(mtd.module(), path, &g));
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
