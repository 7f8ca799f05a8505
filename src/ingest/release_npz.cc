#include "tpugraphs/ingest/release_npz.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <type_traits>
#include <vector>

#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/ingest/absent_dimensions.h"
#include "tpugraphs/io/npz.h"

namespace tpugraphs::ingest {
namespace {

namespace fs = std::filesystem;

std::string Str(int64_t v) { return std::to_string(v); }

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += Str(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// The header of a required key; NotFound naming the file and the key if it is absent.
StatusOr<io::NpyHeader> Require(const io::NpzReader& npz, const std::string& path,
                                const std::string& key) {
  if (!npz.Has(key)) return NotFoundError(path + ": missing key '" + key + "'");
  return npz.Header(key);
}

// Checks a 2-D key of `cols` columns and returns its row count.
StatusOr<int64_t> Rows2D(const io::NpyHeader& h, const std::string& path, const std::string& key,
                         int64_t cols) {
  if (h.shape.size() != 2) {
    return InvalidArgumentError(path + ": " + key + " has shape " + ShapeString(h.shape) +
                                ", expected (rows, " + Str(cols) + ")");
  }
  if (h.shape[1] != cols) {
    return InvalidArgumentError(path + ": " + key + " has " + Str(h.shape[1]) +
                                " columns, expected " + Str(cols));
  }
  return h.shape[0];
}

StatusOr<int64_t> Length1D(const io::NpyHeader& h, const std::string& path,
                           const std::string& key) {
  if (h.shape.size() != 1) {
    return InvalidArgumentError(path + ": " + key + " has shape " + ShapeString(h.shape) +
                                ", expected a 1-D array");
  }
  return h.shape[0];
}

Status ExpectLength(int64_t got, int64_t want, const std::string& path, const std::string& key,
                    const std::string& of_what) {
  if (got != want) {
    return InvalidArgumentError(path + ": " + key + " has " + Str(got) + " rows, expected " +
                                Str(want) + " (" + of_what + ")");
  }
  return Status::Ok();
}

template <typename T>
StatusOr<std::vector<T>> ReadAll(const io::NpzReader& npz, const std::string& key) {
  TPUG_ASSIGN_OR_RETURN(auto arr, npz.Read<T>(key));
  return std::move(arr.data);
}

struct Layout {
  ReleaseNpzShape shape;
};

// Checks keys and shapes from the headers alone.
StatusOr<Layout> InspectHeaders(const io::NpzReader& npz, const std::string& path) {
  const bool has_tile = npz.Has("config_feat");
  const bool has_layout = npz.Has("node_config_feat");
  if (has_tile && has_layout) {
    return InvalidArgumentError(path +
                                ": holds both config_feat (tile) and node_config_feat "
                                "(layout); a release file is one or the other");
  }
  if (!has_tile && !has_layout) {
    return NotFoundError(path +
                         ": missing key 'config_feat' (tile) or 'node_config_feat' "
                         "(layout); not a TpuGraphs release file");
  }
  Layout out;
  ReleaseNpzShape& s = out.shape;
  s.kind = has_tile ? TaskKind::kTile : TaskKind::kLayout;
  TPUG_ASSIGN_OR_RETURN(auto feat, Require(npz, path, "node_feat"));
  TPUG_ASSIGN_OR_RETURN(s.num_nodes, Rows2D(feat, path, "node_feat", kNodeFeatureCount));
  TPUG_ASSIGN_OR_RETURN(auto opc, Require(npz, path, "node_opcode"));
  TPUG_ASSIGN_OR_RETURN(int64_t n_opc, Length1D(opc, path, "node_opcode"));
  TPUG_RETURN_IF_ERROR(
      ExpectLength(n_opc, s.num_nodes, path, "node_opcode", "one per node_feat row"));
  TPUG_ASSIGN_OR_RETURN(auto edges, Require(npz, path, "edge_index"));
  if (edges.shape.size() == 1 && edges.shape[0] == 0) {
    out.shape.num_edges = 0;  // an empty edge list saved without its second dimension
  } else {
    TPUG_ASSIGN_OR_RETURN(out.shape.num_edges, Rows2D(edges, path, "edge_index", 2));
  }
  TPUG_ASSIGN_OR_RETURN(auto rt, Require(npz, path, "config_runtime"));
  TPUG_ASSIGN_OR_RETURN(int64_t n_rt, Length1D(rt, path, "config_runtime"));
  if (s.kind == TaskKind::kTile) {
    TPUG_ASSIGN_OR_RETURN(auto cf, Require(npz, path, "config_feat"));
    TPUG_ASSIGN_OR_RETURN(s.num_configs, Rows2D(cf, path, "config_feat", kTileConfigFeatureCount));
    TPUG_RETURN_IF_ERROR(
        ExpectLength(n_rt, s.num_configs, path, "config_runtime", "one per config_feat row"));
    TPUG_ASSIGN_OR_RETURN(auto norm, Require(npz, path, "config_runtime_normalizers"));
    TPUG_ASSIGN_OR_RETURN(int64_t n_norm, Length1D(norm, path, "config_runtime_normalizers"));
    TPUG_RETURN_IF_ERROR(ExpectLength(n_norm, s.num_configs, path, "config_runtime_normalizers",
                                      "one per config_feat row"));
  } else {
    TPUG_ASSIGN_OR_RETURN(auto ids, Require(npz, path, "node_config_ids"));
    TPUG_ASSIGN_OR_RETURN(s.num_config_nodes, Length1D(ids, path, "node_config_ids"));
    TPUG_ASSIGN_OR_RETURN(auto ncf, Require(npz, path, "node_config_feat"));
    if (ncf.shape.size() != 3) {
      return InvalidArgumentError(path + ": node_config_feat has shape " + ShapeString(ncf.shape) +
                                  ", expected (configs, " + Str(s.num_config_nodes) + ", 18)");
    }
    if (ncf.shape[2] != kLayoutConfigFeatureCount) {
      return InvalidArgumentError(path + ": node_config_feat has " + Str(ncf.shape[2]) +
                                  " columns, expected " + Str(kLayoutConfigFeatureCount));
    }
    if (ncf.shape[1] != s.num_config_nodes) {
      return InvalidArgumentError(path + ": node_config_feat has " + Str(ncf.shape[1]) +
                                  " configurable nodes, but node_config_ids has " +
                                  Str(s.num_config_nodes));
    }
    s.num_configs = ncf.shape[0];
    TPUG_RETURN_IF_ERROR(ExpectLength(n_rt, s.num_configs, path, "config_runtime",
                                      "one per node_config_feat config"));
    if (npz.Has("node_splits")) {
      TPUG_ASSIGN_OR_RETURN(auto sp, npz.Header("node_splits"));
      const bool ok = sp.shape.size() == 1 || (sp.shape.size() == 2 && sp.shape[0] == 1);
      if (!ok) {
        return InvalidArgumentError(path + ": node_splits has shape " + ShapeString(sp.shape) +
                                    ", expected (1, k) or (k,)");
      }
    }
  }
  return out;
}

Status ResolveNames(const std::string& path, TaskKind kind, const std::string& collection_in,
                    const std::string& name_in, std::string* collection, std::string* name) {
  *collection = collection_in;
  if (collection->empty()) {
    if (kind == TaskKind::kLayout) {
      return InvalidArgumentError(
          path +
          ": layout file outside the release layout npz/layout/<source>/<search>/...; "
          "give its collection with --collection (e.g. layout:xla:random)");
    }
    *collection = "tile:xla";
  }
  Status s = ValidateCollection(*collection);
  if (!s.ok()) return s.WithContext(path);
  if (TaskKindOfCollection(*collection) != kind) {
    return InvalidArgumentError(
        path + ": file holds " + std::string(TaskKindName(kind)) + " configs (" +
        (kind == TaskKind::kTile ? "config_feat" : "node_config_feat") + ") but collection " +
        *collection + " is a " + std::string(TaskKindName(TaskKindOfCollection(*collection))) +
        " collection");
  }
  *name = name_in.empty() ? fs::path(path).stem().string() : name_in;
  if (name->empty()) return InvalidArgumentError(path + ": empty graph name");
  return Status::Ok();
}

// Members at least this large (uncompressed) are worth a thread of their own.
constexpr uint64_t kParallelMemberBytes = uint64_t{1} << 20;

// The array reads of one file. Run in list order, or on `threads` threads when at least two
// members are large; the statuses come back in list order either way, so the caller reports
// the same first error whatever the thread count, and every array gets the same bytes.
struct MemberRead {
  std::string key;
  std::function<Status()> read;
};

std::vector<Status> RunMemberReads(const io::NpzReader& npz, const std::vector<MemberRead>& reads,
                                   int threads) {
  std::vector<Status> status(reads.size());
  int large = 0;
  for (const MemberRead& r : reads) {
    const io::ZipEntry* e = npz.zip().Find(r.key + ".npy");
    if (e != nullptr && e->uncompressed_size >= kParallelMemberBytes) ++large;
  }
  if (threads <= 1 || large < 2) {
    for (size_t i = 0; i < reads.size(); ++i) {
      status[i] = reads[i].read();
      if (!status[i].ok()) break;  // as reading one after the other would stop
    }
    return status;
  }
  ThreadPool pool(std::min<int>(threads, static_cast<int>(reads.size())));
  pool.ParallelFor(static_cast<int64_t>(reads.size()), 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) status[i] = reads[i].read();
  });
  return status;
}

Status FirstError(const std::vector<Status>& status, size_t begin, size_t end) {
  for (size_t i = begin; i < end && i < status.size(); ++i) {
    if (!status[i].ok()) return status[i];
  }
  return Status::Ok();
}

// Reads the graph; node_config_feat too when `with_config_feat` (a layout file not streamed).
// Errors come in the order of reading the head arrays, validating them, then node_config_feat.
StatusOr<Graph> LoadGraph(const io::NpzReader& npz, const std::string& path, const Layout& lay,
                          const std::string& collection, const std::string& split,
                          const std::string& name, bool with_config_feat, int threads) {
  Graph g;
  g.kind = lay.shape.kind;
  TPUG_RETURN_IF_ERROR(ResolveNames(path, g.kind, collection, name, &g.collection, &g.name));
  {
    Status s = ValidateSplit(split);
    if (!s.ok()) return s.WithContext(path);
  }
  g.split = split;
  g.num_configs = lay.shape.num_configs;
  std::vector<MemberRead> reads;
  auto add = [&](const std::string& key, auto* field) {
    using T = typename std::remove_pointer_t<decltype(field)>::value_type;
    reads.push_back({key, [&npz, key, field]() -> Status {
                       TPUG_ASSIGN_OR_RETURN(*field, ReadAll<T>(npz, key));
                       return Status::Ok();
                     }});
  };
  add("node_feat", &g.node_feat);
  add("node_opcode", &g.node_opcode);
  add("edge_index", &g.edge_index);
  add("config_runtime", &g.config_runtime);
  if (g.is_tile()) {
    add("config_feat", &g.config_feat);
    add("config_runtime_normalizers", &g.config_runtime_normalizers);
  } else {
    add("node_config_ids", &g.node_config_ids);
    if (npz.Has("node_splits")) add("node_splits", &g.node_splits);
  }
  const size_t head = reads.size();
  std::vector<int8_t> config_feat;
  if (with_config_feat && g.is_layout()) add("node_config_feat", &config_feat);
  const std::vector<Status> status = RunMemberReads(npz, reads, threads);
  TPUG_RETURN_IF_ERROR(FirstError(status, 0, head));
  TPUG_RETURN_IF_ERROR(ValidateGraph(g, path));
  TPUG_RETURN_IF_ERROR(FirstError(status, head, reads.size()));
  g.node_config_feat = std::move(config_feat);
  return g;
}

}  // namespace

