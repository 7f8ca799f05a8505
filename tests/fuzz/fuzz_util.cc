#include "fuzz_util.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

namespace tpugraphs::fuzz {
namespace {

namespace fs = std::filesystem;

const fs::path& ScratchDir() {
  static const fs::path dir = [] {
    // $TMPDIR when set; else /dev/shm, a memory file system, so that a write of the input
    // never waits on a disk that is busy writing back other work (which can stall a unit
    // past -timeout); else the system's temporary directory.
    std::error_code ec;
    fs::path base;
    const char* tmpdir = std::getenv("TMPDIR");
    if ((tmpdir == nullptr || *tmpdir == '\0') && access("/dev/shm", W_OK | X_OK) == 0) {
      base = "/dev/shm";
    } else {
      base = fs::temp_directory_path(ec);
      if (ec) base = "/tmp";
    }
    fs::path d = base / ("tpugraphs-fuzz-" + std::to_string(getpid()));
    fs::create_directories(d, ec);
    if (ec) Fail("cannot create scratch directory " + d.string() + ": " + ec.message());
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(ScratchDir(), ignored);
    });
    return d;
  }();
  return dir;
}

}  // namespace

void InitHarness() {
  static std::once_flag once;
  std::call_once(once, [] { spdlog::set_level(spdlog::level::off); });
}

std::string ScratchPath(std::string_view suffix) {
  return (ScratchDir() / ("input" + std::string(suffix))).string();
}

const std::string& WriteScratchFile(const uint8_t* data, size_t size, std::string_view suffix) {
  static std::map<std::string, std::string, std::less<>> paths;
  auto it = paths.find(suffix);
  if (it == paths.end()) it = paths.emplace(std::string(suffix), ScratchPath(suffix)).first;
  const std::string& path = it->second;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) Fail("cannot open scratch file " + path);
  if (size > 0 && std::fwrite(data, 1, size, f) != size) Fail("cannot write " + path);
  if (std::fclose(f) != 0) Fail("cannot close " + path);
  return path;
}

void Fail(std::string_view message) {
  std::fprintf(stderr, "fuzz harness invariant violated: %.*s\n", static_cast<int>(message.size()),
               message.data());
  std::abort();
}

}  // namespace tpugraphs::fuzz
