// NpzReader and NpzWriter: .npy members inside a zip archive (numpy.savez / savez_compressed).
#include "tpugraphs/io/npz.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <type_traits>

namespace tpugraphs::io {
namespace {

constexpr std::string_view kNpySuffix = ".npy";
// Raw bytes per chunk when elements must be converted (fits in L2 alongside its output).
constexpr size_t kConvertChunkBytes = size_t{1} << 20;
// Bytes per step when Read grows its destination and reads straight into it: small enough that
// the zero-filled new part is still in cache when the data lands on it.
constexpr size_t kDirectChunkBytes = size_t{1} << 20;
// Cap on the raw bytes of one ReadChunked chunk and of one write step.
constexpr size_t kMaxChunkBytes = size_t{64} << 20;
// NpzWriter::AppendArray hands data to the zip layer in multiples of this (see WriteArrayBytes):
// it divides kMaxChunkBytes and is a multiple of ZipWriter's 256 KiB deflate piece.
constexpr size_t kStreamPieceBytes = size_t{1} << 20;
static_assert(kMaxChunkBytes % kStreamPieceBytes == 0);
// Largest member Read inflates whole with libdeflate (it holds the compressed and the inflated
// bytes at once); larger ones are streamed through zlib.
constexpr uint64_t kMaxWholeMemberBytes = uint64_t{1} << 30;
// The whole-member path sizes the result from the declared size before inflating, where the
// streaming path grows it as data arrives. So that a small file declaring a huge member cannot
// make us commit much memory, members above 64 MiB take it only if they declare at most 64x
// their compressed size (bench-npz.py's layout file compresses 4.3x); the others are streamed.
constexpr uint64_t kWholeMemberAnyRatioBytes = uint64_t{64} << 20;
constexpr uint64_t kWholeMemberMaxRatio = 64;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool NeedsSwap(const NpyHeader& h) {
  return DTypeSize(h.dtype) > 1 && h.big_endian != (std::endian::native == std::endian::big);
}

// Reads elements of one member in file order and converts them to T.
template <typename T>
class ElementSource {
 public:
  ElementSource(ZipMemberStream* stream, const NpyHeader& h, const std::string& where,
                int64_t max_chunk)
      : stream_(stream), h_(h), where_(where), item_(DTypeSize(h.dtype)) {
    // Identical layout: read straight into the destination. bool is always converted so that
    // bytes other than 0/1 never land in a bool.
    direct_ = DTypeOf<T>() == h.dtype && !NeedsSwap(h) && !std::is_same_v<T, bool>;
    if (!direct_) raw_.resize(static_cast<size_t>(max_chunk) * item_);
  }
  bool direct() const { return direct_; }

  // Reads the next `count` (<= max_chunk) elements, the first being element `first`.
  Status Next(int64_t count, int64_t first, T* dst) {
    if (direct_) return stream_->ReadExact(dst, static_cast<size_t>(count) * sizeof(T));
    TPUG_RETURN_IF_ERROR(stream_->ReadExact(raw_.data(), static_cast<size_t>(count) * item_));
    return ConvertElements<T>(h_.dtype, h_.big_endian, raw_.data(), count, dst, first, where_);
  }

 private:
  ZipMemberStream* stream_;
  const NpyHeader& h_;
  const std::string& where_;
  size_t item_;
  bool direct_ = false;
  std::vector<unsigned char> raw_;
};

// Asks the kernel for transparent huge pages on a large, not yet touched buffer (numpy does the
// same for its arrays): far fewer page faults when the data lands. Advisory; errors are ignored.
void AdviseHugePages(const void* p, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < 2 * kHuge) return;
  const auto begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const auto end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end > begin) {
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
}

int64_t ChunkElements(size_t bytes, size_t item) {
  return static_cast<int64_t>(std::max<size_t>(1, bytes / item));
}

}  // namespace

struct NpzReader::OpenedArray {
  std::unique_ptr<ZipMemberStream> stream;
  NpyHeader header;
};

