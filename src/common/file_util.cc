#include "tpugraphs/common/file_util.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace tpugraphs {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

// Guards the registries below and is held while a temporary is created, renamed into place or
// removed, so that TerminateOnSignal() (on the CLI's signal thread) sees every temporary that
// exists and none is created after it ran. Recursive: Commit() may call Abandon().
std::recursive_mutex& OpenTempsMutex() {
  static std::recursive_mutex mu;
  return mu;
}
// Set by TerminateOnSignal(): no temporary may be created or committed any more.
bool& Terminating() {
  static bool terminating = false;
  return terminating;
}
std::set<std::string>& OpenTemps() {
  static std::set<std::string> temps;
  return temps;
}
// Staging directory -> the output directory it becomes (as given to Begin).
std::map<std::string, std::string>& OpenStagingDirs() {
  static std::map<std::string, std::string> dirs;
  return dirs;
}

// The path a message names for a file being written: a file below a staging directory by the
// path it gets in the output directory (the staging directory is gone once the command fails).
std::string ShownPath(const std::string& path) {
  std::lock_guard<std::recursive_mutex> lock(OpenTempsMutex());
  for (const auto& [staging, root] : OpenStagingDirs()) {
    if (path.size() > staging.size() + 1 && path.compare(0, staging.size(), staging) == 0 &&
        path[staging.size()] == '/') {
      return (std::filesystem::path(root) / path.substr(staging.size() + 1)).string();
    }
  }
  return path;
}

std::atomic<uint64_t>& TempCounter() {
  static std::atomic<uint64_t> counter{0};
  return counter;
}

// "<name>.tmp-<pid>-<n>": the suffix every temporary file or directory carries.
std::string TempSuffix() {
  return ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(TempCounter()++);
}

// Whether pid is a process that has ended but not been reaped yet (a killed process whose parent
// died with it waits for init): it writes nothing any more.
bool IsZombie(pid_t pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return false;
  char buf[512] = {0};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  // "pid (comm) S ...": the state follows the last ')'.
  const char* close = std::strrchr(buf, ')');
  return n > 0 && close != nullptr && close[1] == ' ' && close[2] == 'Z';
}

int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  if (type == FTW_DP) {
    ::rmdir(path);
  } else {
    ::unlink(path);
  }
  return 0;
}

// Recursive removal with plain system calls (also used from the signal handler).
void RemoveTree(const std::string& path) {
  ::nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
}

namespace fs = std::filesystem;

// root as an absolute path without a trailing separator or "." / ".." components.
fs::path AbsoluteRoot(const std::string& root) {
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(root), ec).lexically_normal();
  if (ec) p = fs::path(root).lexically_normal();
  if (p.filename().empty() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p;
}

}  // namespace

StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    if (errno == ENOENT) return NotFoundError(path + ": no such file");
    return IoError(path + ": cannot open: " + ErrnoText());
  }
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) return IoError(path + ": read failed");
  return out;
}

StatusOr<uint64_t> FileSize(const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return NotFoundError(path + ": no such file");
    return IoError(path + ": " + ec.message());
  }
  return static_cast<uint64_t>(size);
}

Status OpenRegularFileForReading(const std::string& path, int* fd, uint64_t* size) {
  *fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (*fd < 0) {
    if (errno == ENOENT) return NotFoundError(path + ": no such file");
    return IoError(path + ": cannot open: " + ErrnoText());
  }
  struct stat st;
  if (::fstat(*fd, &st) != 0) return IoError(path + ": cannot stat: " + ErrnoText());
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError(path + ": not a regular file");
  *size = static_cast<uint64_t>(st.st_size);
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  AtomicFileWriter w;
  TPUG_RETURN_IF_ERROR(w.Open(path));
  TPUG_RETURN_IF_ERROR(w.Append(contents));
  return w.Commit();
}

AtomicFileWriter::~AtomicFileWriter() { Abandon(); }

Status AtomicFileWriter::Open(const std::string& path) {
  Abandon();
  path_ = path;
  tmp_path_ = path + TempSuffix();
  {
    std::lock_guard<std::recursive_mutex> lock(OpenTempsMutex());
    if (Terminating()) {
      tmp_path_.clear();
      return IoError(path + ": not written: the process is terminating");
    }
    file_ = std::fopen(tmp_path_.c_str(), "wb");
    if (file_ != nullptr) OpenTemps().insert(tmp_path_);
  }
  if (file_ == nullptr) {
    std::string err = ErrnoText();
    tmp_path_.clear();
    return IoError(ShownPath(path) + ": cannot create output file: " + err);
  }
  offset_ = 0;
  return Status::Ok();
}

