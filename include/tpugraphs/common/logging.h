// Logging and progress reporting. Everything here writes to stderr; stdout is reserved for
// results (tables, JSON, CSV) so that shell scripts can parse it.
//
// The library logs through spdlog's default logger (spdlog::info(...)), which SetupLogging
// points at stderr. Progress lines are rate-limited and redraw in place on a terminal; when
// stderr is not a terminal they are printed as plain lines at most every few seconds.
//
// Thread-safety: Progress::Add may be called from any thread.
#ifndef TPUGRAPHS_COMMON_LOGGING_H_
#define TPUGRAPHS_COMMON_LOGGING_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace tpugraphs {

// verbosity: -1 quiet (warnings and errors only), 0 normal (info), 1 debug, 2 trace.
void SetupLogging(int verbosity);

// Sends every log message at `min_level` or above, and every progress line (at level 2, at most
// every 5 s), to `handler` instead of stderr; an empty handler goes back to stderr. Levels are
// spdlog's: 0 trace, 1 debug, 2 info, 3 warning, 4 error, 5 critical. For front-ends with a
// logging system of their own (the Python module forwards to `logging`). Like the log itself,
// this is process-wide; the handler may be called from any thread, one call at a time.
using LogHandler = std::function<void(int level, const std::string& message)>;
void SetLogHandler(LogHandler handler, int min_level);

// A prefix for every log line and progress line of this thread while the object lives, e.g.
// "member 2/8: " for ensemble members trained side by side; the previous prefix comes back when
// it ends. Progress lines of a thread with a prefix are plain lines, never redrawn in place (two
// such lines would overwrite each other). Lines logged by other threads (a thread pool's
// workers) carry their own thread's prefix.
class ScopedLogContext {
 public:
  explicit ScopedLogContext(std::string prefix);
  ~ScopedLogContext();
  ScopedLogContext(const ScopedLogContext&) = delete;
  ScopedLogContext& operator=(const ScopedLogContext&) = delete;

 private:
  std::string previous_;
};

// This thread's prefix ("" without a ScopedLogContext).
const std::string& LogContext();

// Whether progress output is enabled (off with --quiet).
bool ProgressEnabled();

// "1.2 s", "3 min 04 s", "1 h 02 min".
std::string FormatDuration(double seconds);
// "512 B", "1.5 MiB", "2.0 GiB".
std::string FormatBytes(double bytes);

// Peak resident set size of this process in bytes (from /proc/self/status VmHWM), 0 if unknown.
uint64_t PeakRssBytes();

class Progress {
 public:
  // `what` names the work ("ingest", "files"); total <= 0 means unknown.
  Progress(std::string what, int64_t total, std::string unit = "items");
  ~Progress();  // Calls Finish() if not yet finished.

  void Add(int64_t n = 1);
  // Overrides the free-form suffix shown after the counters (e.g. "loss=0.123").
  void SetSuffix(std::string suffix);
  // Prints the final line with the total time.
  void Finish();

 private:
  void MaybePrint(bool force);

  std::string context_;  // the creating thread's ScopedLogContext
  std::string what_, unit_, suffix_;
  int64_t total_;
  std::atomic<int64_t> done_{0};
  std::chrono::steady_clock::time_point start_, last_print_;
  std::mutex mu_;
  bool finished_ = false;
  bool tty_ = false;
  bool printed_inline_ = false;
};

}  // namespace tpugraphs

#endif  // TPUGRAPHS_COMMON_LOGGING_H_
