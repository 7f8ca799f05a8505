#include "tpugraphs/distributed/communicator.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <stdexcept>

#include "mpi_world.h"

namespace tpugraphs::distributed {
namespace {

// Adds the wall time of its scope to a counter.
class ScopedTimer {
 public:
  explicit ScopedTimer(double* sink) : sink_(sink), start_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() {
    *sink_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  double* sink_;
  std::chrono::steady_clock::time_point start_;
};

// [lo, hi) of the index range that rank r reduces.
int64_t SliceBegin(int64_t n, int size, int r) { return n * r / size; }

template <typename T>
std::string ToBytes(const T* x, int64_t count) {
  return std::string(reinterpret_cast<const char*>(x), static_cast<size_t>(count) * sizeof(T));
}

Status SizeMismatch(const std::string& what, int rank, size_t got, size_t want) {
  return InternalError(what + ": rank " + std::to_string(rank) + " sent " + std::to_string(got) +
                       " bytes, expected " + std::to_string(want));
}

// --- the single-process group ---
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status AllToAll(const std::vector<std::string>& send, std::vector<std::string>* recv) override {
    *recv = send;
    return Status::Ok();
  }
  Status AllGather(const std::string& mine, std::vector<std::string>* all) override {
    *all = {mine};
    return Status::Ok();
  }
  Status Gather(const std::string& mine, int, std::vector<std::string>* all) override {
    *all = {mine};
    return Status::Ok();
  }
  Status Broadcast(std::string*, int) override { return Status::Ok(); }
  Status Barrier() override { return Status::Ok(); }
  [[noreturn]] void Abort(const std::string& message, int exit_code) override {
    std::fprintf(stderr, "rank 0: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(exit_code);
  }
};

// --- ranks that are threads of one process ---
// Every collective is one exchange: each rank deposits one message per destination, waits until
// all have, takes what was addressed to it, and waits until all have taken theirs.
class LocalHub {
 public:
  explicit LocalHub(int size) : size_(size), boxes_(size, std::vector<std::string>(size)) {}

  std::vector<std::string> Exchange(int rank, const std::vector<std::string>& send) {
    std::unique_lock<std::mutex> lock(mu_);
    if (aborted_) throw std::runtime_error("local group aborted");
    for (int r = 0; r < size_; ++r) boxes_[r][rank] = send[r];
    Arrive(lock);
    std::vector<std::string> recv = std::move(boxes_[rank]);
    boxes_[rank].assign(size_, std::string());
    Arrive(lock);
    return recv;
  }

  void AbortAll() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  // A reusable barrier.
  void Arrive(std::unique_lock<std::mutex>& lock) {
    const uint64_t gen = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
    if (aborted_) throw std::runtime_error("local group aborted");
  }

  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::vector<std::vector<std::string>> boxes_;  // boxes_[dest][source]
};

class LocalRank final : public Communicator {
 public:
  LocalRank(std::shared_ptr<LocalHub> hub, int rank, int size)
      : hub_(std::move(hub)), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status AllToAll(const std::vector<std::string>& send, std::vector<std::string>* recv) override {
    if (static_cast<int>(send.size()) != size_) {
      return InternalError("AllToAll: " + std::to_string(send.size()) + " messages for " +
                           std::to_string(size_) + " ranks");
    }
    *recv = hub_->Exchange(rank_, send);
    return Status::Ok();
  }
  Status AllGather(const std::string& mine, std::vector<std::string>* all) override {
    *all = hub_->Exchange(rank_, std::vector<std::string>(size_, mine));
    return Status::Ok();
  }
  Status Gather(const std::string& mine, int root, std::vector<std::string>* all) override {
    std::vector<std::string> send(size_);
    send[root] = mine;
    *all = hub_->Exchange(rank_, send);
    if (rank_ != root) all->clear();
    return Status::Ok();
  }
  Status Broadcast(std::string* bytes, int root) override {
    std::vector<std::string> send(size_);
    if (rank_ == root) send.assign(size_, *bytes);
    std::vector<std::string> recv = hub_->Exchange(rank_, send);
    *bytes = std::move(recv[root]);
    return Status::Ok();
  }
  Status Barrier() override {
    hub_->Exchange(rank_, std::vector<std::string>(size_));
    return Status::Ok();
  }
  [[noreturn]] void Abort(const std::string& message, int) override {
    hub_->AbortAll();
    throw std::runtime_error("rank " + std::to_string(rank_) + ": " + message);
  }

