// Fuzzes the npy header parser and the element conversions (io/npy.h): the input is a whole
// .npy file (preamble, header dict, data).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "tpugraphs/io/npy.h"

namespace {
constexpr int64_t kMaxElements = int64_t{1} << 20;

template <typename T>
void Convert(const tpugraphs::io::NpyHeader& h, const uint8_t* raw, int64_t count) {
  auto out = std::make_unique<T[]>(static_cast<size_t>(count));
  (void)tpugraphs::io::ConvertElements<T>(h.dtype, h.big_endian, raw, count, out.get(), 0,
                                          "fuzz.npy");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpugraphs;
  fuzz::InitHarness();
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto parsed = io::ParseNpyHeader(bytes, "fuzz.npy");

  // The streaming parser must agree with the in-memory one on every header it accepts.
  size_t pos = 0;
  auto read_exact = [&](void* dst, size_t n) -> Status {
    if (n > size - pos) return DataLossError("fuzz.npy: truncated");
    if (n > 0) std::memcpy(dst, data + pos, n);
    pos += n;
    return Status::Ok();
  };
  auto streamed = io::ReadNpyHeader(read_exact, size, "fuzz.npy");
  if (!streamed.ok()) return 0;
  const io::NpyHeader& h = *streamed;
  if (parsed.ok() && (parsed->dtype != h.dtype || parsed->shape != h.shape ||
                      parsed->header_bytes != h.header_bytes)) {
    fuzz::Fail("ParseNpyHeader and ReadNpyHeader disagree");
  }
  if (h.header_bytes > size || h.data_bytes() > size - h.header_bytes) {
    fuzz::Fail("accepted header declares more data than the stream holds");
  }
  const int64_t count = std::min<int64_t>(h.num_elements(), kMaxElements);
  const uint8_t* raw = data + h.header_bytes;
  Convert<double>(h, raw, count);
  Convert<float>(h, raw, count);
  Convert<int64_t>(h, raw, count);
  Convert<int32_t>(h, raw, count);
  Convert<uint8_t>(h, raw, count);
  Convert<int8_t>(h, raw, count);
  Convert<bool>(h, raw, count);
  (void)h.DebugString();
  return 0;
}
