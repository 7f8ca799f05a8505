// Reading and writing numpy .npz archives (a zip of .npy members) without numpy.
//
// NpzReader opens only the zip central directory; arrays are read on demand, whole (Read) or
// in bounded chunks (ReadChunked), so archives and members larger than memory work. Every
// member read to its end has its CRC-32 verified: a mismatch is DataLoss naming the file and
// the member. See docs/npz.md for what is supported, the conversion rules and the error classes.
//
// Usage:
//   TPUG_ASSIGN_OR_RETURN(auto npz, io::NpzReader::Open("graph.npz"));
//   TPUG_ASSIGN_OR_RETURN(io::NdArray<float> feat, npz->Read<float>("node_feat"));
//   // feat.shape == {n, 140}; feat.data holds n*140 floats in C order.
//
//   TPUG_ASSIGN_OR_RETURN(auto out, io::NpzWriter::Create("out.npz", /*compress=*/true));
//   TPUG_RETURN_IF_ERROR(out->Add<float>("node_feat", {n, 140}, feat.data.data()));
//   TPUG_RETURN_IF_ERROR(out->Finish());
//
// Thread-safety: NpzReader's const methods may be called concurrently from several threads
// (each call opens its own member stream). An NpzWriter is used by one thread.
#ifndef TPUGRAPHS_IO_NPZ_H_
#define TPUGRAPHS_IO_NPZ_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tpugraphs/common/status.h"
#include "tpugraphs/io/npy.h"
#include "tpugraphs/io/zip.h"

namespace tpugraphs::io {

// A dense array in C (row-major) order and host byte order.
template <typename T>
struct NdArray {
  std::vector<int64_t> shape;
  std::vector<T> data;

  int64_t num_elements() const { return static_cast<int64_t>(data.size()); }
};

class NpzReader {
 public:
  // Opens the archive and reads its central directory. Errors: NotFound (no such file),
  // DataLoss (not a zip file, truncated), Unimplemented (multi-disk archive).
  static StatusOr<std::unique_ptr<NpzReader>> Open(const std::string& path);

  const std::string& path() const { return zip_->path(); }
  // Member names without the ".npy" suffix, in archive order (directories skipped).
  std::vector<std::string> Keys() const;
  bool Has(std::string_view key) const;

  // Parses only the npy header of `key` (the member's CRC is not checked: that needs the data).
  // Errors: NotFound (no such key), InvalidArgument (bad magic or header), Unimplemented (dtype,
  // npy version, compression method or encryption we do not support), DataLoss (declared shape
  // larger than the member, truncated member).
  StatusOr<NpyHeader> Header(std::string_view key) const;

  // Reads a whole array converted to T, in C order and host byte order. T is one of bool,
  // int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t, float, double.
  // Conversions (see ConvertElements): integer/bool -> integer only if every value fits (else
  // OutOfRange naming file, key and value); integer -> float and float -> float always (f8 -> f4
  // rounds); float -> integer only if finite, integral and in range (else InvalidArgument).
  // Fortran-order arrays are transposed to C order. Errors as for Header, plus DataLoss for a
  // CRC mismatch or corrupt deflate data. Deflated members up to 1 GiB are inflated whole with
  // libdeflate when it is the DefaultInflateBackend (zip.h), else streamed through zlib; the
  // result is the same.
  template <typename T>
  StatusOr<NdArray<T>> Read(std::string_view key) const;

  // Streams the elements in file order (C or Fortran, as Header().fortran_order says), converted
  // to T, in chunks of at most `max_elements` (also at most 64 MiB of raw data per chunk):
  // fn(data, count, first_element_index). Never holds the whole member in memory. Stops and
  // returns fn's error if it returns one. The member's CRC-32 is verified after the last chunk:
  // chunks already delivered are unverified until ReadChunked returns OK.
  template <typename T>
  Status ReadChunked(
      std::string_view key, int64_t max_elements,
      const std::function<Status(const T* data, int64_t count, int64_t first)>& fn) const;

  // The zip layer, for callers that need member sizes or compression methods.
  const ZipReader& zip() const { return *zip_; }

 private:
  struct OpenedArray;
  NpzReader() = default;
  StatusOr<OpenedArray> OpenArray(std::string_view key) const;
  StatusOr<const ZipEntry*> FindEntry(std::string_view key) const;
  std::string Where(std::string_view key) const;

  std::unique_ptr<ZipReader> zip_;
  std::vector<std::string> keys_;
  std::unordered_map<std::string, const ZipEntry*> by_key_;
};

class NpzWriter {
 public:
  // Writes through AtomicFileWriter: nothing appears at `path` until Finish() succeeds, and a
  // writer destroyed before Finish leaves nothing behind. `compress` selects deflate (like
  // np.savez_compressed) at zlib `level` (-1: zlib's default, 6, as numpy uses) or stored
  // members (like np.savez).
  static StatusOr<std::unique_ptr<NpzWriter>> Create(const std::string& path, bool compress,
                                                     int level = -1);

  // Adds "<key>.npy" with the given shape: npy format 1.0 (2.0 only if the header needs it),
  // little-endian, C order, dtype from T (bool->b1, uint8_t->u1, int64_t->i8, float->f4, ...).
  // `data` holds the product of `shape` elements in C order. Errors: InvalidArgument (empty or
  // duplicate key, negative dimension), IoError.
  template <typename T>
  Status Add(std::string_view key, const std::vector<int64_t>& shape, const T* data);

  // Writes the central directory (zip64 records when needed) and commits the file.
  Status Finish();

  const std::string& path() const { return zip_->path(); }

 private:
  NpzWriter() = default;
  std::unique_ptr<ZipWriter> zip_;
  bool compress_ = false;
  int level_ = -1;
};

}  // namespace tpugraphs::io

#endif  // TPUGRAPHS_IO_NPZ_H_