StatusOr<std::unique_ptr<NpzReader>> NpzReader::Open(const std::string& path) {
  std::unique_ptr<NpzReader> r(new NpzReader());
  TPUG_ASSIGN_OR_RETURN(r->zip_, ZipReader::Open(path));
  for (const ZipEntry& e : r->zip_->entries()) {
    if (e.name.empty() || e.name.back() == '/') continue;  // directory entries
    std::string key =
        EndsWith(e.name, kNpySuffix) ? e.name.substr(0, e.name.size() - kNpySuffix.size()) : e.name;
    const ZipEntry* last = r->zip_->Find(e.name);  // duplicates: the last one wins
    auto [it, inserted] = r->by_key_.emplace(key, last);
    if (inserted) r->keys_.push_back(key);
  }
  return r;
}

std::vector<std::string> NpzReader::Keys() const { return keys_; }

bool NpzReader::Has(std::string_view key) const {
  if (by_key_.count(std::string(key)) != 0) return true;
  return EndsWith(key, kNpySuffix) &&
         by_key_.count(std::string(key.substr(0, key.size() - kNpySuffix.size()))) != 0;
}

std::string NpzReader::Where(std::string_view key) const {
  return path() + ": array '" + std::string(key) + "'";
}

StatusOr<NpzReader::OpenedArray> NpzReader::OpenArray(std::string_view key) const {
  TPUG_ASSIGN_OR_RETURN(const ZipEntry* entry, FindEntry(key));
  OpenedArray a;
  TPUG_ASSIGN_OR_RETURN(a.stream, zip_->OpenMember(*entry));
  ZipMemberStream* s = a.stream.get();
  auto read = [s](void* dst, size_t n) { return s->ReadExact(dst, n); };
  TPUG_ASSIGN_OR_RETURN(
      a.header, ReadNpyHeader(read, s->size(), path() + ": member '" + s->entry().name + "'"));
  return a;
}

StatusOr<const ZipEntry*> NpzReader::FindEntry(std::string_view key) const {
  auto it = by_key_.find(std::string(key));
  if (it == by_key_.end() && EndsWith(key, kNpySuffix)) {
    it = by_key_.find(std::string(key.substr(0, key.size() - kNpySuffix.size())));
  }
  if (it == by_key_.end()) {
    std::string have;
    for (size_t i = 0; i < keys_.size() && i < 20; ++i) have += (i ? ", " : "") + keys_[i];
    if (keys_.size() > 20) have += ", ...";
    return NotFoundError(Where(key) + " not found (the archive holds: " +
                         (have.empty() ? std::string("nothing") : have) + ")");
  }
  return it->second;
}

StatusOr<NpyHeader> NpzReader::Header(std::string_view key) const {
  TPUG_ASSIGN_OR_RETURN(OpenedArray a, OpenArray(key));
  return a.header;
}

namespace {

// Reads array `h` of a deflated member whole through libdeflate (ZipMemberStream::ReadWhole).
// When no conversion is needed the member is inflated straight into the result: the vector is
// sized so that the npy header lands in its first elements, which are then erased (one memmove
// of the data), so there is no second buffer of the array's size to fault in and copy from.
template <typename T>
StatusOr<NdArray<T>> ReadWholeMember(const ZipReader& zip, const ZipEntry& entry,
                                     const NpyHeader& h, const std::string& where) {
  TPUG_ASSIGN_OR_RETURN(auto stream, zip.OpenMember(entry));
  const size_t n = static_cast<size_t>(h.num_elements());
  NdArray<T> out;
  out.shape = h.shape;
  try {
    if (DTypeOf<T>() == h.dtype && !NeedsSwap(h)) {
      // Header + data is exactly the member's size (ReadNpyHeader checked it).
      const size_t pad = static_cast<size_t>((h.header_bytes + sizeof(T) - 1) / sizeof(T));
      out.data.reserve(n + pad);
      AdviseHugePages(out.data.data(), (n + pad) * sizeof(T));
      out.data.resize(n + pad);
      auto* member = reinterpret_cast<unsigned char*>(out.data.data()) + pad * sizeof(T) -
                     static_cast<size_t>(h.header_bytes);
      TPUG_RETURN_IF_ERROR(stream->ReadWhole(member, InflateBackend::kLibdeflate));
      out.data.erase(out.data.begin(), out.data.begin() + static_cast<std::ptrdiff_t>(pad));
      return out;
    }
    std::unique_ptr<unsigned char[]> buf(new unsigned char[static_cast<size_t>(stream->size())]);
    TPUG_RETURN_IF_ERROR(stream->ReadWhole(buf.get(), InflateBackend::kLibdeflate));
    out.data.resize(n);
    TPUG_RETURN_IF_ERROR(ConvertElements<T>(h.dtype, h.big_endian, buf.get() + h.header_bytes,
                                            static_cast<int64_t>(n), out.data.data(), 0, where));
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError(where + ": out of memory for shape " + h.DebugString());
  }
  return out;
}

// Whether Read takes a member whole through libdeflate: deflated, libdeflate selected, not too
// large to hold compressed and inflated at once, and not a bool array (std::vector<bool> has no
// contiguous storage to inflate into).
template <typename T>
bool UseWholeMember(const ZipEntry& e) {
  return !std::is_same_v<T, bool> && e.method == kZipDeflated &&
         DefaultInflateBackend() == InflateBackend::kLibdeflate && LibdeflateAvailable() &&
         e.uncompressed_size <= kMaxWholeMemberBytes &&
         (e.uncompressed_size <= kWholeMemberAnyRatioBytes ||
          e.uncompressed_size / kWholeMemberMaxRatio <= e.compressed_size);
}

}  // namespace

