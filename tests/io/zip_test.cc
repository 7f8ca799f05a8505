// The zip layer on its own: our CRC-32 against zlib's, and a writer/reader round trip of stored
// and deflated members including empty ones.
#include "tpugraphs/io/zip.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"

namespace tpugraphs::io {
namespace {

std::vector<unsigned char> RandomBytes(size_t n, uint64_t seed) {
  std::vector<unsigned char> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<unsigned char>(x >> 24);
  }
  return v;
}

TEST(Crc32Test, MatchesZlibForManyLengthsOffsetsAndStarts) {
  const std::vector<unsigned char> buf = RandomBytes(5000, 1);
  for (size_t len = 0; len <= 300; ++len) {
    for (size_t off : {0, 1, 3, 8, 15}) {
      for (uint32_t start : {0u, 0xFFFFFFFFu, 0x12345678u}) {
        ASSERT_EQ(Crc32(start, buf.data() + off, len), Crc32Zlib(start, buf.data() + off, len))
            << "len " << len << " off " << off << " start " << start;
      }
    }
  }
  for (size_t len : {1000, 1023, 4096, 4999}) {
    EXPECT_EQ(Crc32(0, buf.data(), len), Crc32Zlib(0, buf.data(), len)) << len;
  }
  // Known value: CRC-32 of "123456789" is 0xCBF43926.
  EXPECT_EQ(Crc32(0, "123456789", 9), 0xCBF43926u);
  const std::string s64(100, 'a');
  EXPECT_EQ(Crc32(0, s64.data(), s64.size()), Crc32Zlib(0, s64.data(), s64.size()));
  // Continuation: crc(a + b) == crc(crc(a), b) across the 64-byte threshold.
  const uint32_t whole = Crc32(0, buf.data(), 3000);
  EXPECT_EQ(Crc32(Crc32(0, buf.data(), 1234), buf.data() + 1234, 3000 - 1234), whole);
  const std::vector<unsigned char> zeros(1 << 20, 0);
  EXPECT_EQ(Crc32(0, zeros.data(), zeros.size()), Crc32Zlib(0, zeros.data(), zeros.size()));
}

TEST(ZipTest, WriterReaderRoundTrip) {
  tpugraphs::testing::TempDir dir;
  const std::string path = dir.File("t.zip");
  const std::vector<unsigned char> a = RandomBytes(100000, 2);
  std::string b(300000, 'x');
  {
    auto w = ZipWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->BeginStored("a.bin", a.size(), Crc32(0, a.data(), a.size())).ok());
    ASSERT_TRUE((*w)->Write(a.data(), a.size()).ok());
    ASSERT_TRUE((*w)->EndMember().ok());
    ASSERT_TRUE((*w)->BeginDeflated("b.txt", b.size(), 6).ok());
    ASSERT_TRUE((*w)->Write(b.data(), 1000).ok());
    ASSERT_TRUE((*w)->Write(b.data() + 1000, b.size() - 1000).ok());
    ASSERT_TRUE((*w)->EndMember().ok());
    ASSERT_TRUE((*w)->BeginDeflated("empty", 0, 6).ok());
    ASSERT_TRUE((*w)->EndMember().ok());
    ASSERT_TRUE((*w)->BeginStored("empty_stored", 0, 0).ok());
    ASSERT_TRUE((*w)->EndMember().ok());
    // A stored member whose data does not match its declared CRC is refused.
    ASSERT_TRUE((*w)->BeginStored("liar", 3, 0).ok());
    ASSERT_TRUE((*w)->Write("abc", 3).ok());
    EXPECT_FALSE((*w)->EndMember().ok());
    // ... and the archive is then never committed.
    EXPECT_FALSE((*w)->Finish().ok());
  }
  EXPECT_TRUE(dir.List().empty());
  {
    auto w = ZipWriter::Create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->BeginStored("a.bin", a.size(), Crc32(0, a.data(), a.size())).ok());
    ASSERT_TRUE((*w)->Write(a.data(), a.size()).ok());
    ASSERT_TRUE((*w)->EndMember().ok());
    ASSERT_TRUE((*w)->BeginDeflated("b.txt", b.size(), 6).ok());
    ASSERT_TRUE((*w)->Write(b.data(), b.size()).ok());
    ASSERT_TRUE((*w)->EndMember().ok());
    ASSERT_TRUE((*w)->BeginDeflated("empty", 0, 6).ok());
    ASSERT_TRUE((*w)->EndMember().ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto r = ZipReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->entries().size(), 3u);
  EXPECT_EQ((*r)->Find("b.txt")->method, kZipDeflated);
  EXPECT_LT((*r)->Find("b.txt")->compressed_size, 5000u);
  for (const auto& [name, want] : std::vector<std::pair<std::string, std::string>>{
           {"a.bin", std::string(a.begin(), a.end())}, {"b.txt", b}, {"empty", ""}}) {
    auto s = (*r)->OpenMember(*(*r)->Find(name));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    std::string got(want.size(), '\0');
    ASSERT_TRUE((*s)->ReadExact(got.data(), got.size()).ok());
    EXPECT_TRUE((*s)->ReadToEnd().ok());
    EXPECT_EQ(got, want) << name;
  }
  // Python's zipfile agrees.
  auto py = tpugraphs::testing::RunPython(
      "import sys, zipfile\n"
      "z = zipfile.ZipFile(sys.argv[1])\n"
      "assert z.testzip() is None\n"
      "assert z.read('b.txt') == b'x' * 300000 and z.read('empty') == b''\n"
      "print(len(z.read('a.bin')))\n",
      {path});
  EXPECT_EQ(py.exit_code, 0) << py.err;
  EXPECT_EQ(py.out, "100000\n");
}

