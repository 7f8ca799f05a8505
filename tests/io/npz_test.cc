// NpzReader/NpzWriter against numpy: files written by numpy (np.savez, np.savez_compressed,
// np.lib.format.write_array into zipfile) are read by our reader and compared value by value
// with what numpy itself holds; files written by our writer are loaded by numpy and checked.
#include "tpugraphs/io/npz.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"

namespace tpugraphs::io {
namespace {

using ::testing::HasSubstr;
using tpugraphs::testing::RunPython;
using tpugraphs::testing::TempDir;

// Writes every numpy-made file the tests use into argv[1]. For each array it also writes
// "<file>.<key>.expect": the array in C order as little-endian float64 (floats and bools) or
// int64 (integers) plus a text line "<dtype> <fortran> <shape...>" in "<...>.meta".
constexpr char kMakeFiles[] = R"PY(
import io, os, sys, struct, zipfile
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(7)

def expect(fname, arrays):
    for k, a in arrays.items():
        a = np.asarray(a)
        base = os.path.join(d, fname + '.' + k)
        if a.dtype.kind == 'f' or a.dtype.kind == 'b':
            np.ascontiguousarray(a).astype('<f8').tofile(base + '.expect')
        else:
            np.ascontiguousarray(a).astype('<i8').tofile(base + '.expect')
        with open(base + '.meta', 'w') as f:
            f.write('%s %d %s\n' % (a.dtype.str, int(np.isfortran(a) and a.ndim > 1),
                                    ' '.join(str(s) for s in a.shape)))

def tile_like(n=50):
    return {
        'node_feat': rng.standard_normal((n, 140)).astype(np.float32),
        'node_opcode': rng.integers(0, 120, n).astype(np.uint8),
        'edge_index': rng.integers(0, n, (80, 2)).astype(np.int64),
        'config_feat': rng.standard_normal((10, 24)).astype(np.float32),
        'config_runtime': rng.integers(1, 10**9, 10).astype(np.int64),
        'node_splits': np.array([[0, 17, 50]], dtype=np.int64),
    }

def variants():
    return {
        'fortran_f4': np.asfortranarray(rng.standard_normal((7, 5, 3)).astype(np.float32)),
        'fortran_i8': np.asfortranarray(rng.integers(-10**12, 10**12, (6, 4)).astype(np.int64)),
        'big_f4': rng.standard_normal((6, 4)).astype('>f4'),
        'big_i8': rng.integers(-10**15, 10**15, 9).astype('>i8'),
        'big_fortran_f8': np.asfortranarray(rng.standard_normal((4, 3, 2)).astype('>f8')),
        'big_u2': rng.integers(0, 65535, 11).astype('>u2'),
        'f8_feat': rng.standard_normal((5, 140)),
        'i4_edges': rng.integers(0, 50, (8, 2)).astype(np.int32),
        'i4_opcode': rng.integers(0, 120, 5).astype(np.int32),
        'u1': rng.integers(0, 256, 17).astype(np.uint8),
        'i1': rng.integers(-128, 128, 17).astype(np.int8),
        'i2': rng.integers(-32768, 32768, 17).astype(np.int16),
        'u4': rng.integers(0, 2**32, 17, dtype=np.uint64).astype(np.uint32),
        'u8': rng.integers(0, 2**63, 17, dtype=np.uint64) * np.uint64(2),
        'b1': rng.integers(0, 2, 13).astype(bool),
        'zero_d': np.array(3.25),
        'empty': np.zeros((0, 2), dtype=np.int64),
        'big300': np.array([1, 2, 300, 4], dtype=np.int64),
        'frac': np.array([1.0, 2.5], dtype=np.float32),
        'float_ints': np.array([[1.0, -2.0], [3.0, 255.0]], dtype=np.float64),
    }

a = tile_like(); np.savez(os.path.join(d, 'tile.npz'), **a); expect('tile.npz', a)
a2 = tile_like(); np.savez_compressed(os.path.join(d, 'tile_c.npz'), **a2); expect('tile_c.npz', a2)
v = variants(); np.savez(os.path.join(d, 'var.npz'), **v); expect('var.npz', v)
np.savez_compressed(os.path.join(d, 'var_c.npz'), **v); expect('var_c.npz', v)
lay = {'node_feat': rng.standard_normal((30, 140)).astype(np.float32),
       'node_config_feat': rng.integers(-1, 6, (9, 4, 18)).astype(np.float32),
       'node_config_ids': np.array([2, 5, 7, 11], dtype=np.int64),
       'config_runtime': rng.integers(10**6, 10**8, 9).astype(np.int64)}
np.savez_compressed(os.path.join(d, 'layout.npz'), **lay); expect('layout.npz', lay)

# npy format versions 2.0 and 3.0 written by numpy itself, stored and deflated.
vv = {'v2': rng.standard_normal((3, 4)).astype(np.float32),
      'v3': rng.integers(0, 9, (2, 5)).astype(np.int64),
      'v1': rng.integers(0, 9, 4).astype(np.uint8)}
for fname, comp in (('versions.npz', zipfile.ZIP_STORED), ('versions_c.npz', zipfile.ZIP_DEFLATED)):
    with zipfile.ZipFile(os.path.join(d, fname), 'w', compression=comp) as zf:
        for k, ver in (('v2', (2, 0)), ('v3', (3, 0)), ('v1', (1, 0))):
            with zf.open(k + '.npy', 'w') as f:
                np.lib.format.write_array(f, vv[k], version=ver)
    expect(fname, vv)

# zip64 extra fields written by Python's zipfile (force_zip64 on each member).
z = {'a': rng.standard_normal((10, 3)).astype(np.float32), 'b': np.arange(7, dtype=np.int64)}
for fname, comp in (('zip64.npz', zipfile.ZIP_STORED), ('zip64_c.npz', zipfile.ZIP_DEFLATED)):
    with zipfile.ZipFile(os.path.join(d, fname), 'w', compression=comp) as zf:
        for k, arr in z.items():
            with zf.open(k + '.npy', 'w', force_zip64=True) as f:
                np.lib.format.write_array(f, arr)
    expect(fname, z)
print('ok')
)PY";

class NpzNumpyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    auto r = RunPython(kMakeFiles, {dir_->path()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string File(const std::string& name) { return dir_->File(name); }

  struct Expected {
    std::string dtype;  // numpy dtype.str, e.g. "<f4", "|u1", ">i8"
    bool fortran = false;
    std::vector<int64_t> shape;
    std::vector<double> f;   // float and bool arrays
    std::vector<int64_t> i;  // integer arrays
  };
  static Expected LoadExpected(const std::string& file, const std::string& key) {
    Expected e;
    const std::string base = File(file) + "." + key;
    std::ifstream meta(base + ".meta");
    int fortran = 0;
    meta >> e.dtype >> fortran;
    e.fortran = fortran != 0;
    int64_t s;
    while (meta >> s) e.shape.push_back(s);
    auto bytes = ReadFileToString(base + ".expect");
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    const size_t n = bytes->size() / 8;
    if (e.dtype[1] == 'f' || e.dtype[1] == 'b') {
      e.f.resize(n);
      if (n > 0) std::memcpy(e.f.data(), bytes->data(), n * 8);
    } else {
      e.i.resize(n);
      if (n > 0) std::memcpy(e.i.data(), bytes->data(), n * 8);
    }
    return e;
  }

  // Reads `key` from `file` as its own dtype and compares with numpy's values.
  static void CheckArray(const NpzReader& r, const std::string& file, const std::string& key) {
    SCOPED_TRACE(file + ":" + key);
    Expected e = LoadExpected(file, key);
    auto h = r.Header(key);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_EQ(h->shape, e.shape);
    EXPECT_EQ(h->fortran_order, e.fortran);
    EXPECT_EQ(h->big_endian, e.dtype[0] == '>');
    EXPECT_EQ(std::string(DTypeName(h->dtype)), e.dtype.substr(1));
    switch (h->dtype) {
      case DType::kBool:
        Compare<bool>(r, key, e);
        break;
      case DType::kInt8:
        Compare<int8_t>(r, key, e);
        break;
      case DType::kUInt8:
        Compare<uint8_t>(r, key, e);
        break;
      case DType::kInt16:
        Compare<int16_t>(r, key, e);
        break;
      case DType::kUInt16:
        Compare<uint16_t>(r, key, e);
        break;
      case DType::kInt32:
        Compare<int32_t>(r, key, e);
        break;
      case DType::kUInt32:
        Compare<uint32_t>(r, key, e);
        break;
      case DType::kInt64:
        Compare<int64_t>(r, key, e);
        break;
      case DType::kUInt64:
        Compare<uint64_t>(r, key, e);
        break;
      case DType::kFloat32:
        Compare<float>(r, key, e);
        break;
      case DType::kFloat64:
        Compare<double>(r, key, e);
        break;
    }
  }

  template <typename T>
  static void Compare(const NpzReader& r, const std::string& key, const Expected& e) {
    auto a = r.Read<T>(key);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->shape, e.shape);
    const size_t n = e.f.empty() ? e.i.size() : e.f.size();
    ASSERT_EQ(a->data.size(), n);
    for (size_t k = 0; k < n; ++k) {
      if constexpr (std::is_same_v<T, uint64_t>) {
        // Expected values were cast to int64 by numpy: compare the bit patterns.
        ASSERT_EQ(static_cast<int64_t>(a->data[k]), e.i[k]) << "element " << k;
      } else if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bool>) {
        ASSERT_EQ(static_cast<double>(a->data[k]), e.f[k]) << "element " << k;
      } else {
        ASSERT_EQ(static_cast<int64_t>(a->data[k]), e.i[k]) << "element " << k;
      }
    }
  }

