#include "tpugraphs/ingest/load_graphs.h"

#include <unistd.h>

#include <cstring>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/ingest/absent_dimensions.h"
#include "tpugraphs/ingest/hlo_text.h"
#include "tpugraphs/ingest/ingest.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "tpugraphs/ingest/release_npz.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/io/record_format.h"

namespace tpugraphs::ingest {
namespace {

// The first 8 bytes of `path` (fewer for a shorter file).
StatusOr<std::string> FileHead(const std::string& path) {
  int fd = -1;
  uint64_t size = 0;
  TPUG_RETURN_IF_ERROR(OpenRegularFileForReading(path, &fd, &size));
  std::string head(8, '\0');
  const ssize_t got = ::pread(fd, head.data(), head.size(), 0);
  ::close(fd);
  head.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return head;
}

StatusOr<LoadedGraphs> LoadFromDataset(const std::string& path, const io::GraphFilter& filter) {
  TPUG_ASSIGN_OR_RETURN(auto reader, io::DatasetReader::Open(path));
  TPUG_ASSIGN_OR_RETURN(const std::vector<int64_t> chosen, io::SelectGraphs(*reader, filter));
  LoadedGraphs out;
  for (int64_t i : chosen) {
    TPUG_ASSIGN_OR_RETURN(Graph g, reader->ReadGraph(i, true));
    out.graphs.push_back(std::move(g));
  }
  return out;
}

// A release .npz or a raw dump, ingested as `tpugraphs ingest` would.
StatusOr<LoadedGraphs> LoadByIngesting(const std::string& path, const io::GraphFilter& filter,
                                       bool mark_absent_dimensions) {
  const std::string collection = filter.collections.size() == 1 ? filter.collections[0] : "";
  TPUG_ASSIGN_OR_RETURN(InputKind kind, DetectInputKind(path));
  LoadedGraphs out;
  std::vector<Graph> graphs;
  if (kind == InputKind::kReleaseNpz) {
    const std::string c = collection.empty() ? InferFromReleasePath(path).collection : collection;
    TPUG_ASSIGN_OR_RETURN(Graph g, LoadReleaseNpz(path, c, "", ""));
    if (mark_absent_dimensions) DeriveAbsentDimensions(&g);
    graphs.push_back(std::move(g));
  } else {
    RawDumpOptions options;
    options.collection = collection;
    options.mark_absent_dimensions = mark_absent_dimensions;
    TPUG_ASSIGN_OR_RETURN(graphs, LoadRawDump(path, options));
    TPUG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
    if (LooksLikeHloText(bytes)) {
      out.hlo_text = true;
      TPUG_RETURN_IF_ERROR(
          ParseHloText(bytes, path, &out.module, nullptr, HloTextLimits(), &out.spans));
      out.text = std::move(bytes);
    }
  }
  std::vector<io::GraphKey> keys;
  for (const Graph& g : graphs) keys.push_back({g.collection, g.split, g.name});
  TPUG_ASSIGN_OR_RETURN(const std::vector<int64_t> chosen, io::SelectGraphs(path, keys, filter));
  for (int64_t i : chosen) out.graphs.push_back(std::move(graphs[i]));
  return out;
}

}  // namespace

StatusOr<LoadedGraphs> LoadGraphs(const std::string& path, const io::GraphFilter& filter,
                                  bool mark_absent_dimensions) {
  TPUG_ASSIGN_OR_RETURN(const std::string head, FileHead(path));
  if (head.size() == 8 && std::memcmp(head.data(), io::kFileMagic, 8) == 0) {
    return LoadFromDataset(path, filter);
  }
  return LoadByIngesting(path, filter, mark_absent_dimensions);
}

}  // namespace tpugraphs::ingest