template <typename T>
StatusOr<NdArray<T>> NpzReader::Read(std::string_view key) const {
  TPUG_ASSIGN_OR_RETURN(OpenedArray a, OpenArray(key));
  const NpyHeader& h = a.header;
  const std::string where = Where(key);
  if constexpr (!std::is_same_v<T, bool>) {
    if (h.file_order_is_c() && UseWholeMember<T>(a.stream->entry())) {
      return ReadWholeMember<T>(*zip_, a.stream->entry(), h, where);
    }
  }
  const int64_t n = h.num_elements();
  const size_t item = DTypeSize(h.dtype);
  NdArray<T> out;
  out.shape = h.shape;
  // Every size used below is bounded by the member's real size (ReadNpyHeader ties the shape
  // to it and OpenMember ties that to the file size), so no allocation follows a bare claim.
  try {
    if (h.file_order_is_c()) {
      // Grow the destination as data arrives (reserve does not touch memory), so a deflated
      // member that lies about its size fails before much memory is committed.
      out.data.reserve(static_cast<size_t>(n));
      if constexpr (!std::is_same_v<T, bool>) {
        AdviseHugePages(out.data.data(), static_cast<size_t>(n) * sizeof(T));
      }
      const int64_t probe = std::min<int64_t>(n, ChunkElements(kConvertChunkBytes, item));
      ElementSource<T> src(a.stream.get(), h, where, std::max<int64_t>(probe, 1));
      const int64_t step =
          src.direct() ? ChunkElements(kDirectChunkBytes, sizeof(T)) : std::max<int64_t>(probe, 1);
      std::unique_ptr<T[]> tmp;
      if constexpr (std::is_same_v<T, bool>) tmp.reset(new T[static_cast<size_t>(step)]);
      for (int64_t pos = 0; pos < n;) {
        const int64_t c = std::min(step, n - pos);
        if constexpr (std::is_same_v<T, bool>) {
          TPUG_RETURN_IF_ERROR(src.Next(c, pos, tmp.get()));
          out.data.insert(out.data.end(), tmp.get(), tmp.get() + c);
        } else {
          out.data.resize(static_cast<size_t>(pos + c));
          TPUG_RETURN_IF_ERROR(src.Next(c, pos, out.data.data() + pos));
        }
        pos += c;
      }
    } else {
      // Fortran order: stream chunks and scatter each element to its C-order position.
      out.data.resize(static_cast<size_t>(n));
      const int64_t step = std::min<int64_t>(n, ChunkElements(kConvertChunkBytes, item));
      ElementSource<T> src(a.stream.get(), h, where, step);
      std::unique_ptr<T[]> tmp(new T[static_cast<size_t>(step)]);
      const size_t k = h.shape.size();
      std::vector<int64_t> c_stride(k, 1), idx(k, 0);
      for (size_t j = k - 1; j > 0; --j) c_stride[j - 1] = c_stride[j] * h.shape[j];
      int64_t off = 0;  // C-order offset of the element with multi-index idx
      for (int64_t pos = 0; pos < n;) {
        const int64_t c = std::min(step, n - pos);
        TPUG_RETURN_IF_ERROR(src.Next(c, pos, tmp.get()));
        for (int64_t e = 0; e < c; ++e) {
          out.data[static_cast<size_t>(off)] = tmp[static_cast<size_t>(e)];
          // Advance the Fortran-order odometer: dimension 0 varies fastest.
          size_t j = 0;
          ++idx[0];
          off += c_stride[0];
          while (j + 1 < k && idx[j] == h.shape[j]) {
            off -= h.shape[j] * c_stride[j];
            idx[j] = 0;
            ++j;
            ++idx[j];
            off += c_stride[j];
          }
        }
        pos += c;
      }
    }
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError(where + ": out of memory for shape " + h.DebugString());
  } catch (const std::length_error&) {
    return ResourceExhaustedError(where + ": shape " + h.DebugString() + " is too large");
  }
  TPUG_RETURN_IF_ERROR(a.stream->ReadToEnd());  // verifies the CRC (also for empty arrays)
  return out;
}