  static TempDir* dir_;
};
TempDir* NpzNumpyTest::dir_ = nullptr;

void CheckWholeFile(const std::string& path, const std::vector<std::string>& expected_keys,
                    const std::function<void(const NpzReader&, const std::string&)>& check) {
  auto r = NpzReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->Keys(), expected_keys);
  for (const auto& k : expected_keys) check(**r, k);
}

TEST_F(NpzNumpyTest, SavezAndSavezCompressedTileFiles) {
  const std::vector<std::string> keys = {"node_feat",   "node_opcode",    "edge_index",
                                         "config_feat", "config_runtime", "node_splits"};
  for (std::string f : {"tile.npz", "tile_c.npz"}) {
    CheckWholeFile(File(f), keys,
                   [&](const NpzReader& r, const std::string& k) { CheckArray(r, f, k); });
  }
  auto r = NpzReader::Open(File("tile_c.npz"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->zip().Find("node_feat.npy")->method, kZipDeflated);
  auto s = NpzReader::Open(File("tile.npz"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->zip().Find("node_feat.npy")->method, kZipStored);
}

TEST_F(NpzNumpyTest, DtypeByteOrderAndFortranVariants) {
  const std::vector<std::string> keys = {
      "fortran_f4", "fortran_i8", "big_f4",   "big_i8",    "big_fortran_f8",
      "big_u2",     "f8_feat",    "i4_edges", "i4_opcode", "u1",
      "i1",         "i2",         "u4",       "u8",        "b1",
      "zero_d",     "empty",      "big300",   "frac",      "float_ints"};
  for (std::string f : {"var.npz", "var_c.npz"}) {
    CheckWholeFile(File(f), keys,
                   [&](const NpzReader& r, const std::string& k) { CheckArray(r, f, k); });
  }
}

TEST_F(NpzNumpyTest, LayoutShapedFile) {
  CheckWholeFile(File("layout.npz"),
                 {"node_feat", "node_config_feat", "node_config_ids", "config_runtime"},
                 [&](const NpzReader& r, const std::string& k) { CheckArray(r, "layout.npz", k); });
  auto r = NpzReader::Open(File("layout.npz"));
  ASSERT_TRUE(r.ok());
  auto h = (*r)->Header("node_config_feat");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->shape, (std::vector<int64_t>{9, 4, 18}));
  // Layout config values are small integers stored as float32: they convert to int8 exactly.
  auto as_i8 = (*r)->Read<int8_t>("node_config_feat");
  ASSERT_TRUE(as_i8.ok()) << as_i8.status().ToString();
  Expected e = LoadExpected("layout.npz", "node_config_feat");
  for (size_t k = 0; k < e.f.size(); ++k) ASSERT_EQ(as_i8->data[k], e.f[k]);
}

TEST_F(NpzNumpyTest, NpyVersions2And3) {
  for (std::string f : {"versions.npz", "versions_c.npz"}) {
    CheckWholeFile(File(f), {"v2", "v3", "v1"},
                   [&](const NpzReader& r, const std::string& k) { CheckArray(r, f, k); });
    auto r = NpzReader::Open(File(f));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ((*r)->Header("v2")->major_version, 2);
    EXPECT_EQ((*r)->Header("v3")->major_version, 3);
    EXPECT_EQ((*r)->Header("v1")->major_version, 1);
  }
}

TEST_F(NpzNumpyTest, Zip64ExtraFieldsFromPython) {
  for (std::string f : {"zip64.npz", "zip64_c.npz"}) {
    CheckWholeFile(File(f), {"a", "b"},
                   [&](const NpzReader& r, const std::string& k) { CheckArray(r, f, k); });
  }
}

TEST_F(NpzNumpyTest, ConversionsBetweenTypes) {
  auto r = NpzReader::Open(File("var.npz"));
  ASSERT_TRUE(r.ok());
  // int32 edges widen to int64; uint8 to float; f8 narrows to f4 by rounding.
  Expected edges = LoadExpected("var.npz", "i4_edges");
  auto e64 = (*r)->Read<int64_t>("i4_edges");
  ASSERT_TRUE(e64.ok());
  EXPECT_EQ(e64->data, edges.i);
  auto u1f = (*r)->Read<float>("u1");
  ASSERT_TRUE(u1f.ok());
  Expected u1 = LoadExpected("var.npz", "u1");
  for (size_t k = 0; k < u1.i.size(); ++k) EXPECT_EQ(u1f->data[k], static_cast<float>(u1.i[k]));
  auto f4 = (*r)->Read<float>("f8_feat");
  ASSERT_TRUE(f4.ok());
  Expected f8 = LoadExpected("var.npz", "f8_feat");
  for (size_t k = 0; k < f8.f.size(); ++k) EXPECT_EQ(f4->data[k], static_cast<float>(f8.f[k]));
  // Integral floats convert to integers; bools to integers.
  auto fi_signed = (*r)->Read<int16_t>("float_ints");
  ASSERT_TRUE(fi_signed.ok());
  EXPECT_EQ(fi_signed->data, (std::vector<int16_t>{1, -2, 3, 255}));
  auto b = (*r)->Read<int32_t>("b1");
  ASSERT_TRUE(b.ok());
  Expected b1 = LoadExpected("var.npz", "b1");
  for (size_t k = 0; k < b1.f.size(); ++k) EXPECT_EQ(b->data[k], b1.f[k]);
  // 0/1 integers convert to bool.
  auto small = (*r)->Read<int64_t>("empty");
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(small->data.empty());
  EXPECT_EQ(small->shape, (std::vector<int64_t>{0, 2}));
  auto zd = (*r)->Read<double>("zero_d");
  ASSERT_TRUE(zd.ok());
  EXPECT_TRUE(zd->shape.empty());
  EXPECT_EQ(zd->data, std::vector<double>{3.25});
}

TEST_F(NpzNumpyTest, ConversionErrorsNameFileKeyAndValue) {
  auto r = NpzReader::Open(File("var.npz"));
  ASSERT_TRUE(r.ok());
  auto big = (*r)->Read<uint8_t>("big300");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfRange);
  EXPECT_THAT(big.status().message(), HasSubstr(File("var.npz")));
  EXPECT_THAT(big.status().message(), HasSubstr("'big300'"));
  EXPECT_THAT(big.status().message(), HasSubstr("value 300"));
  // The same array fits in int16.
  EXPECT_TRUE((*r)->Read<int16_t>("big300").ok());
  // A negative value does not fit an unsigned type.
  auto neg = (*r)->Read<uint16_t>("float_ints");
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().code(), StatusCode::kInvalidArgument);  // float -> int rule
  EXPECT_THAT(neg.status().message(), HasSubstr("-2"));
  auto frac = (*r)->Read<int32_t>("frac");
  ASSERT_FALSE(frac.ok());
  EXPECT_EQ(frac.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(frac.status().message(), HasSubstr("2.5"));
  EXPECT_THAT(frac.status().message(), HasSubstr("'frac'"));
  auto i8neg = (*r)->Read<uint64_t>("i1");
  ASSERT_FALSE(i8neg.ok());
  EXPECT_EQ(i8neg.status().code(), StatusCode::kOutOfRange);
  auto tobool = (*r)->Read<bool>("u1");
  ASSERT_FALSE(tobool.ok());
  EXPECT_EQ(tobool.status().code(), StatusCode::kOutOfRange);
}

