#include "tpugraphs/tune/measurements.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/hash.h"
#include "tpugraphs/common/json_util.h"
#include "tpugraphs/common/logging.h"

namespace tpugraphs::tune {
namespace {

constexpr char kHeader[] = "# tpugraphs tune measurements 1";

uint64_t KeyOf(const std::string& graph, const Config& c) {
  return Fnv1aStep(Fnv1a(graph), HashConfig(c));
}

std::vector<std::string> SplitOn(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

// A whole-string integer (optional sign), or false.
bool ParseInteger(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *v = x;
  return true;
}

bool ParseReal(const std::string& s, double* v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return errno != ERANGE && end == s.c_str() + s.size();
}

// A line without its trailing '\r' and surrounding blanks.
std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

// Whitespace-separated fields.
std::vector<std::string> Fields(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string Shorten(const std::string& line) {
  return line.size() <= 80 ? line : line.substr(0, 77) + "...";
}

}  // namespace

std::string FormatMeasurement(const Measurement& m) {
  std::string s = m.graph + "\t" + std::to_string(m.round) + "\t" + JsonNumber(m.runtime, 17) +
                  "\t" + (std::isfinite(m.predicted) ? JsonNumber(m.predicted, 17) : "nan") + "\t";
  if (!m.config.layout.empty() || m.config.tile.empty()) {
    s += "L:";
    for (size_t i = 0; i < m.config.layout.size(); ++i) {
      if (i > 0) s += ',';
      s += std::to_string(static_cast<int>(m.config.layout[i]));
    }
  } else {
    s += "T:";
    for (size_t i = 0; i < m.config.tile.size(); ++i) {
      if (i > 0) s += ',';
      s += JsonNumber(m.config.tile[i], 9);
    }
  }
  return s + "\n";
}

StatusOr<Measurement> ParseMeasurement(const std::string& line, const std::string& where) {
  const std::vector<std::string> f = SplitOn(line, '\t');
  if (f.size() != 5) {
    return InvalidArgumentError(where +
                                ": expected 5 tab-separated fields (graph, round, runtime, "
                                "predicted, config), found " +
                                std::to_string(f.size()));
  }
  Measurement m;
  m.graph = f[0];
  if (m.graph.find(':') == std::string::npos) {
    return InvalidArgumentError(where + ": graph '" + Shorten(m.graph) +
                                "' is not collection:name");
  }
  if (!ParseInteger(f[1], &m.round) || m.round < 1) {
    return InvalidArgumentError(where + ": round '" + Shorten(f[1]) + "' is not an integer >= 1");
  }
  if (!ParseReal(f[2], &m.runtime) || !std::isfinite(m.runtime) || m.runtime <= 0) {
    return InvalidArgumentError(where + ": runtime '" + Shorten(f[2]) +
                                "' is not a finite number > 0");
  }
  if (f[3] == "nan") {
    m.predicted = std::numeric_limits<double>::quiet_NaN();
  } else if (!ParseReal(f[3], &m.predicted) || !std::isfinite(m.predicted)) {
    return InvalidArgumentError(where + ": predicted score '" + Shorten(f[3]) +
                                "' is neither a finite number nor nan");
  }
  const std::string& c = f[4];
  if (c.size() < 2 || (c.compare(0, 2, "L:") != 0 && c.compare(0, 2, "T:") != 0)) {
    return InvalidArgumentError(where + ": the configuration must start with L: or T:");
  }
  const bool layout = c[0] == 'L';
  const std::vector<std::string> values = SplitOn(c.substr(2), ',');
  for (const std::string& v : values) {
    if (layout) {
      int64_t x = 0;
      if (!ParseInteger(v, &x) || x < -128 || x > 127) {
        return InvalidArgumentError(where + ": layout value '" + Shorten(v) +
                                    "' is not an integer in [-128, 127]");
      }
      m.config.layout.push_back(static_cast<int8_t>(x));
    } else {
      double x = 0;
      if (!ParseReal(v, &x) || !std::isfinite(x)) {
        return InvalidArgumentError(where + ": tile value '" + Shorten(v) + "' is not a number");
      }
      m.config.tile.push_back(static_cast<float>(x));
    }
  }
  return m;
}

StatusOr<MeasurementLog> MeasurementLog::Open(const std::string& path) {
  MeasurementLog log;
  log.path_ = path;
  if (path.empty()) return log;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return log;  // created by the first Append
    return IoError(path + ": " + std::strerror(errno));
  }
  TPUG_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    ++line_no;
    if (nl == std::string::npos) {  // torn by a kill mid-write: not a record
      spdlog::warn("{}: line {} has no newline (a run was stopped while writing it); dropped", path,
                   line_no);
      log.keep_bytes_ = static_cast<int64_t>(pos);
      break;
    }
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1 && line != kHeader) {
      return InvalidArgumentError(path +
                                  ": not a tpugraphs measurements file (its first line must "
                                  "be '" +
                                  std::string(kHeader) + "')");
    }
    if (line.empty() || line[0] == '#') continue;
    TPUG_ASSIGN_OR_RETURN(Measurement m,
                          ParseMeasurement(line, path + ":" + std::to_string(line_no)));
    log.index_.emplace(KeyOf(m.graph, m.config), log.records_.size());
    log.records_.push_back(std::move(m));
  }
  return log;
}

const Measurement* MeasurementLog::Find(const std::string& graph, const Config& config) const {
  auto [begin, end] = index_.equal_range(KeyOf(graph, config));
  const Measurement* first = nullptr;
  for (auto it = begin; it != end; ++it) {
    const Measurement& m = records_[it->second];
    if (m.graph == graph && m.config == config && (first == nullptr || &m < first)) first = &m;
  }
  return first;
}

