// The two inflaters of deflated zip members (zlib, streamed; libdeflate, whole member) give the
// same bytes on the real release files, and the libdeflate path reports damaged members (bad
// CRC-32, truncated deflate stream, wrong declared size) as DataLoss naming file and member.
//
// TPUGRAPHS_TEST_INFLATE=zlib in the environment makes zlib the default inflater for the whole
// io_test binary (CTest runs the io tests once that way too: "zlib:" test names).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/io/npz.h"
#include "tpugraphs/io/zip.h"

namespace tpugraphs::io {
namespace {

using ::testing::HasSubstr;
using tpugraphs::testing::TempDir;

class InflateBackendEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* v = std::getenv("TPUGRAPHS_TEST_INFLATE");
    if (v != nullptr && std::string(v) == "zlib") SetDefaultInflateBackend(InflateBackend::kZlib);
  }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new InflateBackendEnvironment);

// Restores the process-wide default backend when a test that switches it ends.
class BackendGuard {
 public:
  BackendGuard() : saved_(DefaultInflateBackend()) {}
  ~BackendGuard() { SetDefaultInflateBackend(saved_); }

 private:
  InflateBackend saved_;
};

std::vector<std::string> RealNpzFiles() {
  std::vector<std::string> files;
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(tpugraphs::testing::RealDataPath("npz"))) {
    if (e.is_regular_file() && e.path().extension() == ".npz") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

StatusOr<std::string> ReadMember(const ZipReader& zip, const ZipEntry& e, InflateBackend b) {
  TPUG_ASSIGN_OR_RETURN(auto stream, zip.OpenMember(e));
  std::string out(static_cast<size_t>(e.uncompressed_size), '\0');
  TPUG_RETURN_IF_ERROR(stream->ReadWhole(out.data(), b));
  return out;
}

TEST(InflateTest, RealReleaseMembersIdenticalWithBothBackends) {
  if (!LibdeflateAvailable()) GTEST_SKIP() << "built without libdeflate";
  const std::vector<std::string> files = RealNpzFiles();
  ASSERT_FALSE(files.empty());
  int deflated = 0;
  for (const std::string& f : files) {
    auto zip = ZipReader::Open(f);
    ASSERT_TRUE(zip.ok()) << zip.status().ToString();
    for (const ZipEntry& e : (*zip)->entries()) {
      deflated += e.method == kZipDeflated;
      auto a = ReadMember(**zip, e, InflateBackend::kZlib);
      auto b = ReadMember(**zip, e, InflateBackend::kLibdeflate);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      EXPECT_EQ(a->size(), e.uncompressed_size) << f << " " << e.name;
      EXPECT_TRUE(*a == *b) << f << ": member " << e.name << " differs between the backends";
      EXPECT_EQ(Crc32(0, b->data(), b->size()), e.crc32) << f << " " << e.name;
    }
  }
  EXPECT_GT(deflated, 10) << "the release files are np.savez_compressed archives";
}

TEST(InflateTest, RealReleaseArraysIdenticalThroughNpzReader) {
  if (!LibdeflateAvailable()) GTEST_SKIP() << "built without libdeflate";
  BackendGuard guard;
  for (const std::string& f : RealNpzFiles()) {
    auto npz = NpzReader::Open(f);
    ASSERT_TRUE(npz.ok());
    for (const std::string& key : (*npz)->Keys()) {
      SetDefaultInflateBackend(InflateBackend::kZlib);
      auto a = (*npz)->Read<double>(key);
      SetDefaultInflateBackend(InflateBackend::kLibdeflate);
      auto b = (*npz)->Read<double>(key);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      EXPECT_EQ(a->shape, b->shape) << f << " " << key;
      // Bitwise, so that NaNs compare too.
      ASSERT_EQ(a->data.size(), b->data.size());
      EXPECT_EQ(std::memcmp(a->data.data(), b->data.data(), a->data.size() * sizeof(double)), 0)
          << f << " " << key;
    }
  }
}

// A compressed archive with a 40 KB float member "a" and a small member "b"; the offset of
// the central directory header of a.npy is returned through `central`.
std::string MakeArchive(const std::string& path, size_t* central) {
  auto w = NpzWriter::Create(path, /*compress=*/true);
  EXPECT_TRUE(w.ok());
  std::vector<float> a(10000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 97) * 0.25f;
  std::vector<int64_t> b = {1, 2, 3};
  EXPECT_TRUE((*w)->Add<float>("a", {100, 100}, a.data()).ok());
  EXPECT_TRUE((*w)->Add<int64_t>("b", {3}, b.data()).ok());
  EXPECT_TRUE((*w)->Finish().ok());
  auto bytes = ReadFileToString(path);
  EXPECT_TRUE(bytes.ok());
  // The first central directory header (signature PK\1\2) belongs to a.npy, written first.
  *central = bytes->find(std::string("PK\x01\x02", 4));
  EXPECT_NE(*central, std::string::npos);
  return *bytes;
}

void Put32(std::string* s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*s)[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}
uint32_t Get32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

class DamagedMemberTest : public ::testing::TestWithParam<InflateBackend> {
 protected:
  // Writes `bytes` to bad.npz and reads array "a" with the backend under test.
  Status ReadA(const std::string& bytes) {
    const std::string path = dir_.File("bad.npz");
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    BackendGuard guard;
    SetDefaultInflateBackend(GetParam());
    auto npz = NpzReader::Open(path);
    if (!npz.ok()) return npz.status();
    auto zip = ZipReader::Open(path);
    if (!zip.ok()) return zip.status();
    // Both entry points: the whole-member read (whose status is returned) and the array read on
    // top of it, which may find the damage earlier (in the npy header) but must fail as well.
    auto whole = ReadMember(**zip, *(*zip)->Find("a.npy"), GetParam());
    auto arr = (*npz)->Read<float>("a");
    EXPECT_EQ(whole.ok(), arr.ok());
    if (!arr.ok()) {
      EXPECT_EQ(arr.status().code(), StatusCode::kDataLoss) << arr.status().ToString();
      EXPECT_THAT(arr.status().message(), HasSubstr(path));
    }
    // The other member is intact and still reads.
    EXPECT_TRUE((*npz)->Read<int64_t>("b").ok());
    return whole.status();
  }
  void ExpectDataLoss(const Status& s, const std::vector<std::string>& any_of) {
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(dir_.File("bad.npz")));
    EXPECT_THAT(s.message(), HasSubstr("member 'a.npy'"));
    bool found = false;
    for (const auto& w : any_of) found = found || s.message().find(w) != std::string::npos;
    EXPECT_TRUE(found) << s.message();
  }
  TempDir dir_;
};

