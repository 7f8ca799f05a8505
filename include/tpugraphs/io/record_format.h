// Constants and low-level framing of the tpugraphs dataset container. The full specification is
// docs/dataset-format.md; this header is its single source of constants.
//
// File layout (all integers little-endian):
//   FileHeader (32 bytes) | record frame ... | index record frame | Footer (32 bytes)
// A record frame is a 24-byte FrameHeader followed by the stored payload. The CRC-32 (zlib's
// polynomial, as in gzip/PNG) covers frame bytes 4..23 and the stored payload, so a flipped bit
// anywhere in a record, including its length fields, is detected.
//
// Thread-safety: free functions only; reentrant.
#ifndef TPUGRAPHS_IO_RECORD_FORMAT_H_
#define TPUGRAPHS_IO_RECORD_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "tpugraphs/common/status.h"

namespace tpugraphs::io {

// "TPUGRAPH" then a format version and a file kind.
inline constexpr char kFileMagic[8] = {'T', 'P', 'U', 'G', 'R', 'A', 'P', 'H'};
// Structural version of the container. Bumped only for layout changes, never for new proto
// fields.
inline constexpr uint32_t kFormatVersion = 1;
// File kinds sharing the header.
inline constexpr uint32_t kFileKindDataset = 1;
inline constexpr size_t kFileHeaderSize = 32;
// Footer: "TPUGEND1" | u64 index offset | u64 index frame size | u32 crc of bytes 0..23 | u32 0.
inline constexpr char kFooterMagic[8] = {'T', 'P', 'U', 'G', 'E', 'N', 'D', '1'};
inline constexpr size_t kFooterSize = 32;
inline constexpr size_t kFrameHeaderSize = 24;

enum class RecordType : uint8_t { kGraph = 1, kConfigBlock = 2, kIndex = 3 };
enum class Codec : uint8_t { kNone = 0, kZlib = 1 };

std::string_view RecordTypeName(RecordType type);

// Limits that protect readers from hostile declared sizes. A record payload may decode to at most
// kMaxRecordRawBytes (protobuf's own 2 GiB message limit is the hard bound), and a zlib payload
// may not claim to expand more than kMaxZlibRatio times (deflate cannot exceed about 1032:1).
inline constexpr uint64_t kMaxRecordRawBytes = (uint64_t{1} << 31) - 1;
inline constexpr uint64_t kMaxZlibRatio = 1100;

struct FrameHeader {
  uint32_t crc = 0;
  RecordType type = RecordType::kGraph;
  Codec codec = Codec::kNone;
  uint64_t stored_size = 0;  // payload bytes following the frame header
  uint64_t raw_size = 0;     // payload bytes after decoding
};

// Little-endian encoding helpers (independent of the host byte order).
void PutU32(char* p, uint32_t v);
void PutU64(char* p, uint64_t v);
uint32_t GetU32(const char* p);
uint64_t GetU64(const char* p);

// CRC-32 (zlib) of `data`, continuing from `crc` (0 to start).
uint32_t Crc32(std::string_view data, uint32_t crc = 0);

std::string EncodeFileHeader(uint32_t version, uint32_t kind);
// Checks the magic, version and kind; messages name `path`.
Status CheckFileHeader(std::string_view bytes, const std::string& path);

// Encodes `payload` (compressing it with zlib at `level` when level > 0 and it helps) into a
// complete frame: header + stored payload.
StatusOr<std::string> EncodeFrame(RecordType type, std::string_view payload, int level);
// Parses the 24 header bytes of a frame (the CRC is checked later, with the payload).
FrameHeader DecodeFrameHeader(const char* p);
// Verifies the CRC of a frame whose header bytes are `header` and stored payload is `stored`,
// then decodes the payload. `what` names the file and record in messages.
StatusOr<std::string> DecodeFramePayload(const char* header, const FrameHeader& h,
                                         std::string_view stored, const std::string& what);

std::string EncodeFooter(uint64_t index_offset, uint64_t index_frame_size);
// Returns {index_offset, index_frame_size}; messages name `path`.
Status DecodeFooter(std::string_view bytes, const std::string& path, uint64_t* index_offset,
                    uint64_t* index_frame_size);

}  // namespace tpugraphs::io

#endif  // TPUGRAPHS_IO_RECORD_FORMAT_H_