 private:
  std::shared_ptr<LocalHub> hub_;
  int rank_, size_;
};

std::unique_ptr<Communicator>& WorldSlot() {
  static std::unique_ptr<Communicator> world;
  return world;
}

}  // namespace

template <typename T>
Status Communicator::AllreduceSumImpl(T* x, int64_t n) {
  const int N = size();
  if (N == 1) {
    for (int64_t i = 0; i < n; ++i) x[i] = T(0) + x[i];  // the same rounding as N > 1 (-0 -> +0)
    return Status::Ok();
  }
  ScopedTimer timer(&comm_seconds_);
  std::vector<std::string> send(N), recv;
  for (int r = 0; r < N; ++r) {
    const int64_t lo = SliceBegin(n, N, r), hi = SliceBegin(n, N, r + 1);
    send[r] = ToBytes(x + lo, hi - lo);
  }
  TPUG_RETURN_IF_ERROR(AllToAll(send, &recv));
  const int me = rank();
  const int64_t lo = SliceBegin(n, N, me), len = SliceBegin(n, N, me + 1) - lo;
  std::vector<T> acc(len, T(0));
  for (int s = 0; s < N; ++s) {
    if (recv[s].size() != static_cast<size_t>(len) * sizeof(T)) {
      return SizeMismatch("AllreduceSum", s, recv[s].size(), len * sizeof(T));
    }
    const T* part = reinterpret_cast<const T*>(recv[s].data());
    for (int64_t i = 0; i < len; ++i) acc[i] += part[i];
  }
  std::vector<std::string> all;
  TPUG_RETURN_IF_ERROR(AllGather(ToBytes(acc.data(), len), &all));
  for (int r = 0; r < N; ++r) {
    const int64_t rlo = SliceBegin(n, N, r), rlen = SliceBegin(n, N, r + 1) - rlo;
    if (all[r].size() != static_cast<size_t>(rlen) * sizeof(T)) {
      return SizeMismatch("AllreduceSum", r, all[r].size(), rlen * sizeof(T));
    }
    std::memcpy(x + rlo, all[r].data(), all[r].size());
  }
  return Status::Ok();
}

Status Communicator::AllreduceSum(float* x, int64_t n) { return AllreduceSumImpl(x, n); }
Status Communicator::AllreduceSum(double* x, int64_t n) { return AllreduceSumImpl(x, n); }

Status Communicator::OrderedSum(const std::vector<int>& owner,
                                const std::vector<const float*>& mine, int64_t n, float* out) {
  const int N = size();
  const int me = rank();
  const int64_t total = static_cast<int64_t>(owner.size());
  int64_t local = 0;
  for (int o : owner) {
    if (o < 0 || o >= N) return InternalError("OrderedSum: owner out of range");
    local += o == me;
  }
  if (local != static_cast<int64_t>(mine.size())) {
    return InternalError("OrderedSum: " + std::to_string(mine.size()) +
                         " local items, owner says " + std::to_string(local));
  }
  if (N == 1) {
    std::fill(out, out + n, 0.0f);
    for (const float* item : mine) {
      for (int64_t p = 0; p < n; ++p) out[p] += item[p];
    }
    return Status::Ok();
  }
  ScopedTimer timer(&comm_seconds_);
  // The ranks that own items, when the ownership is contiguous in rank order.
  const bool contiguous = std::is_sorted(owner.begin(), owner.end());
  int64_t owning = 0;
  for (size_t i = 0; contiguous && i < owner.size(); ++i) {
    owning += i == 0 || owner[i] != owner[i - 1];
  }
  if (contiguous && owning <= total / N + 1) {
    // Contiguous ownership in rank order: a chain. Each owning rank adds its items onto the
    // running sum it received and passes it on; the last one's is the total. The additions are
    // the single process's loop in its order; each rank receives n floats per owning rank,
    // against n (items/N + 1) for the exchange of slices below, so the chain is taken when it
    // sends less (a few ranks, many items).
    std::fill(out, out + n, 0.0f);
    int prev = -1;
    for (int r : owner) {
      if (r == prev) continue;
      prev = r;
      std::string bytes;
      if (r == me) {
        for (const float* item : mine) {
          for (int64_t p = 0; p < n; ++p) out[p] += item[p];
        }
        bytes = ToBytes(out, n);
      }
      TPUG_RETURN_IF_ERROR(Broadcast(&bytes, r));
      if (r != me) {
        const size_t want = static_cast<size_t>(n) * sizeof(float);
        if (bytes.size() != want) return SizeMismatch("OrderedSum", r, bytes.size(), want);
        std::memcpy(out, bytes.data(), want);
      }
    }
    return Status::Ok();
  }
  std::vector<std::string> send(N), recv;
  for (int r = 0; r < N; ++r) {
    const int64_t lo = SliceBegin(n, N, r), len = SliceBegin(n, N, r + 1) - lo;
    std::string& s = send[r];
    s.reserve(mine.size() * len * sizeof(float));
    for (const float* item : mine) s.append(ToBytes(item + lo, len));
  }
  TPUG_RETURN_IF_ERROR(AllToAll(send, &recv));
  const int64_t lo = SliceBegin(n, N, me), len = SliceBegin(n, N, me + 1) - lo;
  std::vector<int64_t> count(N, 0);
  for (int o : owner) ++count[o];
  for (int s = 0; s < N; ++s) {
    const size_t want = static_cast<size_t>(count[s] * len) * sizeof(float);
    if (recv[s].size() != want) return SizeMismatch("OrderedSum", s, recv[s].size(), want);
  }
  std::vector<float> acc(len, 0.0f);
  std::vector<int64_t> cursor(N, 0);
  for (int64_t i = 0; i < total; ++i) {
    const int s = owner[i];
    const float* part = reinterpret_cast<const float*>(recv[s].data()) + cursor[s]++ * len;
    for (int64_t p = 0; p < len; ++p) acc[p] += part[p];
  }
  std::vector<std::string> all;
  TPUG_RETURN_IF_ERROR(AllGather(ToBytes(acc.data(), len), &all));
  for (int r = 0; r < N; ++r) {
    const int64_t rlo = SliceBegin(n, N, r), rlen = SliceBegin(n, N, r + 1) - rlo;
    if (all[r].size() != static_cast<size_t>(rlen) * sizeof(float)) {
      return SizeMismatch("OrderedSum", r, all[r].size(), rlen * sizeof(float));
    }
    std::memcpy(out + rlo, all[r].data(), all[r].size());
  }
  return Status::Ok();
}

Status Communicator::AllGatherItems(const std::vector<int>& owner, const std::vector<double>& mine,
                                    std::vector<double>* values) {
  const int N = size();
  values->assign(owner.size(), 0.0);
  std::vector<std::string> all;
  if (N == 1) {
    all = {ToBytes(mine.data(), static_cast<int64_t>(mine.size()))};
  } else {
    ScopedTimer timer(&comm_seconds_);
    TPUG_RETURN_IF_ERROR(AllGather(ToBytes(mine.data(), static_cast<int64_t>(mine.size())), &all));
  }
  std::vector<int64_t> count(N, 0);
  for (int o : owner) {
    if (o < 0 || o >= N) return InternalError("AllGatherItems: owner out of range");
    ++count[o];
  }
  for (int s = 0; s < N; ++s) {
    const size_t want = static_cast<size_t>(count[s]) * sizeof(double);
    if (all[s].size() != want) return SizeMismatch("AllGatherItems", s, all[s].size(), want);
  }
  std::vector<int64_t> cursor(N, 0);
  for (size_t i = 0; i < owner.size(); ++i) {
    const int s = owner[i];
    std::memcpy(&(*values)[i], all[s].data() + cursor[s]++ * sizeof(double), sizeof(double));
  }
  return Status::Ok();
}

Status Communicator::Agree(const Status& mine) {
  if (size() == 1) return mine;
  std::string msg;
  if (!mine.ok()) {
    msg.push_back(static_cast<char>(static_cast<int>(mine.code())));
    msg += mine.message();
  }
  std::vector<std::string> all;
  {
    ScopedTimer timer(&comm_seconds_);
    TPUG_RETURN_IF_ERROR(AllGather(msg, &all));
  }
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (all[r].empty()) continue;
    Status agreed(static_cast<StatusCode>(static_cast<unsigned char>(all[r][0])),
                  "rank " + std::to_string(r) + ": " + all[r].substr(1));
    agreed_message_ = agreed.message();
    has_agreed_ = true;
    return agreed;
  }
  return Status::Ok();
}

bool Communicator::WasAgreed(const Status& s) const {
  return !s.ok() && has_agreed_ && s.message() == agreed_message_;
}

std::vector<int64_t> Communicator::Owned(const std::vector<int>& owner) const {
  std::vector<int64_t> out;
  for (size_t i = 0; i < owner.size(); ++i) {
    if (owner[i] == rank()) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

std::vector<int> BalanceByCost(const std::vector<double>& costs, int ranks) {
  std::vector<int> owner(costs.size(), 0);
  if (ranks <= 1) return owner;
  std::vector<size_t> order(costs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  std::vector<double> load(ranks, 0.0);
  std::vector<int64_t> items(ranks, 0);
  for (size_t i : order) {
    int best = 0;
    for (int r = 1; r < ranks; ++r) {
      // The lightest rank; among equal loads the one with fewer items, then the lower rank.
      if (load[r] < load[best] || (load[r] == load[best] && items[r] < items[best])) best = r;
    }
    owner[i] = best;
    load[best] += costs[i];
    ++items[best];
  }
  return owner;
}

std::vector<int> SplitContiguous(const std::vector<double>& costs, int ranks) {
  std::vector<int> owner(costs.size(), 0);
  if (ranks <= 1 || costs.empty()) return owner;
  double total = 0.0;
  for (double c : costs) total += std::max(0.0, c);
  const double n = static_cast<double>(costs.size());
  double before = 0.0;
  for (size_t i = 0; i < costs.size(); ++i) {
    const double c = std::max(0.0, costs[i]);
    // The item's midpoint on the cumulative cost (by count when every cost is zero).
    const double mid = total > 0 ? (before + 0.5 * c) / total : (static_cast<double>(i) + 0.5) / n;
    owner[i] = std::min(ranks - 1, static_cast<int>(mid * ranks));
    if (i > 0) owner[i] = std::max(owner[i], owner[i - 1]);
    before += c;
  }
  return owner;
}

bool MpiCompiledIn() { return internal::MpiAvailable(); }

std::string MpiDescription() {
  return MpiCompiledIn() ? "MPI: " + internal::MpiLibraryVersion()
                         : "MPI: no (built without TPUGRAPHS_MPI)";
}

bool LaunchedByMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                        "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

Status InitWorld(int* argc, char*** argv) {
  if (WorldSlot() != nullptr) return Status::Ok();
  if (MpiCompiledIn() && LaunchedByMpi()) {
    TPUG_ASSIGN_OR_RETURN(WorldSlot(), internal::StartMpi(argc, argv));
  } else {
    WorldSlot() = MakeSingleProcess();
  }
  return Status::Ok();
}

void FinalizeWorld() { internal::StopMpi(); }

Communicator& World() {
  if (WorldSlot() == nullptr) WorldSlot() = MakeSingleProcess();
  return *WorldSlot();
}

std::unique_ptr<Communicator> MakeSingleProcess() { return std::make_unique<SingleProcess>(); }

std::vector<std::unique_ptr<Communicator>> MakeLocalGroup(int size) {
  auto hub = std::make_shared<LocalHub>(size);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<LocalRank>(hub, r, size));
  return out;
}

}  // namespace tpugraphs::distributed