ReleasePathInfo InferFromReleasePath(const std::string& path) {
  std::vector<std::string> parts;
  for (const auto& p : fs::path(path).lexically_normal()) parts.push_back(p.string());
  ReleasePathInfo info;
  auto is_split = [](const std::string& s) { return s == "train" || s == "valid" || s == "test"; };
  // Search from the end for ".../npz/<task>/..." (release files) or ".../pb/<task>/..." (raw
  // dumps in the same tree, as `tpugraphs synth` writes them).
  for (int i = static_cast<int>(parts.size()) - 2; i >= 0; --i) {
    if (parts[i] != "npz" && parts[i] != "pb") continue;
    const int left = static_cast<int>(parts.size()) - i - 1;  // components after "npz"
    if (left == 4 && parts[i + 1] == "tile" && is_split(parts[i + 3])) {
      std::string c = "tile:" + parts[i + 2];
      if (ValidateCollection(c).ok()) info = {c, parts[i + 3]};
      return info;
    }
    if (left == 5 && parts[i + 1] == "layout" && is_split(parts[i + 4])) {
      std::string c = "layout:" + parts[i + 2] + ":" + parts[i + 3];
      if (ValidateCollection(c).ok()) info = {c, parts[i + 4]};
      return info;
    }
  }
  return info;
}

