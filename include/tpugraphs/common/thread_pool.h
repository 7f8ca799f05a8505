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

#include <condition_variable>
#include <cstdint>
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

 private:
  void WorkerLoop();

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_grain_ = 1, job_shards_ = 0;
  int64_t next_shard_ = 0, shards_done_ = 0;
  uint64_t generation_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
};

}  // namespace tpugraphs

#endif  // TPUGRAPHS_COMMON_THREAD_POOL_H_
