#include "tpugraphs/common/huge_pages.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__) && defined(__linux__) && !defined(TPUGRAPHS_SANITIZED_HEAP)
#include <sys/mman.h>
#include <unistd.h>
#define TPUGRAPHS_HAVE_GLIBC_HEAP 1
#endif

namespace tpugraphs {

namespace {
#if defined(TPUGRAPHS_HAVE_GLIBC_HEAP)
constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
// The main heap's range [lo, hi) after AdviseMainHeapHugePages (0, 0 before).
std::uintptr_t g_main_lo = 0, g_main_hi = 0;
#endif
}  // namespace

bool HugePagesWanted() {
  static const bool wanted = [] {
    const char* v = std::getenv("TPUGRAPHS_HUGE_PAGES");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return wanted;
}

void AdviseMainHeapHugePages(unsigned long reserve_bytes) {
#if defined(TPUGRAPHS_HAVE_GLIBC_HEAP)
  if (!HugePagesWanted()) return;
  constexpr std::size_t kBlock = (std::size_t{32} << 20) - (std::size_t{1} << 20);
  constexpr int kMaxBlocks = 64;
  void* blocks[kMaxBlocks] = {};
  int count = 0;
  char* lo = static_cast<char*>(sbrk(0));
  if (lo == reinterpret_cast<char*>(-1)) return;
  for (std::size_t got = 0; got < reserve_bytes && count < kMaxBlocks; got += kBlock) {
    blocks[count++] = std::malloc(kBlock);
  }
  char* hi = static_cast<char*>(sbrk(0));
  for (int i = 0; i < count; ++i) std::free(blocks[i]);
  const std::uintptr_t from =
      (reinterpret_cast<std::uintptr_t>(lo) + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t to = reinterpret_cast<std::uintptr_t>(hi) & ~(kHugePage - 1);
  g_main_lo = reinterpret_cast<std::uintptr_t>(lo);
  g_main_hi = reinterpret_cast<std::uintptr_t>(hi);
  if (to > from) madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE);
#else
  (void)reserve_bytes;
#endif
}

void AdviseThreadHeapHugePages() {
#if defined(TPUGRAPHS_HAVE_GLIBC_HEAP)
  if (!HugePagesWanted()) return;
  constexpr std::uintptr_t kHeapMax = std::uintptr_t{64} << 20;
  void* probe = std::malloc(64);
  if (probe == nullptr) return;
  const std::uintptr_t p = reinterpret_cast<std::uintptr_t>(probe);
  std::free(probe);
  // A block of the main heap (the thread shares the main arena): that heap is advised, or not
  // ours to advise, and its range is not aligned like an arena's.
  const std::uintptr_t brk = reinterpret_cast<std::uintptr_t>(sbrk(0));
  if ((p >= g_main_lo && p < g_main_hi) || (g_main_lo == 0 && p < brk)) return;
  const std::uintptr_t heap = p & ~(kHeapMax - 1);
  // The arena's heap is one mapping of kHeapMax bytes (most of it PROT_NONE until the arena
  // grows); madvise fails without effect if the range is not wholly mapped.
  madvise(reinterpret_cast<void*>(heap), kHeapMax, MADV_HUGEPAGE);
#endif
}

}  // namespace tpugraphs
