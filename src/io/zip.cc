// Zip reading and writing. Record layouts follow PKWARE's APPNOTE.TXT 6.3.x: local file header
// (4.3.7), data descriptor (4.3.9), central directory header (4.3.12), zip64 end of central
// directory record and locator (4.3.14, 4.3.15), end of central directory record (4.3.16) and the
// zip64 extended information extra field (4.5.3). All integers are little-endian.
#include "tpugraphs/io/zip.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>

#if defined(TPUGRAPHS_HAVE_LIBDEFLATE)
#include <libdeflate.h>
#endif

#include "tpugraphs/common/file_util.h"

namespace tpugraphs::io {
namespace {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndOfCentralDirSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kDataDescriptorSig = 0x08074b50;
constexpr uint16_t kZip64ExtraId = 0x0001;

constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kEndSize = 22;
constexpr size_t kZip64EndSize = 56;
constexpr size_t kZip64LocatorSize = 20;
constexpr uint32_t kMax32 = 0xFFFFFFFFu;
constexpr uint16_t kMax16 = 0xFFFFu;

// Raw deflate expands at most about 1032:1 (a 258-byte match coded in about two bits), so a
// member declaring more is lying; we refuse it before allocating anything from that size.
constexpr uint64_t kMaxDeflateRatio = 1032;

// Size of the buffer of compressed input for inflate and of deflate's output buffer.
constexpr size_t kIoBufferSize = 1 << 18;
// Output is checksummed in pieces of this size as it is produced (cache-hot).
constexpr size_t kCrcPiece = size_t{1} << 18;

uint16_t Get16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Get32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t Get64(const unsigned char* p) {
  return static_cast<uint64_t>(Get32(p)) | (static_cast<uint64_t>(Get32(p + 4)) << 32);
}
void Put16(std::string* s, uint16_t v) {
  s->push_back(static_cast<char>(v & 0xFF));
  s->push_back(static_cast<char>(v >> 8));
}
void Put32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void Put64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

std::string MethodName(uint16_t method) {
  switch (method) {
    case 1:
      return "shrink";
    case 6:
      return "implode";
    case 9:
      return "deflate64";
    case 12:
      return "bzip2";
    case 14:
      return "lzma";
    case 93:
      return "zstandard";
    case 95:
      return "xz";
    case 98:
      return "ppmd";
    case 99:
      return "aes-encrypted";
    default:
      return "unknown";
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ZipReader

ZipReader::~ZipReader() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<std::unique_ptr<ZipReader>> ZipReader::Open(const std::string& path) {
  std::unique_ptr<ZipReader> r(new ZipReader());
  r->path_ = path;
  TPUG_RETURN_IF_ERROR(OpenRegularFileForReading(path, &r->fd_, &r->file_size_));
  TPUG_RETURN_IF_ERROR(r->Parse());
  return r;
}

Status ZipReader::PRead(uint64_t offset, void* dst, size_t n) const {
  if (offset > file_size_ || n > file_size_ - offset) {
    return DataLossError(path_ + ": truncated: needs bytes up to offset " +
                         std::to_string(offset + n) + " but the file has " +
                         std::to_string(file_size_) + " bytes");
  }
  auto* out = static_cast<char*>(dst);
  while (n > 0) {
    // Linux transfers at most about 2 GiB per call.
    size_t want = std::min<size_t>(n, size_t{1} << 30);
    ssize_t got = ::pread(fd_, out, want, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return IoError(path_ + ": read failed at offset " + std::to_string(offset) + ": " +
                     std::strerror(errno));
    }
    if (got == 0) {
      return DataLossError(path_ + ": unexpected end of file at offset " + std::to_string(offset) +
                           " (the file shrank while being read?)");
    }
    out += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
  return Status::Ok();
}

Status ZipReader::Parse() {
  const std::string& p = path_;
  if (file_size_ < kEndSize) {
    return DataLossError(p + ": not a zip archive (only " + std::to_string(file_size_) +
                         " bytes, too short for an end-of-central-directory record)");
  }
  // The end record sits at the end, followed only by its comment (at most 65535 bytes).
  const uint64_t tail_len = std::min<uint64_t>(file_size_, kEndSize + kMax16);
  std::vector<unsigned char> tail(tail_len);
  TPUG_RETURN_IF_ERROR(PRead(file_size_ - tail_len, tail.data(), tail_len));
  int64_t found = -1;
  for (int64_t i = static_cast<int64_t>(tail_len - kEndSize); i >= 0; --i) {
    const unsigned char* q = tail.data() + i;
    if (Get32(q) != kEndOfCentralDirSig) continue;
    uint64_t comment_len = Get16(q + 20);
    if (static_cast<uint64_t>(i) + kEndSize + comment_len <= tail_len) {
      found = i;
      break;
    }
  }
  if (found < 0) {
    unsigned char head[4] = {0, 0, 0, 0};
    TPUG_RETURN_IF_ERROR(PRead(0, head, 4));
    if (Get32(head) == kLocalHeaderSig) {
      return DataLossError(p +
                           ": truncated zip archive (starts like a zip file but has no "
                           "end-of-central-directory record)");
    }
    return DataLossError(p + ": not a zip archive (no end-of-central-directory record)");
  }
  const uint64_t end_pos = file_size_ - tail_len + static_cast<uint64_t>(found);
  const unsigned char* e = tail.data() + found;
  uint64_t disk = Get16(e + 4), cd_disk = Get16(e + 6);
  uint64_t entries_on_disk = Get16(e + 8), total_entries = Get16(e + 10);
  uint64_t cd_size = Get32(e + 12), cd_offset = Get32(e + 16);
  uint64_t cd_limit = end_pos;  // the central directory must end before this offset

  // A zip64 locator, if any, immediately precedes the end record.
  if (end_pos >= kZip64LocatorSize) {
    unsigned char loc[kZip64LocatorSize];
    TPUG_RETURN_IF_ERROR(PRead(end_pos - kZip64LocatorSize, loc, kZip64LocatorSize));
    if (Get32(loc) == kZip64LocatorSig) {
      uint32_t z64_disk = Get32(loc + 4);
      uint64_t z64_offset = Get64(loc + 8);
      uint32_t total_disks = Get32(loc + 16);
      if (z64_disk != 0 || total_disks > 1) {
        return UnimplementedError(p + ": multi-disk (spanned) zip archives are not supported");
      }
      if (z64_offset > end_pos - kZip64LocatorSize ||
          end_pos - kZip64LocatorSize - z64_offset < kZip64EndSize) {
        return DataLossError(p + ": zip64 end-of-central-directory offset " +
                             std::to_string(z64_offset) + " is out of range");
      }
      unsigned char z[kZip64EndSize];
      TPUG_RETURN_IF_ERROR(PRead(z64_offset, z, kZip64EndSize));
      if (Get32(z) != kZip64EndSig) {
        return DataLossError(p + ": bad zip64 end-of-central-directory signature at offset " +
                             std::to_string(z64_offset));
      }
      disk = Get32(z + 16);
      cd_disk = Get32(z + 20);
      entries_on_disk = Get64(z + 24);
      total_entries = Get64(z + 32);
      cd_size = Get64(z + 40);
      cd_offset = Get64(z + 48);
      cd_limit = z64_offset;
    }
  }
  if (disk != 0 || cd_disk != 0 || entries_on_disk != total_entries) {
    return UnimplementedError(p + ": multi-disk (spanned) zip archives are not supported");
  }
  if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset) {
    return DataLossError(p + ": central directory (offset " + std::to_string(cd_offset) + ", " +
                         std::to_string(cd_size) +
                         " bytes) extends past the end-of-central-directory record; the file "
                         "is truncated or not a complete zip archive");
  }
  if (total_entries > cd_size / kCentralHeaderSize) {
    return DataLossError(p + ": end record declares " + std::to_string(total_entries) +
                         " members but the central directory has only " + std::to_string(cd_size) +
                         " bytes");
  }
  std::vector<unsigned char> cd(cd_size);
  TPUG_RETURN_IF_ERROR(PRead(cd_offset, cd.data(), cd_size));
  entries_.reserve(total_entries);
  uint64_t pos = 0;
  for (uint64_t i = 0; i < total_entries; ++i) {
    const std::string where = p + ": central directory entry " + std::to_string(i);
    if (cd_size - pos < kCentralHeaderSize) return DataLossError(where + " is truncated");
    const unsigned char* h = cd.data() + pos;
    if (Get32(h) != kCentralHeaderSig) {
      return DataLossError(where + " has a bad signature (corrupt central directory)");
    }
    ZipEntry ent;
    ent.flags = Get16(h + 8);
    ent.method = Get16(h + 10);
    ent.crc32 = Get32(h + 16);
    ent.compressed_size = Get32(h + 20);
    ent.uncompressed_size = Get32(h + 24);
    const uint64_t name_len = Get16(h + 28), extra_len = Get16(h + 30), comment_len = Get16(h + 32);
    uint64_t entry_disk = Get16(h + 34);
    ent.local_header_offset = Get32(h + 42);
    if (cd_size - pos - kCentralHeaderSize < name_len + extra_len + comment_len) {
      return DataLossError(where + " is truncated");
    }
    ent.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_len);
    // Zip64 extended information: only the fields whose 32-bit value is saturated are present,
    // in this order (APPNOTE 4.5.3).
    const unsigned char* x = h + kCentralHeaderSize + name_len;
    const unsigned char* x_end = x + extra_len;
    while (x_end - x >= 4) {
      uint16_t id = Get16(x), len = Get16(x + 2);
      if (x_end - x - 4 < len) break;  // malformed trailing extra data: ignore like zipfile
      if (id == kZip64ExtraId) {
        const unsigned char* f = x + 4;
        const unsigned char* f_end = f + len;
        auto take = [&](uint64_t* field) -> bool {
          if (f_end - f < 8) return false;
          *field = Get64(f);
          f += 8;
          return true;
        };
        bool ok = true;
        if (ent.uncompressed_size == kMax32) ok = ok && take(&ent.uncompressed_size);
        if (ent.compressed_size == kMax32) ok = ok && take(&ent.compressed_size);
        if (ent.local_header_offset == kMax32) ok = ok && take(&ent.local_header_offset);
        if (ok && entry_disk == kMax16) {
          if (f_end - f < 4)
            ok = false;
          else
            entry_disk = Get32(f);
        }
        if (!ok) {
          return DataLossError(p + ": member '" + ent.name +
                               "': zip64 extra field is too short for its saturated sizes");
        }
      }
      x += 4 + len;
    }
    if (entry_disk != 0) {
      return UnimplementedError(p + ": member '" + ent.name +
                                "' lives on another disk; multi-disk archives are not supported");
    }
    if (ent.local_header_offset > cd_offset) {
      return DataLossError(p + ": member '" + ent.name + "' has local header offset " +
                           std::to_string(ent.local_header_offset) + " past the central directory");
    }
    pos += kCentralHeaderSize + name_len + extra_len + comment_len;
    by_name_[ent.name] = entries_.size();
    entries_.push_back(std::move(ent));
  }
  return Status::Ok();
}

const ZipEntry* ZipReader::Find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

StatusOr<std::unique_ptr<ZipMemberStream>> ZipReader::OpenMember(const ZipEntry& entry) const {
  const std::string where = path_ + ": member '" + entry.name + "'";
  if (entry.encrypted()) {
    return UnimplementedError(where + " is encrypted; encrypted zip members are not supported");
  }
  if (entry.method != kZipStored && entry.method != kZipDeflated) {
    return UnimplementedError(where + " uses compression method " + std::to_string(entry.method) +
                              " (" + MethodName(entry.method) +
                              "); only stored (0) and deflated (8) are supported");
  }
  unsigned char h[kLocalHeaderSize];
  if (entry.local_header_offset > file_size_ ||
      file_size_ - entry.local_header_offset < kLocalHeaderSize) {
    return DataLossError(where + ": local header at offset " +
                         std::to_string(entry.local_header_offset) + " is past the end of file");
  }
  TPUG_RETURN_IF_ERROR(PRead(entry.local_header_offset, h, kLocalHeaderSize));
  if (Get32(h) != kLocalHeaderSig) {
    return DataLossError(where + ": bad local header signature at offset " +
                         std::to_string(entry.local_header_offset));
  }
  const uint64_t name_len = Get16(h + 26), extra_len = Get16(h + 28);
  const uint64_t data_offset = entry.local_header_offset + kLocalHeaderSize + name_len + extra_len;
  if (data_offset > file_size_ || entry.compressed_size > file_size_ - data_offset) {
    return DataLossError(where + ": data (" + std::to_string(entry.compressed_size) +
                         " bytes at offset " + std::to_string(data_offset) +
                         ") extends past the end of the file (" + std::to_string(file_size_) +
                         " bytes); the archive is truncated");
  }
  std::string local_name(name_len, '\0');
  TPUG_RETURN_IF_ERROR(
      PRead(entry.local_header_offset + kLocalHeaderSize, local_name.data(), name_len));
  if (local_name != entry.name) {
    return DataLossError(where + ": local header names '" + local_name +
                         "' (central directory and local header disagree)");
  }
  if (entry.method == kZipStored && entry.compressed_size != entry.uncompressed_size) {
    return DataLossError(where + ": stored member with compressed size " +
                         std::to_string(entry.compressed_size) + " != uncompressed size " +
                         std::to_string(entry.uncompressed_size));
  }
  if (entry.method == kZipDeflated &&
      entry.uncompressed_size / kMaxDeflateRatio > entry.compressed_size + 1) {
    return DataLossError(where + " declares " + std::to_string(entry.uncompressed_size) +
                         " uncompressed bytes from " + std::to_string(entry.compressed_size) +
                         " compressed bytes, more than deflate can produce");
  }
  // Without a data descriptor (flag bit 3) the local header repeats the CRC and sizes (or
  // saturates them for zip64); a disagreement means one of the two headers is damaged.
  if ((Get16(h + 6) & 0x0008) == 0) {
    const uint32_t l_crc = Get32(h + 14), l_csize = Get32(h + 18), l_usize = Get32(h + 22);
    const bool sizes_ok = (l_csize == kMax32 || l_csize == entry.compressed_size) &&
                          (l_usize == kMax32 || l_usize == entry.uncompressed_size);
    if (l_crc != entry.crc32 || !sizes_ok) {
      return DataLossError(where + ": local header (CRC " + Hex32(l_crc) + ", sizes " +
                           std::to_string(l_csize) + "/" + std::to_string(l_usize) +
                           ") disagrees with the central directory (CRC " + Hex32(entry.crc32) +
                           ", sizes " + std::to_string(entry.compressed_size) + "/" +
                           std::to_string(entry.uncompressed_size) + "); corrupt archive");
    }
  }
  std::unique_ptr<ZipMemberStream> s(new ZipMemberStream(this, entry, data_offset));
  TPUG_RETURN_IF_ERROR(s->Init());
  return s;
}

// ---------------------------------------------------------------------------------------------
// ZipMemberStream

struct ZipMemberStream::Inflater {
  z_stream z{};
  bool initialized = false;
  bool stream_end = false;
  std::vector<unsigned char> in;
  ~Inflater() {
    if (initialized) inflateEnd(&z);
  }
};

ZipMemberStream::ZipMemberStream(const ZipReader* reader, ZipEntry entry, uint64_t data_offset)
    : reader_(reader), entry_(std::move(entry)), data_offset_(data_offset) {}

ZipMemberStream::~ZipMemberStream() = default;

namespace {
#if defined(TPUGRAPHS_HAVE_LIBDEFLATE)
constexpr InflateBackend kBuiltInBackend = InflateBackend::kLibdeflate;
#else
constexpr InflateBackend kBuiltInBackend = InflateBackend::kZlib;
#endif
std::atomic<InflateBackend> default_backend{kBuiltInBackend};
}  // namespace

bool LibdeflateAvailable() {
#if defined(TPUGRAPHS_HAVE_LIBDEFLATE)
  return true;
#else
  return false;
#endif
}

InflateBackend DefaultInflateBackend() { return default_backend.load(std::memory_order_relaxed); }

void SetDefaultInflateBackend(InflateBackend backend) {
  default_backend.store(backend, std::memory_order_relaxed);
}

std::string_view InflateBackendName(InflateBackend backend) {
  return backend == InflateBackend::kLibdeflate ? "libdeflate" : "zlib";
}

Status ZipMemberStream::ReadWhole(void* dst, InflateBackend backend) {
  if (produced_ != 0 || consumed_ != 0) {
    return FailedPreconditionError(Where() + ": ReadWhole after part of the member was read");
  }
  if (entry_.method == kZipDeflated && backend == InflateBackend::kLibdeflate &&
      LibdeflateAvailable()) {
    TPUG_RETURN_IF_ERROR(InflateWholeWithLibdeflate(dst));
    return Finish();
  }
  TPUG_RETURN_IF_ERROR(ReadExact(dst, static_cast<size_t>(size())));
  return ReadToEnd();  // an empty member: checks the CRC
}

#if defined(TPUGRAPHS_HAVE_LIBDEFLATE)
namespace {
// One decompressor per thread, kept for the thread's life (it is about 10 KiB of tables).
struct DecompressorDeleter {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};
libdeflate_decompressor* ThreadDecompressor() {
  thread_local std::unique_ptr<libdeflate_decompressor, DecompressorDeleter> d(
      libdeflate_alloc_decompressor());
  return d.get();
}
}  // namespace

Status ZipMemberStream::InflateWholeWithLibdeflate(void* dst) {
  // libdeflate inflates one whole stream into a buffer of known size: the directory's
  // uncompressed size, which OpenMember has already bounded by the compressed size.
  const size_t in_size = static_cast<size_t>(entry_.compressed_size);
  const size_t out_size = static_cast<size_t>(entry_.uncompressed_size);
  std::unique_ptr<unsigned char[]> in(
      new (std::nothrow) unsigned char[std::max<size_t>(in_size, 1)]);
  if (!in) {
    return ResourceExhaustedError(Where() + ": out of memory for " + std::to_string(in_size) +
                                  " compressed bytes");
  }
  TPUG_RETURN_IF_ERROR(ReadRaw(in.get(), in_size));
  libdeflate_decompressor* d = ThreadDecompressor();
  if (d == nullptr) return ResourceExhaustedError(Where() + ": cannot allocate a decompressor");
  size_t in_used = 0, out_made = 0;
  const libdeflate_result rc =
      libdeflate_deflate_decompress_ex(d, in.get(), in_size, dst, out_size, &in_used, &out_made);
  switch (rc) {
    case LIBDEFLATE_SUCCESS:
      break;
    case LIBDEFLATE_INSUFFICIENT_SPACE:
      return DataLossError(Where() + ": inflates to more than the " + std::to_string(out_size) +
                           " bytes the directory declares");
    case LIBDEFLATE_BAD_DATA:
      return DataLossError(Where() +
                           ": corrupt deflate data (libdeflate cannot decode the member's " +
                           std::to_string(in_size) + " compressed bytes: damaged or truncated)");
    default:
      return InternalError(Where() + ": libdeflate returned " + std::to_string(rc));
  }
  if (out_made != out_size) {
    return DataLossError(Where() + ": deflate stream ends after " + std::to_string(out_made) +
                         " bytes but the directory says " + std::to_string(out_size));
  }
  crc_ = Crc32(crc_, dst, out_size);
  produced_ = out_size;
  inflater_->stream_end = true;
  return Status::Ok();
}
#else
Status ZipMemberStream::InflateWholeWithLibdeflate(void*) {
  return UnimplementedError(Where() + ": this build has no libdeflate");
}
#endif

std::string ZipMemberStream::Where() const {
  return reader_->path() + ": member '" + entry_.name + "'";
}

Status ZipMemberStream::Init() {
  if (entry_.method != kZipDeflated) return Status::Ok();
  inflater_ = std::make_unique<Inflater>();
  if (inflateInit2(&inflater_->z, -MAX_WBITS) != Z_OK) {
    return InternalError(Where() + ": cannot initialise zlib inflate");
  }
  inflater_->initialized = true;
  inflater_->in.resize(static_cast<size_t>(
      std::min<uint64_t>(kIoBufferSize, std::max<uint64_t>(entry_.compressed_size, 1))));
  return Status::Ok();
}

Status ZipMemberStream::ReadRaw(void* dst, size_t n) {
  TPUG_RETURN_IF_ERROR(reader_->PRead(data_offset_ + consumed_, dst, n));
  consumed_ += n;
  return Status::Ok();
}

StatusOr<size_t> ZipMemberStream::Read(void* dst, size_t n) {
  const uint64_t left = entry_.uncompressed_size - produced_;
  if (left == 0 || n == 0) {
    if (left == 0) TPUG_RETURN_IF_ERROR(Finish());
    return size_t{0};
  }
  n = static_cast<size_t>(std::min<uint64_t>(n, left));
  auto* out = static_cast<unsigned char*>(dst);
  // The CRC is computed piece by piece right after each piece arrives, while it is in cache.
  if (entry_.method == kZipStored) {
    for (size_t done = 0; done < n;) {
      const size_t piece = std::min(n - done, kCrcPiece);
      TPUG_RETURN_IF_ERROR(ReadRaw(out + done, piece));
      crc_ = Crc32(crc_, out + done, piece);
      done += piece;
    }
  } else {
    z_stream& z = inflater_->z;
    size_t done = 0;
    while (done < n) {
      if (inflater_->stream_end) {
        return DataLossError(Where() + ": deflate stream ends after " +
                             std::to_string(produced_ + done) + " bytes but the directory says " +
                             std::to_string(entry_.uncompressed_size));
      }
      if (z.avail_in == 0) {
        uint64_t remaining = entry_.compressed_size - consumed_;
        if (remaining == 0) {
          return DataLossError(Where() + ": compressed data ends after " +
                               std::to_string(produced_ + done) + " of " +
                               std::to_string(entry_.uncompressed_size) +
                               " bytes (truncated or corrupt member)");
        }
        size_t take = static_cast<size_t>(std::min<uint64_t>(remaining, inflater_->in.size()));
        TPUG_RETURN_IF_ERROR(ReadRaw(inflater_->in.data(), take));
        z.next_in = inflater_->in.data();
        z.avail_in = static_cast<uInt>(take);
      }
      size_t want = std::min(n - done, kCrcPiece);
      z.next_out = out + done;
      z.avail_out = static_cast<uInt>(want);
      int rc = inflate(&z, Z_NO_FLUSH);
      const size_t got = want - z.avail_out;
      crc_ = Crc32(crc_, out + done, got);
      done += got;
      if (rc == Z_STREAM_END) {
        inflater_->stream_end = true;
      } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
        return DataLossError(Where() + ": corrupt deflate data (" +
                             (z.msg != nullptr ? std::string(z.msg) : "inflate error") + ")");
      } else if (rc == Z_MEM_ERROR) {
        return ResourceExhaustedError(Where() + ": out of memory while inflating");
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return InternalError(Where() + ": inflate returned " + std::to_string(rc));
      }
    }
  }
  produced_ += n;
  if (produced_ == entry_.uncompressed_size) TPUG_RETURN_IF_ERROR(Finish());
  return n;
}

Status ZipMemberStream::ReadExact(void* dst, size_t n) {
  auto* out = static_cast<char*>(dst);
  while (n > 0) {
    TPUG_ASSIGN_OR_RETURN(size_t got, Read(out, n));
    if (got == 0) {
      return DataLossError(Where() + ": member ends after " + std::to_string(produced_) +
                           " bytes, expected more");
    }
    out += got;
    n -= got;
  }
  return Status::Ok();
}

Status ZipMemberStream::ReadToEnd() {
  std::vector<unsigned char> buf(static_cast<size_t>(
      std::min<uint64_t>(kIoBufferSize, std::max<uint64_t>(size() - produced_, 1))));
  while (true) {
    TPUG_ASSIGN_OR_RETURN(size_t got, Read(buf.data(), buf.size()));
    if (got == 0) return Status::Ok();
  }
}

Status ZipMemberStream::Finish() {
  if (finished_) return Status::Ok();
  if (entry_.method == kZipDeflated && !inflater_->stream_end) {
    // All declared bytes are out; the deflate stream must end here without more output.
    z_stream& z = inflater_->z;
    unsigned char scratch[64];
    while (!inflater_->stream_end) {
      if (z.avail_in == 0) {
        uint64_t remaining = entry_.compressed_size - consumed_;
        if (remaining == 0) {
          return DataLossError(Where() +
                               ": compressed data ends before the deflate stream is "
                               "complete (truncated or corrupt member)");
        }
        size_t take = static_cast<size_t>(std::min<uint64_t>(remaining, inflater_->in.size()));
        TPUG_RETURN_IF_ERROR(ReadRaw(inflater_->in.data(), take));
        z.next_in = inflater_->in.data();
        z.avail_in = static_cast<uInt>(take);
      }
      z.next_out = scratch;
      z.avail_out = sizeof(scratch);
      int rc = inflate(&z, Z_NO_FLUSH);
      if (z.avail_out != sizeof(scratch)) {
        return DataLossError(Where() + ": inflates to more than the " +
                             std::to_string(entry_.uncompressed_size) +
                             " bytes the directory declares");
      }
      if (rc == Z_STREAM_END) {
        inflater_->stream_end = true;
      } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
        return DataLossError(Where() + ": corrupt deflate data (" +
                             (z.msg != nullptr ? std::string(z.msg) : "inflate error") + ")");
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return InternalError(Where() + ": inflate returned " + std::to_string(rc));
      }
    }
  }
  if (crc_ != entry_.crc32) {
    return DataLossError(Where() + ": CRC-32 mismatch (data has " + Hex32(crc_) +
                         ", the directory records " + Hex32(entry_.crc32) +
                         "); the member is corrupt");
  }
  if ((entry_.flags & 0x0008) != 0) TPUG_RETURN_IF_ERROR(CheckDataDescriptor());
  finished_ = true;
  return Status::Ok();
}

Status ZipMemberStream::CheckDataDescriptor() {
  // Optional signature, CRC, then both sizes as 4 bytes, or 8 bytes for zip64 members.
  const uint64_t at = data_offset_ + entry_.compressed_size;
  unsigned char d[24];
  const size_t n = static_cast<size_t>(std::min<uint64_t>(sizeof(d), reader_->file_size() - at));
  TPUG_RETURN_IF_ERROR(reader_->PRead(at, d, n));
  size_t p = (n >= 4 && Get32(d) == kDataDescriptorSig) ? 4 : 0;
  const bool crc_ok = n >= p + 4 && Get32(d + p) == entry_.crc32;
  p += 4;
  const bool sizes32 = n >= p + 8 && Get32(d + p) == entry_.compressed_size &&
                       Get32(d + p + 4) == entry_.uncompressed_size;
  const bool sizes64 = n >= p + 16 && Get64(d + p) == entry_.compressed_size &&
                       Get64(d + p + 8) == entry_.uncompressed_size;
  if (!crc_ok || !(sizes32 || sizes64)) {
    return DataLossError(Where() +
                         ": data descriptor after the member disagrees with the "
                         "central directory (CRC or sizes); corrupt archive");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// ZipWriter

namespace {
// 1980-01-01 00:00:00, the earliest MS-DOS date: fixed so that outputs are reproducible.
constexpr uint16_t kDosTime = 0;
constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;
constexpr uint16_t kFlagDataDescriptor = 0x0008;
constexpr uint16_t kFlagUtf8 = 0x0800;
// Sizes at or above this use zip64 fields (the 32-bit fields saturate at 0xFFFFFFFF).
constexpr uint64_t kZip64Threshold = kMax32;
}  // namespace

struct ZipWriter::Deflater {
  z_stream z{};
  bool initialized = false;
  std::vector<unsigned char> out;
  ~Deflater() {
    if (initialized) deflateEnd(&z);
  }
};

ZipWriter::~ZipWriter() = default;

StatusOr<std::unique_ptr<ZipWriter>> ZipWriter::Create(const std::string& path) {
  std::unique_ptr<ZipWriter> w(new ZipWriter());
  TPUG_RETURN_IF_ERROR(w->out_.Open(path));
  return w;
}

Status ZipWriter::StartMember(std::string_view name, uint16_t method, uint16_t flags, uint32_t crc,
                              uint64_t size, bool zip64) {
  const std::string& p = out_.path();
  if (finished_) return FailedPreconditionError(p + ": archive already finished");
  if (in_member_) {
    return FailedPreconditionError(p + ": member '" + members_.back().name + "' not ended");
  }
  if (name.empty() || name.size() > 0xFFFF - 64 || name.find('\0') != std::string_view::npos) {
    return InvalidArgumentError(p + ": invalid member name '" + std::string(name) + "'");
  }
  if (names_.count(std::string(name)) != 0) {
    return InvalidArgumentError(p + ": duplicate member '" + std::string(name) + "'");
  }
  for (unsigned char c : name) {
    if (c >= 0x80) flags |= kFlagUtf8;
  }
  Member m;
  m.name = std::string(name);
  m.method = method;
  m.flags = flags;
  m.local_header_offset = out_.offset();
  m.local_zip64 = zip64;
  const bool descriptor = (flags & kFlagDataDescriptor) != 0;
  std::string h;
  Put32(&h, kLocalHeaderSig);
  Put16(&h, zip64 ? 45 : 20);
  Put16(&h, flags);
  Put16(&h, method);
  Put16(&h, kDosTime);
  Put16(&h, kDosDate);
  Put32(&h, descriptor ? 0 : crc);
  if (zip64) {
    Put32(&h, kMax32);
    Put32(&h, kMax32);
  } else {
    Put32(&h, descriptor ? 0 : static_cast<uint32_t>(size));
    Put32(&h, descriptor ? 0 : static_cast<uint32_t>(size));
  }
  Put16(&h, static_cast<uint16_t>(name.size()));
  Put16(&h, zip64 ? 20 : 0);
  h.append(name);
  if (zip64) {
    Put16(&h, kZip64ExtraId);
    Put16(&h, 16);
    Put64(&h, descriptor ? 0 : size);
    Put64(&h, descriptor ? 0 : size);
  }
  TPUG_RETURN_IF_ERROR(out_.Append(h));
  names_[m.name] = members_.size();
  m.crc32 = crc;
  m.uncompressed_size = size;
  members_.push_back(std::move(m));
  in_member_ = true;
  data_start_ = out_.offset();
  running_crc_ = 0;
  running_size_ = 0;
  return Status::Ok();
}

Status ZipWriter::BeginStored(std::string_view name, uint64_t size, uint32_t crc) {
  deflater_.reset();
  crc_at_end_ = false;
  return StartMember(name, kZipStored, 0, crc, size, size >= kZip64Threshold);
}

Status ZipWriter::BeginStoredCrcAtEnd(std::string_view name, uint64_t size) {
  TPUG_RETURN_IF_ERROR(BeginStored(name, size, 0));
  crc_at_end_ = true;
  return Status::Ok();
}

Status ZipWriter::BeginDeflated(std::string_view name, uint64_t size_hint, int level) {
  crc_at_end_ = false;
  deflater_ = std::make_unique<Deflater>();
  if (deflateInit2(&deflater_->z, level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return InvalidArgumentError(out_.path() + ": cannot initialise deflate at level " +
                                std::to_string(level));
  }
  deflater_->initialized = true;
  deflater_->out.resize(kIoBufferSize);
  // The compressed size can exceed the input slightly (stored blocks); leave a margin.
  const bool zip64 = size_hint >= kZip64Threshold - (kZip64Threshold >> 6);
  return StartMember(name, kZipDeflated, kFlagDataDescriptor, 0, 0, zip64);
}

Status ZipWriter::Write(const void* data, size_t n) {
  Status s = WriteImpl(data, n);
  if (!s.ok()) failed_ = true;
  return s;
}

Status ZipWriter::WriteImpl(const void* data, size_t n) {
  if (!in_member_) return FailedPreconditionError(out_.path() + ": write outside a member");
  const auto* in = static_cast<const unsigned char*>(data);
  while (n > 0) {
    // Checksum and compress piece by piece, while each piece is in cache.
    const size_t take = std::min(n, kCrcPiece);
    running_crc_ = Crc32(running_crc_, in, take);
    running_size_ += take;
    if (!deflater_) {
      TPUG_RETURN_IF_ERROR(out_.Append(in, take));
      in += take;
      n -= take;
      continue;
    }
    z_stream& z = deflater_->z;
    z.next_in = const_cast<unsigned char*>(in);
    z.avail_in = static_cast<uInt>(take);
    while (z.avail_in > 0) {
      z.next_out = deflater_->out.data();
      z.avail_out = static_cast<uInt>(deflater_->out.size());
      if (deflate(&z, Z_NO_FLUSH) == Z_STREAM_ERROR) {
        return InternalError(out_.path() + ": deflate failed");
      }
      TPUG_RETURN_IF_ERROR(out_.Append(deflater_->out.data(), deflater_->out.size() - z.avail_out));
    }
    in += take;
    n -= take;
  }
  return Status::Ok();
}

Status ZipWriter::EndMember() {
  Status s = EndMemberImpl();
  if (!s.ok()) failed_ = true;
  return s;
}

Status ZipWriter::EndMemberImpl() {
  if (!in_member_) return FailedPreconditionError(out_.path() + ": no member to end");
  Member& m = members_.back();
  const std::string where = out_.path() + ": member '" + m.name + "'";
  if (deflater_) {
    z_stream& z = deflater_->z;
    z.next_in = nullptr;
    z.avail_in = 0;
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
      z.next_out = deflater_->out.data();
      z.avail_out = static_cast<uInt>(deflater_->out.size());
      rc = deflate(&z, Z_FINISH);
      if (rc == Z_STREAM_ERROR) return InternalError(where + ": deflate failed");
      TPUG_RETURN_IF_ERROR(out_.Append(deflater_->out.data(), deflater_->out.size() - z.avail_out));
    }
    deflater_.reset();
    m.crc32 = running_crc_;
    m.uncompressed_size = running_size_;
    m.compressed_size = out_.offset() - data_start_;
    if (!m.local_zip64 &&
        (m.compressed_size >= kZip64Threshold || m.uncompressed_size >= kZip64Threshold)) {
      return InvalidArgumentError(where + ": " + std::to_string(m.uncompressed_size) +
                                  " bytes written but the size hint was below 4 GiB");
    }
    std::string d;
    Put32(&d, kDataDescriptorSig);
    Put32(&d, m.crc32);
    if (m.local_zip64) {
      Put64(&d, m.compressed_size);
      Put64(&d, m.uncompressed_size);
    } else {
      Put32(&d, static_cast<uint32_t>(m.compressed_size));
      Put32(&d, static_cast<uint32_t>(m.uncompressed_size));
    }
    TPUG_RETURN_IF_ERROR(out_.Append(d));
  } else {
    if (crc_at_end_ && running_size_ == m.uncompressed_size) {
      // The local header's CRC-32 field: 14 bytes in (signature, version, flags, method, time,
      // date), the same place with or without the zip64 extra field.
      std::string crc;
      Put32(&crc, running_crc_);
      TPUG_RETURN_IF_ERROR(out_.Overwrite(m.local_header_offset + 14, crc));
      m.crc32 = running_crc_;
      crc_at_end_ = false;
    }
    if (running_size_ != m.uncompressed_size || running_crc_ != m.crc32) {
      return InternalError(where + ": stored member got " + std::to_string(running_size_) +
                           " bytes with CRC " + Hex32(running_crc_) + " but was declared with " +
                           std::to_string(m.uncompressed_size) + " bytes and CRC " +
                           Hex32(m.crc32));
    }
    m.compressed_size = running_size_;
  }
  in_member_ = false;
  return Status::Ok();
}

Status ZipWriter::Finish() {
  const std::string& p = out_.path();
  if (finished_) return FailedPreconditionError(p + ": archive already finished");
  if (failed_) {
    return FailedPreconditionError(p + ": not written because an earlier write failed");
  }
  if (in_member_) TPUG_RETURN_IF_ERROR(EndMember());
  const uint64_t cd_offset = out_.offset();
  std::string cd;
  for (const Member& m : members_) {
    std::string extra;
    if (m.uncompressed_size >= kZip64Threshold) Put64(&extra, m.uncompressed_size);
    if (m.compressed_size >= kZip64Threshold) Put64(&extra, m.compressed_size);
    if (m.local_header_offset >= kZip64Threshold) Put64(&extra, m.local_header_offset);
    const bool zip64 = !extra.empty() || m.local_zip64;
    Put32(&cd, kCentralHeaderSig);
    Put16(&cd, (3 << 8) | 45);  // made by: Unix, spec 4.5
    Put16(&cd, zip64 ? 45 : 20);
    Put16(&cd, m.flags);
    Put16(&cd, m.method);
    Put16(&cd, kDosTime);
    Put16(&cd, kDosDate);
    Put32(&cd, m.crc32);
    Put32(&cd, static_cast<uint32_t>(std::min<uint64_t>(m.compressed_size, kMax32)));
    Put32(&cd, static_cast<uint32_t>(std::min<uint64_t>(m.uncompressed_size, kMax32)));
    Put16(&cd, static_cast<uint16_t>(m.name.size()));
    Put16(&cd, static_cast<uint16_t>(extra.empty() ? 0 : extra.size() + 4));
    Put16(&cd, 0);               // comment length
    Put16(&cd, 0);               // disk number start
    Put16(&cd, 0);               // internal attributes
    Put32(&cd, 0100644u << 16);  // external attributes: regular file, rw-r--r--
    Put32(&cd, static_cast<uint32_t>(std::min<uint64_t>(m.local_header_offset, kMax32)));
    cd.append(m.name);
    if (!extra.empty()) {
      Put16(&cd, kZip64ExtraId);
      Put16(&cd, static_cast<uint16_t>(extra.size()));
      cd.append(extra);
    }
  }
  const uint64_t cd_size = cd.size();
  const uint64_t count = members_.size();
  if (count >= kMax16 || cd_size >= kMax32 || cd_offset >= kMax32) {
    const uint64_t z64_offset = cd_offset + cd_size;
    Put32(&cd, kZip64EndSig);
    Put64(&cd, kZip64EndSize - 12);  // size of the remaining record
    Put16(&cd, (3 << 8) | 45);
    Put16(&cd, 45);
    Put32(&cd, 0);  // this disk
    Put32(&cd, 0);  // disk with the central directory
    Put64(&cd, count);
    Put64(&cd, count);
    Put64(&cd, cd_size);
    Put64(&cd, cd_offset);
    Put32(&cd, kZip64LocatorSig);
    Put32(&cd, 0);
    Put64(&cd, z64_offset);
    Put32(&cd, 1);
  }
  Put32(&cd, kEndOfCentralDirSig);
  Put16(&cd, 0);
  Put16(&cd, 0);
  Put16(&cd, static_cast<uint16_t>(std::min<uint64_t>(count, kMax16)));
  Put16(&cd, static_cast<uint16_t>(std::min<uint64_t>(count, kMax16)));
  Put32(&cd, static_cast<uint32_t>(std::min<uint64_t>(cd_size, kMax32)));
  Put32(&cd, static_cast<uint32_t>(std::min<uint64_t>(cd_offset, kMax32)));
  Put16(&cd, 0);  // comment length
  TPUG_RETURN_IF_ERROR(out_.Append(cd));
  TPUG_RETURN_IF_ERROR(out_.Commit());
  finished_ = true;
  return Status::Ok();
}

}  // namespace tpugraphs::io