// ReadChunked delivers the elements in file order; Fortran arrays are compared against Read's
// C-order result through the index mapping.
template <typename T>
void CheckChunkedMatchesRead(const NpzReader& r, const std::string& key) {
  SCOPED_TRACE(key);
  auto whole = r.Read<T>(key);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto h = r.Header(key);
  ASSERT_TRUE(h.ok());
  const int64_t n = h->num_elements();
  // File-order index -> C-order index.
  std::vector<int64_t> c_of_file(static_cast<size_t>(n));
  const auto& shape = h->shape;
  for (int64_t f = 0; f < n; ++f) {
    if (h->file_order_is_c()) {
      c_of_file[f] = f;
      continue;
    }
    int64_t rem = f, c = 0, stride = 1;
    std::vector<int64_t> idx(shape.size());
    for (size_t j = 0; j < shape.size(); ++j) {
      idx[j] = rem % shape[j];
      rem /= shape[j];
    }
    for (size_t j = shape.size(); j-- > 0;) {
      c += idx[j] * stride;
      stride *= shape[j];
    }
    c_of_file[f] = c;
  }
  for (int64_t chunk : {int64_t{1}, int64_t{7}, int64_t{13}, n + 5, int64_t{1} << 40}) {
    std::vector<T> got;
    int64_t expect_first = 0;
    Status s = r.ReadChunked<T>(key, chunk, [&](const T* d, int64_t count, int64_t first) {
      EXPECT_EQ(first, expect_first);
      EXPECT_LE(count, chunk);
      EXPECT_GT(count, 0);
      got.insert(got.end(), d, d + count);
      expect_first += count;
      return Status::Ok();
    });
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(static_cast<int64_t>(got.size()), n);
    for (int64_t f = 0; f < n; ++f) {
      ASSERT_EQ(got[f], whole->data[c_of_file[f]]) << "chunk " << chunk << " element " << f;
    }
  }
}