Status MeasurementLog::Append(const std::vector<Measurement>& records) {
  if (!path_.empty() && !records.empty()) {
    struct stat st;
    const bool existed = ::stat(path_.c_str(), &st) == 0;
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return IoError(path_ + ": cannot open for appending: " + std::strerror(errno));
    std::string text;
    if (keep_bytes_ >= 0) {  // cut the torn line off first
      if (::ftruncate(fd, keep_bytes_) != 0) {
        const std::string err = std::strerror(errno);
        ::close(fd);
        return IoError(path_ + ": cannot cut off its torn last line: " + err);
      }
      keep_bytes_ = -1;
    }
    const off_t start = ::lseek(fd, 0, SEEK_END);
    if (start == 0) text = std::string(kHeader) + "\n";
    for (const Measurement& m : records) text += FormatMeasurement(m);
    // A failed append (a full disk) is taken back: the file keeps exactly the records it had,
    // none cut in the middle, and a file this append created is removed again.
    auto undo = [&](const std::string& what) {
      const std::string err = std::strerror(errno);
      const bool undone = start >= 0 && ::ftruncate(fd, start) == 0;
      ::close(fd);
      if (undone && start == 0 && !existed) ::unlink(path_.c_str());
      return IoError(path_ + ": " + what + ": " + err +
                     (undone ? " (the batch's measurements were not kept)"
                             : " (its last line may be cut; the next run drops it)"));
    };
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return undo("write failed");
      if (w == 0) {
        errno = ENOSPC;
        return undo("write failed");
      }
      done += static_cast<size_t>(w);
    }
    if (::fsync(fd) != 0) return undo("cannot make the measurements durable");
    if (::close(fd) != 0) {
      return IoError(path_ + ": cannot make the measurements durable: " + std::strerror(errno));
    }
  }
  for (const Measurement& m : records) {
    index_.emplace(KeyOf(m.graph, m.config), records_.size());
    records_.push_back(m);
  }
  return Status::Ok();
}

std::string SubstituteCommand(const std::string& command, const std::string& path) {
  std::string quoted = "'";
  for (char c : path) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  quoted += "'";
  std::string out;
  bool substituted = false;
  for (size_t i = 0; i < command.size(); ++i) {
    if (command.compare(i, 2, "{}") == 0) {
      out += quoted;
      ++i;
      substituted = true;
    } else {
      out += command[i];
    }
  }
  return substituted ? out : out + " " + quoted;
}

StatusOr<std::vector<double>> ParseMeasureOutput(const std::string& output, int64_t k,
                                                 const std::string& command) {
  std::vector<double> runtime(static_cast<size_t>(k), 0.0);
  std::vector<int64_t> line_of(static_cast<size_t>(k), 0);
  const std::string who = "measure command `" + command + "`";
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < output.size()) {
    size_t nl = output.find('\n', pos);
    if (nl == std::string::npos) nl = output.size();
    const std::string line = Trimmed(output.substr(pos, nl - pos));
    pos = nl + 1;
    ++line_no;
    const std::vector<std::string> f = Fields(line);
    int64_t index = 0;
    if (f.empty() || !ParseInteger(f[0], &index)) continue;  // a header or a message
    const std::string at =
        who + ", output line " + std::to_string(line_no) + " '" + Shorten(line) + "'";
    if (f.size() != 2) {
      return InvalidArgumentError(at + ": expected 'index<TAB>runtime'");
    }
    if (index < 0 || index >= k) {
      return InvalidArgumentError(at + ": index " + std::to_string(index) +
                                  " is not one of the batch's 0.." + std::to_string(k - 1));
    }
    double v = 0;
    if (!ParseReal(f[1], &v) || !std::isfinite(v)) {
      return InvalidArgumentError(at + ": the runtime is not a finite number");
    }
    if (v <= 0) return InvalidArgumentError(at + ": the runtime is not positive");
    if (line_of[index] != 0) {
      return InvalidArgumentError(at + ": configuration " + std::to_string(index) +
                                  " was already given on line " + std::to_string(line_of[index]));
    }
    line_of[index] = line_no;
    runtime[index] = v;
  }
  std::string missing;
  int64_t n_missing = 0;
  for (int64_t i = 0; i < k; ++i) {
    if (line_of[i] != 0) continue;
    if (++n_missing <= 10) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
  }
  if (n_missing > 0) {
    return InvalidArgumentError(who + " printed no runtime for " + std::to_string(n_missing) +
                                " of the batch's " + std::to_string(k) + " configurations (index " +
                                missing + (n_missing > 10 ? ", ..." : "") + ")");
  }
  return runtime;
}

StatusOr<std::vector<double>> RunMeasureCommand(const std::string& command, const std::string& npz,
                                                int64_t k) {
  const std::string line = SubstituteCommand(command, npz);
  std::fflush(nullptr);
  std::FILE* pipe = ::popen(line.c_str(), "r");
  if (pipe == nullptr) {
    return IoError("measure command `" + command + "`: cannot start: " + std::strerror(errno));
  }
  std::string output;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int status = ::pclose(pipe);
  if (status == -1) {
    return IoError("measure command `" + command + "`: " + std::strerror(errno));
  }
  if (WIFSIGNALED(status)) {
    return InvalidArgumentError("measure command `" + command + "` was killed by signal " +
                                std::to_string(WTERMSIG(status)) + " measuring " + npz);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    return InvalidArgumentError("measure command `" + command + "` failed (exit status " +
                                std::to_string(WEXITSTATUS(status)) + ") measuring " + npz);
  }
  return ParseMeasureOutput(output, k, command);
}

}  // namespace tpugraphs::tune