StatusOr<ReleaseNpzShape> InspectReleaseNpz(const std::string& path) {
  TPUG_ASSIGN_OR_RETURN(auto npz, io::NpzReader::Open(path));
  TPUG_ASSIGN_OR_RETURN(Layout lay, InspectHeaders(*npz, path));
  return lay.shape;
}

StatusOr<Graph> LoadReleaseNpz(const std::string& path, const std::string& collection,
                               const std::string& split, const std::string& name,
                               int member_threads) {
  TPUG_ASSIGN_OR_RETURN(auto npz, io::NpzReader::Open(path));
  TPUG_ASSIGN_OR_RETURN(Layout lay, InspectHeaders(*npz, path));
  return LoadGraph(*npz, path, lay, collection, split, name, /*with_config_feat=*/true,
                   member_threads);
}

Status StreamReleaseNpz(const std::string& path, const std::string& collection,
                        const std::string& split, const std::string& name,
                        io::DatasetWriter* writer, int64_t chunk_values, int member_threads,
                        bool mark_absent_dimensions) {
  TPUG_ASSIGN_OR_RETURN(auto npz, io::NpzReader::Open(path));
  TPUG_ASSIGN_OR_RETURN(Layout lay, InspectHeaders(*npz, path));
  TPUG_ASSIGN_OR_RETURN(Graph g, LoadGraph(*npz, path, lay, collection, split, name,
                                           /*with_config_feat=*/false, member_threads));
  if (mark_absent_dimensions) DeriveAbsentDimensions(&g);
  TPUG_RETURN_IF_ERROR(writer->BeginGraph(g));
  const int64_t row = g.num_config_nodes() * kLayoutConfigFeatureCount;
  if (!g.is_layout() || g.num_configs == 0 || row == 0) return Status::Ok();
  Status s;
  TPUG_ASSIGN_OR_RETURN(auto header, npz->Header("node_config_feat"));
  if (header.file_order_is_c()) {
    // Chunks end anywhere; whole configs are passed on and the remainder carried over.
    const int64_t chunk = std::max<int64_t>(row, chunk_values / row * row);
    std::vector<int8_t> carry;
    s = npz->ReadChunked<int8_t>(
        "node_config_feat", chunk, [&](const int8_t* data, int64_t count, int64_t) -> Status {
          if (!carry.empty()) {
            const int64_t need = std::min<int64_t>(row - carry.size(), count);
            carry.insert(carry.end(), data, data + need);
            data += need;
            count -= need;
            if (static_cast<int64_t>(carry.size()) == row) {
              TPUG_RETURN_IF_ERROR(writer->AppendLayoutConfigs(carry.data(), 1));
              carry.clear();
            }
          }
          const int64_t whole = count / row;
          if (whole > 0) TPUG_RETURN_IF_ERROR(writer->AppendLayoutConfigs(data, whole));
          carry.insert(carry.end(), data + whole * row, data + count);
          return Status::Ok();
        });
    if (s.ok() && !carry.empty()) {
      s = DataLossError(path + ": node_config_feat ends inside a config");
    }
  } else {
    // Fortran order: the file order is not the row order, so the array is converted whole.
    auto all = ReadAll<int8_t>(*npz, "node_config_feat");
    s = all.ok() ? writer->AppendLayoutConfigs(all->data(), g.num_configs) : all.status();
  }
  if (!s.ok()) {
    writer->AbortGraph();
    return s;
  }
  return Status::Ok();
}