TEST_F(NpzNumpyTest, ReadChunkedMatchesRead) {
  for (std::string f : {"var.npz", "var_c.npz"}) {
    auto r = NpzReader::Open(File(f));
    ASSERT_TRUE(r.ok());
    CheckChunkedMatchesRead<float>(**r, "fortran_f4");
    CheckChunkedMatchesRead<int64_t>(**r, "fortran_i8");
    CheckChunkedMatchesRead<double>(**r, "big_fortran_f8");
    CheckChunkedMatchesRead<float>(**r, "big_f4");
    CheckChunkedMatchesRead<int64_t>(**r, "big_i8");
    CheckChunkedMatchesRead<double>(**r, "f8_feat");
    CheckChunkedMatchesRead<int64_t>(**r, "i4_edges");  // converted
    CheckChunkedMatchesRead<bool>(**r, "b1");
    CheckChunkedMatchesRead<int64_t>(**r, "empty");
    CheckChunkedMatchesRead<double>(**r, "zero_d");
  }
  auto r = NpzReader::Open(File("layout.npz"));
  ASSERT_TRUE(r.ok());
  CheckChunkedMatchesRead<float>(**r, "node_config_feat");
}

TEST_F(NpzNumpyTest, ReadChunkedStopsOnCallbackError) {
  auto r = NpzReader::Open(File("tile.npz"));
  ASSERT_TRUE(r.ok());
  int calls = 0;
  Status s = (*r)->ReadChunked<float>("node_feat", 100, [&](const float*, int64_t, int64_t) {
    ++calls;
    return calls == 3 ? InvalidArgumentError("stop here") : Status::Ok();
  });
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(s.message(), "stop here");
  Status bad = (*r)->ReadChunked<float>(
      "node_feat", 0, [](const float*, int64_t, int64_t) { return Status::Ok(); });
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
}

