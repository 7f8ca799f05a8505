#include "tpugraphs/common/rng.h"

#include <cmath>
#include <unordered_set>

#include "tpugraphs/common/hash.h"

namespace tpugraphs {
namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

uint64_t DeriveSeed(uint64_t master, std::string_view purpose, uint64_t a, uint64_t b) {
  uint64_t x = master ^ Fnv1a(purpose);
  uint64_t out = SplitMix64(x);
  x ^= a * 0xd6e8feb86659fd93ULL;
  out ^= SplitMix64(x);
  x ^= b * 0xa0761d6478bd642fULL;
  out ^= SplitMix64(x);
  return out;
}

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = SplitMix64(x);
}

uint64_t Rng::NextU64() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

uint64_t Rng::UniformInt(uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = NextU64();
  } while (x >= limit);
  return x % n;
}

double Rng::Normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u, v, s;
  do {
    u = 2.0 * Uniform() - 1.0;
    v = 2.0 * Uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double m = std::sqrt(-2.0 * std::log(s) / s);
  spare_ = v * m;
  has_spare_ = true;
  return u * m;
}

std::vector<int64_t> Rng::SampleWithoutReplacement(int64_t n, int64_t k) {
  std::vector<int64_t> out;
  out.reserve(k);
  if (k * 4 >= n) {
    std::vector<int64_t> all(n);
    for (int64_t i = 0; i < n; ++i) all[i] = i;
    for (int64_t i = 0; i < k; ++i) {
      int64_t j = i + static_cast<int64_t>(UniformInt(n - i));
      std::swap(all[i], all[j]);
      out.push_back(all[i]);
    }
    return out;
  }
  std::unordered_set<int64_t> seen;
  while (static_cast<int64_t>(out.size()) < k) {
    int64_t x = static_cast<int64_t>(UniformInt(n));
    if (seen.insert(x).second) out.push_back(x);
  }
  return out;
}

}  // namespace tpugraphs
