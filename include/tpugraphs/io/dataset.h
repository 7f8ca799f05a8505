// The tpugraphs dataset container: one file holding many Graphs (docs/dataset-format.md).
//
// A dataset file is a fixed header (magic "TPUGRAPH", format version, file kind), a stream of
// CRC-checked, zlib-compressed protobuf records (proto/tpugraphs/dataset.proto), an index record
// and a fixed footer pointing at the index. Each graph is one GraphRecord (arrays without the
// layout config values) plus, for layout graphs, ConfigBlock records of a fixed number of configs
// holding the config values one byte each. Opening reads only the header, footer and index; a
// graph or any subset of its configs is decoded on demand.
//
// Usage:
//   TPUG_ASSIGN_OR_RETURN(auto writer, io::DatasetWriter::Create("train.tpug"));
//   for (const Graph& g : graphs) TPUG_RETURN_IF_ERROR(writer->Add(g));
//   TPUG_RETURN_IF_ERROR(writer->Finish());  // nothing is visible at the path before this
//
//   TPUG_ASSIGN_OR_RETURN(auto reader, io::DatasetReader::Open("train.tpug"));
//   TPUG_ASSIGN_OR_RETURN(Graph g, reader->ReadGraph(0, /*with_layout_configs=*/false));
//   TPUG_ASSIGN_OR_RETURN(auto rows, reader->ReadLayoutConfigs(0, {5, 17, 3}));
//
// Thread-safety: a DatasetWriter is used by one thread. A DatasetReader's const methods may be
// called from several threads at once (reads use pread on one file descriptor).
#ifndef TPUGRAPHS_IO_DATASET_H_
#define TPUGRAPHS_IO_DATASET_H_

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"

namespace tpugraphs::io {

// What the index says about a graph (no graph record is decoded to get it).
struct GraphInfo {
  std::string name, collection, split;
  TaskKind kind = TaskKind::kTile;
  int64_t num_nodes = 0, num_edges = 0, num_configs = 0, num_config_nodes = 0;
};

struct DatasetWriterOptions {
  // zlib level 0 (store) .. 9 for every record (1: fast, a few percent larger than 6).
  int compression_level = 1;
  // Target decoded size of one layout ConfigBlock; configs_per_block = max(1, this / (nc * 18)).
  // Smaller blocks make sparse config reads cheaper, larger ones compress slightly better.
  int64_t target_block_bytes = int64_t{1} << 16;
};

class DatasetWriter {
 public:
  // Opens a temporary beside `path`; the dataset appears at `path` only on Finish().
  static StatusOr<std::unique_ptr<DatasetWriter>> Create(const std::string& path,
                                                         const DatasetWriterOptions& options = {});
  ~DatasetWriter();  // Abandons the output unless Finish() succeeded.

  // Writes a whole graph, configs included. Validates it first (ValidateGraph); a layout graph
  // with configs must carry its node_config_feat. (collection, name) must be new in this file.
  Status Add(const Graph& g);

  // Streaming form for huge layout graphs: the graph without node_config_feat (left empty), then
  // its [k, nc, 18] config values in pieces of any k. The pieces must total g.num_configs before
  // the next BeginGraph/Add/Finish. Memory stays bounded by one ConfigBlock.
  Status BeginGraph(const Graph& g_without_layout_configs);
  // REQUIRES: a graph begun with BeginGraph. `values` holds num_configs * nc * 18 bytes.
  Status AppendLayoutConfigs(const int8_t* values, int64_t num_configs);
  // Drops the graph begun with BeginGraph (e.g. its source turned out to be bad midway). Bytes
  // already written stay in the file unreferenced; readers never see them.
  void AbortGraph();

  // Writes the index and footer and renames the file into place. The writer is then closed.
  Status Finish();

  const std::string& path() const { return path_; }
  int64_t num_graphs() const;
  // Bytes written so far (including records of aborted graphs).
  uint64_t bytes_written() const { return file_.offset(); }

 private:
  DatasetWriter() = default;
  struct Pending;
  Status WriteRecord(int record_type, const std::string& payload, uint64_t* offset);
  Status FlushBlock();
  Status EndGraph();

