#include "tpugraphs/eval/metrics.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

namespace tpugraphs::eval {
namespace {

constexpr double kUndefined = std::numeric_limits<double>::quiet_NaN();

// Pairs among the members of a run of `len` equal values.
inline int64_t RunPairs(int64_t len) { return len * (len - 1) / 2; }

// Sorts `v` ascending with a bottom-up merge sort and returns the number of inversions (pairs
// i < j with v[i] > v[j], equal values not counted). `buf` is scratch of the same size.
template <typename T>
int64_t MergeSortCountInversions(std::vector<T>& v, std::vector<T>& buf) {
  const int64_t n = static_cast<int64_t>(v.size());
  int64_t inversions = 0;
  // Insertion-sort short runs first (inversions counted one shift at a time): fewer passes.
  constexpr int64_t kRun = 16;
  for (int64_t start = 0; start < n; start += kRun) {
    const int64_t end = std::min(n, start + kRun);
    for (int64_t i = start + 1; i < end; ++i) {
      const T value = v[i];
      int64_t j = i;
      while (j > start && v[j - 1] > value) {
        v[j] = v[j - 1];
        --j;
      }
      inversions += i - j;
      v[j] = value;
    }
  }
  T* src = v.data();
  T* dst = buf.data();
  for (int64_t width = kRun; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      const int64_t mid = std::min(n, lo + width);
      const int64_t hi = std::min(n, lo + 2 * width);
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        if (src[j] < src[i]) {
          // src[j] jumps over every remaining left element, each of which is larger.
          inversions += mid - i;
          dst[k++] = src[j++];
        } else {
          dst[k++] = src[i++];
        }
      }
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    std::swap(src, dst);
  }
  if (src != v.data()) std::copy(src, src + n, v.data());
  return inversions;
}

// Order-preserving map of a non-NaN double to an unsigned integer: a < b iff Key(a) < Key(b),
// a == b iff Key(a) == Key(b) (-0.0 and +0.0 map to the same key).
inline uint64_t OrderedKey(double d) {
  if (d == 0) d = 0.0;
  const uint64_t bits = std::bit_cast<uint64_t>(d);
  return (bits >> 63) != 0 ? ~bits : (bits | (uint64_t{1} << 63));
}

struct XY {
  uint64_t x, y;  // OrderedKey of score and runtime
};

// Sorts by (x, y) with a stable LSD radix sort on 8-bit digits: the 8 digits of y, then the 8
// digits of x. Passes whose digit is the same for every element are skipped (e.g. the low
// mantissa bytes of integer runtimes), so typical inputs need far fewer than 16 passes.
void RadixSortXY(std::vector<XY>& v, std::vector<XY>& tmp) {
  const size_t n = v.size();
  std::vector<std::array<size_t, 256>> hist(16);
  for (auto& h : hist) h.fill(0);
  for (const XY& k : v) {
    for (int d = 0; d < 8; ++d) {
      ++hist[d][(k.y >> (8 * d)) & 255];
      ++hist[8 + d][(k.x >> (8 * d)) & 255];
    }
  }
  XY* src = v.data();
  XY* dst = tmp.data();
  for (int pass = 0; pass < 16; ++pass) {
    auto& h = hist[pass];
    if (std::any_of(h.begin(), h.end(), [n](size_t c) { return c == n; })) continue;
    size_t offset = 0;
    for (auto& c : h) {
      const size_t count = c;
      c = offset;
      offset += count;
    }
    const int shift = 8 * (pass & 7);
    if (pass < 8) {
      for (size_t i = 0; i < n; ++i) dst[h[(src[i].y >> shift) & 255]++] = src[i];
    } else {
      for (size_t i = 0; i < n; ++i) dst[h[(src[i].x >> shift) & 255]++] = src[i];
    }
    std::swap(src, dst);
  }
  if (src != v.data()) std::copy(src, src + n, v.data());
}

}  // namespace