TEST(NpzRealFiles, ReleaseTileFilesMatchNumpy) {
  const std::string dir = tpugraphs::testing::RealDataPath("npz/tile_test");
  TempDir out;
  // numpy lists every array of every file as "file key dtype shape" and dumps its values as
  // float64 (exact for every dtype in these files) to "<out>/<file>.<key>".
  auto py = RunPython(R"PY(
import sys, os, numpy as np
d, o = sys.argv[1], sys.argv[2]
for f in sorted(os.listdir(d)):
    with np.load(os.path.join(d, f)) as z:
        for k in z.files:
            a = z[k]
            a.astype('<f8').tofile(os.path.join(o, f + '.' + k))
            print(f, k, a.dtype.str, ','.join(map(str, a.shape)) or '-')
)PY",
                      {dir, out.path()});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  std::istringstream lines(py.out);
  std::string file, key, dtype, shape_text;
  int arrays = 0;
  while (lines >> file >> key >> dtype >> shape_text) {
    SCOPED_TRACE(file + ":" + key);
    auto r = NpzReader::Open(dir + "/" + file);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto h = (*r)->Header(key);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_EQ(std::string(DTypeName(h->dtype)), dtype.substr(1));
    std::string ours;
    for (size_t j = 0; j < h->shape.size(); ++j) {
      if (j > 0) ours += ',';
      ours += std::to_string(h->shape[j]);
    }
    EXPECT_EQ(ours.empty() ? "-" : ours, shape_text);
    auto a = (*r)->Read<double>(key);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto want = ReadFileToString(out.File(file + "." + key));
    ASSERT_TRUE(want.ok());
    ASSERT_EQ(want->size(), a->data.size() * sizeof(double));
    if (!want->empty()) {
      EXPECT_EQ(std::memcmp(want->data(), a->data.data(), want->size()), 0);
    }
    ++arrays;
  }
  EXPECT_GE(arrays, 3 * 5);
}

// ---------------------------------------------------------------------------------------------
// Our writer, checked by numpy.

