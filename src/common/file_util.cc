#include "tpugraphs/common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>

namespace tpugraphs {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

std::mutex& OpenTempsMutex() {
  static std::mutex mu;
  return mu;
}
std::set<std::string>& OpenTemps() {
  static std::set<std::string> temps;
  return temps;
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
  static std::atomic<uint64_t> counter{0};
  path_ = path;
  tmp_path_ = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  if (file_ == nullptr) {
    std::string err = ErrnoText();
    tmp_path_.clear();
    return IoError(path + ": cannot create output file: " + err);
  }
  {
    std::lock_guard<std::mutex> lock(OpenTempsMutex());
    OpenTemps().insert(tmp_path_);
  }
  offset_ = 0;
  return Status::Ok();
}

Status AtomicFileWriter::Append(std::string_view data) {
  if (file_ == nullptr) return InternalError(path_ + ": write to a file that is not open");
  if (!data.empty() && std::fwrite(data.data(), 1, data.size(), file_) != data.size()) {
    return IoError(path_ + ": write failed: " + ErrnoText());
  }
  offset_ += data.size();
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
    return IoError(path_ + ": flush failed: " + err);
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    std::string err = ErrnoText();
    Abandon();
    return IoError(path_ + ": cannot rename temporary into place: " + err);
  }
  {
    std::lock_guard<std::mutex> lock(OpenTempsMutex());
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
    std::lock_guard<std::mutex> lock(OpenTempsMutex());
    OpenTemps().erase(tmp_path_);
    tmp_path_.clear();
  }
}

void RemoveOpenTemporaryFiles() {
  // Called from a signal handler: best effort, no locking (the process is about to exit).
  for (const auto& p : OpenTemps()) ::unlink(p.c_str());
}

}  // namespace tpugraphs
