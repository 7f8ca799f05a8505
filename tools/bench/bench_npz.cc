// Times reading every array of .npz files with our NpzReader (driven by tools/bench/bench-npz.py,
// which times numpy's np.load on the same files in the same run).
//
// Usage: bench_npz [--repeat N] [--chunked ELEMENTS] [--inflate zlib|libdeflate] [--threads N]
//                  FILE...
//        bench_npz --crc-speed      (prints {"crc32_gbps": ours, "zlib_crc32_gbps": zlib})
//   --repeat N           read each file N times and report the best and median (default 5)
//   --chunked ELEMENTS   stream every array with ReadChunked in chunks of ELEMENTS instead of
//                        reading whole arrays (default 0: whole arrays, all kept in memory until
//                        the file is done, as np.load into a dict would)
//   --inflate BACKEND    how deflated members are inflated (default: libdeflate when the build
//                        has it, else zlib)
//   --threads N          read the arrays of a file on N threads, one member per task (default 1)
// Prints one JSON object per file on stdout:
//   {"file": ..., "arrays": ..., "elements": ..., "bytes": ..., "best_s": ..., "median_s": ...,
//    "peak_rss_bytes": ...}
// peak_rss_bytes is this process's peak RSS after the file (run one file per process to
// attribute it). Errors go to stderr with exit code 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/io/npz.h"

namespace tpugraphs::io {
namespace {

struct FileResult {
  int arrays = 0;
  int64_t elements = 0;
  uint64_t bytes = 0;  // decoded array bytes
};

template <typename T>
Status ReadOne(const NpzReader& r, const std::string& key, int64_t chunked, FileResult* res,
               std::vector<std::shared_ptr<void>>* keep) {
  if (chunked > 0) {
    int64_t n = 0;
    volatile T sink{};
    TPUG_RETURN_IF_ERROR(r.ReadChunked<T>(key, chunked, [&](const T* d, int64_t c, int64_t) {
      n += c;
      if (c > 0) sink = d[c - 1];
      return Status::Ok();
    }));
    (void)sink;
    res->elements += n;
    res->bytes += static_cast<uint64_t>(n) * sizeof(T);
  } else {
    TPUG_ASSIGN_OR_RETURN(NdArray<T> a, r.Read<T>(key));
    res->elements += static_cast<int64_t>(a.data.size());
    res->bytes += a.data.size() * sizeof(T);
    keep->push_back(std::make_shared<NdArray<T>>(std::move(a)));
  }
  return Status::Ok();
}

Status ReadKey(const NpzReader& r, const std::string& key, int64_t chunked, FileResult* res,
               std::vector<std::shared_ptr<void>>* keep) {
  TPUG_ASSIGN_OR_RETURN(NpyHeader h, r.Header(key));
  switch (h.dtype) {
    case DType::kBool:
      return ReadOne<bool>(r, key, chunked, res, keep);
    case DType::kInt8:
      return ReadOne<int8_t>(r, key, chunked, res, keep);
    case DType::kUInt8:
      return ReadOne<uint8_t>(r, key, chunked, res, keep);
    case DType::kInt16:
      return ReadOne<int16_t>(r, key, chunked, res, keep);
    case DType::kUInt16:
      return ReadOne<uint16_t>(r, key, chunked, res, keep);
    case DType::kInt32:
      return ReadOne<int32_t>(r, key, chunked, res, keep);
    case DType::kUInt32:
      return ReadOne<uint32_t>(r, key, chunked, res, keep);
    case DType::kInt64:
      return ReadOne<int64_t>(r, key, chunked, res, keep);
    case DType::kUInt64:
      return ReadOne<uint64_t>(r, key, chunked, res, keep);
    case DType::kFloat32:
      return ReadOne<float>(r, key, chunked, res, keep);
    case DType::kFloat64:
      return ReadOne<double>(r, key, chunked, res, keep);
  }
  return InternalError(key + ": unknown dtype");
}

// Reads every array of the file; with a pool of several threads the members are read in
// parallel, one per task.
Status ReadAll(const std::string& path, int64_t chunked, ThreadPool* pool, FileResult* res) {
  TPUG_ASSIGN_OR_RETURN(auto r, NpzReader::Open(path));
  const std::vector<std::string> keys = r->Keys();
  std::vector<FileResult> parts(keys.size());
  std::vector<Status> status(keys.size());
  std::vector<std::vector<std::shared_ptr<void>>> keep(keys.size());  // alive until the end
  pool->ParallelFor(static_cast<int64_t>(keys.size()), 1, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) status[i] = ReadKey(*r, keys[i], chunked, &parts[i], &keep[i]);
  });
  for (size_t i = 0; i < keys.size(); ++i) {
    TPUG_RETURN_IF_ERROR(status[i]);
    ++res->arrays;
    res->elements += parts[i].elements;
    res->bytes += parts[i].bytes;
  }
  return Status::Ok();
}

