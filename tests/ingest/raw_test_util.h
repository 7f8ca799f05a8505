// Small helpers shared by the raw-dump ingest tests.
#ifndef TPUGRAPHS_TESTS_INGEST_RAW_TEST_UTIL_H_
#define TPUGRAPHS_TESTS_INGEST_RAW_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "testing/test_util.h"
#include "tpu_graphs/tuning.pb.h"

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

}  // namespace tpugraphs::ingest::testing

#endif  // TPUGRAPHS_TESTS_INGEST_RAW_TEST_UTIL_H_