template <typename T>
Status NpzReader::ReadChunked(
    std::string_view key, int64_t max_elements,
    const std::function<Status(const T* data, int64_t count, int64_t first)>& fn) const {
  if (max_elements <= 0) {
    return InvalidArgumentError(Where(key) + ": ReadChunked needs max_elements > 0, got " +
                                std::to_string(max_elements));
  }
  TPUG_ASSIGN_OR_RETURN(OpenedArray a, OpenArray(key));
  const NpyHeader& h = a.header;
  const std::string where = Where(key);
  const int64_t n = h.num_elements();
  const size_t item = std::max(DTypeSize(h.dtype), sizeof(T));
  const int64_t step =
      std::max<int64_t>(1, std::min({max_elements, n, ChunkElements(kMaxChunkBytes, item)}));
  std::unique_ptr<T[]> buf;
  try {
    buf.reset(new T[static_cast<size_t>(step)]);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError(where + ": out of memory for a chunk of " + std::to_string(step) +
                                  " elements");
  }
  ElementSource<T> src(a.stream.get(), h, where, step);
  for (int64_t pos = 0; pos < n;) {
    const int64_t c = std::min(step, n - pos);
    TPUG_RETURN_IF_ERROR(src.Next(c, pos, buf.get()));
    TPUG_RETURN_IF_ERROR(fn(buf.get(), c, pos));
    pos += c;
  }
  return a.stream->ReadToEnd();
}

// ---------------------------------------------------------------------------------------------
// NpzWriter

StatusOr<std::unique_ptr<NpzWriter>> NpzWriter::Create(const std::string& path, bool compress,
                                                       int level) {
  if (level < -1 || level > 9) {
    return InvalidArgumentError(path + ": deflate level must be -1 or 0..9, got " +
                                std::to_string(level));
  }
  std::unique_ptr<NpzWriter> w(new NpzWriter());
  TPUG_ASSIGN_OR_RETURN(w->zip_, ZipWriter::Create(path));
  w->compress_ = compress;
  w->level_ = level;
  return w;
}

template <typename T>
Status NpzWriter::Prepare(std::string_view key, const std::vector<int64_t>& shape,
                          uint64_t* elements, std::string* name, std::string* header) const {
  static_assert(sizeof(bool) == 1, "npy b1 needs a one-byte bool");
  const std::string& p = path();
  const std::string where = p + ": array '" + std::string(key) + "'";
  if (key.empty()) return InvalidArgumentError(p + ": empty array name");
  if (open_ != nullptr) {
    return FailedPreconditionError(where + ": " + open_->where + " is not ended (EndArray)");
  }
  uint64_t n = 1;
  const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / sizeof(T);
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgumentError(where + ": negative dimension " + std::to_string(d));
    if (d != 0 && n > limit / static_cast<uint64_t>(d)) {
      return InvalidArgumentError(where + ": shape has too many elements");
    }
    n *= static_cast<uint64_t>(d);
  }
  *elements = n;
  *name = std::string(key) + std::string(kNpySuffix);
  *header = FormatNpyHeader(DTypeOf<T>(), shape);
  return Status::Ok();
}

