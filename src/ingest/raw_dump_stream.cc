// The streaming readers of raw dumps (raw_dump_stream.h): layout dumps and tile dumps decoded
// from the wire, with the helpers only they use. What they share with the whole-message path of
// raw_dump.cc (module plausibility, arena options, the tile rules) is in raw_dump_internal.h.
#include "tpugraphs/ingest/raw_dump_stream.h"

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/wire_format_lite.h>
#include <spdlog/spdlog.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "raw_dump_internal.h"
#include "tpu_graphs/tuning.pb.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/ingest/hlo_graph.h"
#include "tpugraphs/ingest/layout_candidates.h"
#include "tpugraphs/ingest/node_features.h"
#include "xla/hlo.pb.h"

namespace tpugraphs::ingest {

namespace {

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
  if (!BuildProgramGraph(module, path, &g, options.mark_absent_dimensions).ok())
    return std::nullopt;

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

}  // namespace tpugraphs::ingest
