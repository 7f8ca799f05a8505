// Hostile and damaged .npz files: each must give a specific error class and a message that names
// the file (and member) and the problem, never a crash or a huge allocation. Also a sparse
// archive with a member and offsets beyond 4 GiB (zip64) built byte by byte and checked with
// Python's zipfile.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/io/npz.h"

namespace tpugraphs::io {
namespace {

using ::testing::HasSubstr;
using tpugraphs::testing::RunPython;
using tpugraphs::testing::TempDir;

constexpr char kMakeBadFiles[] = R"PY(
import io, os, struct, sys, zipfile
import numpy as np
d = sys.argv[1]
P = lambda name: os.path.join(d, name)
rng = np.random.default_rng(3)

def npy_bytes(a, version=None):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, version=version)
    return buf.getvalue()

def zip_with(name, members, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(P(name), 'w', compression=compression) as zf:
        for k, b in members.items():
            zf.writestr(k, b)

def data_offset(raw, info):
    off = info.header_offset
    n, e = struct.unpack('<HH', raw[off + 26:off + 30])
    return off + 30 + n + e

def central_entries(path):
    zf = zipfile.ZipFile(path)
    raw = open(path, 'rb').read()
    pos, out = zf.start_dir, {}
    for _ in zf.infolist():
        n, e, c = struct.unpack('<HHH', raw[pos + 28:pos + 34])
        out[raw[pos + 46:pos + 46 + n].decode()] = pos
        pos += 46 + n + e + c
    return zf, out

a = rng.standard_normal((200, 50)).astype(np.float32)
np.savez(P('good.npz'), a=a, b=np.arange(10))
np.savez_compressed(P('good_c.npz'), a=a, b=np.arange(10))
raw = open(P('good.npz'), 'rb').read()
open(P('trunc_half.npz'), 'wb').write(raw[:len(raw) // 2])
open(P('trunc_tail.npz'), 'wb').write(raw[:-10])

craw = bytearray(open(P('good_c.npz'), 'rb').read())
info = zipfile.ZipFile(P('good_c.npz')).getinfo('a.npy')
craw[data_offset(craw, info) + info.compress_size // 2] ^= 0x55
open(P('flip_c.npz'), 'wb').write(craw)

sraw = bytearray(raw)
info = zipfile.ZipFile(P('good.npz')).getinfo('a.npy')
sraw[data_offset(sraw, info) + 1000] ^= 0x01
open(P('flip.npz'), 'wb').write(sraw)

open(P('notzip.npz'), 'wb').write(b'this is not a zip file at all\n' * 10)
open(P('empty.npz'), 'wb').write(b'')

def raw_npy(header, payload):
    h = header.encode()
    h += b' ' * ((64 - (10 + len(h) + 1) % 64) % 64) + b'\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h + payload

zip_with('shape_big.npz', {'x.npy': raw_npy(
    "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1000), }", b'\0' * 40)})
zip_with('shape_overflow.npz', {'x.npy': raw_npy(
    "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", b'\0' * 8)})
zip_with('trailing.npz', {'x.npy': raw_npy(
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", b'\0' * 12)})
zip_with('bad_dict.npz', {'x.npy': raw_npy(
    "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", b'\0' * 8)})
zip_with('neg_dim.npz', {'x.npy': raw_npy(
    "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", b'\0' * 8)})
zip_with('garbage.npz', {'x.npy': b'GARBAGE!' + b'\0' * 100})
zip_with('short.npz', {'x.npy': b'\x93NUM'})
v4 = bytearray(npy_bytes(np.arange(3)))
v4[6] = 4
zip_with('version4.npz', {'x.npy': bytes(v4)})
zip_with('bzip2.npz', {'x.npy': npy_bytes(np.arange(5))}, zipfile.ZIP_BZIP2)
zip_with('lzma.npz', {'x.npy': npy_bytes(np.arange(5))}, zipfile.ZIP_LZMA)
np.savez(P('complex.npz'), x=np.zeros(3, np.complex64))
np.savez(P('structured.npz'), x=np.zeros(3, dtype=[('a', '<i4'), ('b', '<f4')]))

# Encrypted: set general-purpose bit 0 in the local and central headers.
zf, cents = central_entries(P('good.npz'))
e = bytearray(raw)
for name, pos in cents.items():
    e[pos + 8] |= 1
    e[zf.getinfo(name).header_offset + 6] |= 1
open(P('encrypted.npz'), 'wb').write(e)

# Absurd declared sizes in the central directory.
zf, cents = central_entries(P('good_c.npz'))
b = bytearray(open(P('good_c.npz'), 'rb').read())
b[cents['a.npy'] + 24:cents['a.npy'] + 28] = struct.pack('<I', 0xFFFFFFF0)
open(P('bomb.npz'), 'wb').write(b)
zf, cents = central_entries(P('good.npz'))
b = bytearray(raw)
b[cents['a.npy'] + 20:cents['a.npy'] + 28] = struct.pack('<II', 0x7FFFFFFF, 0x7FFFFFFF)
open(P('beyond.npz'), 'wb').write(b)
b = bytearray(raw)
b[-12:-10] = struct.pack('<H', 0xFFFE)  # total entries in the end record
b[-14:-12] = struct.pack('<H', 0xFFFE)
open(P('count.npz'), 'wb').write(b)
print('ok')
)PY";

class NpzBadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    auto r = RunPython(kMakeBadFiles, {dir_->path()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string File(const std::string& name) { return dir_->File(name); }

  // Opens `name` (must succeed) and reads `key` as float; returns the status.
  static Status ReadStatus(const std::string& name, const std::string& key) {
    auto r = NpzReader::Open(File(name));
    if (!r.ok()) return r.status();
    auto a = (*r)->Read<float>(key);
    return a.ok() ? Status::Ok() : a.status();
  }
  static Status OpenStatus(const std::string& name) {
    auto r = NpzReader::Open(File(name));
    return r.ok() ? Status::Ok() : r.status();
  }

  static TempDir* dir_;
};
TempDir* NpzBadInputTest::dir_ = nullptr;

void ExpectError(const Status& s, StatusCode code, const std::string& file,
                 const std::vector<std::string>& parts) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(file));
  for (const auto& p : parts) EXPECT_THAT(s.message(), HasSubstr(p));
}

TEST_F(NpzBadInputTest, GoodFilesReadFine) {
  EXPECT_TRUE(ReadStatus("good.npz", "a").ok());
  EXPECT_TRUE(ReadStatus("good_c.npz", "a").ok());
}

TEST_F(NpzBadInputTest, TruncatedZip) {
  ExpectError(OpenStatus("trunc_half.npz"), StatusCode::kDataLoss, File("trunc_half.npz"),
              {"truncated"});
  ExpectError(OpenStatus("trunc_tail.npz"), StatusCode::kDataLoss, File("trunc_tail.npz"),
              {"truncated"});
}

TEST_F(NpzBadInputTest, FlippedByteInDeflatedMember) {
  Status s = ReadStatus("flip_c.npz", "a");
  ExpectError(s, StatusCode::kDataLoss, File("flip_c.npz"), {"'a.npy'"});
  EXPECT_THAT(s.message(),
              ::testing::AnyOf(HasSubstr("CRC-32 mismatch"), HasSubstr("corrupt deflate data")));
  // The undamaged member of the same file still reads.
  auto r = NpzReader::Open(File("flip_c.npz"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)->Read<int64_t>("b").ok());
}

TEST_F(NpzBadInputTest, FlippedByteInStoredMemberIsCrcMismatch) {
  ExpectError(ReadStatus("flip.npz", "a"), StatusCode::kDataLoss, File("flip.npz"),
              {"'a.npy'", "CRC-32 mismatch"});
  // Streaming reads verify the CRC too, after the last chunk.
  auto r = NpzReader::Open(File("flip.npz"));
  ASSERT_TRUE(r.ok());
  int64_t seen = 0;
  Status s = (*r)->ReadChunked<float>("a", 333, [&](const float*, int64_t count, int64_t) {
    seen += count;
    return Status::Ok();
  });
  // The CRC is checked as the last bytes arrive, so the last chunk is never delivered.
  EXPECT_EQ(seen, 200 * 50 / 333 * 333);
  ExpectError(s, StatusCode::kDataLoss, File("flip.npz"), {"CRC-32 mismatch"});
}

TEST_F(NpzBadInputTest, MissingKeyAndMissingFile) {
  ExpectError(ReadStatus("good.npz", "node_feat"), StatusCode::kNotFound, File("good.npz"),
              {"'node_feat'", "not found", "a, b"});
  ExpectError(OpenStatus("no_such_file.npz"), StatusCode::kNotFound, File("no_such_file.npz"),
              {"no such file"});
}

TEST_F(NpzBadInputTest, NotAZipFile) {
  ExpectError(OpenStatus("notzip.npz"), StatusCode::kDataLoss, File("notzip.npz"),
              {"not a zip archive"});
  ExpectError(OpenStatus("empty.npz"), StatusCode::kDataLoss, File("empty.npz"),
              {"not a zip archive"});
}

TEST_F(NpzBadInputTest, DeclaredShapeLargerThanMember) {
  // (1e9, 1000) float32 would be 4 TB: refused from the header, before any allocation.
  ExpectError(ReadStatus("shape_big.npz", "x"), StatusCode::kDataLoss, File("shape_big.npz"),
              {"'x.npy'", "(1000000000, 1000)", "only 40 bytes"});
  auto r = NpzReader::Open(File("shape_big.npz"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->Header("x").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(
      (*r)->ReadChunked<float>("x", 10, [](const float*, int64_t, int64_t) { return Status::Ok(); })
          .code(),
      StatusCode::kDataLoss);
  ExpectError(ReadStatus("shape_overflow.npz", "x"), StatusCode::kDataLoss,
              File("shape_overflow.npz"), {"more elements"});
  ExpectError(ReadStatus("trailing.npz", "x"), StatusCode::kDataLoss, File("trailing.npz"),
              {"4 unexpected bytes"});
}

TEST_F(NpzBadInputTest, UnsupportedCompressionMethods) {
  // The directory opens and lists the key; reading it is Unimplemented.
  auto r = NpzReader::Open(File("bzip2.npz"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->Keys(), std::vector<std::string>{"x"});
  ExpectError(ReadStatus("bzip2.npz", "x"), StatusCode::kUnimplemented, File("bzip2.npz"),
              {"'x.npy'", "compression method 12 (bzip2)"});
  ExpectError(ReadStatus("lzma.npz", "x"), StatusCode::kUnimplemented, File("lzma.npz"),
              {"compression method 14 (lzma)"});
}

TEST_F(NpzBadInputTest, BadNpyHeaders) {
  ExpectError(ReadStatus("garbage.npz", "x"), StatusCode::kInvalidArgument, File("garbage.npz"),
              {"'x.npy'", "bad magic"});
  ExpectError(ReadStatus("short.npz", "x"), StatusCode::kDataLoss, File("short.npz"),
              {"too short"});
  ExpectError(ReadStatus("version4.npz", "x"), StatusCode::kUnimplemented, File("version4.npz"),
              {"version 4.0"});
  ExpectError(ReadStatus("bad_dict.npz", "x"), StatusCode::kInvalidArgument, File("bad_dict.npz"),
              {"malformed npy header", "fortran_order"});
  ExpectError(ReadStatus("neg_dim.npz", "x"), StatusCode::kInvalidArgument, File("neg_dim.npz"),
              {"negative dimension"});
  ExpectError(ReadStatus("complex.npz", "x"), StatusCode::kUnimplemented, File("complex.npz"),
              {"unsupported npy dtype '<c8'"});
  ExpectError(ReadStatus("structured.npz", "x"), StatusCode::kUnimplemented, File("structured.npz"),
              {"structured dtypes"});
}

TEST_F(NpzBadInputTest, EncryptedMember) {
  ExpectError(ReadStatus("encrypted.npz", "a"), StatusCode::kUnimplemented, File("encrypted.npz"),
              {"'a.npy'", "encrypted"});
}

TEST_F(NpzBadInputTest, AbsurdDeclaredSizes) {
  ExpectError(ReadStatus("bomb.npz", "a"), StatusCode::kDataLoss, File("bomb.npz"),
              {"'a.npy'", "more than deflate can produce"});
  ExpectError(ReadStatus("beyond.npz", "a"), StatusCode::kDataLoss, File("beyond.npz"),
              {"'a.npy'", "past the end of the file"});
  ExpectError(OpenStatus("count.npz"), StatusCode::kDataLoss, File("count.npz"),
              {"declares 65534 members"});
}

// A sparse archive whose first member is 4.5 GiB of zeros (a hole in the file) and whose second
// member starts beyond 4 GiB: zip64 sizes in the local and central headers, a zip64 offset in
// the central header, and the zip64 end-of-central-directory record and locator. Python's
// zipfile and numpy confirm that the hand-built archive is valid.
constexpr char kMakeSparseZip64[] = R"PY(
import struct, sys, zlib
import numpy as np
path = sys.argv[1]
N = 9 * 2**29  # 4.5 GiB of uint8
def npy_header(descr, shape):
    h = ("{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)).encode()
    h += b' ' * ((64 - (10 + len(h) + 1) % 64) % 64) + b'\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h
big_hdr = npy_header('|u1', '(%d,)' % N)
small = npy_header('<i8', '(3,)') + struct.pack('<3q', 7, -8, 9)
big_size = len(big_hdr) + N
with open(path, 'wb') as f:
    f.write(struct.pack('<IHHHHHIIIHH', 0x04034b50, 45, 0, 0, 0, 0x21, 0, 0xFFFFFFFF, 0xFFFFFFFF, 7, 20))
    f.write(b'big.npy' + struct.pack('<HHQQ', 1, 16, big_size, big_size))
    f.write(big_hdr)
    f.seek(N, 1)  # the zeros: a hole
    small_off = f.tell()
    f.write(struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, 0, 0, 0x21, zlib.crc32(small), len(small), len(small), 9, 0))
    f.write(b'small.npy' + small)
    cd_off = f.tell()
    cd = struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 45, 45, 0, 0, 0, 0x21, 0, 0xFFFFFFFF, 0xFFFFFFFF, 7, 20, 0, 0, 0, 0, 0)
    cd += b'big.npy' + struct.pack('<HHQQ', 1, 16, big_size, big_size)
    cd += struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 45, 45, 0, 0, 0, 0x21, zlib.crc32(small), len(small), len(small), 9, 12, 0, 0, 0, 0, 0xFFFFFFFF)
    cd += b'small.npy' + struct.pack('<HHQ', 1, 8, small_off)
    f.write(cd)
    z64 = f.tell()
    f.write(struct.pack('<IQHHIIQQQQ', 0x06064b50, 44, 45, 45, 0, 0, 2, 2, len(cd), cd_off))
    f.write(struct.pack('<IIQI', 0x07064b50, 0, z64, 1))
    f.write(struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, 2, 2, len(cd), 0xFFFFFFFF, 0))
import zipfile
zf = zipfile.ZipFile(path)
assert zf.getinfo('big.npy').file_size == big_size
assert zf.getinfo('small.npy').header_offset == small_off > 2**32
assert np.load(path)['small'].tolist() == [7, -8, 9]
print(big_size, small_off)
)PY";

TEST(NpzZip64Test, SparseArchiveBeyond4GiB) {
  TempDir dir;
  const std::string path = dir.File("sparse64.npz");
  auto py = RunPython(kMakeSparseZip64, {path});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  uint64_t big_size = 0, small_off = 0;
  std::sscanf(py.out.c_str(), "%lu %lu", &big_size, &small_off);
  auto r = NpzReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->Keys(), (std::vector<std::string>{"big", "small"}));
  const ZipEntry* big = (*r)->zip().Find("big.npy");
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->uncompressed_size, big_size);
  EXPECT_GT(big->compressed_size, uint64_t{1} << 32);
  EXPECT_EQ((*r)->zip().Find("small.npy")->local_header_offset, small_off);
  auto h = (*r)->Header("big");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->num_elements(), int64_t{9} << 29);
  // Stream the first chunk of the big member and stop (its CRC in the file is a dummy).
  int64_t got = 0;
  Status s =
      (*r)->ReadChunked<uint8_t>("big", 1 << 20, [&](const uint8_t* d, int64_t n, int64_t first) {
        EXPECT_EQ(first, 0);
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(d[i], 0);
        got += n;
        return FailedPreconditionError("stop");
      });
  EXPECT_EQ(got, 1 << 20);
  EXPECT_EQ(s.message(), "stop");
  auto small = (*r)->Read<int64_t>("small");
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->data, (std::vector<int64_t>{7, -8, 9}));
}

}  // namespace
}  // namespace tpugraphs::io

