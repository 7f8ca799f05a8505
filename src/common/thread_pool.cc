#include "tpugraphs/common/thread_pool.h"

#include <algorithm>

namespace tpugraphs {

int ThreadPool::HardwareThreads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads <= 0 ? HardwareThreads() : num_threads) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

int64_t ThreadPool::NumShards(int64_t n, int64_t grain) {
  if (n <= 0) return 0;
  grain = std::max<int64_t>(grain, 1);
  return (n + grain - 1) / grain;
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  grain = std::max<int64_t>(grain, 1);
  const int64_t shards = NumShards(n, grain);
  if (shards == 0) return;
  if (workers_.empty() || shards == 1) {
    for (int64_t s = 0; s < shards; ++s) fn(s, s * grain, std::min(n, (s + 1) * grain));
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  job_shards_ = shards;
  next_shard_ = 0;
  shards_done_ = 0;
  error_ = nullptr;
  ++generation_;
  cv_.notify_all();
  // The calling thread works too.
  while (next_shard_ < job_shards_) {
    int64_t s = next_shard_++;
    lock.unlock();
    try {
      fn(s, s * grain, std::min(n, (s + 1) * grain));
    } catch (...) {
      std::lock_guard<std::mutex> g(mu_);
      if (!error_) error_ = std::current_exception();
    }
    lock.lock();
    ++shards_done_;
  }
  done_cv_.wait(lock, [this] { return shards_done_ == job_shards_; });
  job_ = nullptr;
  std::exception_ptr err = error_;
  error_ = nullptr;
  lock.unlock();
  if (err) std::rethrow_exception(err);
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || (job_ != nullptr && generation_ != seen); });
    if (stop_) return;
    seen = generation_;
    while (job_ != nullptr && next_shard_ < job_shards_) {
      int64_t s = next_shard_++;
      const auto* fn = job_;
      int64_t n = job_n_, grain = job_grain_;
      lock.unlock();
      try {
        (*fn)(s, s * grain, std::min(n, (s + 1) * grain));
      } catch (...) {
        std::lock_guard<std::mutex> g(mu_);
        if (!error_) error_ = std::current_exception();
      }
      lock.lock();
      if (++shards_done_ == job_shards_) done_cv_.notify_all();
    }
  }
}

}  // namespace tpugraphs
