#include "tpugraphs/common/huge_pages.h"

#include <gtest/gtest.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tpugraphs {
namespace {

// Whether the kernel gives transparent huge pages to those who ask (madvise or always).
bool KernelOffersHugePages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  return std::getline(in, line) && line.find("[never]") == std::string::npos;
}

// The VmFlags lines of the mappings of /proc/self/smaps that hold address p, or (p null) that
// are labelled [heap].
std::vector<std::string> FlagsOf(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  std::string line;
  std::vector<std::string> out;
  bool inside = false;
  while (std::getline(in, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' &&
        line.find(' ') != std::string::npos && line.find(':') > line.find(' ')) {
      inside = p == nullptr ? line.find("[heap]") != std::string::npos : a >= lo && a < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) out.push_back(line);
  }
  return out;
}

bool Advised(const std::vector<std::string>& flags) {
  for (const std::string& f : flags) {
    if (f.find(" hg") != std::string::npos) return true;
  }
  return false;
}

TEST(HugePagesTest, TheMainHeapAndAWorkersHeapAreAdvised) {
  if (!kHeapAdvisable) GTEST_SKIP() << "not glibc's heap (another libc or a sanitizer's)";
  if (!KernelOffersHugePages()) GTEST_SKIP() << "transparent_hugepage is [never] here";
  ASSERT_TRUE(HugePagesWanted());
#if defined(__GLIBC__)
  // As main() sets them: blocks below 32 MiB come from the heap, which is never trimmed.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  ASSERT_FALSE(Advised(FlagsOf(nullptr))) << "advised before the call";
  AdviseMainHeapHugePages(64ul << 20);
  // madvise splits the heap's mapping; the advised part is still labelled [heap].
  EXPECT_TRUE(Advised(FlagsOf(nullptr)));
  std::vector<std::string> worker_flags;
  std::thread worker([&] {
    void* probe = std::malloc(1 << 20);
    AdviseThreadHeapHugePages();
    worker_flags = FlagsOf(probe);
    std::free(probe);
  });
  worker.join();
  EXPECT_TRUE(Advised(worker_flags));
}

}  // namespace
}  // namespace tpugraphs
