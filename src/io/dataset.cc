#include "tpugraphs/io/dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/dataset.pb.h"
#include "tpugraphs/io/record_format.h"

namespace tpugraphs::io {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// Packs numeric arrays as little-endian bytes (the explicit encoding of the `bytes` fields).
template <typename T>
std::string PackLE(const std::vector<T>& v) {
  std::string out(v.size() * sizeof(T), '\0');
  if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1) {
    if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  } else {
    for (size_t i = 0; i < v.size(); ++i) {
      unsigned char b[sizeof(T)];
      std::memcpy(b, &v[i], sizeof(T));
      for (size_t k = 0; k < sizeof(T); ++k) out[i * sizeof(T) + k] = b[sizeof(T) - 1 - k];
    }
  }
  return out;
}

template <typename T>
Status UnpackLE(const std::string& bytes, int64_t expected_count, const char* field,
                const std::string& what, std::vector<T>* out) {
  if (expected_count < 0 || bytes.size() % sizeof(T) != 0 ||
      bytes.size() / sizeof(T) != static_cast<uint64_t>(expected_count)) {
    return DataLossError(what + ": field " + field + " holds " + Str(bytes.size()) +
                         " bytes, expected " + Str(expected_count) + " x " + Str(sizeof(T)));
  }
  out->resize(expected_count);
  if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1) {
    if (!bytes.empty()) std::memcpy(out->data(), bytes.data(), bytes.size());
  } else {
    for (int64_t i = 0; i < expected_count; ++i) {
      unsigned char b[sizeof(T)];
      for (size_t k = 0; k < sizeof(T); ++k) b[k] = bytes[i * sizeof(T) + sizeof(T) - 1 - k];
      std::memcpy(&(*out)[i], b, sizeof(T));
    }
  }
  return Status::Ok();
}

dataset::TaskKindProto KindToProto(TaskKind k) {
  return k == TaskKind::kTile ? dataset::TASK_KIND_TILE : dataset::TASK_KIND_LAYOUT;
}

