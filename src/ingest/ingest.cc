#include "tpugraphs/ingest/ingest.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "tpugraphs/common/json_util.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/ingest/absent_dimensions.h"
#include "tpugraphs/ingest/layout_candidates.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "tpugraphs/ingest/release_npz.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs::ingest {
namespace {

namespace fs = std::filesystem;

// What loading one input produced.
struct Loaded {
  Status status;
  std::vector<Graph> graphs;
  // Streamed layout .npz: written at its turn by StreamReleaseNpz (not loaded here).
  bool stream = false;
  std::string collection, split, name;
  ReleaseNpzShape shape;
};

// `member_threads`: threads for the members of one release .npz (LoadReleaseNpz).
Loaded LoadOne(const std::string& path, const IngestConfig& config, int member_threads) {
  Loaded out;
  auto kind = DetectInputKind(path);
  if (!kind.ok()) {
    out.status = kind.status();
    return out;
  }
  ReleasePathInfo inferred = InferFromReleasePath(path);
  out.collection = !config.collection().empty() ? config.collection() : inferred.collection;
  out.split = !config.split().empty() ? config.split() : inferred.split;
  if (*kind == InputKind::kRawDump) {
    RawDumpOptions opt;
    opt.collection = out.collection;
    opt.split = out.split;
    opt.layout_candidates = config.layout_candidates();
    opt.layout_seed = config.seed();
    opt.mark_absent_dimensions = config.mark_absent_dimensions();
    auto graphs = LoadRawDump(path, opt);
    if (!graphs.ok()) {
      out.status = graphs.status();
    } else {
      out.graphs = std::move(graphs).value();
    }
    return out;
  }
  auto shape = InspectReleaseNpz(path);
  if (!shape.ok()) {
    out.status = shape.status();
    return out;
  }
  out.shape = *shape;
  if (out.collection.empty() && shape->kind == TaskKind::kTile) out.collection = "tile:xla";
  out.name = fs::path(path).stem().string();
  if (shape->layout_config_values() > config.stream_threshold_values()) {
    out.stream = true;
    if (out.collection.empty()) {
      out.status = InvalidArgumentError(
          path +
          ": layout file outside the release layout npz/layout/<source>/<search>/...; "
          "give its collection with --collection (e.g. layout:xla:random)");
    }
    return out;
  }
  auto g = LoadReleaseNpz(path, out.collection, out.split, out.name, member_threads);
  if (!g.ok()) {
    out.status = g.status();
  } else {
    if (config.mark_absent_dimensions()) DeriveAbsentDimensions(&*g);
    out.graphs.push_back(std::move(g).value());
  }
  return out;
}

}  // namespace

Status ValidateIngestConfig(const IngestConfig& c) {
  if (c.inputs_size() == 0) return InvalidArgumentError("no inputs given (files or directories)");
  for (const auto& in : c.inputs()) {
    if (in.empty()) return InvalidArgumentError("an input path is empty");
  }
  if (c.output().empty()) return InvalidArgumentError("--output: a dataset path is required");
  if (!c.collection().empty()) {
    Status s = ValidateCollection(c.collection());
    if (!s.ok()) return s.WithContext("--collection");
  }
  {
    Status s = ValidateSplit(c.split());
    if (!s.ok()) return s.WithContext("--split");
  }
  if (c.compression_level() < 0 || c.compression_level() > 9) {
    return InvalidArgumentError("--compression-level " + std::to_string(c.compression_level()) +
                                " is not in 0..9");
  }
  if (c.stream_threshold_values() < 0) {
    return InvalidArgumentError("--stream-threshold must be non-negative");
  }
  if (c.threads() < 0) return InvalidArgumentError("--threads must be non-negative");
  if (c.layout_candidates() < 0 || c.layout_candidates() > kMaxLayoutCandidates) {
    return InvalidArgumentError("--layout-candidates " + std::to_string(c.layout_candidates()) +
                                " is not in 0.." + std::to_string(kMaxLayoutCandidates));
  }
  for (char ch : c.hlo_stage()) {
    if (ch == '/' || ch == '\0') {
      return InvalidArgumentError("--hlo-stage '" + c.hlo_stage() +
                                  "' is not a stage name (e.g. after_optimizations)");
    }
  }
  return Status::Ok();
}