template <typename T>
std::vector<T> Pattern(int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      v[i] = i % 3 == 0;
    } else if constexpr (std::is_floating_point_v<T>) {
      v[i] = static_cast<T>(i * 0.25 - 3);
    } else if constexpr (std::is_signed_v<T>) {
      v[i] = static_cast<T>((i * 7919) % 200 - 100);
    } else {
      v[i] = static_cast<T>((i * 7919) % 250);
    }
  }
  return v;
}

// The same patterns in numpy, checked against a file written by our writer.
constexpr char kCheckWritten[] = R"PY(
import sys, numpy as np
z = np.load(sys.argv[1])
def pat(n, dt):
    i = np.arange(n, dtype=np.int64)
    dt = np.dtype(dt)
    if dt.kind == 'b': return i % 3 == 0
    if dt.kind == 'f': return (i * 0.25 - 3).astype(dt)
    if dt.kind == 'i': return ((i * 7919) % 200 - 100).astype(dt)
    return ((i * 7919) % 250).astype(dt)
want = {'b1': ((4, 3), '|b1'), 'i1': ((5,), '|i1'), 'u1': ((2, 3, 4), '|u1'),
        'i2': ((6,), '<i2'), 'u2': ((6,), '<u2'), 'i4': ((3, 2), '<i4'), 'u4': ((7,), '<u4'),
        'i8': ((10, 2), '<i8'), 'u8': ((3,), '<u8'), 'f4': ((20, 140), '<f4'),
        'f8': ((2, 2), '<f8'), 'zero_d': ((), '<f8'), 'empty': ((0, 2), '<i8'),
        'node_config_feat': ((5, 7, 18), '<f4')}
assert sorted(z.files) == sorted(want), z.files
for k, (shape, dt) in want.items():
    a = z[k]
    assert a.dtype.str == dt, (k, a.dtype.str, dt)
    assert a.shape == shape, (k, a.shape, shape)
    n = int(np.prod(shape))
    assert np.array_equal(a.ravel(), pat(n, dt)), k
print('ok')
)PY";

Status WriteAllTypes(const std::string& path, bool compress) {
  TPUG_ASSIGN_OR_RETURN(auto w, NpzWriter::Create(path, compress));
  std::vector<bool> bits = Pattern<bool>(12);
  std::unique_ptr<bool[]> b1(new bool[bits.size()]);
  std::copy(bits.begin(), bits.end(), b1.get());
  TPUG_RETURN_IF_ERROR(w->Add<bool>("b1", {4, 3}, b1.get()));
  TPUG_RETURN_IF_ERROR(w->Add<int8_t>("i1", {5}, Pattern<int8_t>(5).data()));
  TPUG_RETURN_IF_ERROR(w->Add<uint8_t>("u1", {2, 3, 4}, Pattern<uint8_t>(24).data()));
  TPUG_RETURN_IF_ERROR(w->Add<int16_t>("i2", {6}, Pattern<int16_t>(6).data()));
  TPUG_RETURN_IF_ERROR(w->Add<uint16_t>("u2", {6}, Pattern<uint16_t>(6).data()));
  TPUG_RETURN_IF_ERROR(w->Add<int32_t>("i4", {3, 2}, Pattern<int32_t>(6).data()));
  TPUG_RETURN_IF_ERROR(w->Add<uint32_t>("u4", {7}, Pattern<uint32_t>(7).data()));
  TPUG_RETURN_IF_ERROR(w->Add<int64_t>("i8", {10, 2}, Pattern<int64_t>(20).data()));
  TPUG_RETURN_IF_ERROR(w->Add<uint64_t>("u8", {3}, Pattern<uint64_t>(3).data()));
  TPUG_RETURN_IF_ERROR(w->Add<float>("f4", {20, 140}, Pattern<float>(2800).data()));
  TPUG_RETURN_IF_ERROR(w->Add<double>("f8", {2, 2}, Pattern<double>(4).data()));
  TPUG_RETURN_IF_ERROR(w->Add<double>("zero_d", {}, Pattern<double>(1).data()));
  TPUG_RETURN_IF_ERROR(w->Add<int64_t>("empty", {0, 2}, nullptr));
  TPUG_RETURN_IF_ERROR(
      w->Add<float>("node_config_feat", {5, 7, 18}, Pattern<float>(5 * 7 * 18).data()));
  return w->Finish();
}