namespace tpugraphs::io {
namespace {

// Every single-byte corruption and every truncation of small archives (stored and deflated)
// must give OK or a clean error naming the file: never a crash, hang or wild allocation.
TEST(NpzCorruptionTest, EveryFlippedByteAndEveryTruncation) {
  TempDir dir;
  for (bool compress : {false, true}) {
    const std::string good = dir.File(compress ? "good_c.npz" : "good.npz");
    {
      auto w = NpzWriter::Create(good, compress);
      ASSERT_TRUE(w.ok());
      std::vector<float> f(24);
      for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i) * 0.5f;
      std::vector<int64_t> e = {0, 1, 1, 2, 2, 3};
      ASSERT_TRUE((*w)->Add<float>("feat", {4, 6}, f.data()).ok());
      ASSERT_TRUE((*w)->Add<int64_t>("edges", {3, 2}, e.data()).ok());
      ASSERT_TRUE((*w)->Finish().ok());
    }
    auto bytes = ReadFileToString(good);
    ASSERT_TRUE(bytes.ok());
    const std::string bad = dir.File("bad.npz");
    auto try_read = [&](const std::string& content, const std::string& what) {
      {
        std::ofstream out(bad, std::ios::binary | std::ios::trunc);
        out.write(content.data(), static_cast<std::streamsize>(content.size()));
      }
      auto r = NpzReader::Open(bad);
      if (!r.ok()) {
        EXPECT_THAT(r.status().message(), HasSubstr(bad)) << what;
        return;
      }
      for (const std::string& key : (*r)->Keys()) {
        auto a = (*r)->Read<double>(key);
        if (!a.ok()) {
          EXPECT_THAT(a.status().message(), HasSubstr(bad)) << what;
        }
        Status s = (*r)->ReadChunked<double>(
            key, 5, [](const double*, int64_t, int64_t) { return Status::Ok(); });
        if (!s.ok()) {
          EXPECT_THAT(s.message(), HasSubstr(bad)) << what;
        }
      }
    };
    int detected = 0;
    for (size_t pos = 0; pos < bytes->size(); ++pos) {
      std::string c = *bytes;
      c[pos] = static_cast<char>(c[pos] ^ 0x5A);
      try_read(c, "flip at " + std::to_string(pos));
      auto r = NpzReader::Open(bad);
      bool all_ok = r.ok();
      if (r.ok()) {
        for (const std::string& key : (*r)->Keys()) all_ok = all_ok && (*r)->Read<double>(key).ok();
      }
      if (!all_ok) ++detected;
    }
    // Flips in data and headers are caught by the CRC or the structure checks; only bytes
    // nobody reads (timestamps, attributes, version-made-by) may go unnoticed.
    EXPECT_GT(detected, static_cast<int>(bytes->size() * 8 / 10)) << "of " << bytes->size();
    std::printf("%s: %d of %zu single-byte flips detected\n", compress ? "deflated" : "stored",
                detected, bytes->size());
    for (size_t len = 0; len < bytes->size(); ++len) {
      try_read(bytes->substr(0, len), "truncated to " + std::to_string(len));
      auto r = NpzReader::Open(bad);
      EXPECT_FALSE(r.ok()) << "truncated to " << len;
    }
  }
}

}  // namespace
}  // namespace tpugraphs::io
