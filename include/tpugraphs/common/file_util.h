// File helpers: whole-file reads and atomic writes.
//
// Every output file of tpugraphs is written through AtomicFileWriter: data goes to a temporary
// file beside the destination and is renamed over it only on Commit(). A failed or abandoned
// write removes the temporary, so a failed command never leaves a half-written output behind and
// never damages an existing file of the same name.
//
// Thread-safety: an AtomicFileWriter is used by one thread at a time.
#ifndef TPUGRAPHS_COMMON_FILE_UTIL_H_
#define TPUGRAPHS_COMMON_FILE_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/status.h"

namespace tpugraphs {

// Reads a whole file. Errors name the path.
StatusOr<std::string> ReadFileToString(const std::string& path);

// Size of a regular file in bytes.
StatusOr<uint64_t> FileSize(const std::string& path);

// Opens a regular file read-only for positioned reads (pread). On success *fd is the open
// descriptor (the caller closes it) and *size the file size. Errors name the path: NotFound,
// IoError, or InvalidArgument for something that is not a regular file (a directory, a device).
Status OpenRegularFileForReading(const std::string& path, int* fd, uint64_t* size);

// Writes `contents` to `path` atomically.
Status WriteFileAtomically(const std::string& path, std::string_view contents);

class AtomicFileWriter {
 public:
  AtomicFileWriter() = default;
  ~AtomicFileWriter();  // Abandons (deletes the temporary) unless committed.
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Creates the temporary file "<path>.tmp-<pid>-<n>" in the destination directory.
  Status Open(const std::string& path);
  Status Append(std::string_view data);
  Status Append(const void* data, size_t size) {
    return Append(std::string_view(static_cast<const char*>(data), size));
  }
  // Bytes appended so far.
  uint64_t offset() const { return offset_; }
  // Replaces bytes already appended at [offset, offset + data.size()) (e.g. a header field that
  // is known only after the data behind it); later Appends still go to the end. InternalError if
  // the range reaches past offset().
  Status Overwrite(uint64_t offset, std::string_view data);
  // Flushes, fsyncs and renames the temporary over the destination.
  Status Commit();
  // Deletes the temporary. Safe to call more than once.
  void Abandon();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string tmp_path_;
  std::FILE* file_ = nullptr;
  uint64_t offset_ = 0;
};

// Writes a set of files below a directory `root` all or nothing. Files are written into a
// staging directory "<root>.tmp-<pid>-<n>" beside root; Commit() then
//   - renames the staging directory to root when root does not exist (one atomic step), or
//   - when root exists, first checks that every staged file can take its place (no directory
//     at a file's path, no non-directory at one of its parent directories), then renames each
//     staged file over its destination (creating missing subdirectories) and removes the
//     staging directory. Files of root that are not written are left untouched.
// Abandon() (also the destructor without Commit) removes the staging directory and any parent
// directory of root that Begin() created, so a failed command leaves root as it was. A process
// killed with SIGKILL leaves its staging directory; the next Begin() for the same root removes
// staging directories of processes that no longer exist (RemoveStaleTemporaries).
//
// Thread-safety: Path() may be called from several threads; Begin/Commit/Abandon from one.
class StagedDirectory {
 public:
  StagedDirectory() = default;
  ~StagedDirectory();
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  // Creates the staging directory. Fails (before anything is written) when root exists and is
  // not a directory, or when the staging directory cannot be created.
  Status Begin(const std::string& root);
  // The staging path of `relative` (a path below root); creates its parent directories.
  StatusOr<std::string> Path(const std::string& relative);
  // Where `relative` ends up after Commit().
  std::string FinalPath(const std::string& relative) const;
  Status Commit();
  void Abandon();

  const std::string& root() const { return root_; }
  const std::string& staging() const { return staging_; }

 private:
  std::string root_;
  std::string staging_;
  std::vector<std::string> created_parents_;  // directories Begin created for root, outermost last
};

// Removes "<path>.tmp-<pid>-<n>" files and directories next to `path` whose process <pid> no
// longer exists (left by a killed process). Best effort: errors are ignored.
void RemoveStaleTemporaries(const std::string& path);

// Removes every temporary file created by AtomicFileWriter that is still open and every
// StagedDirectory's staging directory not yet committed, makes every later attempt to create or
// commit one fail, then ends the process by signal `sig` (default action). The CLI calls it from
// the thread that waits for SIGINT and SIGTERM (blocked in every other thread), so that Ctrl-C
// or a termination leaves no temporaries behind even while other threads are writing.
[[noreturn]] void TerminateOnSignal(int sig);

}  // namespace tpugraphs

#endif  // TPUGRAPHS_COMMON_FILE_UTIL_H_
