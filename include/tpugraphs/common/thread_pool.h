// A fixed-size thread pool with deterministic work splitting.
//
// ParallelFor splits [0, n) into contiguous shards whose boundaries depend only on n and the
// requested grain, never on the thread count, so per-shard results merged in shard order are
// identical whatever --threads is. Exceptions thrown by a task are captured and rethrown on the
// calling thread after every shard has finished.
//
// Thread-safety: ParallelFor may be called from one thread at a time per pool.
#ifndef TPUGRAPHS_COMMON_THREAD_POOL_H_
#define TPUGRAPHS_COMMON_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tpugraphs {

class ThreadPool {
 public:
  // num_threads <= 0 means "all hardware threads". A pool of 1 runs everything inline.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Number of shards ParallelFor uses for n items with the given grain (items per shard).
  static int64_t NumShards(int64_t n, int64_t grain);

  // Calls fn(shard, begin, end) for every shard of [0, n); shard sizes are `grain` except the
  // last. Blocks until all shards are done.
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t shard, int64_t begin, int64_t end)>& fn);

  // Hardware concurrency (at least 1).
  static int HardwareThreads();
  // The thread count a run uses for a requested one: itself when positive, else every core.
  // The one place where 0 ("-j 0", TrainConfig.threads 0, ...) becomes the core count.
  static int ResolveThreads(int requested) { return requested > 0 ? requested : HardwareThreads(); }

  // How long an idle worker (and a caller waiting for the last shards) polls for work before
  // it sleeps on a condition variable. A training step of one graph calls ParallelFor a few
  // times per millisecond, with serial work of up to half a millisecond between (the loss, the
  // shared passes, the optimizer); a worker that slept there would be woken by a futex at the
  // next call, late by tens of microseconds on a VM. Polling yields the core after its first
  // 50 microseconds, so other threads run meanwhile.
  static constexpr int64_t kSpinMicros = 1000;

 private:
  using Fn = std::function<void(int64_t, int64_t, int64_t)>;
  void WorkerLoop();
  // Claims and runs the shards of job `generation` until none is left; false if the pool moved
  // on to another job first.
  void RunShards(uint32_t generation);

  int num_threads_;
  std::vector<std::thread> workers_;
  // The job: its generation (high 32 bits) and next unclaimed shard (low 32 bits) in one word,
  // so that a worker claims a shard of the job it saw and never one of the next job.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<const Fn*> job_{nullptr};
  std::atomic<int64_t> job_n_{0}, job_grain_{1}, job_shards_{0};
  std::atomic<int64_t> shards_done_{0};
  std::atomic<bool> stop_{false};
  uint32_t generation_ = 0;  // the caller's count of jobs

  std::mutex mu_;                    // guards the sleeping below and error_
  std::condition_variable cv_;       // workers sleep here between jobs
  std::condition_variable done_cv_;  // the caller sleeps here for the last shards
  int sleepers_ = 0;
  bool caller_sleeps_ = false;
  std::exception_ptr error_;
};

}  // namespace tpugraphs

#endif  // TPUGRAPHS_COMMON_THREAD_POOL_H_
