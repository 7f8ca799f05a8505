#include "tpugraphs/ingest/export.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <filesystem>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/ingest/release_npz.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs::ingest {
namespace {
namespace fs = std::filesystem;

bool Selected(const std::vector<std::string>& allowed, const std::string& value) {
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), value) != allowed.end();
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
  std::vector<int64_t> chosen;
  for (int64_t i = 0; i < reader->num_graphs(); ++i) {
    const auto& info = reader->info(i);
    if (Selected(options.collections, info.collection) && Selected(options.splits, info.split) &&
        Selected(options.graphs, info.name)) {
      chosen.push_back(i);
    }
  }
  if (chosen.empty()) {
    return NotFoundError(options.dataset + ": no graph matches the given filters (" +
                         std::to_string(reader->num_graphs()) + " graphs in the dataset)");
  }
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
        TPUG_ASSIGN_OR_RETURN(Graph g, reader->ReadGraph(chosen[k]));
        const std::string rel = ReleaseRelativePath(g);
        TPUG_ASSIGN_OR_RETURN(std::string path, staged.Path(rel));
        TPUG_RETURN_IF_ERROR(WriteReleaseNpz(g, path, options.compress));
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
  TPUG_RETURN_IF_ERROR(staged.Commit());
  for (std::string& f : files) {
    if (!f.empty()) summary.files.push_back(std::move(f));
  }
  summary.graphs = static_cast<int64_t>(summary.files.size());
  return summary;
}

}  // namespace tpugraphs::ingest
