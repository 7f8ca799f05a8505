// Times distributed::Communicator::OrderedSum alone, as a training step uses it: B per-graph
// gradients of P floats spread round-robin over the ranks of the job, summed in graph order. Run
// under mpirun (tools/bench/bench-mpi.sh): mpirun -np 2 mpi_ordered_sum [P] [B] [REPS] Prints, on
// rank 0, the mean wall time per call and the bytes each rank receives per call.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tpugraphs/distributed/communicator.h"

int main(int argc, char** argv) {
  using namespace tpugraphs;
  if (!distributed::InitWorld(&argc, &argv).ok()) return 1;
  distributed::Communicator& comm = distributed::World();
  const int64_t params = argc > 1 ? std::atoll(argv[1]) : 69669;  // the default layout model
  const int graphs = argc > 2 ? std::atoi(argv[2]) : 4;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 200;
  if (params <= 0 || graphs <= 0 || reps <= 0) {
    std::fprintf(stderr, "usage: mpi_ordered_sum [PARAMS > 0] [GRAPHS > 0] [REPS > 0]\n");
    distributed::FinalizeWorld();
    return 2;
  }
  std::vector<int> owner(graphs);
  for (int b = 0; b < graphs; ++b) owner[b] = b % comm.size();
  std::vector<std::vector<float>> items;
  for (int64_t b : comm.Owned(owner)) items.emplace_back(params, 0.001f * static_cast<float>(b));
  std::vector<const float*> mine;
  for (const auto& item : items) mine.push_back(item.data());
  std::vector<float> out(params);
  auto sum = [&] {
    Status s = comm.OrderedSum(owner, mine, params, out.data());
    if (!s.ok()) comm.Abort(s.message(), 1);
  };
  for (int i = 0; i < 10; ++i) sum();  // warm-up
  if (!comm.Barrier().ok()) comm.Abort("barrier failed", 1);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) sum();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (comm.rank() == 0) {
    const int n = comm.size();
    const double mine_items = static_cast<double>(comm.Owned(owner).size());
    const double received = ((graphs - mine_items) + (n - 1)) * 4.0 * params / n;
    std::printf(
        "OrderedSum: %d ranks, %d graphs x %lld floats: %.3f ms per call, %.0f KiB "
        "received by rank 0 per call\n",
        n, graphs, static_cast<long long>(params), 1e3 * seconds / reps, received / 1024);
  }
  distributed::FinalizeWorld();
  return 0;
}