bool IsXlaDumpFileName(const std::string& name) {
  constexpr std::string_view kPrefix = "module_";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  size_t p = kPrefix.size();
  while (p < name.size() && name[p] >= '0' && name[p] <= '9') ++p;
  return p > kPrefix.size() && p < name.size() && name[p] == '.';
}

bool IsXlaDumpOfStage(const std::string& name, const std::string& stage) {
  for (const char* ext : {".txt", ".pb", ".hlo.pb"}) {
    const std::string suffix = "." + stage + ext;
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
  }
  return false;
}

StatusOr<std::vector<std::string>> ExpandInputs(const std::vector<std::string>& inputs) {
  return ExpandInputs(inputs, "");
}

StatusOr<std::vector<std::string>> ExpandInputs(const std::vector<std::string>& inputs,
                                                const std::string& hlo_stage) {
  std::set<std::string> files;
  int64_t other_stages = 0;
  for (const auto& in : inputs) {
    std::error_code ec;
    fs::file_status st = fs::status(in, ec);
    if (ec || !fs::exists(st)) return NotFoundError(in + ": no such file or directory");
    if (fs::is_directory(st)) {
      auto it = fs::recursive_directory_iterator(in, fs::directory_options::none, ec);
      if (ec) return IoError(in + ": cannot list directory: " + ec.message());
      for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (ec) return IoError(in + ": cannot list directory: " + ec.message());
        const std::string name = it->path().filename().string();
        if (!name.empty() && name[0] == '.') {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (!it->is_regular_file()) continue;
        if (!hlo_stage.empty() && IsXlaDumpFileName(name) && !IsXlaDumpOfStage(name, hlo_stage)) {
          spdlog::debug("{}: XLA dump file of another stage than {}, not read", it->path().string(),
                        hlo_stage);
          ++other_stages;
          continue;
        }
        files.insert(it->path().string());
      }
    } else {
      files.insert(in);
    }
  }
  if (other_stages > 0) {
    spdlog::info("ingest: skipped {} XLA dump files not of stage {}", other_stages, hlo_stage);
  }
  if (files.empty()) {
    return InvalidArgumentError("no input files found in the given paths" +
                                (other_stages > 0
                                     ? " (" + std::to_string(other_stages) +
                                           " XLA dump files are of other stages than " + hlo_stage +
                                           "; see --hlo-stage)"
                                     : std::string()));
  }
  return std::vector<std::string>(files.begin(), files.end());
}

StatusOr<InputKind> DetectInputKind(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path + ": cannot open");
  char magic[4] = {0, 0, 0, 0};
  in.read(magic, 4);
  if (in.gcount() == 4 && magic[0] == 'P' && magic[1] == 'K' &&
      ((magic[2] == 3 && magic[3] == 4) || (magic[2] == 5 && magic[3] == 6))) {
    return InputKind::kReleaseNpz;
  }
  return InputKind::kRawDump;
}

