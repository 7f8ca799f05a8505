// Small helpers shared by the raw-dump ingest tests.
#ifndef TPUGRAPHS_TESTS_INGEST_RAW_TEST_UTIL_H_
#define TPUGRAPHS_TESTS_INGEST_RAW_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "testing/graph_compare.h"
#include "testing/test_util.h"
#include "tpu_graphs/tuning.pb.h"
#include "tpugraphs/common/graph.h"

namespace tpugraphs::ingest::testing {

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  EXPECT_TRUE(in.good() || in.eof()) << path;
  return ss.str();
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

inline std::string LayoutDumpPath() {
  return tpugraphs::testing::RealDataPath("raw/module_tuning_data_layout.pb");
}
inline std::string TileDumpPath() {
  return tpugraphs::testing::RealDataPath("raw/op_tuning_data.pb");
}

inline tpu_graphs::ModuleTuningData ParseLayoutDump() {
  tpu_graphs::ModuleTuningData m;
  EXPECT_TRUE(m.ParseFromString(ReadBytes(LayoutDumpPath())));
  return m;
}
inline tpu_graphs::TuningData ParseTileDump() {
  tpu_graphs::TuningData t;
  EXPECT_TRUE(t.ParseFromString(ReadBytes(TileDumpPath())));
  return t;
}

// Appends a varint / a length-delimited field, as the wire format spells them.
inline void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
inline void PutBytesField(int field, const std::string& bytes, std::string* out) {
  PutVarint((static_cast<uint64_t>(field) << 3) | 2, out);
  PutVarint(bytes.size(), out);
  out->append(bytes);
}

using tpugraphs::testing::ExpectSameGraph;

}  // namespace tpugraphs::ingest::testing

#endif  // TPUGRAPHS_TESTS_INGEST_RAW_TEST_UTIL_H_