Status AtomicFileWriter::Append(std::string_view data) {
  if (file_ == nullptr) return InternalError(path_ + ": write to a file that is not open");
  if (!data.empty() && std::fwrite(data.data(), 1, data.size(), file_) != data.size()) {
    return IoError(ShownPath(path_) + ": write failed: " + ErrnoText());
  }
  offset_ += data.size();
  return Status::Ok();
}

Status AtomicFileWriter::Overwrite(uint64_t offset, std::string_view data) {
  if (file_ == nullptr) return InternalError(path_ + ": write to a file that is not open");
  if (offset > offset_ || data.size() > offset_ - offset) {
    return InternalError(path_ + ": overwrite of bytes [" + std::to_string(offset) + ", +" +
                         std::to_string(data.size()) + ") beyond the " + std::to_string(offset_) +
                         " written");
  }
  // Buffered bytes go out first; pwrite leaves the stream's position at the end.
  if (std::fflush(file_) != 0) return IoError(ShownPath(path_) + ": write failed: " + ErrnoText());
  const int fd = ::fileno(file_);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t w =
        ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return IoError(ShownPath(path_) + ": write failed: " + ErrnoText());
    done += static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status AtomicFileWriter::Commit() {
  if (file_ == nullptr) return InternalError(path_ + ": commit of a file that is not open");
  bool ok = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  ok = (std::fclose(file_) == 0) && ok;
  file_ = nullptr;
  if (!ok) {
    std::string err = ErrnoText();
    Abandon();
    return IoError(ShownPath(path_) + ": flush failed: " + err);
  }
  {
    std::lock_guard<std::recursive_mutex> lock(OpenTempsMutex());
    if (Terminating()) return IoError(path_ + ": not written: the process is terminating");
    if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
      std::string err = ErrnoText();
      Abandon();
      return IoError(ShownPath(path_) + ": cannot rename temporary into place: " + err);
    }
    OpenTemps().erase(tmp_path_);
  }
  tmp_path_.clear();
  return Status::Ok();
}

void AtomicFileWriter::Abandon() {
  if (file_ != nullptr) {
    std::fclose(file_);
    file_ = nullptr;
  }
  if (!tmp_path_.empty()) {
    std::remove(tmp_path_.c_str());
    std::lock_guard<std::recursive_mutex> lock(OpenTempsMutex());
    OpenTemps().erase(tmp_path_);
    tmp_path_.clear();
  }
}

void RemoveStaleTemporaries(const std::string& path) {
  const fs::path abs = AbsoluteRoot(path);
  const std::string prefix = abs.filename().string() + ".tmp-";
  std::error_code ec;
  fs::directory_iterator it(abs.parent_path().empty() ? fs::path(".") : abs.parent_path(), ec);
  if (ec) return;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return;
    const std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // "<pid>-<n>" after the prefix.
    const std::string rest = name.substr(prefix.size());
    const size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string::npos) continue;
    bool digits = true;
    for (size_t i = 0; i < rest.size(); ++i) {
      digits = digits && (i == dash || (rest[i] >= '0' && rest[i] <= '9'));
    }
    if (!digits || dash > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(rest.substr(0, dash)));
    if (pid == ::getpid() || pid <= 0) continue;
    if ((::kill(pid, 0) == 0 || errno != ESRCH) && !IsZombie(pid)) continue;  // alive
    RemoveTree(it->path().string());
  }
}

StagedDirectory::~StagedDirectory() { Abandon(); }

Status StagedDirectory::Begin(const std::string& root) {
  Abandon();
  if (root.empty()) return InvalidArgumentError("empty output directory name");
  root_ = root;
  const fs::path abs = AbsoluteRoot(root);
  std::error_code ec;
  const fs::file_status st = fs::status(abs, ec);
  if (fs::exists(st) && !fs::is_directory(st)) {
    return InvalidArgumentError(root + ": exists and is not a directory");
  }
  // Parents of root that do not exist yet: created now, removed again by Abandon().
  std::vector<fs::path> missing;
  for (fs::path p = abs.parent_path(); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (!fs::create_directory(*it, ec) && ec) {
      Abandon();
      return IoError(it->string() + ": cannot create directory: " + ec.message());
    }
    created_parents_.insert(created_parents_.begin(), it->string());
  }
  RemoveStaleTemporaries(abs.string());
  const std::string staging = abs.string() + TempSuffix();
  std::unique_lock<std::recursive_mutex> lock(OpenTempsMutex());
  if (Terminating()) {
    lock.unlock();
    Abandon();
    return IoError(root + ": not written: the process is terminating");
  }
  const bool created = fs::create_directory(staging, ec);
  if (created) OpenStagingDirs().emplace(staging, root);
  lock.unlock();
  if (!created) {
    Abandon();
    return IoError(staging + ": cannot create staging directory for " + root + ": " +
                   (ec ? ec.message() : std::string("already exists")));
  }
  staging_ = staging;
  return Status::Ok();
}