StatusOr<IngestSummary> RunIngest(const IngestConfig& config) {
  TPUG_RETURN_IF_ERROR(ValidateIngestConfig(config));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> inputs(config.inputs().begin(), config.inputs().end());
  TPUG_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandInputs(inputs, config.hlo_stage()));
  spdlog::info("ingest: {} input files -> {}", files.size(), config.output());

  io::DatasetWriterOptions wopt;
  wopt.compression_level = config.compression_level();
  TPUG_ASSIGN_OR_RETURN(auto writer, io::DatasetWriter::Create(config.output(), wopt));

  IngestSummary summary;
  summary.output = config.output();
  summary.files = static_cast<int64_t>(files.size());
  std::map<std::string, CollectionTotals> totals;
  std::map<std::pair<std::string, std::string>, std::string> seen;  // (collection, name) -> file

  ThreadPool pool(config.threads());
  Progress progress("ingest", static_cast<int64_t>(files.size()), "files");
  const int64_t window = std::max<int64_t>(1, 2 * pool.num_threads());
  // A window of files is loaded whole before it is written: besides at most `window` files, it
  // holds at most kWindowBytes of input (one file alone may be larger), so that large raw dumps
  // (an nlp-sized program with 65,000 configurations is about 340 MB, its graph as large) are
  // in memory one at a time whatever the thread count. Release .npz files above
  // --stream-threshold are streamed and count nothing here.
  constexpr uint64_t kWindowBytes = uint64_t{256} << 20;
  auto window_end = [&](size_t begin) {
    size_t end = begin;
    uint64_t bytes = 0;
    while (end < files.size() && end - begin < static_cast<size_t>(window)) {
      std::error_code ec;
      const uint64_t size = fs::file_size(files[end], ec);
      const uint64_t counted = ec ? 0 : size;
      if (end > begin && bytes + counted > kWindowBytes) break;
      bytes += counted;
      ++end;
    }
    return end;
  };

  auto fail_file = [&](const std::string& path, const Status& s) -> Status {
    if (!config.keep_going()) return s;
    spdlog::warn("skipping {}", s.message());
    ++summary.skipped;
    summary.skipped_files.push_back(path);
    return Status::Ok();
  };
  auto count = [&](const std::string& collection, int64_t n, int64_t m, int64_t c) {
    auto& t = totals[collection];
    t.collection = collection;
    ++t.graphs;
    t.nodes += n;
    t.edges += m;
    t.configs += c;
    ++summary.graphs;
  };
  // Registers (collection, name) for `path`; a repeat is an error naming both files.
  auto claim = [&](const std::string& path, const std::string& collection,
                   const std::string& name) -> Status {
    auto [it, inserted] = seen.emplace(std::make_pair(collection, name), path);
    if (inserted) return Status::Ok();
    return InvalidArgumentError(path + ": duplicate graph '" + name + "' in collection " +
                                collection + " (also in " + it->second + ")");
  };

  for (size_t begin = 0, end = 0; begin < files.size(); begin = end) {
    end = window_end(begin);
    std::vector<Loaded> loaded(end - begin);
    // Fewer files than threads (one large .npz, say): the spare threads inflate members.
    const int member_threads = std::max(1, pool.num_threads() / static_cast<int>(end - begin));
    pool.ParallelFor(static_cast<int64_t>(end - begin), 1, [&](int64_t, int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        loaded[i] = LoadOne(files[begin + i], config, member_threads);
      }
    });
    for (size_t i = begin; i < end; ++i) {
      Loaded& item = loaded[i - begin];
      const std::string& path = files[i];
      if (!item.status.ok()) {
        TPUG_RETURN_IF_ERROR(fail_file(path, item.status));
        progress.Add(1);
        continue;
      }
      if (item.stream) {
        Status s = claim(path, item.collection, item.name);
        if (s.ok()) {
          spdlog::debug("{}: streaming {} layout config values", path,
                        item.shape.layout_config_values());
          s = StreamReleaseNpz(path, item.collection, item.split, item.name, writer.get(),
                               int64_t{1} << 22, pool.num_threads(),
                               config.mark_absent_dimensions());
          if (!s.ok()) seen.erase({item.collection, item.name});
        }
        if (s.ok()) {
          count(item.collection, item.shape.num_nodes, item.shape.num_edges,
                item.shape.num_configs);
        } else {
          TPUG_RETURN_IF_ERROR(fail_file(path, s));
        }
        progress.Add(1);
        continue;
      }
      // All graphs of one file are checked before any is written, so a skipped file leaves
      // nothing in the dataset.
      Status s;
      std::vector<std::pair<std::string, std::string>> claimed;
      for (const Graph& g : item.graphs) {
        s = claim(path, g.collection, g.name);
        if (!s.ok()) break;
        claimed.emplace_back(g.collection, g.name);
      }
      for (size_t k = 0; s.ok() && k < item.graphs.size(); ++k) {
        s = ValidateGraph(item.graphs[k], path);
      }
      if (!s.ok()) {
        for (const auto& key : claimed) seen.erase(key);
        TPUG_RETURN_IF_ERROR(fail_file(path, s));
        progress.Add(1);
        continue;
      }
      for (Graph& g : item.graphs) {
        TPUG_RETURN_IF_ERROR(writer->Add(g));
        count(g.collection, g.num_nodes(), g.num_edges(), g.num_configs);
        g = Graph();  // release memory early
      }
      progress.Add(1);
    }
  }
  progress.Finish();
  if (summary.graphs == 0 && summary.skipped > 0) {
    return InvalidArgumentError("all " + std::to_string(summary.skipped) +
                                " input files failed; nothing written to " + config.output());
  }
  summary.output_bytes = writer->bytes_written();
  TPUG_RETURN_IF_ERROR(writer->Finish());
  for (auto& [name, t] : totals) summary.collections.push_back(t);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (summary.skipped > 0) {
    spdlog::warn("ingest: skipped {} of {} input files", summary.skipped, summary.files);
  }
  spdlog::info("ingest: wrote {} graphs to {} in {}", summary.graphs, config.output(),
               FormatDuration(summary.seconds));
  return summary;
}

