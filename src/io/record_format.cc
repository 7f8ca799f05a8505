#include "tpugraphs/io/record_format.h"

#include <zlib.h>

#include <cstring>

namespace tpugraphs::io {

std::string_view RecordTypeName(RecordType type) {
  switch (type) {
    case RecordType::kGraph:
      return "graph";
    case RecordType::kConfigBlock:
      return "config block";
    case RecordType::kIndex:
      return "index";
  }
  return "unknown";
}

void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint32_t Crc32(std::string_view data, uint32_t crc) {
  uLong c = crc;
  const auto* p = reinterpret_cast<const Bytef*>(data.data());
  size_t left = data.size();
  while (left > 0) {  // zlib takes uInt lengths
    uInt n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    c = crc32(c, p, n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(c);
}

// Header: magic[8] | u32 version | u32 kind | 12 reserved zero bytes | u32 crc of bytes 0..27.
std::string EncodeFileHeader(uint32_t version, uint32_t kind) {
  std::string h(kFileHeaderSize, '\0');
  std::memcpy(h.data(), kFileMagic, 8);
  PutU32(h.data() + 8, version);
  PutU32(h.data() + 12, kind);
  PutU32(h.data() + 28, Crc32(std::string_view(h.data(), 28)));
  return h;
}

Status CheckFileHeader(std::string_view bytes, const std::string& path) {
  if (bytes.size() < kFileHeaderSize || std::memcmp(bytes.data(), kFileMagic, 8) != 0) {
    return InvalidArgumentError(path + ": not a tpugraphs dataset (bad magic)");
  }
  uint32_t version = GetU32(bytes.data() + 8);
  uint32_t kind = GetU32(bytes.data() + 12);
  if (Crc32(bytes.substr(0, 28)) != GetU32(bytes.data() + 28)) {
    return DataLossError(path + ": file header is corrupted (CRC mismatch)");
  }
  if (version > kFormatVersion) {
    return UnimplementedError(path + ": format v" + std::to_string(version) +
                              " is newer than supported v" + std::to_string(kFormatVersion));
  }
  if (version == 0) return DataLossError(path + ": invalid format version 0");
  if (kind != kFileKindDataset) {
    return InvalidArgumentError(path + ": tpugraphs file of kind " + std::to_string(kind) +
                                " is not a dataset (kind " + std::to_string(kFileKindDataset) +
                                ")");
  }
  return Status::Ok();
}

StatusOr<std::string> EncodeFrame(RecordType type, std::string_view payload, int level) {
  std::string out(kFrameHeaderSize, '\0');
  Codec codec = Codec::kNone;
  if (level > 0 && !payload.empty()) {
    uLongf bound = compressBound(static_cast<uLong>(payload.size()));
    out.resize(kFrameHeaderSize + bound);
    uLongf dest_len = bound;
    int rc = compress2(reinterpret_cast<Bytef*>(out.data() + kFrameHeaderSize), &dest_len,
                       reinterpret_cast<const Bytef*>(payload.data()),
                       static_cast<uLong>(payload.size()), level);
    if (rc != Z_OK) return InternalError("zlib compress2 failed with code " + std::to_string(rc));
    if (dest_len < payload.size()) {
      codec = Codec::kZlib;
      out.resize(kFrameHeaderSize + dest_len);
    }
  }
  if (codec == Codec::kNone) {
    out.resize(kFrameHeaderSize);
    out.append(payload);
  }
  char* h = out.data();
  h[4] = static_cast<char>(type);
  h[5] = static_cast<char>(codec);
  PutU64(h + 8, out.size() - kFrameHeaderSize);
  PutU64(h + 16, payload.size());
  uint32_t crc = Crc32(std::string_view(h + 4, kFrameHeaderSize - 4));
  crc = Crc32(std::string_view(out).substr(kFrameHeaderSize), crc);
  PutU32(h, crc);
  return out;
}

FrameHeader DecodeFrameHeader(const char* p) {
  FrameHeader h;
  h.crc = GetU32(p);
  h.type = static_cast<RecordType>(static_cast<uint8_t>(p[4]));
  h.codec = static_cast<Codec>(static_cast<uint8_t>(p[5]));
  h.stored_size = GetU64(p + 8);
  h.raw_size = GetU64(p + 16);
  return h;
}

StatusOr<std::string> DecodeFramePayload(const char* header, const FrameHeader& h,
                                         std::string_view stored, const std::string& what) {
  uint32_t crc = Crc32(std::string_view(header + 4, kFrameHeaderSize - 4));
  crc = Crc32(stored, crc);
  if (crc != h.crc) {
    return DataLossError(what + ": CRC mismatch (record is corrupted)");
  }
  if (header[6] != 0 || header[7] != 0) {
    return DataLossError(what + ": reserved frame bytes are not zero");
  }
  if (h.raw_size > kMaxRecordRawBytes) {
    return ResourceExhaustedError(what + ": declared decoded size " + std::to_string(h.raw_size) +
                                  " exceeds the limit of " + std::to_string(kMaxRecordRawBytes));
  }
  if (h.codec == Codec::kNone) {
    if (h.raw_size != stored.size()) {
      return DataLossError(what + ": stored and decoded sizes differ for an uncompressed record");
    }
    return std::string(stored);
  }
  if (h.codec != Codec::kZlib) {
    return DataLossError(what + ": unknown codec " + std::to_string(static_cast<int>(h.codec)));
  }
  if (h.raw_size > (stored.size() + 64) * kMaxZlibRatio) {
    return DataLossError(what + ": declared decoded size " + std::to_string(h.raw_size) +
                         " is impossible for " + std::to_string(stored.size()) +
                         " compressed bytes");
  }
  std::string raw(h.raw_size, '\0');
  uLongf dest_len = static_cast<uLongf>(h.raw_size);
  int rc =
      uncompress(reinterpret_cast<Bytef*>(raw.data()), &dest_len,
                 reinterpret_cast<const Bytef*>(stored.data()), static_cast<uLong>(stored.size()));
  if (rc != Z_OK || dest_len != h.raw_size) {
    return DataLossError(what + ": zlib payload does not decode to the declared " +
                         std::to_string(h.raw_size) + " bytes");
  }
  return raw;
}

std::string EncodeFooter(uint64_t index_offset, uint64_t index_frame_size) {
  std::string f(kFooterSize, '\0');
  std::memcpy(f.data(), kFooterMagic, 8);
  PutU64(f.data() + 8, index_offset);
  PutU64(f.data() + 16, index_frame_size);
  PutU32(f.data() + 24, Crc32(std::string_view(f.data(), 24)));
  return f;
}

Status DecodeFooter(std::string_view bytes, const std::string& path, uint64_t* index_offset,
                    uint64_t* index_frame_size) {
  if (bytes.size() != kFooterSize || std::memcmp(bytes.data(), kFooterMagic, 8) != 0) {
    return DataLossError(path +
                         ": no dataset footer at the end of the file (truncated, or "
                         "the writer did not finish)");
  }
  if (Crc32(bytes.substr(0, 24)) != GetU32(bytes.data() + 24)) {
    return DataLossError(path + ": dataset footer is corrupted (CRC mismatch)");
  }
  if (GetU32(bytes.data() + 28) != 0) {
    return DataLossError(path + ": dataset footer is corrupted (reserved bytes are not zero)");
  }
  *index_offset = GetU64(bytes.data() + 8);
  *index_frame_size = GetU64(bytes.data() + 16);
  return Status::Ok();
}

}  // namespace tpugraphs::io
