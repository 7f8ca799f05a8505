// Seeded random numbers that are identical on every platform and thread count.
//
// One master seed (--seed) feeds every random decision. Each consumer derives its own stream with
// DeriveSeed(master, "purpose", index...), so adding a consumer never shifts another's numbers,
// and work split over threads draws from per-item streams, never from a shared one.
// The uniform and normal transforms are our own: std::uniform_real_distribution and
// std::normal_distribution are implementation-defined and differ between standard libraries.
//
// Thread-safety: an Rng object is not thread-safe; give each thread or work item its own.
#ifndef TPUGRAPHS_COMMON_RNG_H_
#define TPUGRAPHS_COMMON_RNG_H_

#include <cstdint>
#include <string_view>
#include <vector>

namespace tpugraphs {

// Mixes a master seed with a purpose string and up to two indices (SplitMix64 finaliser over an
// FNV-1a hash of the purpose).
uint64_t DeriveSeed(uint64_t master, std::string_view purpose, uint64_t a = 0, uint64_t b = 0);

// xoshiro256** (Blackman & Vigna), seeded through SplitMix64.
class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t NextU64();
  // Uniform in [0, 1) with 53 random bits.
  double Uniform();
  // Uniform integer in [0, n). REQUIRES: n > 0. Unbiased (rejection sampling).
  uint64_t UniformInt(uint64_t n);
  // Standard normal (Marsaglia polar method).
  double Normal();
  // Shuffles v in place (Fisher-Yates with UniformInt).
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[UniformInt(i)]);
  }
  // k distinct indices from [0, n), in random order. REQUIRES: k <= n.
  std::vector<int64_t> SampleWithoutReplacement(int64_t n, int64_t k);

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace tpugraphs

#endif  // TPUGRAPHS_COMMON_RNG_H_