std::string FormatIngestSummary(const IngestSummary& s, bool json) {
  std::string out;
  char buf[512];
  if (json) {
    out = "{\"output\": " + JsonQuote(s.output) + ", \"files\": " + std::to_string(s.files) +
          ", \"graphs\": " + std::to_string(s.graphs) +
          ", \"skipped\": " + std::to_string(s.skipped) + ", \"skipped_files\": [";
    for (size_t i = 0; i < s.skipped_files.size(); ++i) {
      if (i > 0) out += ", ";
      out += JsonQuote(s.skipped_files[i]);
    }
    out += "], \"collections\": [";
    for (size_t i = 0; i < s.collections.size(); ++i) {
      const auto& c = s.collections[i];
      std::snprintf(buf, sizeof(buf),
                    "%s{\"collection\": %s, \"graphs\": %lld, \"nodes\": %lld, \"edges\": %lld, "
                    "\"configs\": %lld}",
                    i ? ", " : "", JsonQuote(c.collection).c_str(),
                    static_cast<long long>(c.graphs), static_cast<long long>(c.nodes),
                    static_cast<long long>(c.edges), static_cast<long long>(c.configs));
      out += buf;
    }
    return out + "]}\n";
  }
  std::snprintf(buf, sizeof(buf), "%-24s %8s %12s %12s %12s\n", "collection", "graphs", "nodes",
                "edges", "configs");
  out += buf;
  CollectionTotals total;
  for (const auto& c : s.collections) {
    std::snprintf(buf, sizeof(buf), "%-24s %8lld %12lld %12lld %12lld\n", c.collection.c_str(),
                  static_cast<long long>(c.graphs), static_cast<long long>(c.nodes),
                  static_cast<long long>(c.edges), static_cast<long long>(c.configs));
    out += buf;
    total.graphs += c.graphs;
    total.nodes += c.nodes;
    total.edges += c.edges;
    total.configs += c.configs;
  }
  std::snprintf(buf, sizeof(buf), "%-24s %8lld %12lld %12lld %12lld\n", "total",
                static_cast<long long>(total.graphs), static_cast<long long>(total.nodes),
                static_cast<long long>(total.edges), static_cast<long long>(total.configs));
  out += buf;
  std::snprintf(buf, sizeof(buf), "files: %lld read, %lld skipped; output: %s\n",
                static_cast<long long>(s.files), static_cast<long long>(s.skipped),
                s.output.c_str());
  return out + buf;
}

}  // namespace tpugraphs::ingest