  std::string path_;
  DatasetWriterOptions options_;
  AtomicFileWriter file_;
  std::unique_ptr<Pending> pending_;  // the graph being streamed, if any
  std::string index_;                 // serialized GraphIndexEntry messages so far
  int64_t num_graphs_ = 0;
  int64_t total_configs_ = 0;
  std::set<std::pair<std::string, std::string>> seen_;
  bool finished_ = false;
  bool failed_ = false;
};

class DatasetReader {
 public:
  // Reads the header, footer and index. Errors name the file: not a dataset, newer version,
  // truncated, corrupted.
  static StatusOr<std::unique_ptr<DatasetReader>> Open(const std::string& path);
  ~DatasetReader();
  DatasetReader(const DatasetReader&) = delete;
  DatasetReader& operator=(const DatasetReader&) = delete;

  const std::string& path() const { return path_; }
  int64_t num_graphs() const { return static_cast<int64_t>(infos_.size()); }
  // REQUIRES: 0 <= i < num_graphs().
  const GraphInfo& info(int64_t i) const { return infos_[i]; }
  // Index of the graph (collection, name), or -1 if absent.
  int64_t Find(std::string_view collection, std::string_view name) const;
  // Size of the file in bytes.
  uint64_t file_size() const { return file_size_; }

  // Decodes graph i. with_layout_configs=false leaves node_config_feat empty (everything else is
  // filled). The result passes ValidateGraph.
  StatusOr<Graph> ReadGraph(int64_t i, bool with_layout_configs = true) const;

  // Layout config values of graph i for the given config indices (any order, repeats allowed),
  // as [k, nc, 18] int8 row-major in the order asked. Decodes only the blocks holding them.
  StatusOr<std::vector<int8_t>> ReadLayoutConfigs(int64_t i,
                                                  const std::vector<int64_t>& config_indices) const;
  // Configs [begin, end) of graph i, as ReadLayoutConfigs of that range.
  StatusOr<std::vector<int8_t>> ReadLayoutConfigRange(int64_t i, int64_t begin, int64_t end) const;
  // Number of configs per ConfigBlock of graph i (0 for tile graphs and layout graphs without
  // configs). Readers that scan all configs do so block by block for bounded memory.
  int64_t configs_per_block(int64_t i) const { return entries_[i].configs_per_block; }

  // Keeps up to `bytes` of decoded config blocks in memory, the least recently used dropped
  // first, for readers that come back to the same graphs' configurations: training samples a
  // graph's configurations anew at every step, and decoding their blocks (a CRC and a protobuf
  // parse of 64 KiB each) costs a one-graph step of a 3,000-node program a tenth of its time.
  // 0, the default, keeps none. Thread-safe, as the reads are.
  void SetBlockCacheBytes(int64_t bytes);
  // Blocks decoded from the file and blocks served from memory since Open.
  int64_t blocks_decoded() const;
  int64_t blocks_cached() const;

 private:
  DatasetReader() = default;
  struct Entry {
    uint64_t graph_offset = 0;
    int64_t configs_per_block = 0;
    std::vector<uint64_t> block_offsets;
  };
  // Reads and decodes the record at `offset`, checking its type. `what` names it in messages.
  StatusOr<std::string> ReadRecord(uint64_t offset, int expected_type,
                                   const std::string& what) const;
  // The values of graph i's config block `block` (configs [*first, *first + *count)), from the
  // cache when it holds them.
  StatusOr<std::shared_ptr<const std::string>> ReadBlock(int64_t i, int64_t block, int64_t* first,
                                                         int64_t* count) const;
  StatusOr<std::string> DecodeBlock(int64_t i, int64_t block) const;
  std::string GraphWhat(int64_t i) const;

  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  std::vector<GraphInfo> infos_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, int64_t> by_id_;  // "collection\0name" -> index

  struct BlockCache {
    using Key = std::pair<int64_t, int64_t>;  // (graph, block)
    struct KeyHash {
      size_t operator()(const Key& k) const {
        return std::hash<int64_t>()(k.first * 1000003 + k.second);
      }
    };
    std::mutex mu;
    int64_t capacity = 0, used = 0;
    int64_t decoded = 0, hits = 0;
    std::list<Key> recent;  // most recent first
    std::unordered_map<Key, std::pair<std::shared_ptr<const std::string>, std::list<Key>::iterator>,
                       KeyHash>
        map;
    // Drops least recently used blocks until at most `bytes` stay cached.
    // The caller holds `mu`.
    void EvictTo(int64_t bytes);
  };
  mutable BlockCache cache_;
};

}  // namespace tpugraphs::io

#endif  // TPUGRAPHS_IO_DATASET_H_
