#include "tpugraphs/common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

namespace tpugraphs {
namespace {

std::mutex& HeldMutex() {
  static std::mutex mu;
  return mu;
}
std::set<std::string>& Held() {
  static std::set<std::string> held;
  return held;
}

// The pid a lock file names, or "unknown" (a holder that has not written it yet).
std::string HolderOf(int fd) {
  char buf[32] = {0};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "unknown" : pid;
}

// Whether fd is still the file at path (a releasing holder may have removed it meanwhile).
bool StillAt(int fd, const std::string& path) {
  struct stat a, b;
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

}  // namespace

StatusOr<std::unique_ptr<OutputLock>> OutputLock::Acquire(const std::string& path,
                                                          std::string_view what) {
  const std::string lock_path = path + ".lock";
  // A holder removes its file on release; one that raced our open is retried on the new file.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      return IoError(lock_path + ": cannot create the lock file of " + std::string(what) + " " +
                     path + ": " + std::strerror(errno));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string holder = HolderOf(fd);
      ::close(fd);
      if (err == EWOULDBLOCK) {
        return FailedPreconditionError(
            std::string(what) + " " + path + " is being written by another process (pid " + holder +
            ", lock " + lock_path +
            "): wait for it to end, or stop it; two runs never write one output");
      }
      return IoError(lock_path + ": cannot lock: " + std::strerror(err));
    }
    if (!StillAt(fd, lock_path)) {
      ::close(fd);
      continue;
    }
    // Best effort: without the pid the lock still holds, and a refused run names "unknown".
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, pid.data(), pid.size(), 0);
    {
      std::lock_guard<std::mutex> lock(HeldMutex());
      Held().insert(lock_path);
    }
    return std::unique_ptr<OutputLock>(new OutputLock(lock_path, fd));
  }
  return IoError(lock_path +
                 ": the lock file kept being replaced; is another process removing it?");
}

OutputLock::~OutputLock() {
  RemoveFile();
  ::close(fd_);
}

void OutputLock::RemoveFile() {
  if (file_removed_) return;
  file_removed_ = true;
  std::lock_guard<std::mutex> lock(HeldMutex());
  Held().erase(lock_path_);
  // Removed while still held, so that no other process takes the file being removed unnoticed
  // (Acquire checks that the file it locked is still the one at the path).
  ::unlink(lock_path_.c_str());
}

void RemoveStaleOutputLock(const std::string& path) {
  struct stat st;
  if (::stat((path + ".lock").c_str(), &st) != 0) return;
  auto lock = OutputLock::Acquire(path, "output");
  // Destroying the lock removes its file; a lock held by a live process stays.
}

void ReleaseOutputLocksOnSignal() {
  // Never released: the process is about to end.
  HeldMutex().lock();
  for (const std::string& p : Held()) ::unlink(p.c_str());
}

}  // namespace tpugraphs