PairCounts CountPairs(std::span<const double> x, std::span<const double> y) {
  assert(x.size() == y.size());
  PairCounts c;
  const int64_t n = static_cast<int64_t>(x.size());
  c.n = n;
  c.total = RunPairs(n);
  if (n < 2) return c;

  std::vector<XY> xy(n), tmp(n);
  for (int64_t i = 0; i < n; ++i) xy[i] = {OrderedKey(x[i]), OrderedKey(y[i])};
  if (n < 1024) {  // below this the 16 radix histograms cost more than a comparison sort
    std::sort(xy.begin(), xy.end(),
              [](const XY& a, const XY& b) { return a.x < b.x || (a.x == b.x && a.y < b.y); });
  } else {
    RadixSortXY(xy, tmp);
  }

  // Runs of equal x, and within them runs of equal (x, y).
  int64_t x_run = 1, xy_run = 1;
  for (int64_t i = 1; i < n; ++i) {
    if (xy[i].x == xy[i - 1].x) {
      ++x_run;
      if (xy[i].y == xy[i - 1].y) {
        ++xy_run;
      } else {
        c.joint_ties += RunPairs(xy_run);
        xy_run = 1;
      }
    } else {
      c.x_ties += RunPairs(x_run);
      c.joint_ties += RunPairs(xy_run);
      x_run = xy_run = 1;
    }
  }
  c.x_ties += RunPairs(x_run);
  c.joint_ties += RunPairs(xy_run);

  // In (x, y) order, a pair i < j with y_i > y_j has x_i < x_j (equal x would be sorted by y):
  // it is exactly a discordant pair. Count them as the inversions of the y sequence.
  std::vector<uint64_t> ys(n), buf(n);
  for (int64_t i = 0; i < n; ++i) ys[i] = xy[i].y;
  c.discordant = MergeSortCountInversions(ys, buf);

  int64_t y_run = 1;
  for (int64_t i = 1; i < n; ++i) {
    if (ys[i] == ys[i - 1]) {
      ++y_run;
    } else {
      c.y_ties += RunPairs(y_run);
      y_run = 1;
    }
  }
  c.y_ties += RunPairs(y_run);
  return c;
}

namespace {

// tau-b from the pair counts, with scipy's arithmetic (scipy/stats/_stats_py.py, kendalltau):
// (tot - xtie - ytie + ntie - 2 dis) / sqrt(tot - xtie) / sqrt(tot - ytie), clipped to [-1, 1].
double TauBFromCounts(const PairCounts& c) {
  if (c.n < 2 || c.x_ties == c.total || c.y_ties == c.total) return kUndefined;
  const int64_t con_minus_dis = c.total - c.x_ties - c.y_ties + c.joint_ties - 2 * c.discordant;
  const double tau = static_cast<double>(con_minus_dis) /
                     std::sqrt(static_cast<double>(c.total - c.x_ties)) /
                     std::sqrt(static_cast<double>(c.total - c.y_ties));
  return std::clamp(tau, -1.0, 1.0);
}

// OPA from the pair counts with x = scores, y = runtimes: every unordered pair with y_i != y_j
// is one ordered pair with y_i > y_j; it is correct iff it is concordant.
double OpaFromCounts(const PairCounts& c) {
  const int64_t ordered = c.total - c.y_ties;
  if (ordered == 0) return kUndefined;
  return static_cast<double>(c.concordant()) / static_cast<double>(ordered);
}

bool ScoreLess(std::span<const double> scores, int64_t a, int64_t b) {
  return scores[a] < scores[b] || (scores[a] == scores[b] && a < b);
}

}  // namespace

double KendallTauB(std::span<const double> x, std::span<const double> y) {
  return TauBFromCounts(CountPairs(x, y));
}

double OrderedPairAccuracy(std::span<const double> scores, std::span<const double> runtimes) {
  return OpaFromCounts(CountPairs(scores, runtimes));
}

