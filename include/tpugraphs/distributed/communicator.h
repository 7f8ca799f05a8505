// Communication between the processes of a data-parallel job (docs/distributed.md).
//
// A Communicator is one rank's view of a group of `size()` ranks. The only code that knows about
// MPI is the MPI implementation behind World() (src/distributed/mpi_world.cc, built with
// TPUGRAPHS_MPI); without MPI, or when the process was not started by an MPI launcher, World() is a
// single-process group whose collectives are copies. Tests use MakeLocalGroup: ranks that are
// threads of one process.
//
// Every collective is entered by all ranks of the group in the same order, from one thread per
// rank. The sums are fixed-order: the result is the same bit for bit on every rank and does not
// depend on how the work was spread over the ranks (see OrderedSum).
//
// Errors: a local failure that the other ranks must learn about goes through Agree() at a point
// every rank reaches; a rank that cannot reach such a point ends the whole job with Abort().
//
// Thread-safety: one thread per rank calls the collectives; rank() and size() may be read from
// any thread.
#ifndef TPUGRAPHS_DISTRIBUTED_COMMUNICATOR_H_
#define TPUGRAPHS_DISTRIBUTED_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tpugraphs/common/status.h"

namespace tpugraphs::distributed {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // --- primitives (per implementation) ---
  // Every rank sends send[r] to rank r (send.size() == size()); recv[s] is what rank s sent here.
  virtual Status AllToAll(const std::vector<std::string>& send, std::vector<std::string>* recv) = 0;
  // all[s] is rank s's `mine`, on every rank.
  virtual Status AllGather(const std::string& mine, std::vector<std::string>* all) = 0;
  // On `root`, all[s] is rank s's `mine`; elsewhere `all` is cleared.
  virtual Status Gather(const std::string& mine, int root, std::vector<std::string>* all) = 0;
  // `bytes` of `root` replaces `bytes` on every other rank.
  virtual Status Broadcast(std::string* bytes, int root) = 0;
  virtual Status Barrier() = 0;
  // Ends every process of the job: prints "rank R: message" on stderr and exits with
  // `exit_code` (with MPI: MPI_Abort, which makes the launcher kill the other ranks).
  [[noreturn]] virtual void Abort(const std::string& message, int exit_code) = 0;

  // --- fixed-order collectives built on the primitives ---
  // In place: x[i] becomes ((0 + x_0[i]) + x_1[i]) + ... + x_{N-1}[i] (x_r: rank r's buffer),
  // the same bits on every rank. The work and the traffic are split by index range (a
  // reduce-scatter, then an all-gather): about 2 n (N-1)/N values leave each rank.
  Status AllreduceSum(float* x, int64_t n);
  Status AllreduceSum(double* x, int64_t n);

  // Sum of `total` items of n floats each, in item order: out = ((0 + item_0) + item_1) + ...,
  // where item i lives on rank owner[i] (owner: the same vector on every rank). `mine` holds this
  // rank's items in increasing item order. The result is the loop a single process runs over
  // the items, bit for bit, whatever the ownership. Each rank receives n (items/N + 1) floats;
  // when owner is non-decreasing (each rank a contiguous run of items, in rank order:
  // SplitContiguous), the ranks pass the running sum along instead, and each receives n floats
  // per rank that owns items.
  Status OrderedSum(const std::vector<int>& owner, const std::vector<const float*>& mine, int64_t n,
                    float* out);

  // Gathers (item, value) records to every rank: values[i] for i in [0, total), each set by
  // the rank that owns i (owner as above); `mine` lists this rank's values in increasing item
  // order.
  Status AllGatherItems(const std::vector<int>& owner, const std::vector<double>& mine,
                        std::vector<double>* values);

  // Every rank calls this with its own status at a point all ranks reach. If any failed, every
  // rank returns the failure of the lowest failing rank as "rank R: <message>" (single-process
  // groups return `mine` unchanged) and remembers it (WasAgreed).
  Status Agree(const Status& mine);
  // True if `s` is an error that Agree returned on this rank: every rank knows about it.
  bool WasAgreed(const Status& s) const;

  // The items i with owner[i] == rank(), ascending (helper for the ownership vectors above).
  std::vector<int64_t> Owned(const std::vector<int>& owner) const;

  // Seconds spent inside collectives since the last ResetCommSeconds() (instrumentation).
  double comm_seconds() const { return comm_seconds_; }
  void ResetCommSeconds() { comm_seconds_ = 0; }

 protected:
  double comm_seconds_ = 0;

 private:
  template <typename T>
  Status AllreduceSumImpl(T* x, int64_t n);
  std::string agreed_message_;
  bool has_agreed_ = false;
};

// Assigns items of the given costs to `ranks` ranks so that the ranks' total costs are close:
// items by decreasing cost (ties: lower index first), each to the rank with the smallest total
// so far (ties: lower rank). Deterministic; owner[i] in [0, ranks).
std::vector<int> BalanceByCost(const std::vector<double>& costs, int ranks);

// Splits items, in their order, into `ranks` contiguous runs of about equal total cost: item i
// goes to the rank whose share of the cumulative cost holds the item's midpoint. owner is
// non-decreasing, so OrderedSum over such items passes one running sum along the ranks.
std::vector<int> SplitContiguous(const std::vector<double>& costs, int ranks);

// --- the process-wide group ---
// Whether this binary was built with MPI.
bool MpiCompiledIn();
// "MPI: Open MPI v4.1.4" or "MPI: no (built without TPUGRAPHS_MPI)" (for --version).
std::string MpiDescription();
// Whether the environment says an MPI launcher (mpirun, mpiexec, srun with PMI/PMIx) started us.
bool LaunchedByMpi();
// Starts MPI when compiled in and launched by an MPI launcher (otherwise World() stays the
// single-process group). Call once, from the main thread, before World() is used.
Status InitWorld(int* argc, char*** argv);
// Ends MPI if InitWorld started it. Safe to call more than once.
void FinalizeWorld();
Communicator& World();

// A single-process group (rank 0 of 1).
std::unique_ptr<Communicator> MakeSingleProcess();
// `size` communicators of one in-process group whose ranks are threads (tests). Abort() throws
// std::runtime_error on the aborting thread instead of ending the process.
std::vector<std::unique_ptr<Communicator>> MakeLocalGroup(int size);

}  // namespace tpugraphs::distributed

#endif  // TPUGRAPHS_DISTRIBUTED_COMMUNICATOR_H_
