#include "tpugraphs/common/rng.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <set>
#include <stdexcept>
#include <thread>

#include "tpugraphs/common/thread_pool.h"

namespace tpugraphs {
namespace {

TEST(RngTest, SameSeedSameStream) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.NextU64();
    EXPECT_EQ(x, b.NextU64());
    EXPECT_NE(x, c.NextU64());
  }
}

TEST(RngTest, DerivedSeedsDifferByPurposeAndIndex) {
  EXPECT_NE(DeriveSeed(1, "init"), DeriveSeed(1, "shuffle"));
  EXPECT_NE(DeriveSeed(1, "init", 0), DeriveSeed(1, "init", 1));
  EXPECT_NE(DeriveSeed(1, "init", 0, 0), DeriveSeed(1, "init", 0, 1));
  EXPECT_EQ(DeriveSeed(7, "x", 3, 4), DeriveSeed(7, "x", 3, 4));
}

TEST(RngTest, UniformAndNormalMoments) {
  Rng r(1);
  const int n = 200000;
  double su = 0, sn = 0, sn2 = 0;
  for (int i = 0; i < n; ++i) {
    double u = r.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    su += u;
    double z = r.Normal();
    sn += z;
    sn2 += z * z;
  }
  EXPECT_NEAR(su / n, 0.5, 0.005);
  EXPECT_NEAR(sn / n, 0.0, 0.01);
  EXPECT_NEAR(sn2 / n, 1.0, 0.02);
}

TEST(RngTest, SampleWithoutReplacementIsDistinct) {
  Rng r(5);
  for (int64_t k : {0, 1, 10, 99, 100}) {
    auto s = r.SampleWithoutReplacement(100, k);
    ASSERT_EQ(static_cast<int64_t>(s.size()), k);
    std::set<int64_t> uniq(s.begin(), s.end());
    EXPECT_EQ(static_cast<int64_t>(uniq.size()), k);
    for (auto x : s) {
      EXPECT_GE(x, 0);
      EXPECT_LT(x, 100);
    }
  }
}

TEST(ThreadPoolTest, ShardResultsIndependentOfThreadCount) {
  auto run = [](int threads) {
    ThreadPool pool(threads);
    const int64_t n = 10007, grain = 100;
    std::vector<double> partial(ThreadPool::NumShards(n, grain), 0.0);
    pool.ParallelFor(n, grain, [&](int64_t shard, int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) partial[shard] += std::sin(static_cast<double>(i));
    });
    double total = 0;
    for (double p : partial) total += p;
    return total;
  };
  double one = run(1);
  EXPECT_EQ(one, run(2));
  EXPECT_EQ(one, run(4));
}

TEST(ThreadPoolTest, ExceptionIsRethrownOnCaller) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.ParallelFor(100, 1,
                                [](int64_t s, int64_t, int64_t) {
                                  if (s == 57) throw std::runtime_error("boom");
                                }),
               std::runtime_error);
  // The pool stays usable.
  std::atomic<int64_t> count{0};
  pool.ParallelFor(100, 7, [&](int64_t, int64_t b, int64_t e) { count += e - b; });
  EXPECT_EQ(count.load(), 100);
}

// Many jobs back to back, of 2 to 40 shards, some while the workers poll and some after they
// have gone to sleep: every shard of every job runs exactly once, on the job it belongs to.
TEST(ThreadPoolTest, BackToBackJobsRunEachShardOnce) {
  for (int threads : {2, 3, 8}) {
    ThreadPool pool(threads);
    for (int job = 0; job < 3000; ++job) {
      const int64_t n = 2 + job % 39;
      std::vector<std::atomic<int>> runs(n);
      for (auto& r : runs) r.store(0);
      pool.ParallelFor(n, 1, [&](int64_t s, int64_t b, int64_t e) {
        ASSERT_EQ(e, b + 1);
        ASSERT_EQ(s, b);
        runs[b].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(runs[i].load(), 1) << "job " << job << " shard " << i;
      if (job % 500 == 499) {
        // Past the polling time: the next job wakes sleeping workers.
        std::this_thread::sleep_for(std::chrono::microseconds(3 * ThreadPool::kSpinMicros));
      }
    }
  }
}

// Two pools used in turn from one thread (the trainer's step pool and kernel pool).
TEST(ThreadPoolTest, TwoPoolsInTurn) {
  ThreadPool a(2), b(2);
  int64_t total = 0;
  for (int round = 0; round < 500; ++round) {
    std::vector<int64_t> pa(ThreadPool::NumShards(1000, 50)), pb(ThreadPool::NumShards(777, 10));
    a.ParallelFor(1000, 50, [&](int64_t s, int64_t lo, int64_t hi) { pa[s] = hi - lo; });
    b.ParallelFor(777, 10, [&](int64_t s, int64_t lo, int64_t hi) { pb[s] = hi - lo; });
    for (int64_t x : pa) total += x;
    for (int64_t x : pb) total += x;
  }
  EXPECT_EQ(total, 500 * (1000 + 777));
}

}  // namespace
}  // namespace tpugraphs
