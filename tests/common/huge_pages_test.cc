#include "tpugraphs/common/huge_pages.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace tpugraphs {
namespace {

// Whether the kernel gives transparent huge pages to those who ask (madvise or always).
bool KernelOffersHugePages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  return std::getline(in, line) && line.find("[never]") == std::string::npos;
}

// The VmFlags line of the mapping of /proc/self/smaps that holds address p ("" if none).
std::string FlagsOfMappingHolding(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' &&
        line.find(' ') != std::string::npos && line.find(':') > line.find(' ')) {
      inside = a >= lo && a < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

bool Advised(const std::string& flags) { return flags.find(" hg") != std::string::npos; }

#if defined(__GLIBC__) && defined(__linux__)
TEST(HugePagesTest, TheMainHeapAndAWorkersHeapAreAdvised) {
  if (!KernelOffersHugePages()) GTEST_SKIP() << "transparent_hugepage is [never] here";
  ASSERT_TRUE(HugePagesWanted());
  // As main() sets them: blocks below 32 MiB come from the heap, which is never trimmed.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  AdviseMainHeapHugePages(64ul << 20);
  // A block well inside the reserve: the heap's advised range starts at most 2 MiB above its start.
  void* block = std::malloc(8ul << 20);
  ASSERT_NE(block, nullptr);
  const std::string main_flags = FlagsOfMappingHolding(static_cast<char*>(block) + (4ul << 20));
  std::free(block);
  EXPECT_TRUE(Advised(main_flags)) << main_flags;
  std::string worker_flags;
  std::thread worker([&] {
    void* probe = std::malloc(1 << 20);
    AdviseThreadHeapHugePages();
    worker_flags = FlagsOfMappingHolding(probe);
    std::free(probe);
  });
  worker.join();
  EXPECT_TRUE(Advised(worker_flags)) << worker_flags;
}
#endif

}  // namespace
}  // namespace tpugraphs
