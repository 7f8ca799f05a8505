// CRC-32 (the zip/zlib polynomial 0x04C11DB7, bit-reflected) for Crc32() in zip.h: libdeflate's
// libdeflate_crc32 when the build has libdeflate (it selects a carry-less multiplication kernel for
// the CPU at run time), zlib's crc32_z otherwise. tools/bench/bench-crc32.sh measures both; a unit
// test checks Crc32 against zlib for many lengths, alignments and starting values.
#include <zlib.h>

#include <cstdint>

#include "tpugraphs/io/zip.h"

#ifdef TPUGRAPHS_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

namespace tpugraphs::io {

uint32_t Crc32(uint32_t crc, const void* data, size_t n) {
#ifdef TPUGRAPHS_HAVE_LIBDEFLATE
  return libdeflate_crc32(crc, data, n);
#else
  return Crc32Zlib(crc, data, n);
#endif
}

uint32_t Crc32Zlib(uint32_t crc, const void* data, size_t n) {
  // crc32_z takes a z_size_t length: no 4 GiB limit.
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), n));
}

}  // namespace tpugraphs::io