template <typename T>
Status NpzWriter::Add(std::string_view key, const std::vector<int64_t>& shape, const T* data) {
  uint64_t n = 0;
  std::string name, header;
  TPUG_RETURN_IF_ERROR(Prepare<T>(key, shape, &n, &name, &header));
  if (n > 0 && data == nullptr) {
    return InvalidArgumentError(path() + ": array '" + std::string(key) + "': null data");
  }
  const uint64_t total = header.size() + n * sizeof(T);

  // Visits the data as little-endian bytes (no copy on little-endian hosts).
  auto for_each_le = [&](const std::function<Status(const void*, size_t)>& visit) -> Status {
    if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1) {
      const auto* bytes = reinterpret_cast<const unsigned char*>(data);
      uint64_t left = n * sizeof(T);
      while (left > 0) {
        size_t c = static_cast<size_t>(std::min<uint64_t>(left, kMaxChunkBytes));
        TPUG_RETURN_IF_ERROR(visit(bytes, c));
        bytes += c;
        left -= c;
      }
      return Status::Ok();
    } else {
      std::vector<unsigned char> buf(kConvertChunkBytes);
      const size_t per = kConvertChunkBytes / sizeof(T);
      for (uint64_t i = 0; i < n; i += per) {
        size_t c = static_cast<size_t>(std::min<uint64_t>(per, n - i));
        ToLittleEndian(data + i, c, buf.data());
        TPUG_RETURN_IF_ERROR(visit(buf.data(), c * sizeof(T)));
      }
      return Status::Ok();
    }
  };

  if (compress_) {
    TPUG_RETURN_IF_ERROR(zip_->BeginDeflated(name, total, level_));
  } else {
    uint32_t crc = Crc32(0, header.data(), header.size());
    TPUG_RETURN_IF_ERROR(for_each_le([&](const void* b, size_t c) {
      crc = Crc32(crc, b, c);
      return Status::Ok();
    }));
    TPUG_RETURN_IF_ERROR(zip_->BeginStored(name, total, crc));
  }
  TPUG_RETURN_IF_ERROR(zip_->Write(header.data(), header.size()));
  TPUG_RETURN_IF_ERROR(for_each_le([&](const void* b, size_t c) { return zip_->Write(b, c); }));
  return zip_->EndMember();
}

template <typename T>
Status NpzWriter::BeginArray(std::string_view key, const std::vector<int64_t>& shape) {
  uint64_t n = 0;
  std::string name, header;
  TPUG_RETURN_IF_ERROR(Prepare<T>(key, shape, &n, &name, &header));
  const uint64_t total = header.size() + n * sizeof(T);
  if (compress_) {
    TPUG_RETURN_IF_ERROR(zip_->BeginDeflated(name, total, level_));
  } else {
    TPUG_RETURN_IF_ERROR(zip_->BeginStoredCrcAtEnd(name, total));
  }
  TPUG_RETURN_IF_ERROR(zip_->Write(header.data(), header.size()));
  auto open = std::make_unique<OpenArray>();
  open->where = path() + ": array '" + std::string(key) + "'";
  open->dtype = DTypeOf<T>();
  open->elements = n;
  open_ = std::move(open);
  return Status::Ok();
}

// Hands data bytes to the zip layer in whole multiples of kStreamPieceBytes counted from the
// start of the data, buffering the rest. Add hands them over in 64 MiB steps and ZipWriter
// deflates every Write in 256 KiB pieces from its start, so both paths feed zlib the same pieces
// (the header alone, then 256 KiB pieces of the data, then the remainder) and the compressed
// bytes are identical at every level, including 0 whose stored blocks follow the input pieces.
Status NpzWriter::WriteArrayBytes(const unsigned char* bytes, size_t n) {
  std::vector<unsigned char>& pending = open_->pending;
  if (!pending.empty()) {
    const size_t take = std::min(n, kStreamPieceBytes - pending.size());
    pending.insert(pending.end(), bytes, bytes + take);
    bytes += take;
    n -= take;
    if (pending.size() < kStreamPieceBytes) return Status::Ok();
    TPUG_RETURN_IF_ERROR(zip_->Write(pending.data(), pending.size()));
    pending.clear();
  }
  const size_t whole = n / kStreamPieceBytes * kStreamPieceBytes;
  if (whole > 0) TPUG_RETURN_IF_ERROR(zip_->Write(bytes, whole));
  if (whole < n) {
    pending.reserve(kStreamPieceBytes);
    pending.assign(bytes + whole, bytes + n);
  }
  return Status::Ok();
}