// BeginStoredCrcAtEnd fills the CRC-32 into the local header at EndMember: the archive is the
// one BeginStored with the CRC known up front writes, and a wrong size is still refused.
TEST(ZipTest, StoredCrcAtEndWritesTheBytesOfStoredWithKnownCrc) {
  tpugraphs::testing::TempDir dir;
  const std::vector<unsigned char> a = RandomBytes(300001, 5);
  const std::vector<unsigned char> b = RandomBytes(77, 6);
  const std::string known = dir.File("known.zip"), later = dir.File("later.zip");
  for (bool crc_known : {true, false}) {
    auto w = ZipWriter::Create(crc_known ? known : later);
    ASSERT_TRUE(w.ok());
    for (const auto* m : {&a, &b}) {
      const std::string name = m == &a ? "a.bin" : "b.bin";
      if (crc_known) {
        ASSERT_TRUE((*w)->BeginStored(name, m->size(), Crc32(0, m->data(), m->size())).ok());
      } else {
        ASSERT_TRUE((*w)->BeginStoredCrcAtEnd(name, m->size()).ok());
      }
      const size_t first = std::min<size_t>(1000, m->size());
      ASSERT_TRUE((*w)->Write(m->data(), first).ok());
      ASSERT_TRUE((*w)->Write(m->data() + first, m->size() - first).ok());
      ASSERT_TRUE((*w)->EndMember().ok());
    }
    ASSERT_TRUE((*w)->BeginDeflated("c.txt", 5, 6).ok());
    ASSERT_TRUE((*w)->Write("hello", 5).ok());
    ASSERT_TRUE((*w)->EndMember().ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto x = ReadFileToString(known);
  auto y = ReadFileToString(later);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_TRUE(*x == *y);
  auto r = ZipReader::Open(later);
  ASSERT_TRUE(r.ok());
  auto s = (*r)->OpenMember(*(*r)->Find("a.bin"));
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE((*s)->ReadToEnd().ok());  // the CRC in the local header and directory agree
  {
    auto w = ZipWriter::Create(dir.File("short.zip"));
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->BeginStoredCrcAtEnd("short", 4).ok());
    ASSERT_TRUE((*w)->Write("abc", 3).ok());
    EXPECT_FALSE((*w)->EndMember().ok());
    EXPECT_FALSE((*w)->Finish().ok());
  }
  EXPECT_FALSE(std::filesystem::exists(dir.File("short.zip")));
}

}  // namespace
}  // namespace tpugraphs::io
