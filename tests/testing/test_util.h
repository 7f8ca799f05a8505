// Helpers shared by the test suites: temporary directories, paths of the shared real data,
// running the CLI binary and Python (numpy/scipy) snippets.
#ifndef TPUGRAPHS_TESTS_TESTING_TEST_UTIL_H_
#define TPUGRAPHS_TESTS_TESTING_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

namespace tpugraphs::testing {

// A fresh directory under the system temp dir, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Names of the entries in the directory (not recursive), sorted.
  std::vector<std::string> List() const;

 private:
  std::string path_;
};

// "<real data dir>/<relative>": the real files in tests/data/real (PROVENANCE.md there). Throws
// std::runtime_error naming the file when it is missing, which GoogleTest reports as a failure of
// the calling test instead of letting the test crash on an empty input.
std::string RealDataPath(const std::string& relative);
// "<source dir>/<relative>".
std::string SourcePath(const std::string& relative);
// Path of the built tpugraphs binary.
std::string BinaryPath();

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `tpugraphs <args>` (args are shell-quoted) and captures its output.
CommandResult RunCli(const std::vector<std::string>& args);
// As RunCli, under a watchdog: a run still going after `seconds` is killed (coreutils
// `timeout`), and its result has exit code 124 and an error saying it did not finish. A bound
// on a hang, not a speed assertion: give it many times the expected time.
CommandResult RunCliWithin(int seconds, const std::vector<std::string>& args);
// Runs a shell command line as is.
CommandResult RunShell(const std::string& command_line);
// `graphs` layout programs of the release's shape (1,500 nodes, 60 configurations each; their
// pruned graphs keep hundreds of nodes), made by `synth --seed 11` in `dir`/synth and ingested
// into `dataset`; "" when that works, else the failing command's stderr.
std::string MakeReleaseShapedLayoutDataset(const std::string& dir, int graphs,
                                           const std::string& dataset);

// A watchdog for code that must not hang in-process: if it is still armed `seconds` after it was
// made, it prints "watchdog: <what> did not finish within N s" to stderr and ends the test
// program with exit code 124, so that a hang fails the test instead of stalling the run.
class Watchdog {
 public:
  Watchdog(int seconds, std::string what);
  ~Watchdog();  // disarms it
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};
// Runs `python3 -c <code> <args...>` with Debian's python3 (numpy and scipy available).
CommandResult RunPython(const std::string& code, const std::vector<std::string>& args = {});

// Shell-quotes one argument.
std::string ShellQuote(const std::string& s);

}  // namespace tpugraphs::testing

#endif  // TPUGRAPHS_TESTS_TESTING_TEST_UTIL_H_
