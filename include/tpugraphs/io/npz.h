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
//   // Or piece by piece, with the same bytes in the file:
//   TPUG_RETURN_IF_ERROR(out->BeginArray<float>("node_feat", {n, 140}));
//   for (...) TPUG_RETURN_IF_ERROR(out->AppendArray<float>(chunk, chunk_elements));
//   TPUG_RETURN_IF_ERROR(out->EndArray());
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

  // Writes one array in pieces, so that it never has to exist whole in memory (e.g. values
  // converted chunk by chunk from a narrower type): BeginArray writes the npy header, AppendArray
  // takes the next `count` elements in C order (any number of calls, any sizes), EndArray checks
  // that the product of `shape` elements arrived and closes the member. The file gets exactly the
  // bytes Add writes for the same array, deflated or stored: a stored member's CRC-32 is filled
  // into its local header at the end (ZipWriter::BeginStoredCrcAtEnd). Memory: one 1 MiB buffer.
  // No other array may be added until EndArray. Errors: as Add; InvalidArgument for a T other
  // than BeginArray's or more elements than the shape holds; FailedPrecondition for an AppendArray
  // or EndArray without BeginArray, an Add, BeginArray or Finish while an array is open, and an
  // EndArray short of elements (the archive then cannot be finished).
  template <typename T>
  Status BeginArray(std::string_view key, const std::vector<int64_t>& shape);
  template <typename T>
  Status AppendArray(const T* data, int64_t count);
  Status EndArray();

  // Writes the central directory (zip64 records when needed) and commits the file.
  Status Finish();

  const std::string& path() const { return zip_->path(); }

 private:
  // The array BeginArray opened.
  struct OpenArray {
    std::string where;  // "<path>: array '<key>'"
    DType dtype = DType::kFloat32;
    uint64_t elements = 0;  // the product of the shape
    uint64_t written = 0;   // elements taken by AppendArray so far
    // Little-endian data bytes not yet handed to the zip layer (see WriteArrayBytes).
    std::vector<unsigned char> pending;
  };
  NpzWriter() = default;
  // Checks key and shape; the element count, the member name and the npy header.
  template <typename T>
  Status Prepare(std::string_view key, const std::vector<int64_t>& shape, uint64_t* elements,
                 std::string* name, std::string* header) const;
  Status WriteArrayBytes(const unsigned char* bytes, size_t n);

  std::unique_ptr<ZipWriter> zip_;
  bool compress_ = false;
  int level_ = -1;
  std::unique_ptr<OpenArray> open_;
  bool broken_ = false;  // an array was left short: Finish refuses
};

}  // namespace tpugraphs::io

#endif  // TPUGRAPHS_IO_NPZ_H_
