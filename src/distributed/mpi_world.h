// The MPI side of World() (src/distributed/mpi_world.cc, the one file that includes mpi.h). Without
// TPUGRAPHS_HAVE_MPI the build reports MPI as absent: MpiAvailable() is false, MpiLibraryVersion()
// is empty and StartMpi fails with a message saying the build has no MPI.
#ifndef TPUGRAPHS_SRC_DISTRIBUTED_MPI_WORLD_H_
#define TPUGRAPHS_SRC_DISTRIBUTED_MPI_WORLD_H_

#include <memory>
#include <string>

#include "tpugraphs/common/status.h"
#include "tpugraphs/distributed/communicator.h"

namespace tpugraphs::distributed::internal {

bool MpiAvailable();
// "Open MPI v4.1.4, ..." (the library's own version line), or "" without MPI.
std::string MpiLibraryVersion();
// MPI_Init_thread (funneled) and the MPI_COMM_WORLD communicator.
StatusOr<std::unique_ptr<Communicator>> StartMpi(int* argc, char*** argv);
// MPI_Finalize if StartMpi ran and it was not called yet.
void StopMpi();

}  // namespace tpugraphs::distributed::internal

#endif  // TPUGRAPHS_SRC_DISTRIBUTED_MPI_WORLD_H_
