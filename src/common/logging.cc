#include "tpugraphs/common/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace tpugraphs {
namespace {
std::atomic<bool> g_progress_enabled{true};

// The front-end's handler (SetLogHandler); guarded by g_handler_mu, called under it.
std::mutex g_handler_mu;
LogHandler g_handler;
std::atomic<bool> g_has_handler{false};

// ScopedLogContext's prefix of this thread.
thread_local std::string t_context;

// The pattern flag %* of the log lines: the logging thread's prefix.
class ContextFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    dest.append(t_context.data(), t_context.data() + t_context.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<ContextFlag>();
  }
};

class HandlerSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string text = t_context + std::string(msg.payload.data(), msg.payload.size());
    std::lock_guard<std::mutex> lock(g_handler_mu);
    if (g_handler) g_handler(static_cast<int>(msg.level), text);
  }
  void flush_() override {}
};

// Sends a progress line to the handler; false when there is none.
bool ProgressToHandler(const std::string& line) {
  if (!g_has_handler) return false;
  std::lock_guard<std::mutex> lock(g_handler_mu);
  if (!g_handler) return false;
  g_handler(static_cast<int>(spdlog::level::info), line);
  return true;
}
}  // namespace

void SetLogHandler(LogHandler handler, int min_level) {
  {
    std::lock_guard<std::mutex> lock(g_handler_mu);
    g_handler = std::move(handler);
    g_has_handler = static_cast<bool>(g_handler);
  }
  if (!g_has_handler) {
    spdlog::drop("tpugraphs");
    SetupLogging(g_progress_enabled ? 0 : -1);
    return;
  }
  auto logger =
      std::make_shared<spdlog::logger>("tpugraphs-handler", std::make_shared<HandlerSink>());
  logger->set_level(static_cast<spdlog::level::level_enum>(min_level));
  spdlog::set_default_logger(logger);
  g_progress_enabled = true;
}

void SetupLogging(int verbosity) {
  auto logger = spdlog::stderr_color_mt("tpugraphs");
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<ContextFlag>('*').set_pattern("[%H:%M:%S.%e] [%^%l%$] %*%v");
  logger->set_formatter(std::move(formatter));
  spdlog::level::level_enum level = spdlog::level::info;
  if (verbosity < 0) level = spdlog::level::warn;
  if (verbosity == 1) level = spdlog::level::debug;
  if (verbosity >= 2) level = spdlog::level::trace;
  logger->set_level(level);
  spdlog::set_default_logger(logger);
  g_progress_enabled = verbosity >= 0;
}

ScopedLogContext::ScopedLogContext(std::string prefix) : previous_(std::move(t_context)) {
  t_context = std::move(prefix);
}

ScopedLogContext::~ScopedLogContext() { t_context = std::move(previous_); }

const std::string& LogContext() { return t_context; }

bool ProgressEnabled() { return g_progress_enabled; }

std::string FormatDuration(double s) {
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%.1f s", s);
  } else if (s < 3600) {
    int m = static_cast<int>(s / 60);
    std::snprintf(buf, sizeof(buf), "%d min %02d s", m, static_cast<int>(s - 60 * m));
  } else {
    int h = static_cast<int>(s / 3600);
    std::snprintf(buf, sizeof(buf), "%d h %02d min", h, static_cast<int>((s - 3600 * h) / 60));
  }
  return buf;
}

std::string FormatBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

uint64_t PeakRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

Progress::Progress(std::string what, int64_t total, std::string unit)
    : context_(t_context), what_(std::move(what)), unit_(std::move(unit)), total_(total) {
  start_ = last_print_ = std::chrono::steady_clock::now();
  tty_ = ::isatty(STDERR_FILENO) && !g_has_handler && t_context.empty();
}

Progress::~Progress() { Finish(); }

void Progress::Add(int64_t n) {
  done_ += n;
  MaybePrint(false);
}

void Progress::SetSuffix(std::string suffix) {
  std::lock_guard<std::mutex> lock(mu_);
  suffix_ = std::move(suffix);
}

void Progress::MaybePrint(bool force) {
  if (!ProgressEnabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto now = std::chrono::steady_clock::now();
  double since = std::chrono::duration<double>(now - last_print_).count();
  if (!force && since < (tty_ ? 0.2 : 5.0)) return;
  last_print_ = now;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  int64_t done = done_;
  double rate = elapsed > 0 ? done / elapsed : 0.0;
  char head[256];
  if (total_ > 0) {
    double frac = static_cast<double>(done) / total_;
    std::string eta = rate > 0 && done < total_ ? FormatDuration((total_ - done) / rate) : "-";
    std::snprintf(head, sizeof(head), "%s%s: %lld/%lld %s (%.0f%%) %.1f %s/s ETA %s",
                  context_.c_str(), what_.c_str(), static_cast<long long>(done),
                  static_cast<long long>(total_), unit_.c_str(), 100.0 * frac, rate, unit_.c_str(),
                  eta.c_str());
  } else {
    std::snprintf(head, sizeof(head), "%s%s: %lld %s %.1f %s/s", context_.c_str(), what_.c_str(),
                  static_cast<long long>(done), unit_.c_str(), rate, unit_.c_str());
  }
  std::string line = head;
  if (!suffix_.empty()) line += " " + suffix_;
  if (ProgressToHandler(line)) return;
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    printed_inline_ = true;
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

void Progress::Finish() {
  if (finished_) return;
  finished_ = true;
  if (!ProgressEnabled()) return;
  if (printed_inline_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  // The log line carries the finishing thread's prefix; the creating thread's, if another.
  spdlog::info("{}{}: {} {} in {}", t_context == context_ ? "" : context_, what_, done_.load(),
               unit_, FormatDuration(elapsed));
}

}  // namespace tpugraphs