std::string IdKey(std::string_view collection, std::string_view name) {
  std::string key(collection);
  key.push_back('\0');
  key.append(name);
  return key;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Writer

struct DatasetWriter::Pending {
  dataset::GraphIndexEntry entry;
  int64_t num_configs = 0;   // declared
  int64_t row_bytes = 0;     // nc * 18
  int64_t configs_done = 0;  // appended so far
  int64_t configs_per_block = 0;
  std::string block;  // values of the block being filled
  int64_t block_configs = 0;
  uint64_t start_offset = 0;
};

StatusOr<std::unique_ptr<DatasetWriter>> DatasetWriter::Create(
    const std::string& path, const DatasetWriterOptions& options) {
  if (options.compression_level < 0 || options.compression_level > 9) {
    return InvalidArgumentError(path + ": compression level " + Str(options.compression_level) +
                                " is not in 0..9");
  }
  if (options.target_block_bytes <= 0) {
    return InvalidArgumentError(path + ": target block size must be positive");
  }
  std::unique_ptr<DatasetWriter> w(new DatasetWriter());
  w->path_ = path;
  w->options_ = options;
  RemoveStaleTemporaries(path);  // left by a killed earlier run
  TPUG_RETURN_IF_ERROR(w->file_.Open(path));
  TPUG_RETURN_IF_ERROR(w->file_.Append(EncodeFileHeader(kFormatVersion, kFileKindDataset)));
  return w;
}

DatasetWriter::~DatasetWriter() {
  if (!finished_) file_.Abandon();
}

int64_t DatasetWriter::num_graphs() const { return num_graphs_; }

Status DatasetWriter::WriteRecord(int record_type, const std::string& payload, uint64_t* offset) {
  TPUG_ASSIGN_OR_RETURN(std::string frame, EncodeFrame(static_cast<RecordType>(record_type),
                                                       payload, options_.compression_level));
  *offset = file_.offset();
  Status s = file_.Append(frame);
  if (!s.ok()) failed_ = true;
  return s;
}

Status DatasetWriter::Add(const Graph& g) {
  TPUG_RETURN_IF_ERROR(ValidateGraph(g, path_ + ": graph '" + g.name + "'"));
  if (g.is_layout() && g.num_configs > 0 && g.num_config_nodes() > 0 &&
      g.node_config_feat.empty()) {
    return InvalidArgumentError(path_ + ": graph '" + g.name +
                                "': layout configs are missing (node_config_feat is empty)");
  }
  if (g.is_layout() && !g.node_config_feat.empty()) {
    // Write the graph record without copying the (possibly large) config values.
    Graph head;
    head.name = g.name;
    head.collection = g.collection;
    head.split = g.split;
    head.kind = g.kind;
    head.node_opcode = g.node_opcode;
    head.node_feat = g.node_feat;
    head.edge_index = g.edge_index;
    head.node_splits = g.node_splits;
    head.num_configs = g.num_configs;
    head.config_runtime = g.config_runtime;
    head.node_config_ids = g.node_config_ids;
    head.config_node_names = g.config_node_names;
    head.absent_dimensions_marked = g.absent_dimensions_marked;
    TPUG_RETURN_IF_ERROR(BeginGraph(head));
    TPUG_RETURN_IF_ERROR(AppendLayoutConfigs(g.node_config_feat.data(), g.num_configs));
    return EndGraph();
  }
  TPUG_RETURN_IF_ERROR(BeginGraph(g));
  return EndGraph();
}

Status DatasetWriter::BeginGraph(const Graph& g) {
  if (finished_) return FailedPreconditionError(path_ + ": writer is already finished");
  if (failed_) return FailedPreconditionError(path_ + ": an earlier write failed");
  if (pending_) TPUG_RETURN_IF_ERROR(EndGraph());
  if (!g.node_config_feat.empty()) {
    return InvalidArgumentError(path_ + ": graph '" + g.name +
                                "': BeginGraph takes the graph without node_config_feat; "
                                "append config values with AppendLayoutConfigs");
  }
  TPUG_RETURN_IF_ERROR(ValidateGraph(g, path_ + ": graph '" + g.name + "'"));
  if (g.name.empty()) return InvalidArgumentError(path_ + ": a graph has an empty name");
  if (g.collection.empty()) {
    return InvalidArgumentError(path_ + ": graph '" + g.name + "' has no collection");
  }
  if (seen_.count({g.collection, g.name}) != 0) {
    return InvalidArgumentError(path_ + ": duplicate graph '" + g.name + "' in collection " +
                                g.collection);
  }

  const int64_t nc = g.num_config_nodes();
  const int64_t row_bytes = nc * kLayoutConfigFeatureCount;
  int64_t per_block = 0;
  if (g.is_layout() && g.num_configs > 0 && row_bytes > 0) {
    per_block = std::max<int64_t>(1, options_.target_block_bytes / row_bytes);
    per_block = std::min(per_block, g.num_configs);
  }

  dataset::GraphRecord rec;
  rec.set_name(g.name);
  rec.set_collection(g.collection);
  rec.set_split(g.split);
  rec.set_kind(KindToProto(g.kind));
  rec.set_num_nodes(g.num_nodes());
  rec.set_num_edges(g.num_edges());
  rec.set_num_configs(g.num_configs);
  rec.set_num_config_nodes(nc);
  rec.set_node_opcode(PackLE(g.node_opcode));
  rec.set_node_feat(PackLE(g.node_feat));
  rec.set_edge_index(PackLE(g.edge_index));
  rec.set_node_splits(PackLE(g.node_splits));
  rec.set_config_runtime(PackLE(g.config_runtime));
  rec.set_config_runtime_normalizers(PackLE(g.config_runtime_normalizers));
  rec.set_config_feat(PackLE(g.config_feat));
  rec.set_node_config_ids(PackLE(g.node_config_ids));
  for (const std::string& name : g.config_node_names) rec.add_config_node_names(name);
  rec.set_absent_dimensions_marked(g.absent_dimensions_marked);
  rec.set_configs_per_block(per_block);
  rec.set_layout_config_width(g.is_layout() ? kLayoutConfigFeatureCount : 0);
  std::string payload;
  if (!rec.SerializeToString(&payload)) {
    return ResourceExhaustedError(path_ + ": graph '" + g.name +
                                  "' is too large for one record (protobuf limit of 2 GiB)");
  }

  auto p = std::make_unique<Pending>();
  p->start_offset = file_.offset();
  uint64_t offset = 0;
  TPUG_RETURN_IF_ERROR(WriteRecord(static_cast<int>(RecordType::kGraph), payload, &offset));
  auto& e = p->entry;
  e.set_name(g.name);
  e.set_collection(g.collection);
  e.set_split(g.split);
  e.set_kind(KindToProto(g.kind));
  e.set_num_nodes(g.num_nodes());
  e.set_num_edges(g.num_edges());
  e.set_num_configs(g.num_configs);
  e.set_num_config_nodes(nc);
  e.set_graph_offset(offset);
  e.set_configs_per_block(per_block);
  e.set_graph_record_raw_bytes(payload.size());
  p->num_configs = g.is_layout() && row_bytes > 0 ? g.num_configs : 0;
  p->row_bytes = row_bytes;
  p->configs_per_block = per_block;
  seen_.insert({g.collection, g.name});
  pending_ = std::move(p);
  return Status::Ok();
}

Status DatasetWriter::FlushBlock() {
  Pending& p = *pending_;
  if (p.block_configs == 0) return Status::Ok();
  dataset::ConfigBlock block;
  block.set_first_config(p.configs_done - p.block_configs);
  block.set_num_configs(p.block_configs);
  block.set_values(std::move(p.block));
  std::string payload;
  if (!block.SerializeToString(&payload)) {
    return ResourceExhaustedError(path_ + ": config block too large");
  }
  uint64_t offset = 0;
  TPUG_RETURN_IF_ERROR(WriteRecord(static_cast<int>(RecordType::kConfigBlock), payload, &offset));
  p.entry.add_block_offsets(offset);
  p.block.clear();
  p.block_configs = 0;
  return Status::Ok();
}

Status DatasetWriter::AppendLayoutConfigs(const int8_t* values, int64_t num_configs) {
  if (!pending_) {
    return FailedPreconditionError(path_ + ": AppendLayoutConfigs without BeginGraph");
  }
  Pending& p = *pending_;
  const std::string& name = p.entry.name();
  if (num_configs < 0 || p.configs_done + num_configs > p.num_configs) {
    return InvalidArgumentError(
        path_ + ": graph '" + name + "': " + Str(p.configs_done + num_configs) +
        " layout configs appended, but the graph declares " + Str(p.num_configs));
  }
  const char* src = reinterpret_cast<const char*>(values);
  int64_t left = num_configs;
  while (left > 0) {
    int64_t take = std::min(left, p.configs_per_block - p.block_configs);
    if (p.block.empty()) p.block.reserve(p.configs_per_block * p.row_bytes);
    p.block.append(src, take * p.row_bytes);
    src += take * p.row_bytes;
    left -= take;
    p.block_configs += take;
    p.configs_done += take;
    if (p.block_configs == p.configs_per_block) TPUG_RETURN_IF_ERROR(FlushBlock());
  }
  return Status::Ok();
}

void DatasetWriter::AbortGraph() {
  if (!pending_) return;
  seen_.erase({pending_->entry.collection(), pending_->entry.name()});
  pending_.reset();
}

Status DatasetWriter::EndGraph() {
  if (!pending_) return Status::Ok();
  Pending& p = *pending_;
  if (p.configs_done != p.num_configs) {
    Status s = InvalidArgumentError(path_ + ": graph '" + p.entry.name() + "' declares " +
                                    Str(p.num_configs) + " layout configs but " +
                                    Str(p.configs_done) + " were appended");
    AbortGraph();
    return s;
  }
  TPUG_RETURN_IF_ERROR(FlushBlock());
  p.entry.set_stored_bytes(file_.offset() - p.start_offset);
  // DatasetIndex field 1, wire type 2 (length-delimited): tag byte 0x0a, varint length, bytes.
  std::string entry = p.entry.SerializeAsString();
  index_.push_back('\x0a');
  for (uint64_t len = entry.size();; len >>= 7) {
    if (len < 0x80) {
      index_.push_back(static_cast<char>(len));
      break;
    }
    index_.push_back(static_cast<char>((len & 0x7f) | 0x80));
  }
  index_.append(entry);
  total_configs_ += p.entry.num_configs();
  ++num_graphs_;
  pending_.reset();
  return Status::Ok();
}

Status DatasetWriter::Finish() {
  if (finished_) return FailedPreconditionError(path_ + ": writer is already finished");
  if (failed_) return FailedPreconditionError(path_ + ": an earlier write failed");
  TPUG_RETURN_IF_ERROR(EndGraph());
  // Rebuild the index message from the serialized entries (each a GraphIndexEntry).
  dataset::DatasetIndex index;
  index.set_writer(std::string("tpugraphs ") + TPUGRAPHS_VERSION);
  index.set_total_configs(total_configs_);
  std::string payload;
  if (!index.SerializeToString(&payload)) {
    return InternalError(path_ + ": cannot serialize the dataset index");
  }
  // The entries were serialized as field 1 (repeated GraphIndexEntry graphs) as they came;
  // concatenating fields is valid protobuf wire format, so they are appended as they are.
  payload.append(index_);
  index_.clear();
  uint64_t offset = 0;
  TPUG_ASSIGN_OR_RETURN(std::string frame,
                        EncodeFrame(RecordType::kIndex, payload, options_.compression_level));
  offset = file_.offset();
  TPUG_RETURN_IF_ERROR(file_.Append(frame));
  TPUG_RETURN_IF_ERROR(file_.Append(EncodeFooter(offset, frame.size())));
  TPUG_RETURN_IF_ERROR(file_.Commit());
  finished_ = true;
  return Status::Ok();
}

// ------------------------------------------------------------------------------------------------
// Reader

namespace {

// Reads exactly `size` bytes at `offset` (pread: no shared file position, so thread-safe).
Status PreadAll(int fd, uint64_t offset, size_t size, char* out, const std::string& what) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(what + ": read failed: " + std::strerror(errno));
    }
    if (n == 0) return DataLossError(what + ": unexpected end of file");
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

DatasetReader::~DatasetReader() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<std::unique_ptr<DatasetReader>> DatasetReader::Open(const std::string& path) {
  std::unique_ptr<DatasetReader> r(new DatasetReader());
  r->path_ = path;
  TPUG_RETURN_IF_ERROR(OpenRegularFileForReading(path, &r->fd_, &r->file_size_));
  const uint64_t size = r->file_size_;

  std::string header(kFileHeaderSize, '\0');
  if (size < kFileHeaderSize) {
    if (size >= 8) {
      TPUG_RETURN_IF_ERROR(PreadAll(r->fd_, 0, 8, header.data(), path));
      if (std::memcmp(header.data(), kFileMagic, 8) == 0) {
        return DataLossError(path + ": truncated dataset (" + Str(size) + " bytes)");
      }
    }
    return InvalidArgumentError(path + ": not a tpugraphs dataset (file too short)");
  }
  TPUG_RETURN_IF_ERROR(PreadAll(r->fd_, 0, kFileHeaderSize, header.data(), path));
  TPUG_RETURN_IF_ERROR(CheckFileHeader(header, path));
  if (size < kFileHeaderSize + kFooterSize) {
    return DataLossError(path + ": truncated dataset (no room for a footer, " + Str(size) +
                         " bytes)");
  }
  std::string footer(kFooterSize, '\0');
  TPUG_RETURN_IF_ERROR(PreadAll(r->fd_, size - kFooterSize, kFooterSize, footer.data(), path));
  uint64_t index_offset = 0, index_frame_size = 0;
  TPUG_RETURN_IF_ERROR(DecodeFooter(footer, path, &index_offset, &index_frame_size));
  if (index_offset < kFileHeaderSize || index_frame_size < kFrameHeaderSize ||
      index_offset > size - kFooterSize || index_frame_size != size - kFooterSize - index_offset) {
    return DataLossError(path +
                         ": footer points at an index outside the file (truncated or "
                         "corrupted)");
  }
  TPUG_ASSIGN_OR_RETURN(
      std::string payload,
      r->ReadRecord(index_offset, static_cast<int>(RecordType::kIndex), path + ": index record"));
  dataset::DatasetIndex index;
  if (!index.ParseFromString(payload)) {
    return DataLossError(path + ": index record does not parse");
  }
  const uint64_t data_end = index_offset;
  for (int gi = 0; gi < index.graphs_size(); ++gi) {
    const auto& e = index.graphs(gi);
    const std::string what = path + ": index entry " + Str(gi) + " ('" + e.name() + "')";
    GraphInfo info;
    info.name = e.name();
    info.collection = e.collection();
    info.split = e.split();
    if (e.kind() != dataset::TASK_KIND_TILE && e.kind() != dataset::TASK_KIND_LAYOUT) {
      return DataLossError(what + ": unknown task kind " + Str(e.kind()));
    }
    info.kind = e.kind() == dataset::TASK_KIND_TILE ? TaskKind::kTile : TaskKind::kLayout;
    info.num_nodes = e.num_nodes();
    info.num_edges = e.num_edges();
    info.num_configs = e.num_configs();
    info.num_config_nodes = e.num_config_nodes();
    if (info.num_nodes < 0 || info.num_edges < 0 || info.num_configs < 0 ||
        info.num_config_nodes < 0) {
      return DataLossError(what + ": negative count");
    }
    // No record can decode to more than kMaxZlibRatio times the file, so larger counts are
    // forged; bounding them here keeps every size computed from them far from overflow.
    const int64_t max_count =
        static_cast<int64_t>(std::min<uint64_t>((size + 64) * kMaxZlibRatio, uint64_t{1} << 52));
    if (info.num_nodes > max_count || info.num_edges > max_count || info.num_configs > max_count ||
        info.num_config_nodes > info.num_nodes) {
      return DataLossError(what + ": counts are impossible for a file of " + Str(size) + " bytes");
    }
    Entry entry;
    entry.graph_offset = e.graph_offset();
    entry.configs_per_block = e.configs_per_block();
    if (entry.graph_offset < kFileHeaderSize || entry.graph_offset >= data_end) {
      return DataLossError(what + ": graph record offset outside the data area");
    }
    const bool has_blocks =
        info.kind == TaskKind::kLayout && info.num_configs > 0 && info.num_config_nodes > 0;
    if (has_blocks) {
      if (entry.configs_per_block <= 0 || entry.configs_per_block > info.num_configs) {
        return DataLossError(what + ": configs_per_block " + Str(entry.configs_per_block) +
                             " is not in [1, " + Str(info.num_configs) + "]");
      }
      if (info.num_config_nodes * kLayoutConfigFeatureCount >
          static_cast<int64_t>(kMaxRecordRawBytes) / entry.configs_per_block) {
        return DataLossError(what + ": config blocks would exceed the record size limit");
      }
      const int64_t blocks =
          (info.num_configs + entry.configs_per_block - 1) / entry.configs_per_block;
      if (e.block_offsets_size() != blocks) {
        return DataLossError(what + ": " + Str(e.block_offsets_size()) +
                             " config blocks, expected " + Str(blocks));
      }
    } else if (e.block_offsets_size() != 0) {
      return DataLossError(what + ": unexpected config blocks");
    }
    for (uint64_t off : e.block_offsets()) {
      if (off < kFileHeaderSize || off >= data_end) {
        return DataLossError(what + ": config block offset outside the data area");
      }
      entry.block_offsets.push_back(off);
    }
    std::string key = IdKey(info.collection, info.name);
    if (!r->by_id_.emplace(key, gi).second) {
      return DataLossError(what + ": duplicate graph in collection " + info.collection);
    }
    r->infos_.push_back(std::move(info));
    r->entries_.push_back(std::move(entry));
  }
  return r;
}

int64_t DatasetReader::Find(std::string_view collection, std::string_view name) const {
  auto it = by_id_.find(IdKey(collection, name));
  return it == by_id_.end() ? -1 : it->second;
}

std::string DatasetReader::GraphWhat(int64_t i) const {
  return path_ + ": graph '" + infos_[i].name + "' (" + infos_[i].collection + ")";
}

StatusOr<std::string> DatasetReader::ReadRecord(uint64_t offset, int expected_type,
                                                const std::string& what_in) const {
  const std::string what = what_in + " at offset " + Str(offset);
  if (offset > file_size_ || file_size_ - offset < kFrameHeaderSize) {
    return DataLossError(what + ": record header extends past the end of the file");
  }
  char header[kFrameHeaderSize];
  TPUG_RETURN_IF_ERROR(PreadAll(fd_, offset, kFrameHeaderSize, header, what));
  FrameHeader h = DecodeFrameHeader(header);
  if (static_cast<int>(h.type) != expected_type) {
    return DataLossError(what + ": expected a " +
                         std::string(RecordTypeName(static_cast<RecordType>(expected_type))) +
                         " record, found type " + Str(static_cast<int>(h.type)));
  }
  const uint64_t available = file_size_ - offset - kFrameHeaderSize;
  if (h.stored_size > available) {
    return DataLossError(what + ": declared record length " + Str(h.stored_size) + " exceeds the " +
                         Str(available) + " bytes left in the file");
  }
  if (h.stored_size > kMaxRecordRawBytes + 1024 * 1024) {
    return ResourceExhaustedError(what + ": declared record length " + Str(h.stored_size) +
                                  " exceeds the record size limit");
  }
  std::string stored(h.stored_size, '\0');
  TPUG_RETURN_IF_ERROR(
      PreadAll(fd_, offset + kFrameHeaderSize, stored.size(), stored.data(), what));
  return DecodeFramePayload(header, h, stored, what);
}

StatusOr<Graph> DatasetReader::ReadGraph(int64_t i, bool with_layout_configs) const {
  if (i < 0 || i >= num_graphs()) {
    return OutOfRangeError(path_ + ": graph index " + Str(i) + " out of range [0, " +
                           Str(num_graphs()) + ")");
  }
  const GraphInfo& info = infos_[i];
  const std::string what = GraphWhat(i);
  TPUG_ASSIGN_OR_RETURN(std::string payload,
                        ReadRecord(entries_[i].graph_offset, static_cast<int>(RecordType::kGraph),
                                   what + ": graph record"));
  dataset::GraphRecord rec;
  if (!rec.ParseFromString(payload)) return DataLossError(what + ": graph record does not parse");
  payload.clear();
  payload.shrink_to_fit();
  if (rec.name() != info.name || rec.collection() != info.collection || rec.split() != info.split ||
      rec.num_nodes() != info.num_nodes || rec.num_edges() != info.num_edges ||
      rec.num_configs() != info.num_configs || rec.num_config_nodes() != info.num_config_nodes ||
      rec.configs_per_block() != entries_[i].configs_per_block ||
      rec.kind() != KindToProto(info.kind)) {
    return DataLossError(what + ": graph record disagrees with the index");
  }
  Graph g;
  g.name = rec.name();
  g.collection = rec.collection();
  g.split = rec.split();
  g.kind = info.kind;
  g.num_configs = rec.num_configs();
  const int64_t n = rec.num_nodes(), m = rec.num_edges(), c = rec.num_configs(),
                nc = rec.num_config_nodes();
  const bool tile = info.kind == TaskKind::kTile;
  TPUG_RETURN_IF_ERROR(UnpackLE(rec.node_opcode(), n, "node_opcode", what, &g.node_opcode));
  TPUG_RETURN_IF_ERROR(
      UnpackLE(rec.node_feat(), n * kNodeFeatureCount, "node_feat", what, &g.node_feat));
  TPUG_RETURN_IF_ERROR(UnpackLE(rec.edge_index(), 2 * m, "edge_index", what, &g.edge_index));
  TPUG_RETURN_IF_ERROR(UnpackLE(rec.node_splits(),
                                static_cast<int64_t>(rec.node_splits().size() / 8), "node_splits",
                                what, &g.node_splits));
  TPUG_RETURN_IF_ERROR(
      UnpackLE(rec.config_runtime(), c, "config_runtime", what, &g.config_runtime));
  TPUG_RETURN_IF_ERROR(UnpackLE(rec.config_runtime_normalizers(), tile ? c : 0,
                                "config_runtime_normalizers", what, &g.config_runtime_normalizers));
  TPUG_RETURN_IF_ERROR(UnpackLE(rec.config_feat(), tile ? c * kTileConfigFeatureCount : 0,
                                "config_feat", what, &g.config_feat));
  TPUG_RETURN_IF_ERROR(
      UnpackLE(rec.node_config_ids(), tile ? 0 : nc, "node_config_ids", what, &g.node_config_ids));
  if (tile && nc != 0) return DataLossError(what + ": tile graph with configurable nodes");
  g.config_node_names.assign(rec.config_node_names().begin(), rec.config_node_names().end());
  g.absent_dimensions_marked = rec.absent_dimensions_marked();
  if (!tile && nc > 0 && rec.layout_config_width() != kLayoutConfigFeatureCount) {
    return DataLossError(what + ": layout config width " + Str(rec.layout_config_width()) +
                         ", expected " + Str(kLayoutConfigFeatureCount));
  }
  TPUG_RETURN_IF_ERROR(ValidateGraph(g, what));
  if (with_layout_configs && !tile && c > 0 && nc > 0) {
    TPUG_ASSIGN_OR_RETURN(g.node_config_feat, ReadLayoutConfigRange(i, 0, c));
  }
  return g;
}

void DatasetReader::SetBlockCacheBytes(int64_t bytes) {
  std::lock_guard<std::mutex> lock(cache_.mu);
  cache_.capacity = std::max<int64_t>(0, bytes);
  cache_.EvictTo(cache_.capacity);
}

void DatasetReader::BlockCache::EvictTo(int64_t bytes) {
  while (used > bytes && !recent.empty()) {
    auto it = map.find(recent.back());
    used -= static_cast<int64_t>(it->second.first->size());
    map.erase(it);
    recent.pop_back();
  }
}

int64_t DatasetReader::blocks_decoded() const {
  std::lock_guard<std::mutex> lock(cache_.mu);
  return cache_.decoded;
}

int64_t DatasetReader::blocks_cached() const {
  std::lock_guard<std::mutex> lock(cache_.mu);
  return cache_.hits;
}

StatusOr<std::shared_ptr<const std::string>> DatasetReader::ReadBlock(int64_t i, int64_t block,
                                                                      int64_t* first,
                                                                      int64_t* count) const {
  const Entry& e = entries_[i];
  *first = block * e.configs_per_block;
  *count = std::min(e.configs_per_block, infos_[i].num_configs - *first);
  const BlockCache::Key key{i, block};
  {
    std::lock_guard<std::mutex> lock(cache_.mu);
    auto it = cache_.map.find(key);
    if (it != cache_.map.end()) {
      cache_.recent.splice(cache_.recent.begin(), cache_.recent, it->second.second);
      ++cache_.hits;
      return it->second.first;
    }
  }
  TPUG_ASSIGN_OR_RETURN(std::string values, DecodeBlock(i, block));
  auto shared = std::make_shared<const std::string>(std::move(values));
  std::lock_guard<std::mutex> lock(cache_.mu);
  ++cache_.decoded;
  const int64_t size = static_cast<int64_t>(shared->size());
  if (size > cache_.capacity || cache_.map.count(key) > 0) return shared;
  cache_.EvictTo(cache_.capacity - size);
  cache_.recent.push_front(key);
  cache_.map.emplace(key, std::make_pair(shared, cache_.recent.begin()));
  cache_.used += size;
  return shared;
}

StatusOr<std::string> DatasetReader::DecodeBlock(int64_t i, int64_t block) const {
  const GraphInfo& info = infos_[i];
  const Entry& e = entries_[i];
  const std::string what = GraphWhat(i) + ": config block " + Str(block);
  TPUG_ASSIGN_OR_RETURN(
      std::string payload,
      ReadRecord(e.block_offsets[block], static_cast<int>(RecordType::kConfigBlock), what));
  dataset::ConfigBlock b;
  if (!b.ParseFromString(payload)) return DataLossError(what + ": config block does not parse");
  const int64_t expect_first = block * e.configs_per_block;
  const int64_t expect_count = std::min(e.configs_per_block, info.num_configs - expect_first);
  const int64_t row = info.num_config_nodes * kLayoutConfigFeatureCount;
  if (b.first_config() != expect_first || b.num_configs() != expect_count ||
      static_cast<int64_t>(b.values().size()) != expect_count * row) {
    return DataLossError(what + ": holds configs [" + Str(b.first_config()) + ", +" +
                         Str(b.num_configs()) + ") in " + Str(b.values().size()) +
                         " bytes, expected [" + Str(expect_first) + ", +" + Str(expect_count) +
                         ") in " + Str(expect_count * row));
  }
  return std::move(*b.mutable_values());
}

StatusOr<std::vector<int8_t>> DatasetReader::ReadLayoutConfigs(
    int64_t i, const std::vector<int64_t>& config_indices) const {
  if (i < 0 || i >= num_graphs()) {
    return OutOfRangeError(path_ + ": graph index " + Str(i) + " out of range [0, " +
                           Str(num_graphs()) + ")");
  }
  const GraphInfo& info = infos_[i];
  if (info.kind != TaskKind::kLayout) {
    return InvalidArgumentError(GraphWhat(i) + ": not a layout graph");
  }
  const int64_t row = info.num_config_nodes * kLayoutConfigFeatureCount;
  for (int64_t k : config_indices) {
    if (k < 0 || k >= info.num_configs) {
      return OutOfRangeError(GraphWhat(i) + ": config index " + Str(k) + " out of range [0, " +
                             Str(info.num_configs) + ")");
    }
  }
  std::vector<int8_t> out(config_indices.size() * row);
  if (row == 0 || config_indices.empty()) return out;
  // Positions grouped by block, so that each needed block is decoded once.
  const int64_t per = entries_[i].configs_per_block;
  std::vector<std::pair<int64_t, int64_t>> order;  // (config, position)
  order.reserve(config_indices.size());
  for (size_t p = 0; p < config_indices.size(); ++p) order.emplace_back(config_indices[p], p);
  std::sort(order.begin(), order.end());
  size_t at = 0;
  while (at < order.size()) {
    const int64_t block = order[at].first / per;
    int64_t first = 0, count = 0;
    TPUG_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> values,
                          ReadBlock(i, block, &first, &count));
    for (; at < order.size() && order[at].first / per == block; ++at) {
      std::memcpy(out.data() + order[at].second * row,
                  values->data() + (order[at].first - first) * row, row);
    }
  }
  return out;
}

