// Transparent huge pages for the heap. On virtual machines a page fault costs microseconds, and
// with 4 KiB pages every fresh megabyte a program touches costs 256 of them: `tune` on one
// 3,000-node graph spent 12 ms reading the graph (its 1.7 MB of node features pass through
// three buffers) and 12 ms reading the model, 3 ms each with 2 MiB pages (docs/tune.md, "Huge
// pages"). Both functions only advise the kernel (madvise MADV_HUGEPAGE) about address ranges
// the allocator already holds; they touch no memory and change no result. Where the kernel
// does not give huge pages on request (transparent_hugepage "never"), or the environment sets
// TPUGRAPHS_HUGE_PAGES=0, they do nothing.
//
// Thread-safety: AdviseMainHeapHugePages once, from main() before other threads allocate;
// AdviseThreadHeapHugePages from any thread, for its own heap.
#ifndef TPUGRAPHS_COMMON_HUGE_PAGES_H_
#define TPUGRAPHS_COMMON_HUGE_PAGES_H_

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define TPUGRAPHS_SANITIZED_HEAP 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TPUGRAPHS_SANITIZED_HEAP 1
#endif

namespace tpugraphs {

// Whether this build can advise its heap: glibc's malloc on Linux, not a sanitizer's allocator
// (whose blocks live in its own mappings).
#if defined(__GLIBC__) && defined(__linux__) && !defined(TPUGRAPHS_SANITIZED_HEAP)
inline constexpr bool kHeapAdvisable = true;
#else
inline constexpr bool kHeapAdvisable = false;
#endif

// Whether the advice is on: TPUGRAPHS_HUGE_PAGES is unset or not "0" (read once).
bool HugePagesWanted();

// glibc: grows the main heap (the brk heap, where the main thread's blocks below
// M_MMAP_THRESHOLD live; main() raises it to 32 MiB) to `reserve_bytes` by blocks just under the
// threshold, gives them back to the allocator, which keeps them while M_TRIM_THRESHOLD is larger,
// and advises huge pages on the range. Elsewhere: nothing.
void AdviseMainHeapHugePages(unsigned long reserve_bytes = 256ul << 20);

// glibc: advises huge pages on the heap of the calling thread's malloc arena, a 64 MiB range
// aligned to 64 MiB (glibc's HEAP_MAX_SIZE on 64-bit systems) for threads other than the main
// one. Does nothing for the main heap, nor elsewhere. Called by each ThreadPool worker.
void AdviseThreadHeapHugePages();

}  // namespace tpugraphs

#endif  // TPUGRAPHS_COMMON_HUGE_PAGES_H_
