#include "tpugraphs/common/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "tpugraphs/common/huge_pages.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tpugraphs {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

// Polls `done` for up to ThreadPool::kSpinMicros, true as soon as it holds: with a pause
// instruction for the first kPauseMicros, then yielding the core to any other runnable thread
// (another pool's workers, a reading-ahead thread) between polls.
template <typename Done>
bool SpinUntil(const Done& done) {
  using Clock = std::chrono::steady_clock;
  constexpr int64_t kPauseMicros = 50;
  const auto start = Clock::now();
  const auto pause_until = start + std::chrono::microseconds(kPauseMicros);
  const auto until = start + std::chrono::microseconds(ThreadPool::kSpinMicros);
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    const auto now = Clock::now();
    if (now >= until) return done();
    if (now >= pause_until) std::this_thread::yield();
  }
}

constexpr uint64_t kShardMask = 0xffffffffu;

}  // namespace

int ThreadPool::HardwareThreads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(ResolveThreads(num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

int64_t ThreadPool::NumShards(int64_t n, int64_t grain) {
  if (n <= 0) return 0;
  grain = std::max<int64_t>(grain, 1);
  return (n + grain - 1) / grain;
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const Fn& fn) {
  grain = std::max<int64_t>(grain, 1);
  const int64_t shards = NumShards(n, grain);
  if (shards == 0) return;
  if (workers_.empty() || shards == 1 || shards >= static_cast<int64_t>(kShardMask)) {
    for (int64_t s = 0; s < shards; ++s) fn(s, s * grain, std::min(n, (s + 1) * grain));
    return;
  }
  // Close the last job's ticket first: a worker still holding it (every shard claimed) must not
  // claim a further shard once it reads this job's larger shard count.
  ticket_.store((static_cast<uint64_t>(generation_) << 32) | kShardMask, std::memory_order_relaxed);
  // The job, its shard count last (release: a worker that reads the count sees the ticket
  // closed), then its ticket (release: a worker that reads the ticket sees the job).
  job_.store(&fn, std::memory_order_relaxed);
  job_n_.store(n, std::memory_order_relaxed);
  job_grain_.store(grain, std::memory_order_relaxed);
  shards_done_.store(0, std::memory_order_relaxed);
  job_shards_.store(shards, std::memory_order_release);
  const uint32_t generation = ++generation_;
  ticket_.store(static_cast<uint64_t>(generation) << 32, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sleepers_ > 0) cv_.notify_all();
  }
  RunShards(generation);  // the calling thread works too
  const auto all_done = [&] { return shards_done_.load(std::memory_order_acquire) == shards; };
  if (!SpinUntil(all_done)) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeps_ = true;
    done_cv_.wait(lock, all_done);
    caller_sleeps_ = false;
  }
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lock(mu_);
    err = error_;
    error_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

void ThreadPool::RunShards(uint32_t generation) {
  uint64_t t = ticket_.load(std::memory_order_acquire);
  while (true) {
    if ((t >> 32) != generation) return;
    const int64_t shards = job_shards_.load(std::memory_order_acquire);
    const int64_t s = static_cast<int64_t>(t & kShardMask);
    if (s >= shards) return;
    // The claim succeeds only while the ticket is still this job's: its parameters then stay
    // until every shard, this one included, is done.
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
      continue;
    }
    const Fn* fn = job_.load(std::memory_order_relaxed);
    const int64_t n = job_n_.load(std::memory_order_relaxed);
    const int64_t grain = job_grain_.load(std::memory_order_relaxed);
    try {
      (*fn)(s, s * grain, std::min(n, (s + 1) * grain));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
    if (shards_done_.fetch_add(1, std::memory_order_acq_rel) + 1 == shards) {
      std::lock_guard<std::mutex> lock(mu_);
      if (caller_sleeps_) done_cv_.notify_all();
    }
    t = ticket_.load(std::memory_order_acquire);
  }
}

void ThreadPool::WorkerLoop() {
  AdviseThreadHeapHugePages();
  uint32_t seen = 0;
  const auto news = [&] {
    return stop_.load(std::memory_order_acquire) ||
           static_cast<uint32_t>(ticket_.load(std::memory_order_acquire) >> 32) != seen;
  };
  while (true) {
    if (!SpinUntil(news)) {
      std::unique_lock<std::mutex> lock(mu_);
      ++sleepers_;
      cv_.wait(lock, news);
      --sleepers_;
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = static_cast<uint32_t>(ticket_.load(std::memory_order_acquire) >> 32);
    RunShards(seen);
  }
}

}  // namespace tpugraphs
