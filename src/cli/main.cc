// The `tpugraphs` binary: parses the command line and dispatches to one subcommand.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <new>
#include <string>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <spdlog/spdlog.h>

#include "command.h"
#include "tpugraphs/common/file_lock.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/huge_pages.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/distributed/communicator.h"

namespace tpugraphs::cli {

std::vector<CommandEntry>& CommandRegistry() {
  static std::vector<CommandEntry> entries;
  return entries;
}

bool RegisterCommand(int order, std::string name, SetupFn setup) {
  CommandRegistry().push_back({order, std::move(name), std::move(setup)});
  return true;
}

namespace {
GlobalOptions g_globals;
}  // namespace
const GlobalOptions& Globals() { return g_globals; }

}  // namespace tpugraphs::cli

namespace {

// SIGINT and SIGTERM are blocked in every thread (threads inherit the mask of main, which
// blocks them before any other thread exists) and taken by one thread that waits for them, so
// the cleanup runs as ordinary code and can lock out writers that are still running.
void StartSignalThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    tpugraphs::ReleaseOutputLocksOnSignal();
    tpugraphs::TerminateOnSignal(sig);
  }).detach();
}

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNoMatchingGraphs = 3;

// The commands that split their work over the ranks of an MPI job; any other command runs on
// rank 0 alone (the other ranks exit at once).
bool RunsDistributed(const std::string& name) {
  return name == "train" || name == "evaluate" || name == "predict";
}

// The results a command printed on stdout, flushed: "" when all of them arrived, else why not.
// Scripts redirect stdout to a file (`evaluate --json > m.json`); a full disk there must fail the
// command like any other failed write, naming the file when stdout is one.
std::string FlushStdout() {
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  if (flushed && !std::ferror(stdout)) return "";
  std::string where = "standard output";
  char target[4096];
  const ssize_t n = ::readlink("/proc/self/fd/1", target, sizeof(target) - 1);
  if (n > 0 && target[0] == '/') where += " (" + std::string(target, static_cast<size_t>(n)) + ")";
  return where + ": write failed" +
         (flushed ? std::string() : ": " + std::string(std::strerror(err)));
}

// Ends MPI (if it was started) on every way out of main.
struct WorldGuard {
  ~WorldGuard() { tpugraphs::distributed::FinalizeWorld(); }
};

}  // namespace

// The heap's 64-byte alignment of every block of 64 bytes or more: src/cli/aligned_heap.cc.

int main(int argc, char** argv) {
  using namespace tpugraphs;
#if defined(__GLIBC__)
  // The model allocates and frees many matrices of a few hundred KB per training step. With
  // glibc's defaults every one of them is a fresh mmap/munmap (and zeroed pages), which cost a
  // fifth of the training time in system calls; keep such blocks in the heap instead.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest allowed value on 64-bit
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  AdviseMainHeapHugePages();  // tpugraphs/common/huge_pages.h
#endif
  StartSignalThread();

  CLI::App app{
      "tpugraphs: learned performance models of XLA programs on TPUs (TpuGraphs).\n"
      "Pipeline: ingest -> (stats, export) -> train -> evaluate / predict; synth makes data.\n"
      "Results go to stdout, logs and progress to stderr.\n"
      "Under mpirun (or srun), train, evaluate and predict share their work over the ranks and\n"
      "give the single-process results (docs/distributed.md).\n"
      "Exit codes: 0 success, 1 failure (bad input, I/O error), 2 usage error, 3 no graph of\n"
      "the dataset matches the selection (collection, split, graph names)."};
  app.set_version_flag("--version", std::string("tpugraphs ") + TPUGRAPHS_VERSION + " (" +
                                        distributed::MpiDescription() + ")");
  app.require_subcommand(1);
  app.fallthrough();
  int verbose = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbose, "More log output (-v debug, -vv trace)");
  app.add_flag("-q,--quiet", quiet, "Only warnings and errors; no progress lines");
  app.add_option("-j,--threads", cli::g_globals.threads,
                 "Worker threads (0 = all cores). Results do not depend on it.")
      ->check(CLI::NonNegativeNumber);

  auto& registry = cli::CommandRegistry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return a.order < b.order; });
  std::map<std::string, cli::RunFn> runs;
  for (auto& entry : registry) runs[entry.name] = entry.setup(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    app.exit(e);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }

  // MPI starts only under an MPI launcher (mpirun, srun); otherwise World() is one process.
  WorldGuard world_guard;
  if (Status s = distributed::InitWorld(&argc, &argv); !s.ok()) {
    std::fprintf(stderr, "tpugraphs: error: %s\n", s.message().c_str());
    return kExitFailure;
  }
  distributed::Communicator& world = distributed::World();
  const bool root = world.rank() == 0;
  // Rank 0 alone logs and shows progress; the others report errors only.
  SetupLogging(quiet || !root ? -1 : verbose);
  if (!root) spdlog::set_level(spdlog::level::err);
  if (const char* tasks = std::getenv("SLURM_STEP_NUM_TASKS");
      world.size() == 1 && tasks != nullptr && std::atoi(tasks) > 1) {
    // srun without an MPI plugin starts independent copies that each do the whole job.
    spdlog::warn(
        "srun started {} tasks but MPI did not connect them ({}): each runs alone; use "
        "srun --mpi=pmix (docs/distributed.md)",
        tasks,
        distributed::MpiCompiledIn() ? "no PMI/PMIx in the environment" : "built without MPI");
  }
  // An error that the other ranks do not know about (it did not pass Agree) would leave them
  // waiting in a collective: it ends the whole job, naming this rank.
  auto fail = [&](const std::string& line) {
    if (world.size() > 1) world.Abort(line, kExitFailure);
    std::fprintf(stderr, "%s\n", line.c_str());
  };
  for (CLI::App* sub : app.get_subcommands()) {
    auto it = runs.find(sub->get_name());
    if (it == runs.end()) continue;
    if (!root && !RunsDistributed(sub->get_name())) return kExitOk;
    try {
      Status status = it->second();
      if (!status.ok()) {
        // The exit code says the kind: 2 usage, 3 no graph matches, else 1.
        const int code = status.code() == StatusCode::kUsage              ? kExitUsage
                         : status.code() == StatusCode::kNoMatchingGraphs ? kExitNoMatchingGraphs
                                                                          : kExitFailure;
        if (world.WasAgreed(status)) {
          // Every rank has it: rank 0 tells, all exit with its code.
          if (root) {
            std::fprintf(stderr, "tpugraphs %s: error: %s\n", sub->get_name().c_str(),
                         status.message().c_str());
          }
          return code;
        }
        if (code != kExitFailure && world.size() > 1) {
          // Usage errors come from the flags and the selection from the dataset, the same on
          // every rank: rank 0 tells.
          if (root) {
            std::fprintf(stderr, "tpugraphs %s: error: %s\n", sub->get_name().c_str(),
                         status.message().c_str());
          }
          return code;
        }
        fail("tpugraphs " + sub->get_name() + ": error: " + status.message());
        return code;
      }
      if (const std::string err = FlushStdout(); !err.empty()) {
        fail("tpugraphs " + sub->get_name() + ": error: " + err);
        return kExitFailure;
      }
      return kExitOk;
    } catch (const std::bad_alloc&) {
      fail("tpugraphs " + sub->get_name() + ": error: out of memory");
      return kExitFailure;
    } catch (const std::exception& e) {
      fail("tpugraphs " + sub->get_name() + ": internal error: " + e.what());
      return kExitFailure;
    }
  }
  return kExitUsage;
}