TEST(NpzWriterTest, NumpyLoadsWhatWeWrite) {
  TempDir dir;
  for (bool compress : {false, true}) {
    SCOPED_TRACE(compress ? "compressed" : "stored");
    const std::string path = dir.File(compress ? "ours_c.npz" : "ours.npz");
    Status s = WriteAllTypes(path, compress);
    ASSERT_TRUE(s.ok()) << s.ToString();
    auto py = RunPython(kCheckWritten, {path});
    EXPECT_EQ(py.exit_code, 0) << py.err;
    EXPECT_EQ(py.out, "ok\n");
    // And our reader reads it back.
    auto r = NpzReader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)->Keys().size(), 14u);
    auto f4 = (*r)->Read<float>("f4");
    ASSERT_TRUE(f4.ok());
    EXPECT_EQ(f4->data, Pattern<float>(2800));
    auto b1 = (*r)->Read<bool>("b1");
    ASSERT_TRUE(b1.ok());
    EXPECT_EQ(b1->data, Pattern<bool>(12));
    EXPECT_EQ((*r)->zip().Find("f4.npy")->method, compress ? kZipDeflated : kZipStored);
  }
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"ours.npz", "ours_c.npz"}));
}

TEST(NpzWriterTest, NothingAppearsUntilFinish) {
  TempDir dir;
  const std::string path = dir.File("x.npz");
  {
    auto w = NpzWriter::Create(path, true);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add<float>("a", {2}, Pattern<float>(2).data()).ok());
    EXPECT_FALSE(std::ifstream(path).good());
    // Duplicate and empty keys, negative dims are refused.
    EXPECT_EQ((*w)->Add<float>("a", {2}, Pattern<float>(2).data()).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ((*w)->Add<float>("", {2}, Pattern<float>(2).data()).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ((*w)->Add<float>("neg", {-1}, nullptr).code(), StatusCode::kInvalidArgument);
  }  // destroyed without Finish
  EXPECT_TRUE(dir.List().empty());
}

TEST(NpzWriterTest, Zip64EndRecordsWithManyMembers) {
  // More than 65535 members force the zip64 end-of-central-directory record and locator.
  TempDir dir;
  const std::string path = dir.File("many.npz");
  constexpr int kMembers = 70000;
  {
    auto w = NpzWriter::Create(path, false);
    ASSERT_TRUE(w.ok());
    for (int i = 0; i < kMembers; ++i) {
      int32_t v = i;
      std::string key = std::to_string(i);
      key.insert(key.begin(), 'm');
      ASSERT_TRUE((*w)->Add<int32_t>(key, {}, &v).ok());
    }
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto r = NpzReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->Keys().size(), static_cast<size_t>(kMembers));
  auto last = (*r)->Read<int32_t>("m69999");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->data, std::vector<int32_t>{69999});
  auto py = RunPython(R"PY(
import sys, numpy as np
z = np.load(sys.argv[1])
assert len(z.files) == 70000
assert int(z['m0']) == 0 and int(z['m65536']) == 65536 and int(z['m69999']) == 69999
print('ok')
)PY",
                      {path});
  EXPECT_EQ(py.exit_code, 0) << py.err;
}

// Values like layout config features (small integers, runs of repeats) so that deflate finds
// matches across the piece boundaries of the writer.
std::vector<float> ConfigLikeFloats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n;) {
    const float x = static_cast<float>(static_cast<int>(rng() % 9) - 1);
    for (int64_t r = 1 + rng() % 40; r > 0 && i < n; --r) v[i++] = x;
  }
  return v;
}

// Streams `data` through BeginArray/AppendArray/EndArray in pieces of the given sizes (cycled).
template <typename T>
Status StreamArray(NpzWriter* w, const std::string& key, const std::vector<int64_t>& shape,
                   const std::vector<T>& data, const std::vector<int64_t>& pieces) {
  TPUG_RETURN_IF_ERROR(w->BeginArray<T>(key, shape));
  const int64_t n = static_cast<int64_t>(data.size());
  for (int64_t at = 0, k = 0; at < n; ++k) {
    const int64_t c = std::min(n - at, pieces[k % pieces.size()]);
    TPUG_RETURN_IF_ERROR(w->AppendArray<T>(data.data() + at, c));
    at += c;
  }
  return w->EndArray();
}

