// The `tpugraphs` binary: parses the command line and dispatches to one subcommand.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <exception>
#include <map>
#include <new>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <spdlog/spdlog.h>

#include "command.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/logging.h"

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
    tpugraphs::TerminateOnSignal(sig);
  }).detach();
}

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

}  // namespace

int main(int argc, char** argv) {
  using namespace tpugraphs;
#if defined(__GLIBC__)
  // The model allocates and frees many matrices of a few hundred KB per training step. With
  // glibc's defaults every one of them is a fresh mmap/munmap (and zeroed pages), which cost a
  // fifth of the training time in system calls; keep such blocks in the heap instead.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest allowed value on 64-bit
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  StartSignalThread();

  CLI::App app{
      "tpugraphs: learned performance models of XLA programs on TPUs (TpuGraphs).\n"
      "Pipeline: ingest -> (stats, export) -> train -> evaluate / predict; synth makes data.\n"
      "Results go to stdout, logs and progress to stderr.\n"
      "Exit codes: 0 success, 1 failure (bad input, I/O error), 2 usage error."};
  app.set_version_flag("--version", std::string("tpugraphs ") + TPUGRAPHS_VERSION);
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

  SetupLogging(quiet ? -1 : verbose);
  for (CLI::App* sub : app.get_subcommands()) {
    auto it = runs.find(sub->get_name());
    if (it == runs.end()) continue;
    try {
      Status status = it->second();
      if (!status.ok()) {
        std::fprintf(stderr, "tpugraphs %s: error: %s\n", sub->get_name().c_str(),
                     status.message().c_str());
        return status.code() == StatusCode::kInvalidArgument &&
                       status.message().rfind("usage: ", 0) == 0
                   ? kExitUsage
                   : kExitFailure;
      }
      return kExitOk;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "tpugraphs %s: error: out of memory\n", sub->get_name().c_str());
      return kExitFailure;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tpugraphs %s: internal error: %s\n", sub->get_name().c_str(), e.what());
      return kExitFailure;
    }
  }
  return kExitUsage;
}
