// CRC-32 (the zip/zlib polynomial 0x04C11DB7, bit-reflected) for Crc32() in zip.h.
//
// On x86-64 CPUs with PCLMULQDQ the bulk of a buffer is folded 64 bytes at a time with
// carry-less multiplication, following "Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ Instruction" (Gopal et al., Intel, 2009); the folding constants x^k mod P(x) for the
// reflected polynomial (the values also used by the Linux kernel's crc32-pclmul) are facts of the
// polynomial. zlib's crc32_z handles short inputs, tails, and other CPUs. A unit test checks the
// result against zlib for many lengths, alignments and starting values.
#include <zlib.h>

#include <cstdint>
#include <cstring>

#include "tpugraphs/io/zip.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TPUG_HAVE_PCLMUL_CRC 1
#endif

namespace tpugraphs::io {
namespace {

#ifdef TPUG_HAVE_PCLMUL_CRC

#define TPUG_CLMUL_TARGET __attribute__((target("pclmul,sse4.1")))

TPUG_CLMUL_TARGET inline __m128i Load(const unsigned char* q) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
}

// x * k folded forward and added to the next block: x.lo * k.lo ^ x.hi * k.hi ^ next.
TPUG_CLMUL_TARGET inline __m128i Fold(__m128i x, __m128i k, __m128i next) {
  const __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
  const __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

// Folds `n` bytes (n >= 64, a multiple of 16) into the raw (not pre/post-inverted) CRC `crc`.
TPUG_CLMUL_TARGET uint32_t FoldPclmul(uint32_t crc, const unsigned char* p, size_t n) {
  // x^(4*128+32), x^(4*128-32) mod P: fold 512 bits forward.
  const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
  // x^(128+32), x^(128-32) mod P: fold 128 bits forward.
  const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
  // x^64 mod P: the last 64 -> 32 bit fold.
  const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);
  // Barrett reduction: P'(x) (low) and mu = floor(x^64 / P(x)) (high), both reflected.
  const __m128i poly_mu = _mm_set_epi64x(0x1F7011641LL, 0x1DB710641LL);
  const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);

  __m128i x0 = _mm_xor_si128(Load(p), _mm_cvtsi32_si128(static_cast<int>(crc)));
  __m128i x1 = Load(p + 16), x2 = Load(p + 32), x3 = Load(p + 48);
  p += 64;
  n -= 64;
  while (n >= 64) {
    x0 = Fold(x0, k1k2, Load(p));
    x1 = Fold(x1, k1k2, Load(p + 16));
    x2 = Fold(x2, k1k2, Load(p + 32));
    x3 = Fold(x3, k1k2, Load(p + 48));
    p += 64;
    n -= 64;
  }
  __m128i x = Fold(x0, k3k4, x1);
  x = Fold(x, k3k4, x2);
  x = Fold(x, k3k4, x3);
  while (n >= 16) {
    x = Fold(x, k3k4, Load(p));
    p += 16;
    n -= 16;
  }
  // 128 -> 64 bits (appending 32 zero bits), then 64 -> 32 with k5.
  x = _mm_xor_si128(_mm_clmulepi64_si128(k3k4, x, 0x01), _mm_srli_si128(x, 8));
  x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, mask32), k5, 0x00), _mm_srli_si128(x, 4));
  // Barrett reduction to the final 32 bits.
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, mask32), poly_mu, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), poly_mu, 0x00);
  x = _mm_xor_si128(x, t);
  return static_cast<uint32_t>(_mm_extract_epi32(x, 1));
}

bool CpuHasPclmul() {
  static const bool has = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return has;
}

#endif  // TPUG_HAVE_PCLMUL_CRC

}  // namespace

uint32_t Crc32(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
#ifdef TPUG_HAVE_PCLMUL_CRC
  if (n >= 64 && CpuHasPclmul()) {
    const size_t bulk = n & ~size_t{15};
    // zlib's convention: the register is inverted before and after.
    crc = ~FoldPclmul(~crc, p, bulk);
    p += bulk;
    n -= bulk;
  }
#endif
  return static_cast<uint32_t>(::crc32_z(crc, p, n));
}

uint32_t Crc32Zlib(uint32_t crc, const void* data, size_t n) {
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), n));
}

}  // namespace tpugraphs::io
