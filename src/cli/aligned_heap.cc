// Replaces the global operator new and delete of the program it is linked into (the tpugraphs
// binary, and every test binary, so that tests train the models the binary trains).
#include <cstdlib>
#include <new>

// Every heap block of 64 bytes or more starts on a 64-byte boundary (a cache line, an AVX-512
// vector). Eigen's vectorised loops over memory it did not allocate (maps over std::vector
// buffers) peel scalar iterations up to the first aligned element, so where a buffer starts
// modulo 64 changes how a sum is grouped and with it the last bits of the result. With malloc's
// 16-byte alignment that depended on the heap's history: the same training run gave another
// model when the command line was one argument longer.
namespace {
constexpr std::size_t kHeapAlignment = 64;
void* AllocateAligned(std::size_t n) {
  if (n < kHeapAlignment) return std::malloc(n == 0 ? 1 : n);
  return std::aligned_alloc(kHeapAlignment, (n + kHeapAlignment - 1) & ~(kHeapAlignment - 1));
}
}  // namespace

void* operator new(std::size_t n) {
  if (void* p = AllocateAligned(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = AllocateAligned(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return AllocateAligned(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return AllocateAligned(n); }
// operator new above allocates with malloc/aligned_alloc, so free is the matching release (GCC
// cannot see that the replaced operators pair up).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#pragma GCC diagnostic pop