template <typename T>
Status NpzWriter::AppendArray(const T* data, int64_t count) {
  if (open_ == nullptr) return FailedPreconditionError(path() + ": AppendArray without BeginArray");
  OpenArray& a = *open_;
  if (DTypeOf<T>() != a.dtype) {
    return InvalidArgumentError(a.where + ": AppendArray of " +
                                std::string(DTypeName(DTypeOf<T>())) + " elements to a " +
                                std::string(DTypeName(a.dtype)) + " array");
  }
  if (count < 0 || static_cast<uint64_t>(count) > a.elements - a.written) {
    return InvalidArgumentError(a.where + ": AppendArray of " + std::to_string(count) +
                                " elements with " + std::to_string(a.elements - a.written) +
                                " left of " + std::to_string(a.elements));
  }
  if (count > 0 && data == nullptr) return InvalidArgumentError(a.where + ": null data");
  const size_t n = static_cast<size_t>(count);
  if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1) {
    TPUG_RETURN_IF_ERROR(
        WriteArrayBytes(reinterpret_cast<const unsigned char*>(data), n * sizeof(T)));
  } else {
    std::vector<unsigned char> buf(kConvertChunkBytes);
    const size_t per = kConvertChunkBytes / sizeof(T);
    for (size_t i = 0; i < n; i += per) {
      const size_t c = std::min(per, n - i);
      ToLittleEndian(data + i, c, buf.data());
      TPUG_RETURN_IF_ERROR(WriteArrayBytes(buf.data(), c * sizeof(T)));
    }
  }
  a.written += n;
  return Status::Ok();
}

Status NpzWriter::EndArray() {
  if (open_ == nullptr) return FailedPreconditionError(path() + ": EndArray without BeginArray");
  std::unique_ptr<OpenArray> a = std::move(open_);
  if (a->written != a->elements) {
    broken_ = true;
    return FailedPreconditionError(a->where + ": ended after " + std::to_string(a->written) +
                                   " of " + std::to_string(a->elements) + " elements");
  }
  if (!a->pending.empty()) TPUG_RETURN_IF_ERROR(zip_->Write(a->pending.data(), a->pending.size()));
  return zip_->EndMember();
}

Status NpzWriter::Finish() {
  if (open_ != nullptr) {
    return FailedPreconditionError(open_->where + ": not ended (EndArray) before Finish");
  }
  if (broken_) {
    return FailedPreconditionError(path() + ": not written because an array was left short");
  }
  return zip_->Finish();
}

#define TPUG_NPZ_INSTANTIATE(T)                                                                   \
  template StatusOr<NdArray<T>> NpzReader::Read<T>(std::string_view) const;                       \
  template Status NpzReader::ReadChunked<T>(                                                      \
      std::string_view, int64_t, const std::function<Status(const T*, int64_t, int64_t)>&) const; \
  template Status NpzWriter::Add<T>(std::string_view, const std::vector<int64_t>&, const T*);     \
  template Status NpzWriter::BeginArray<T>(std::string_view, const std::vector<int64_t>&);        \
  template Status NpzWriter::AppendArray<T>(const T*, int64_t);
TPUG_NPZ_INSTANTIATE(bool)
TPUG_NPZ_INSTANTIATE(int8_t)
TPUG_NPZ_INSTANTIATE(uint8_t)
TPUG_NPZ_INSTANTIATE(int16_t)
TPUG_NPZ_INSTANTIATE(uint16_t)
TPUG_NPZ_INSTANTIATE(int32_t)
TPUG_NPZ_INSTANTIATE(uint32_t)
TPUG_NPZ_INSTANTIATE(int64_t)
TPUG_NPZ_INSTANTIATE(uint64_t)
TPUG_NPZ_INSTANTIATE(float)
TPUG_NPZ_INSTANTIATE(double)
#undef TPUG_NPZ_INSTANTIATE

}  // namespace tpugraphs::io
