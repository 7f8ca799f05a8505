// FNV-1a, the non-cryptographic hash of every value the project stores or derives streams from:
// seed derivation (common/rng.h), the data fingerprint of a model file, and equality keys of
// configurations (train/config_sampling.h, tune/search_space.h, ingest/layout_candidates.h).
// Values are stored in model files and decide random streams, so they must never change.
// WordHash, below, is for keys that never leave a process, where FNV-1a's byte at a time is slow.
// The round and the prime are 64-bit FNV-1a's (Fowler, Noll, Vo;
// http://www.isthe.com/chongo/tech/comp/fnv/); the project's offset basis, 1469598103934665603, is
// the published one (14695981039346656037) without its last digit, as every copy of the hash had it
// before they were gathered here, and so it stays. Hashes are as good with any basis;
// tests/common/hash_test.cc checks the round on the published vectors.
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_COMMON_HASH_H_
#define TPUGRAPHS_COMMON_HASH_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace tpugraphs {

inline constexpr uint64_t kFnv1aOffsetBasis = 1469598103934665603ULL;  // the project's
inline constexpr uint64_t kFnv1aPublishedOffsetBasis = 14695981039346656037ULL;
inline constexpr uint64_t kFnv1aPrime = 1099511628211ULL;

// One FNV-1a round: `unit` (a byte, or a wider word where a caller hashes words) into `h`.
inline constexpr uint64_t Fnv1aStep(uint64_t h, uint64_t unit) { return (h ^ unit) * kFnv1aPrime; }

// FNV-1a of `n` bytes, continuing from `h`.
inline uint64_t Fnv1a(const void* data, size_t n, uint64_t h = kFnv1aOffsetBasis) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = Fnv1aStep(h, bytes[i]);
  return h;
}

// FNV-1a of a string's bytes, continuing from `h`.
inline uint64_t Fnv1a(std::string_view s, uint64_t h = kFnv1aOffsetBasis) {
  return Fnv1a(s.data(), s.size(), h);
}

// A 64-bit hash of `n` bytes read eight at a time (multiply and xor-shift per word, the last
// n % 8 bytes zero-padded), continuing from `h`: about ten times FNV-1a's speed on long inputs,
// for in-memory equality keys only (`tune`'s set of configurations already scored). Never
// stored: its values may change. data may be null when n is 0.
inline uint64_t WordHash(const void* data, size_t n, uint64_t h = kFnv1aOffsetBasis) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ULL;  // 2^64 / golden ratio, odd
  const auto mix = [](uint64_t x, uint64_t w) {
    x = (x ^ w) * kMul;
    return x ^ (x >> 29);
  };
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix(h, w);
  }
  uint64_t tail = 0;
  if (i < n) std::memcpy(&tail, p + i, n - i);
  return mix(h, tail ^ (static_cast<uint64_t>(n) << 56));  // the length: "a" and "a\0" differ
}

}  // namespace tpugraphs

#endif  // TPUGRAPHS_COMMON_HASH_H_
