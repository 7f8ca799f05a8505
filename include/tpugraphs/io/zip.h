// A small zip archive reader and writer: the container layer under our .npz support.
//
// Supported (PKWARE APPNOTE 6.3.x): single-disk archives, members stored (method 0) or deflated
// (method 8, raw deflate through zlib, or libdeflate for whole members), zip64 (members and
// archives over 4 GiB: the zip64 extended-information extra field in local and central headers, the
// zip64 end-of-central- directory record and locator), data descriptors (general purpose flag bit
// 3), UTF-8 names. Not supported, with a clear error when a member is read: other compression
// methods (Unimplemented), encrypted members (Unimplemented), multi-disk archives (Unimplemented at
// Open).
//
// The reader opens only the central directory; member data is read on demand with pread, so
// archives and members larger than memory are fine. Every member read to its end has its CRC-32
// and size verified; a mismatch is a DataLoss error naming the archive and the member.
//
// Thread-safety: a ZipReader is immutable after Open and may be shared by threads; each
// ZipMemberStream is used by one thread at a time. A ZipWriter is used by one thread.
#ifndef TPUGRAPHS_IO_ZIP_H_
#define TPUGRAPHS_IO_ZIP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/status.h"

namespace tpugraphs::io {

// Compression methods we know by number (APPNOTE 4.4.5).
inline constexpr uint16_t kZipStored = 0;
inline constexpr uint16_t kZipDeflated = 8;

// One member as described by the central directory (zip64 values already applied).
struct ZipEntry {
  std::string name;
  uint16_t method = 0;
  uint16_t flags = 0;  // general purpose bit flag
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t local_header_offset = 0;

  bool encrypted() const { return (flags & 0x0001) != 0 || (flags & 0x0040) != 0; }
};

class ZipReader;

// How ZipMemberStream::ReadWhole inflates a deflated member. zlib inflates piece by piece (as
// Read does); libdeflate inflates the whole member in one call into a buffer of the size the
// directory declares, about twice as fast (docs/npz.md, "Throughput"). Both verify the CRC-32,
// the declared size and the data descriptor alike; the bytes produced are identical.
enum class InflateBackend { kZlib, kLibdeflate };

// Whether this build has libdeflate (CMake found libdeflate-dev).
bool LibdeflateAvailable();
// The backend ReadWhole uses unless told otherwise: libdeflate when available, else zlib.
// Process-wide; benchmarks and tests switch it to compare the two. Safe to call from any thread.
InflateBackend DefaultInflateBackend();
void SetDefaultInflateBackend(InflateBackend backend);  // kLibdeflate needs LibdeflateAvailable()
std::string_view InflateBackendName(InflateBackend backend);

// Sequential reader of one member's uncompressed bytes. Created by ZipReader::OpenMember.
class ZipMemberStream {
 public:
  ~ZipMemberStream();
  ZipMemberStream(const ZipMemberStream&) = delete;
  ZipMemberStream& operator=(const ZipMemberStream&) = delete;

  // Reads up to `n` bytes into `dst`; returns how many were read (0 only at the end of the
  // member). When the last byte has been read the size and CRC-32 are verified (DataLoss on
  // mismatch), so a caller that reads to the end has checked the member.
  StatusOr<size_t> Read(void* dst, size_t n);
  // Reads exactly `n` bytes or fails with DataLoss ("member ends after N bytes").
  Status ReadExact(void* dst, size_t n);
  // Reads and discards the rest of the member, verifying its CRC-32.
  Status ReadToEnd();
  // Reads the whole member into `dst` (room for size() bytes) and verifies it as Read does;
  // only at the start of the member. Deflated members use `backend` (kLibdeflate falls back to
  // zlib in builds without it); the compressed bytes are held in memory meanwhile. Errors as
  // for Read: DataLoss naming archive and member for corrupt or truncated deflate data, a
  // stream longer or shorter than the declared size, a CRC-32 or data descriptor mismatch.
  Status ReadWhole(void* dst, InflateBackend backend = DefaultInflateBackend());

  uint64_t size() const { return entry_.uncompressed_size; }
  uint64_t position() const { return produced_; }
  const ZipEntry& entry() const { return entry_; }
  // "<archive>: member '<name>'" for error messages.
  std::string Where() const;

 private:
  friend class ZipReader;
  ZipMemberStream(const ZipReader* reader, ZipEntry entry, uint64_t data_offset);
  Status Init();
  Status ReadRaw(void* dst, size_t n);  // compressed bytes from the archive
  Status Finish();                      // size and CRC check at the end
  Status CheckDataDescriptor();         // flag bit 3: the trailing descriptor must agree
  Status InflateWholeWithLibdeflate(void* dst);

