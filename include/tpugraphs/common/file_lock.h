// One writer per output: an advisory lock beside an output path.
//
// A command that writes a long-lived output (train's model and checkpoint, tune's measurements)
// first takes "<path>.lock" with flock(2) and writes its pid into it. A second command on the
// same output is refused at once, naming the holder's pid, instead of racing the first. The
// kernel releases the lock when its process dies however it dies (kill -9 included), so a lock
// left by a killed run never blocks the next one; that run takes the same file and removes it
// when it is done. On SIGINT and SIGTERM the CLI removes the lock files it holds
// (ReleaseOutputLocksOnSignal) before it dies.
//
// Thread-safety: OutputLock objects may be created and destroyed from any threads.
#ifndef TPUGRAPHS_COMMON_FILE_LOCK_H_
#define TPUGRAPHS_COMMON_FILE_LOCK_H_

#include <memory>
#include <string>
#include <string_view>

#include "tpugraphs/common/status.h"

namespace tpugraphs {

class OutputLock {
 public:
  // Takes "<path>.lock". `what` names the output in the refusal ("--output"). Fails with
  // FailedPrecondition, naming the holder's pid, when another process holds it; with IoError
  // when the lock file cannot be created.
  static StatusOr<std::unique_ptr<OutputLock>> Acquire(const std::string& path,
                                                       std::string_view what);
  ~OutputLock();  // Removes the lock file (unless RemoveFile ran) and releases the lock.
  // Removes the lock file now, the lock still held until destruction: called just before the
  // last write of the output, so that a process killed after that write leaves no lock file
  // behind (one killed before it leaves none either, and its output is written again).
  void RemoveFile();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  const std::string& lock_path() const { return lock_path_; }

 private:
  OutputLock(std::string lock_path, int fd) : lock_path_(std::move(lock_path)), fd_(fd) {}
  std::string lock_path_;
  int fd_ = -1;
  bool file_removed_ = false;
};

// Removes "<path>.lock" when no process holds it (a lock file left by a killed run whose output
// will not be written again, e.g. a finished ensemble member's). Best effort.
void RemoveStaleOutputLock(const std::string& path);

// Removes the lock files this process holds. For the CLI's signal thread, just before the
// process ends by the signal; safe to call once, with other threads still running.
void ReleaseOutputLocksOnSignal();

}  // namespace tpugraphs

#endif  // TPUGRAPHS_COMMON_FILE_LOCK_H_
