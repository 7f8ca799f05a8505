// How subcommands plug into the `tpugraphs` binary.
//
// Each src/cli/cmd_<name>.cc registers itself with TPUGRAPHS_REGISTER_COMMAND. Its setup function
// adds a CLI11 subcommand with its flags and returns the function that runs it. A run function
// only turns flags into a library config, calls the library and returns its Status; main() maps
// that Status to the exit code (0 ok, 1 failure, 2 usage) and prints the message.
#ifndef TPUGRAPHS_CLI_COMMAND_H_
#define TPUGRAPHS_CLI_COMMAND_H_

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tpugraphs/common/status.h"

namespace tpugraphs::cli {

using RunFn = std::function<Status()>;
// Adds the subcommand to `app` and returns its run function.
using SetupFn = std::function<RunFn(CLI::App& app)>;

struct CommandEntry {
  int order;  // position in --help (pipeline order)
  std::string name;
  SetupFn setup;
};

std::vector<CommandEntry>& CommandRegistry();
bool RegisterCommand(int order, std::string name, SetupFn setup);

// Options shared by all subcommands (set on the top-level app).
struct GlobalOptions {
  int threads = 0;  // 0 = all cores
};
const GlobalOptions& Globals();

// Under MPI, rank 0 runs `evaluate` or `predict` a second time on the gathered scores; that
// replay would repeat every warning the scoring pass logged. Quiet() lowers the log level to
// errors until Restore() or the end of the scope, on every way out.
class ReplayLogQuiet {
 public:
  ReplayLogQuiet() = default;
  ReplayLogQuiet(const ReplayLogQuiet&) = delete;
  ReplayLogQuiet& operator=(const ReplayLogQuiet&) = delete;
  ~ReplayLogQuiet() { Restore(); }
  void Quiet() {
    if (saved_) return;
    saved_ = spdlog::get_level();
    spdlog::set_level(spdlog::level::err);
  }
  void Restore() {
    if (!saved_) return;
    spdlog::set_level(*saved_);
    saved_.reset();
  }

 private:
  std::optional<spdlog::level::level_enum> saved_;
};

}  // namespace tpugraphs::cli

#define TPUGRAPHS_REGISTER_COMMAND(order, name, setup) \
  static const bool tpugraphs_registered_##setup =     \
      ::tpugraphs::cli::RegisterCommand(order, name, setup)

#endif  // TPUGRAPHS_CLI_COMMAND_H_
