// CRC-32 throughput (tools/bench/bench-crc32.sh): the library's Crc32 (zip.h) against zlib's
// crc32_z and, when the build has libdeflate, libdeflate_crc32, over buffers of 4 KiB to 16 MiB
// (the sizes of npz members and dataset frames). bytes_per_second is the figure to compare.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "tpugraphs/io/zip.h"

#ifdef TPUGRAPHS_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

namespace tpugraphs::io {
namespace {

std::vector<unsigned char> Bytes(size_t n) {
  std::vector<unsigned char> v(n);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<unsigned char>(x >> 24);
  }
  return v;
}

template <uint32_t (*F)(uint32_t, const void*, size_t)>
void BM_Crc(benchmark::State& state) {
  const std::vector<unsigned char> buf = Bytes(static_cast<size_t>(state.range(0)));
  uint32_t crc = 0;
  for (auto _ : state) {
    crc = F(crc, buf.data(), buf.size());
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

#ifdef TPUGRAPHS_HAVE_LIBDEFLATE
uint32_t Libdeflate(uint32_t crc, const void* data, size_t n) {
  return libdeflate_crc32(crc, data, n);
}
BENCHMARK(BM_Crc<Libdeflate>)
    ->Name("libdeflate_crc32")
    ->RangeMultiplier(16)
    ->Range(4 << 10, 16 << 20);
#endif
BENCHMARK(BM_Crc<Crc32>)->Name("tpugraphs_Crc32")->RangeMultiplier(16)->Range(4 << 10, 16 << 20);
BENCHMARK(BM_Crc<Crc32Zlib>)->Name("zlib_crc32_z")->RangeMultiplier(16)->Range(4 << 10, 16 << 20);

}  // namespace
}  // namespace tpugraphs::io

BENCHMARK_MAIN();
