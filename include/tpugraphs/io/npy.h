// The .npy array format (numpy's NEP 1 / numpy.lib.format): element types, header parsing and
// formatting, and element conversion.
//
// A .npy stream is: the magic "\x93NUMPY", a major and minor version byte, the header length
// (uint16 little-endian for version 1.0, uint32 for 2.0 and 3.0), and the header: an ASCII
// (3.0: UTF-8) Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and a final '\n'. The raw elements follow, in C or Fortran order.
//
// We support the simple numeric dtypes listed in DType in either byte order ('<', '>', '|' for
// one-byte types, '=' meaning little-endian as written by every machine we know). Structured,
// string, object, complex and float16 dtypes are Unimplemented.
//
// Thread-safety: all functions are pure and may be called concurrently.
#ifndef TPUGRAPHS_IO_NPY_H_
#define TPUGRAPHS_IO_NPY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/status.h"

namespace tpugraphs::io {

enum class DType {
  kBool,
  kInt8,
  kUInt8,
  kInt16,
  kUInt16,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64,
  kFloat32,
  kFloat64
};

// numpy-style descr without the byte order: "b1", "i1", "u1", ..., "f4", "f8".
std::string_view DTypeName(DType dtype);
// Bytes per element.
size_t DTypeSize(DType dtype);
bool IsFloatDType(DType dtype);

// The DType of a C++ element type; only for the eleven supported types.
template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<bool>() {
  return DType::kBool;
}
template <>
constexpr DType DTypeOf<int8_t>() {
  return DType::kInt8;
}
template <>
constexpr DType DTypeOf<uint8_t>() {
  return DType::kUInt8;
}
template <>
constexpr DType DTypeOf<int16_t>() {
  return DType::kInt16;
}
template <>
constexpr DType DTypeOf<uint16_t>() {
  return DType::kUInt16;
}
template <>
constexpr DType DTypeOf<int32_t>() {
  return DType::kInt32;
}
template <>
constexpr DType DTypeOf<uint32_t>() {
  return DType::kUInt32;
}
template <>
constexpr DType DTypeOf<int64_t>() {
  return DType::kInt64;
}
template <>
constexpr DType DTypeOf<uint64_t>() {
  return DType::kUInt64;
}
template <>
constexpr DType DTypeOf<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType DTypeOf<double>() {
  return DType::kFloat64;
}

struct NpyHeader {
  DType dtype = DType::kFloat32;
  bool big_endian = false;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  // Format version from the preamble (1.0, 2.0 or 3.0) and the size of preamble + header, i.e.
  // the offset of the first element. Filled by the parsers; ignored by FormatNpyHeader.
  int major_version = 1;
  int minor_version = 0;
  uint64_t header_bytes = 0;

  // Product of shape (1 for a 0-d array). The parsers guarantee it does not overflow.
  int64_t num_elements() const;
  // num_elements() * DTypeSize(dtype).
  uint64_t data_bytes() const;
  // Whether the file order equals C order (C order, or at most one dimension longer than 1).
  bool file_order_is_c() const;
  // "(3, 4) <f4" for messages.
  std::string DebugString() const;
};

// Upper bound on the header length we accept (numpy itself refuses headers over 10000 bytes by
// default; we allow more, for arrays with very many dimensions, but never a huge allocation).
inline constexpr uint64_t kMaxNpyHeaderBytes = uint64_t{1} << 20;

// Parses a complete header from `read_exact`, which must deliver exactly the requested bytes
// or fail. `available` is the number of bytes the stream holds in total (header + data): the
// header length and the declared shape are checked against it before anything is allocated, so
// a declared shape larger than the stream is DataLoss and trailing bytes after the data are
// DataLoss too. `where` prefixes every message (e.g. "x.npz: array 'node_feat'").
// Errors: InvalidArgument (bad magic, malformed header dict, negative dimension), Unimplemented
// (unknown version or dtype), DataLoss (header or data larger than the stream).
StatusOr<NpyHeader> ReadNpyHeader(const std::function<Status(void* dst, size_t n)>& read_exact,
                                  uint64_t available, const std::string& where);

// Parses a header held completely in `bytes` (preamble included); data need not follow.
StatusOr<NpyHeader> ParseNpyHeader(std::string_view bytes, const std::string& where);

// The preamble + header dict for an array, padded so that the data starts at a multiple of 64
// bytes, as numpy does. Uses version 1.0 unless the header is too long for it (then 2.0).
std::string FormatNpyHeader(DType dtype, const std::vector<int64_t>& shape, bool big_endian = false,
                            bool fortran_order = false);

// Converts `count` raw elements of type `src` (byte order `big_endian`) at `raw` to T, writing
// `out[0..count)`. Rules: integer/bool -> integer/bool only if the value fits (OutOfRange);
// integer -> float always (rounding to nearest); float -> float always (f8 -> f4 rounds, may
// overflow to inf); float -> integer/bool only if finite, integral and in range
// (InvalidArgument). Messages read "<where>: element <first_index + i> value <v> ...".
// T is one of the eleven types of DTypeOf.
template <typename T>
Status ConvertElements(DType src, bool big_endian, const void* raw, int64_t count, T* out,
                       int64_t first_index, const std::string& where);

// Writes `n` elements of `src` in little-endian byte order to `out` (which holds n*sizeof(T)
// bytes). A memcpy on little-endian hosts.
template <typename T>
void ToLittleEndian(const T* src, size_t n, void* out);

}  // namespace tpugraphs::io

#endif  // TPUGRAPHS_IO_NPY_H_