StatusOr<std::vector<int8_t>> DatasetReader::ReadLayoutConfigRange(int64_t i, int64_t begin,
                                                                   int64_t end) const {
  if (i < 0 || i >= num_graphs()) {
    return OutOfRangeError(path_ + ": graph index " + Str(i) + " out of range");
  }
  const GraphInfo& info = infos_[i];
  if (info.kind != TaskKind::kLayout) {
    return InvalidArgumentError(GraphWhat(i) + ": not a layout graph");
  }
  if (begin < 0 || end < begin || end > info.num_configs) {
    return OutOfRangeError(GraphWhat(i) + ": config range [" + Str(begin) + ", " + Str(end) +
                           ") outside [0, " + Str(info.num_configs) + ")");
  }
  const int64_t row = info.num_config_nodes * kLayoutConfigFeatureCount;
  std::vector<int8_t> out((end - begin) * row);
  if (row == 0 || begin == end) return out;
  const int64_t per = entries_[i].configs_per_block;
  for (int64_t block = begin / per; block * per < end; ++block) {
    int64_t first = 0, count = 0;
    TPUG_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> values,
                          ReadBlock(i, block, &first, &count));
    const int64_t lo = std::max(begin, first), hi = std::min(end, first + count);
    std::memcpy(out.data() + (lo - begin) * row, values->data() + (lo - first) * row,
                (hi - lo) * row);
  }
  return out;
}

}  // namespace tpugraphs::io