namespace {

// float32 values of node_config_feat converted per step (4 MiB): the converted copy of a layout
// graph's configs never exists whole.
constexpr int64_t kConvertValues = int64_t{1} << 20;

// Writes node_config_feat [c, nc, 18] as float32, reading the int8 values from `source` in
// ranges of at most `configs_per_read` configs and converting them kConvertValues at a time.
Status WriteLayoutConfigFeat(io::NpzWriter* npz, const Graph& g, int64_t configs_per_read,
                             const LayoutConfigSource& source) {
  const int64_t c = g.num_configs, nc = g.num_config_nodes();
  const int64_t row = nc * kLayoutConfigFeatureCount;
  TPUG_RETURN_IF_ERROR(
      npz->BeginArray<float>("node_config_feat", {c, nc, kLayoutConfigFeatureCount}));
  if (row > 0 && c > 0) {
    const int64_t per = std::max<int64_t>(1, configs_per_read);
    std::vector<float> buf(static_cast<size_t>(std::min(kConvertValues, c * row)));
    int64_t filled = 0;
    for (int64_t begin = 0; begin < c; begin += per) {
      const int64_t end = std::min(c, begin + per);
      TPUG_ASSIGN_OR_RETURN(const int8_t* values, source(begin, end));
      int64_t left = (end - begin) * row;
      while (left > 0) {
        const int64_t take = std::min(left, static_cast<int64_t>(buf.size()) - filled);
        float* out = buf.data() + filled;
        for (int64_t i = 0; i < take; ++i) out[i] = static_cast<float>(values[i]);
        values += take;
        left -= take;
        filled += take;
        if (filled == static_cast<int64_t>(buf.size())) {
          TPUG_RETURN_IF_ERROR(npz->AppendArray<float>(buf.data(), filled));
          filled = 0;
        }
      }
    }
    if (filled > 0) TPUG_RETURN_IF_ERROR(npz->AppendArray<float>(buf.data(), filled));
  }
  return npz->EndArray();
}

// WriteReleaseNpz and WriteReleaseNpzStreamed; `source` is used for layout graphs only.
Status WriteRelease(const Graph& g, const std::string& path, bool compress,
                    int64_t configs_per_read, const LayoutConfigSource& source) {
  const int64_t n = g.num_nodes(), m = g.num_edges(), c = g.num_configs, nc = g.num_config_nodes();
  TPUG_ASSIGN_OR_RETURN(auto npz, io::NpzWriter::Create(path, compress));
  TPUG_RETURN_IF_ERROR(npz->Add<float>("node_feat", {n, kNodeFeatureCount}, g.node_feat.data()));
  TPUG_RETURN_IF_ERROR(npz->Add<uint8_t>("node_opcode", {n}, g.node_opcode.data()));
  TPUG_RETURN_IF_ERROR(npz->Add<int64_t>("edge_index", {m, 2}, g.edge_index.data()));
  if (g.is_tile()) {
    TPUG_RETURN_IF_ERROR(
        npz->Add<float>("config_feat", {c, kTileConfigFeatureCount}, g.config_feat.data()));
    TPUG_RETURN_IF_ERROR(npz->Add<int64_t>("config_runtime", {c}, g.config_runtime.data()));
    TPUG_RETURN_IF_ERROR(
        npz->Add<int64_t>("config_runtime_normalizers", {c}, g.config_runtime_normalizers.data()));
  } else {
    TPUG_RETURN_IF_ERROR(npz->Add<int64_t>("node_config_ids", {nc}, g.node_config_ids.data()));
    TPUG_RETURN_IF_ERROR(WriteLayoutConfigFeat(npz.get(), g, configs_per_read, source));
    TPUG_RETURN_IF_ERROR(npz->Add<int64_t>("config_runtime", {c}, g.config_runtime.data()));
    TPUG_RETURN_IF_ERROR(npz->Add<int64_t>(
        "node_splits", {1, static_cast<int64_t>(g.node_splits.size())}, g.node_splits.data()));
  }
  return npz->Finish();
}

}  // namespace

Status WriteReleaseNpz(const Graph& g, const std::string& path, bool compress) {
  TPUG_RETURN_IF_ERROR(ValidateGraph(g, path));
  const int64_t c = g.num_configs, row = g.num_config_nodes() * kLayoutConfigFeatureCount;
  if (g.is_layout() && c > 0 && row > 0 && g.node_config_feat.empty()) {
    return InvalidArgumentError(path + ": graph '" + g.name + "' was read without its configs");
  }
  auto source = [&g, row](int64_t begin, int64_t) -> StatusOr<const int8_t*> {
    return g.node_config_feat.data() + begin * row;
  };
  return WriteRelease(g, path, compress, c, source);
}

Status WriteReleaseNpzStreamed(const Graph& g, const std::string& path, bool compress,
                               int64_t configs_per_read, const LayoutConfigSource& source) {
  TPUG_RETURN_IF_ERROR(ValidateGraph(g, path));
  if (configs_per_read <= 0) {
    return InvalidArgumentError(path + ": configs_per_read must be > 0, got " +
                                Str(configs_per_read));
  }
  return WriteRelease(g, path, compress, configs_per_read, source);
}

}  // namespace tpugraphs::ingest
