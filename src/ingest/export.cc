#include "tpugraphs/ingest/export.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iterator>
#include <vector>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/ingest/release_npz.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs::ingest {
namespace {
namespace fs = std::filesystem;

// Layout config bytes read from the dataset per step of writing node_config_feat.
constexpr int64_t kConfigReadBytes = int64_t{4} << 20;

// Configs per read of graph i: whole ConfigBlocks (none is decoded twice) of about
// kConfigReadBytes of int8 values.
int64_t ConfigsPerRead(const io::DatasetReader& reader, int64_t i) {
  const int64_t per_block = std::max<int64_t>(1, reader.configs_per_block(i));
  const int64_t row =
      std::max<int64_t>(1, reader.info(i).num_config_nodes * kLayoutConfigFeatureCount);
  return std::max<int64_t>(1, kConfigReadBytes / row / per_block) * per_block;
}

// Removes the empty directories below `root` (not root itself): those made for graphs that
// failed midway with --keep-going, so that they do not show up in the output.
void RemoveEmptyDirectories(const std::string& root) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec)) dirs.push_back(it->path());
  }
  // Deepest first, so that a directory emptied by removing its children goes too.
  std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) {
    return std::distance(a.begin(), a.end()) > std::distance(b.begin(), b.end());
  });
  for (const fs::path& d : dirs) {
    if (fs::is_empty(d, ec) && !ec) fs::remove(d, ec);
  }
}
}  // namespace

std::string ReleaseRelativePath(const std::string& collection, const std::string& split,
                                const std::string& name) {
  std::string out = "npz";
  size_t start = 0;
  while (true) {
    size_t pos = collection.find(':', start);
    out += '/';
    out += collection.substr(start, pos == std::string::npos ? pos : pos - start);
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  out += '/';
  out += split.empty() ? std::string("nosplit") : split;
  out += '/';
  out += name;
  out += ".npz";
  return out;
}

std::string ReleaseRelativePath(const Graph& g) {
  return ReleaseRelativePath(g.collection, g.split, g.name);
}

StatusOr<ExportSummary> ExportDataset(const ExportOptions& options) {
  if (options.output_dir.empty()) return InvalidArgumentError("--output-dir is required");
  TPUG_ASSIGN_OR_RETURN(auto reader, io::DatasetReader::Open(options.dataset));
  TPUG_ASSIGN_OR_RETURN(std::vector<int64_t> chosen, io::SelectGraphs(*reader, options.filter));
  // Graph names become file names: refuse names that would leave the output tree.
  for (int64_t i : chosen) {
    const auto& name = reader->info(i).name;
    if (name.find('/') != std::string::npos || name == "." || name == "..") {
      return InvalidArgumentError(options.dataset + ": graph name '" + name +
                                  "' cannot be used as a file name");
    }
  }
  // Everything goes to a staging directory first and into place only when every graph has been
  // written, so that a failure (a corrupt record, a full disk) leaves the output as it was.
  StagedDirectory staged;
  TPUG_RETURN_IF_ERROR(staged.Begin(options.output_dir));
  ExportSummary summary;
  std::vector<std::string> files(chosen.size());
  std::vector<Status> status(chosen.size());
  std::atomic<bool> failed{false};
  ThreadPool pool(options.threads);
  Progress progress("export", static_cast<int64_t>(chosen.size()), "graphs");
  pool.ParallelFor(static_cast<int64_t>(chosen.size()), 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      if (failed.load() && !options.keep_going) return;
      auto run = [&]() -> Status {
        // The graph without its layout configs; those are read a few MiB at a time while the
        // file is written, so a worker never holds a graph's configs whole.
        const int64_t i = chosen[k];
        TPUG_ASSIGN_OR_RETURN(Graph g, reader->ReadGraph(i, /*with_layout_configs=*/false));
        const std::string rel = ReleaseRelativePath(g);
        TPUG_ASSIGN_OR_RETURN(std::string path, staged.Path(rel));
        std::vector<int8_t> values;
        auto source = [&](int64_t begin, int64_t end) -> StatusOr<const int8_t*> {
          TPUG_ASSIGN_OR_RETURN(values, reader->ReadLayoutConfigRange(i, begin, end));
          return values.data();
        };
        TPUG_RETURN_IF_ERROR(
            WriteReleaseNpzStreamed(g, path, options.compress, ConfigsPerRead(*reader, i), source));
        files[k] = staged.FinalPath(rel);
        return Status::Ok();
      };
      status[k] = run();
      if (!status[k].ok()) failed.store(true);
      progress.Add(1);
    }
  });
  progress.Finish();
  for (size_t k = 0; k < chosen.size(); ++k) {
    if (status[k].ok()) continue;
    if (!options.keep_going) return status[k];
    const auto& info = reader->info(chosen[k]);
    summary.skipped.push_back({info.collection, info.split, info.name, status[k].message()});
  }
  if (!summary.skipped.empty()) RemoveEmptyDirectories(staged.staging());
  TPUG_RETURN_IF_ERROR(staged.Commit());
  for (std::string& f : files) {
    if (!f.empty()) summary.files.push_back(std::move(f));
  }
  summary.graphs = static_cast<int64_t>(summary.files.size());
  return summary;
}

}  // namespace tpugraphs::ingest
