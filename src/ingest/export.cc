#include "tpugraphs/ingest/export.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <mutex>

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
  ExportSummary summary;
  summary.files.resize(chosen.size());
  std::vector<Status> status(chosen.size());
  ThreadPool pool(options.threads);
  Progress progress("export", static_cast<int64_t>(chosen.size()), "graphs");
  pool.ParallelFor(static_cast<int64_t>(chosen.size()), 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      auto g = reader->ReadGraph(chosen[k]);
      if (!g.ok()) {
        status[k] = g.status();
        continue;
      }
      fs::path out = fs::path(options.output_dir) / ReleaseRelativePath(*g);
      std::error_code ec;
      fs::create_directories(out.parent_path(), ec);
      if (ec) {
        status[k] =
            IoError(out.parent_path().string() + ": cannot create directory: " + ec.message());
        continue;
      }
      status[k] = WriteReleaseNpz(*g, out.string(), options.compress);
      summary.files[k] = out.string();
      progress.Add(1);
    }
  });
  progress.Finish();
  for (const Status& s : status) TPUG_RETURN_IF_ERROR(s);
  summary.graphs = static_cast<int64_t>(chosen.size());
  return summary;
}

}  // namespace tpugraphs::ingest
