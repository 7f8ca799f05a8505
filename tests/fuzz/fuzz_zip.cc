// Fuzzes the zip reader (io/zip.h): central directory, local headers, stored and deflated
// members, data descriptors, CRC checks.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_util.h"
#include "tpugraphs/io/zip.h"

namespace {
// Bytes read per member at most: enough to cover every path, bounded so that a deflate bomb in
// a small input cannot take seconds.
constexpr uint64_t kMaxBytesPerMember = uint64_t{16} << 20;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpugraphs;
  fuzz::InitHarness();
  const std::string& path = fuzz::WriteScratchFile(data, size, ".zip");
  auto zip = io::ZipReader::Open(path);
  if (!zip.ok()) return 0;
  const io::ZipReader& reader = **zip;
  std::vector<char> buf(64 << 10);
  for (const io::ZipEntry& entry : reader.entries()) {
    if (reader.Find(entry.name) == nullptr) fuzz::Fail("listed member not found by name");
    auto member = reader.OpenMember(entry);
    if (!member.ok()) continue;
    io::ZipMemberStream& stream = **member;
    uint64_t total = 0;
    while (total < kMaxBytesPerMember) {
      auto n = stream.Read(buf.data(), buf.size());
      if (!n.ok() || *n == 0) break;
      if (*n > buf.size()) fuzz::Fail("Read returned more than asked");
      total += *n;
      if (total > stream.size()) fuzz::Fail("member produced more bytes than its size");
    }
  }
  return 0;
}