TEST_P(DamagedMemberTest, IntactArchiveReads) {
  size_t central = 0;
  const std::string good = MakeArchive(dir_.File("good.npz"), &central);
  EXPECT_TRUE(ReadA(good).ok());
}

TEST_P(DamagedMemberTest, BadCrc) {
  size_t central = 0;
  std::string bytes = MakeArchive(dir_.File("good.npz"), &central);
  Put32(&bytes, central + 16, Get32(bytes, central + 16) ^ 0x00010000u);
  ExpectDataLoss(ReadA(bytes), {"CRC-32 mismatch"});
}

TEST_P(DamagedMemberTest, TruncatedDeflateStream) {
  size_t central = 0;
  std::string bytes = MakeArchive(dir_.File("good.npz"), &central);
  // The directory now says the compressed data ends half-way.
  const uint32_t csize = Get32(bytes, central + 20);
  Put32(&bytes, central + 20, csize / 2);
  ExpectDataLoss(ReadA(bytes), {"corrupt deflate data", "compressed data ends"});
}

TEST_P(DamagedMemberTest, DeclaredSizeTooLarge) {
  size_t central = 0;
  std::string bytes = MakeArchive(dir_.File("good.npz"), &central);
  Put32(&bytes, central + 24, Get32(bytes, central + 24) + 100);
  ExpectDataLoss(ReadA(bytes), {"deflate stream ends after", "compressed data ends"});
}

TEST_P(DamagedMemberTest, DeclaredSizeTooSmall) {
  size_t central = 0;
  std::string bytes = MakeArchive(dir_.File("good.npz"), &central);
  Put32(&bytes, central + 24, Get32(bytes, central + 24) - 100);
  Status s = ReadA(bytes);
  // The npy header then claims more data than the member holds, or inflating overruns it.
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(dir_.File("bad.npz")));
}

TEST_P(DamagedMemberTest, FlippedByteInsideTheStream) {
  size_t central = 0;
  std::string bytes = MakeArchive(dir_.File("good.npz"), &central);
  // a.npy's data starts after the 30-byte local header and its 5-byte name.
  bytes[30 + 5 + 40] = static_cast<char>(bytes[30 + 5 + 40] ^ 0x5A);
  ExpectDataLoss(ReadA(bytes), {"corrupt deflate data", "CRC-32 mismatch", "deflate stream ends",
                                "inflates to more than"});
}

INSTANTIATE_TEST_SUITE_P(Backends, DamagedMemberTest,
                         ::testing::Values(InflateBackend::kZlib, InflateBackend::kLibdeflate),
                         [](const auto& info) {
                           return std::string(InflateBackendName(info.param));
                         });

}  // namespace
}  // namespace tpugraphs::io