std::vector<int64_t> TopKByScore(std::span<const double> scores, int64_t k) {
  const int64_t n = static_cast<int64_t>(scores.size());
  k = std::clamp<int64_t>(k, 0, n);
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), int64_t{0});
  auto less = [&](int64_t a, int64_t b) { return ScoreLess(scores, a, b); };
  if (k < n) std::nth_element(idx.begin(), idx.begin() + k, idx.end(), less);
  idx.resize(k);
  std::sort(idx.begin(), idx.end(), less);
  return idx;
}

std::vector<int64_t> RankByScore(std::span<const double> scores) {
  std::vector<int64_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), int64_t{0});
  std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return ScoreLess(scores, a, b); });
  return idx;
}

double TopKError(std::span<const double> scores, std::span<const double> runtimes, int64_t k) {
  assert(scores.size() == runtimes.size());
  if (scores.empty() || k <= 0) return kUndefined;
  const double best = *std::min_element(runtimes.begin(), runtimes.end());
  if (!(best > 0)) return kUndefined;
  double picked = std::numeric_limits<double>::infinity();
  for (int64_t i : TopKByScore(scores, k)) picked = std::min(picked, runtimes[i]);
  return picked / best - 1.0;
}

namespace reference {

PairCounts CountPairs(std::span<const double> x, std::span<const double> y) {
  PairCounts c;
  const int64_t n = static_cast<int64_t>(x.size());
  c.n = n;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = i + 1; j < n; ++j) {
      ++c.total;
      const bool tx = x[i] == x[j], ty = y[i] == y[j];
      c.x_ties += tx;
      c.y_ties += ty;
      c.joint_ties += tx && ty;
      if ((x[i] < x[j] && y[i] > y[j]) || (x[i] > x[j] && y[i] < y[j])) ++c.discordant;
    }
  }
  return c;
}

double KendallTauB(std::span<const double> x, std::span<const double> y) {
  // Straight from the definition, independent of PairCounts::concordant().
  const int64_t n = static_cast<int64_t>(x.size());
  int64_t con = 0, dis = 0, only_x = 0, only_y = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = i + 1; j < n; ++j) {
      const double dx = x[i] - x[j], dy = y[i] - y[j];
      if (dx == 0 && dy == 0) continue;
      if (dx == 0) {
        ++only_x;
      } else if (dy == 0) {
        ++only_y;
      } else if ((dx > 0) == (dy > 0)) {
        ++con;
      } else {
        ++dis;
      }
    }
  }
  // Pairs not tied in x = con + dis + only_y; not tied in y = con + dis + only_x.
  const double nx = static_cast<double>(con + dis + only_y);
  const double ny = static_cast<double>(con + dis + only_x);
  if (nx == 0 || ny == 0) return kUndefined;
  return std::clamp(static_cast<double>(con - dis) / std::sqrt(nx) / std::sqrt(ny), -1.0, 1.0);
}

double OrderedPairAccuracy(std::span<const double> scores, std::span<const double> runtimes) {
  const int64_t n = static_cast<int64_t>(scores.size());
  int64_t pairs = 0, correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      if (runtimes[i] > runtimes[j]) {
        ++pairs;
        if (scores[i] > scores[j]) ++correct;
      }
    }
  }
  if (pairs == 0) return kUndefined;
  return static_cast<double>(correct) / static_cast<double>(pairs);
}

double TopKError(std::span<const double> scores, std::span<const double> runtimes, int64_t k) {
  const int64_t n = static_cast<int64_t>(scores.size());
  if (n == 0 || k <= 0) return kUndefined;
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return scores[a] < scores[b]; });
  double best = runtimes[0];
  for (int64_t i = 1; i < n; ++i) best = std::min(best, runtimes[i]);
  if (!(best > 0)) return kUndefined;
  double picked = runtimes[order[0]];
  for (int64_t i = 1; i < std::min(k, n); ++i) picked = std::min(picked, runtimes[order[i]]);
  return picked / best - 1.0;
}

}  // namespace reference
}  // namespace tpugraphs::eval
