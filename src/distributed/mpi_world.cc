#include "mpi_world.h"

#include <climits>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#if defined(TPUGRAPHS_HAVE_MPI)
#include <mpi.h>
#endif

namespace tpugraphs::distributed::internal {

#if defined(TPUGRAPHS_HAVE_MPI)
namespace {

bool g_started = false;

Status MpiError(const char* what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  return IoError(std::string(what) + " failed: " + std::string(text, len));
}

#define TPUG_MPI(call, what)                                    \
  do {                                                          \
    const int mpi_rc_ = (call);                                 \
    if (mpi_rc_ != MPI_SUCCESS) return MpiError(what, mpi_rc_); \
  } while (false)

// Byte counts as MPI's int counts.
StatusOr<std::vector<int>> Counts(const std::vector<int64_t>& sizes, std::vector<int>* displs) {
  std::vector<int> out(sizes.size());
  displs->assign(sizes.size(), 0);
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] > INT_MAX || offset > INT_MAX) {
      return ResourceExhaustedError("a message of " + std::to_string(sizes[i]) +
                                    " bytes exceeds MPI's 2 GiB message limit");
    }
    out[i] = static_cast<int>(sizes[i]);
    (*displs)[i] = static_cast<int>(offset);
    offset += sizes[i];
  }
  return out;
}

class MpiWorld final : public Communicator {
 public:
  MpiWorld() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllToAll(const std::vector<std::string>& send, std::vector<std::string>* recv) override {
    if (static_cast<int>(send.size()) != size_) return InternalError("AllToAll: wrong fan-out");
    std::vector<int64_t> send_sizes(size_), recv_sizes(size_);
    for (int r = 0; r < size_; ++r) send_sizes[r] = static_cast<int64_t>(send[r].size());
    TPUG_MPI(MPI_Alltoall(send_sizes.data(), 1, MPI_INT64_T, recv_sizes.data(), 1, MPI_INT64_T,
                          MPI_COMM_WORLD),
             "MPI_Alltoall");
    std::vector<int> sdispl, rdispl;
    TPUG_ASSIGN_OR_RETURN(std::vector<int> scount, Counts(send_sizes, &sdispl));
    TPUG_ASSIGN_OR_RETURN(std::vector<int> rcount, Counts(recv_sizes, &rdispl));
    std::string sbuf;
    for (const auto& s : send) sbuf += s;
    std::string rbuf(static_cast<size_t>(rdispl.back()) + rcount.back(), '\0');
    TPUG_MPI(MPI_Alltoallv(sbuf.data(), scount.data(), sdispl.data(), MPI_BYTE, rbuf.data(),
                           rcount.data(), rdispl.data(), MPI_BYTE, MPI_COMM_WORLD),
             "MPI_Alltoallv");
    recv->resize(size_);
    for (int r = 0; r < size_; ++r) (*recv)[r] = rbuf.substr(rdispl[r], rcount[r]);
    return Status::Ok();
  }

  Status AllGather(const std::string& mine, std::vector<std::string>* all) override {
    const int64_t my_size = static_cast<int64_t>(mine.size());
    std::vector<int64_t> sizes(size_);
    TPUG_MPI(MPI_Allgather(&my_size, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, MPI_COMM_WORLD),
             "MPI_Allgather");
    std::vector<int> displ;
    TPUG_ASSIGN_OR_RETURN(std::vector<int> count, Counts(sizes, &displ));
    std::string buf(static_cast<size_t>(displ.back()) + count.back(), '\0');
    TPUG_MPI(MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, buf.data(),
                            count.data(), displ.data(), MPI_BYTE, MPI_COMM_WORLD),
             "MPI_Allgatherv");
    all->resize(size_);
    for (int r = 0; r < size_; ++r) (*all)[r] = buf.substr(displ[r], count[r]);
    return Status::Ok();
  }

  Status Gather(const std::string& mine, int root, std::vector<std::string>* all) override {
    const int64_t my_size = static_cast<int64_t>(mine.size());
    std::vector<int64_t> sizes(size_);
    TPUG_MPI(
        MPI_Gather(&my_size, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, root, MPI_COMM_WORLD),
        "MPI_Gather");
    std::vector<int> displ, count(size_, 0);
    if (rank_ == root) {
      TPUG_ASSIGN_OR_RETURN(count, Counts(sizes, &displ));
    } else {
      displ.assign(size_, 0);
    }
    std::string buf(rank_ == root ? static_cast<size_t>(displ.back()) + count.back() : 0, '\0');
    TPUG_MPI(MPI_Gatherv(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, buf.data(),
                         count.data(), displ.data(), MPI_BYTE, root, MPI_COMM_WORLD),
             "MPI_Gatherv");
    all->clear();
    if (rank_ == root) {
      for (int r = 0; r < size_; ++r) all->push_back(buf.substr(displ[r], count[r]));
    }
    return Status::Ok();
  }

  Status Broadcast(std::string* bytes, int root) override {
    int64_t n = static_cast<int64_t>(bytes->size());
    TPUG_MPI(MPI_Bcast(&n, 1, MPI_INT64_T, root, MPI_COMM_WORLD), "MPI_Bcast");
    if (n > INT_MAX)
      return ResourceExhaustedError("a broadcast of " + std::to_string(n) +
                                    " bytes exceeds MPI's 2 GiB message limit");
    bytes->resize(static_cast<size_t>(n));
    TPUG_MPI(MPI_Bcast(bytes->data(), static_cast<int>(n), MPI_BYTE, root, MPI_COMM_WORLD),
             "MPI_Bcast");
    return Status::Ok();
  }

  Status Barrier() override {
    TPUG_MPI(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    return Status::Ok();
  }

  [[noreturn]] void Abort(const std::string& message, int exit_code) override {
    std::fprintf(stderr, "rank %d: %s\n", rank_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // not reached
  }

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace

bool MpiAvailable() { return true; }

std::string MpiLibraryVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "MPI";
  std::string v(text, len);
  const size_t cut = v.find_first_of(",\n");  // the first clause is enough
  return cut == std::string::npos ? v : v.substr(0, cut);
}

StatusOr<std::unique_ptr<Communicator>> StartMpi(int* argc, char*** argv) {
  int provided = 0;
  TPUG_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  g_started = true;
  // Errors come back as return codes (turned into Status) instead of ending the process here.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return std::unique_ptr<Communicator>(new MpiWorld());
}

void StopMpi() {
  if (!g_started) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

#else  // !TPUGRAPHS_HAVE_MPI

bool MpiAvailable() { return false; }

std::string MpiLibraryVersion() { return ""; }

StatusOr<std::unique_ptr<Communicator>> StartMpi(int*, char***) {
  return UnimplementedError("this tpugraphs was built without MPI (TPUGRAPHS_MPI=OFF)");
}

void StopMpi() {}

#endif

}  // namespace tpugraphs::distributed::internal