StatusOr<std::string> StagedDirectory::Path(const std::string& relative) {
  if (staging_.empty()) return InternalError(root_ + ": staged write without Begin()");
  const fs::path rel = fs::path(relative).lexically_normal();
  if (rel.is_absolute() || rel.empty() || *rel.begin() == "..") {
    return InvalidArgumentError(root_ + ": '" + relative + "' is not a path below it");
  }
  const fs::path p = fs::path(staging_) / rel;
  std::error_code ec;
  std::lock_guard<std::recursive_mutex> lock(OpenTempsMutex());
  if (Terminating()) return IoError(root_ + ": not written: the process is terminating");
  fs::create_directories(p.parent_path(), ec);
  if (ec && !fs::is_directory(p.parent_path())) {
    return IoError((fs::path(root_) / rel.parent_path()).string() +
                   ": cannot create directory: " + ec.message());
  }
  return p.string();
}

std::string StagedDirectory::FinalPath(const std::string& relative) const {
  return (fs::path(root_) / fs::path(relative).lexically_normal()).string();
}

Status StagedDirectory::Commit() {
  if (staging_.empty()) return InternalError(root_ + ": commit without Begin()");
  std::lock_guard<std::recursive_mutex> terminate_guard(OpenTempsMutex());
  if (Terminating()) return IoError(root_ + ": not written: the process is terminating");
  const fs::path abs = AbsoluteRoot(root_);
  std::error_code ec;
  if (!fs::exists(abs, ec)) {
    if (std::rename(staging_.c_str(), abs.c_str()) == 0) {
      std::lock_guard<std::recursive_mutex> lock(OpenTempsMutex());
      OpenStagingDirs().erase(staging_);
      staging_.clear();
      created_parents_.clear();
      return Status::Ok();
    }
    // Created meanwhile: fall through to the file-by-file move.
  }
  if (!fs::is_directory(abs, ec)) {
    Status s = IoError(root_ + ": exists and is not a directory");
    Abandon();
    return s;
  }
  // Every staged file and the directories it needs, checked before the first move.
  std::vector<fs::path> files;
  for (fs::recursive_directory_iterator it(staging_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file()) files.push_back(fs::path(it->path()).lexically_relative(staging_));
  }
  if (ec) {
    Status s = IoError(staging_ + ": cannot list staged files: " + ec.message());
    Abandon();
    return s;
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& rel : files) {
    fs::path dir = abs;
    for (const fs::path& part : rel.parent_path()) {
      dir /= part;
      const fs::file_status st = fs::symlink_status(dir, ec);
      if (fs::exists(st) && !fs::is_directory(fs::status(dir, ec))) {
        Status s = IoError(FinalPath(rel.string()) + ": cannot write it: " +
                           (fs::path(root_) / dir.lexically_relative(abs)).string() +
                           " exists and is not a directory; nothing was written");
        Abandon();
        return s;
      }
    }
    if (fs::is_directory(abs / rel, ec)) {
      Status s = IoError(FinalPath(rel.string()) +
                         ": is a directory and cannot be replaced by a file; nothing was written");
      Abandon();
      return s;
    }
  }
  for (const fs::path& rel : files) {
    const fs::path dest = abs / rel;
    fs::create_directories(dest.parent_path(), ec);
    if (std::rename((fs::path(staging_) / rel).c_str(), dest.c_str()) != 0) {
      Status s =
          IoError(FinalPath(rel.string()) + ": cannot move the file into place: " + ErrnoText());
      Abandon();
      return s;
    }
  }
  RemoveTree(staging_);
  std::lock_guard<std::recursive_mutex> lock(OpenTempsMutex());
  OpenStagingDirs().erase(staging_);
  staging_.clear();
  created_parents_.clear();
  return Status::Ok();
}

void StagedDirectory::Abandon() {
  if (!staging_.empty()) {
    RemoveTree(staging_);
    std::lock_guard<std::recursive_mutex> lock(OpenTempsMutex());
    OpenStagingDirs().erase(staging_);
    staging_.clear();
  }
  for (const std::string& d : created_parents_) ::rmdir(d.c_str());  // only if still empty
  created_parents_.clear();
}

void TerminateOnSignal(int sig) {
  {
    // Never released: the process ends below, and no other thread may create or commit a
    // temporary meanwhile.
    OpenTempsMutex().lock();
    Terminating() = true;
    for (const auto& p : OpenTemps()) ::unlink(p.c_str());
    for (const auto& d : OpenStagingDirs()) RemoveTree(d.first);
  }
  // Die of the signal, as the default action would have.
  std::signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  std::raise(sig);
  std::_Exit(128 + sig);
}

}  // namespace tpugraphs