// CRC-32 throughput of ours and zlib's on 256 MiB of pseudo-random bytes, best of 5.
int CrcSpeed() {
  std::vector<unsigned char> buf(size_t{256} << 20);
  uint64_t x = 88172645463325252ull;
  for (auto& b : buf) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<unsigned char>(x);
  }
  auto best = [&](uint32_t (*fn)(uint32_t, const void*, size_t), uint32_t* out) {
    double t_best = 1e30;
    for (int k = 0; k < 5; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      *out = fn(0, buf.data(), buf.size());
      auto t1 = std::chrono::steady_clock::now();
      t_best = std::min(t_best, std::chrono::duration<double>(t1 - t0).count());
    }
    return static_cast<double>(buf.size()) / t_best / 1e9;
  };
  uint32_t a = 0, b = 0;
  const double ours = best(&Crc32, &a), zlib = best(&Crc32Zlib, &b);
  if (a != b) {
    std::fprintf(stderr, "bench_npz: CRC mismatch %08x vs %08x\n", a, b);
    return 1;
  }
  std::printf("{\"crc32_gbps\": %.3f, \"zlib_crc32_gbps\": %.3f}\n", ours, zlib);
  return 0;
}

int Main(int argc, char** argv) {
  int repeat = 5;
  int threads = 1;
  int64_t chunked = 0;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--repeat" || a == "--chunked" || a == "--threads") && i + 1 < argc) {
      if (a == "--repeat") {
        repeat = std::max(1, std::atoi(argv[++i]));
      } else if (a == "--threads") {
        threads = std::max(1, std::atoi(argv[++i]));
      } else {
        chunked = std::max<int64_t>(0, std::atoll(argv[++i]));
      }
    } else if (a == "--inflate" && i + 1 < argc) {
      const std::string b = argv[++i];
      if (b == "zlib") {
        SetDefaultInflateBackend(InflateBackend::kZlib);
      } else if (b == "libdeflate" && LibdeflateAvailable()) {
        SetDefaultInflateBackend(InflateBackend::kLibdeflate);
      } else {
        std::fprintf(stderr, "bench_npz: --inflate %s is not available in this build\n", b.c_str());
        return 2;
      }
    } else if (a == "--crc-speed") {
      return CrcSpeed();
    } else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: bench_npz [--repeat N] [--chunked ELEMENTS] [--inflate zlib|libdeflate]\n"
          "                 [--threads N] FILE...\n"
          "       bench_npz --crc-speed\n");
      return 0;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "bench_npz: no files given (see --help)\n");
    return 1;
  }
  ThreadPool pool(threads);
  for (const std::string& f : files) {
    std::vector<double> times;
    FileResult res;
    for (int k = 0; k < repeat; ++k) {
      res = FileResult();
      auto t0 = std::chrono::steady_clock::now();
      Status s = ReadAll(f, chunked, &pool, &res);
      auto t1 = std::chrono::steady_clock::now();
      if (!s.ok()) {
        std::fprintf(stderr, "bench_npz: error: %s\n", s.message().c_str());
        return 1;
      }
      times.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    std::sort(times.begin(), times.end());
    std::printf(
        "{\"file\": \"%s\", \"arrays\": %d, \"elements\": %lld, \"bytes\": %llu, \"best_s\": "
        "%.6f, \"median_s\": %.6f, \"peak_rss_bytes\": %llu, \"inflate\": \"%s\", "
        "\"threads\": %d}\n",
        f.c_str(), res.arrays, static_cast<long long>(res.elements),
        static_cast<unsigned long long>(res.bytes), times.front(), times[times.size() / 2],
        static_cast<unsigned long long>(PeakRssBytes()),
        std::string(InflateBackendName(DefaultInflateBackend())).c_str(), pool.num_threads());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace tpugraphs::io

int main(int argc, char** argv) { return tpugraphs::io::Main(argc, argv); }