// The same archive written with Add for every array and with the large ones streamed: the files
// must be identical, stored and deflated (levels 0, 1, 6 and 9; level 0 emits stored blocks
// whose boundaries follow the pieces zlib is fed, so it also checks that streaming feeds the
// same pieces as Add).
TEST(NpzWriterTest, StreamedArraysWriteTheBytesOfAdd) {
  TempDir dir;
  // 5.5 MiB of floats: several of the writer's 1 MiB steps and 256 KiB deflate pieces.
  const std::vector<int64_t> shape = {1201, 64, 18};
  const std::vector<float> feat = ConfigLikeFloats(shape[0] * shape[1] * shape[2], 3);
  const std::vector<int8_t> bytes = Pattern<int8_t>(700001);
  const std::vector<float> head = Pattern<float>(2800);
  const std::vector<int64_t> tail = Pattern<int64_t>(1201);
  // Piece sizes in elements: tiny, odd, around and across 1 MiB, larger than 1 MiB. (Fed to
  // zlib as they come, pieces like these change level 0's output: the test would catch it.)
  const std::vector<int64_t> pieces = {1, 2, 3, 10000, 7, 1000, 65535, 262145, 3, 1 << 20, 700001};
  struct Mode {
    bool compress;
    int level;
  };
  for (Mode mode : {Mode{false, -1}, Mode{true, -1}, Mode{true, 0}, Mode{true, 1}, Mode{true, 9}}) {
    const std::string what =
        mode.compress ? "deflate level " + std::to_string(mode.level) : std::string("stored");
    SCOPED_TRACE(what);
    const std::string whole = dir.File("whole.npz"), streamed = dir.File("streamed.npz");
    {
      auto w = NpzWriter::Create(whole, mode.compress, mode.level);
      ASSERT_TRUE(w.ok());
      ASSERT_TRUE((*w)->Add<float>("head", {20, 140}, head.data()).ok());
      ASSERT_TRUE((*w)->Add<float>("node_config_feat", shape, feat.data()).ok());
      ASSERT_TRUE((*w)->Add<int8_t>("bytes", {700001}, bytes.data()).ok());
      ASSERT_TRUE((*w)->Add<float>("empty", {0, 18}, nullptr).ok());
      ASSERT_TRUE((*w)->Add<int64_t>("tail", {1201}, tail.data()).ok());
      ASSERT_TRUE((*w)->Finish().ok());
    }
    {
      auto w = NpzWriter::Create(streamed, mode.compress, mode.level);
      ASSERT_TRUE(w.ok());
      ASSERT_TRUE((*w)->Add<float>("head", {20, 140}, head.data()).ok());
      Status s = StreamArray<float>(w->get(), "node_config_feat", shape, feat, pieces);
      ASSERT_TRUE(s.ok()) << s.ToString();
      s = StreamArray<int8_t>(w->get(), "bytes", {700001}, bytes, {999, 1 << 20});
      ASSERT_TRUE(s.ok()) << s.ToString();
      s = StreamArray<float>(w->get(), "empty", {0, 18}, {}, {1});
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_TRUE((*w)->Add<int64_t>("tail", {1201}, tail.data()).ok());
      ASSERT_TRUE((*w)->Finish().ok());
    }
    auto a = ReadFileToString(whole);
    auto b = ReadFileToString(streamed);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), b->size());
    EXPECT_TRUE(*a == *b) << "the files differ first at byte "
                          << std::mismatch(a->begin(), a->end(), b->begin()).first - a->begin();
    // The streamed file reads back (CRCs checked).
    auto r = NpzReader::Open(streamed);
    ASSERT_TRUE(r.ok());
    auto got = (*r)->Read<float>("node_config_feat");
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->data, feat);
  }
}

TEST(NpzWriterTest, StreamedArrayMisuseIsRefused) {
  TempDir dir;
  const std::string path = dir.File("x.npz");
  const std::vector<float> v = Pattern<float>(10);
  {
    auto w = NpzWriter::Create(path, false);
    ASSERT_TRUE(w.ok());
    NpzWriter& npz = **w;
    EXPECT_EQ(npz.AppendArray<float>(v.data(), 1).code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(npz.EndArray().code(), StatusCode::kFailedPrecondition);
    ASSERT_TRUE(npz.BeginArray<float>("a", {2, 5}).ok());
    // Another array while "a" is open, a different element type, too many elements.
    EXPECT_EQ(npz.Add<float>("b", {1}, v.data()).code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(npz.BeginArray<float>("b", {1}).code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(npz.AppendArray<double>(nullptr, 0).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(npz.AppendArray<float>(v.data(), 11).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(npz.Finish().code(), StatusCode::kFailedPrecondition);
    ASSERT_TRUE(npz.AppendArray<float>(v.data(), 4).ok());
    // Ended short: refused, and the archive can no longer be finished.
    Status s = npz.EndArray();
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr("array 'a': ended after 4 of 10 elements"));
    EXPECT_EQ(npz.Finish().code(), StatusCode::kFailedPrecondition);
  }
  EXPECT_TRUE(dir.List().empty());
}

}  // namespace
}  // namespace tpugraphs::io