  const ZipReader* reader_;
  ZipEntry entry_;
  uint64_t data_offset_;
  uint64_t consumed_ = 0;  // compressed bytes taken from the archive
  uint64_t produced_ = 0;  // uncompressed bytes handed out
  uint32_t crc_ = 0;
  bool finished_ = false;
  struct Inflater;
  std::unique_ptr<Inflater> inflater_;
};

class ZipReader {
 public:
  // Opens `path` and parses its end-of-central-directory records and central directory.
  // Errors: NotFound (no such file), DataLoss (not a zip file, truncated, inconsistent
  // directory), Unimplemented (multi-disk archive).
  static StatusOr<std::unique_ptr<ZipReader>> Open(const std::string& path);
  ~ZipReader();
  ZipReader(const ZipReader&) = delete;
  ZipReader& operator=(const ZipReader&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  // Members in central-directory order.
  const std::vector<ZipEntry>& entries() const { return entries_; }
  // The last member with this exact name (as Python's zipfile does), or nullptr.
  const ZipEntry* Find(std::string_view name) const;

  // Checks the member's local header and returns a stream over its uncompressed bytes.
  // Errors: Unimplemented (method other than stored/deflated, encrypted member), DataLoss
  // (bad local header, member data beyond the end of the file, impossible sizes).
  StatusOr<std::unique_ptr<ZipMemberStream>> OpenMember(const ZipEntry& entry) const;

  // Reads `n` bytes at `offset` of the archive (pread; DataLoss if the file is shorter).
  Status PRead(uint64_t offset, void* dst, size_t n) const;

 private:
  ZipReader() = default;
  Status Parse();

  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string, size_t> by_name_;
};

// Writes a zip archive through AtomicFileWriter: nothing appears at `path` until Finish()
// succeeds; destroying an unfinished writer removes the temporary.
class ZipWriter {
 public:
  static StatusOr<std::unique_ptr<ZipWriter>> Create(const std::string& path);

  // Starts a stored member whose size and CRC-32 are known in advance (the local header carries
  // them; zip64 extra field when size >= 4 GiB). EndMember checks they were honoured.
  Status BeginStored(std::string_view name, uint64_t size, uint32_t crc);
  // Starts a stored member whose size is known in advance but whose CRC-32 is not: it is taken
  // from the data as it is written and filled into the local header at EndMember (rewritten in
  // place), so the archive holds the same bytes as BeginStored with that CRC, in one pass over
  // the data. EndMember checks the size.
  Status BeginStoredCrcAtEnd(std::string_view name, uint64_t size);
  // Starts a deflated member (raw deflate, zlib `level`). The size and CRC follow the data in a
  // data descriptor (flag bit 3). `size_hint` is the expected uncompressed size: when it (or its
  // deflate bound) reaches 4 GiB the member is written with zip64 sizes.
  Status BeginDeflated(std::string_view name, uint64_t size_hint, int level);
  // Appends uncompressed bytes to the current member.
  Status Write(const void* data, size_t n);
  Status EndMember();
  // Writes the central directory (zip64 records when needed) and commits the file.
  Status Finish();

  const std::string& path() const { return out_.path(); }
  ~ZipWriter();

 private:
  ZipWriter() = default;
  Status StartMember(std::string_view name, uint16_t method, uint16_t flags, uint32_t crc,
                     uint64_t size, bool zip64);
  Status WriteImpl(const void* data, size_t n);
  Status EndMemberImpl();

  struct Member {
    std::string name;
    uint16_t method = 0;
    uint16_t flags = 0;
    uint32_t crc32 = 0;
    uint64_t compressed_size = 0;
    uint64_t uncompressed_size = 0;
    uint64_t local_header_offset = 0;
    bool local_zip64 = false;
  };
  AtomicFileWriter out_;
  std::vector<Member> members_;
  std::unordered_map<std::string, size_t> names_;
  bool in_member_ = false;
  bool finished_ = false;
  bool failed_ = false;      // a write failed mid-member: Finish refuses to commit
  bool crc_at_end_ = false;  // the stored member's CRC goes into its local header at EndMember
  uint64_t data_start_ = 0;
  uint32_t running_crc_ = 0;
  uint64_t running_size_ = 0;
  struct Deflater;
  std::unique_ptr<Deflater> deflater_;
};

// CRC-32 (zip/zlib polynomial) of `n` bytes, continuing from `crc` (0 to start); same result as
// zlib's crc32. libdeflate_crc32 when the build has libdeflate (carry-less multiplication where
// the CPU has it), zlib's crc32_z otherwise (docs/npz.md, "CRC-32").
uint32_t Crc32(uint32_t crc, const void* data, size_t n);
// The same through zlib alone (the reference for tests and benchmarks).
uint32_t Crc32Zlib(uint32_t crc, const void* data, size_t n);

}  // namespace tpugraphs::io

#endif  // TPUGRAPHS_IO_ZIP_H_
