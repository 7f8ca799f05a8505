#include "testing/test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace tpugraphs::testing {
namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "tpugraphs_test_XXXXXX").string();
  char* p = ::mkdtemp(tmpl.data());
  if (p == nullptr) std::abort();
  path_ = p;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::vector<std::string> TempDir::List() const {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

std::string RealDataPath(const std::string& relative) {
  std::string path = std::string(TPUGRAPHS_REAL_DATA) + "/" + relative;
  if (!fs::exists(path)) {
    // A missing fixture fails the test that needs it with a message (GoogleTest reports the
    // exception as a failure of that test); it must never turn into a crash further on.
    throw std::runtime_error("missing real-data fixture " + path +
                             " (tests/data/real/PROVENANCE.md lists the files the tests need)");
  }
  return path;
}
std::string SourcePath(const std::string& relative) {
  return std::string(TPUGRAPHS_SOURCE_DIR) + "/" + relative;
}
std::string BinaryPath() { return TPUGRAPHS_BINARY; }

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

namespace {
std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

CommandResult RunShell(const std::string& command_line) {
  TempDir tmp;
  std::string out = tmp.File("out"), err = tmp.File("err");
  std::string cmd =
      "( " + command_line + " ) </dev/null >" + ShellQuote(out) + " 2>" + ShellQuote(err);
  int rc = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

namespace {
// "tpugraphs <args>", shell-quoted.
std::string CliCommand(const std::vector<std::string>& args) {
  std::string cmd = ShellQuote(BinaryPath());
  for (const auto& a : args) cmd += " " + ShellQuote(a);
  return cmd;
}
}  // namespace

CommandResult RunCli(const std::vector<std::string>& args) { return RunShell(CliCommand(args)); }

std::string MakeReleaseShapedLayoutDataset(const std::string& dir, int graphs,
                                           const std::string& dataset) {
  const std::string synth = dir + "/synth";
  CommandResult r =
      RunCli({"-q", "synth", "--task", "layout", "--graphs", std::to_string(graphs), "--nodes",
              "1500", "--configs", "60", "--seed", "11", "--output", synth});
  if (r.exit_code != 0) return "synth: " + r.err;
  r = RunCli({"-q", "ingest", synth + "/pb/layout", "-o", dataset});
  if (r.exit_code != 0) return "ingest: " + r.err;
  return "";
}

CommandResult RunCliWithin(int seconds, const std::vector<std::string>& args) {
  CommandResult r = RunShell("timeout -k 10 " + std::to_string(seconds) + " " + CliCommand(args));
  if (r.exit_code == 124 || r.exit_code == 137) {
    r.err += "\nwatchdog: tpugraphs did not finish within " + std::to_string(seconds) +
             " s and was killed (a hang?)\n";
  }
  return r;
}

struct Watchdog::State {
  std::mutex mu;
  std::condition_variable cv;
  bool disarmed = false;
  std::thread thread;
};

Watchdog::Watchdog(int seconds, std::string what) : state_(std::make_unique<State>()) {
  State* st = state_.get();
  st->thread = std::thread([st, seconds, what = std::move(what)] {
    std::unique_lock<std::mutex> lock(st->mu);
    if (st->cv.wait_for(lock, std::chrono::seconds(seconds), [st] { return st->disarmed; })) {
      return;
    }
    std::fprintf(stderr, "watchdog: %s did not finish within %d s (a hang?)\n", what.c_str(),
                 seconds);
    std::fflush(stderr);
    std::_Exit(124);
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->disarmed = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
}

CommandResult RunPython(const std::string& code, const std::vector<std::string>& args) {
  std::string cmd = ShellQuote(TPUGRAPHS_PYTHON) + " -c " + ShellQuote(code);
  for (const auto& a : args) cmd += " " + ShellQuote(a);
  return RunShell(cmd);
}

}  // namespace tpugraphs::testing
