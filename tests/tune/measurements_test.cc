// The closed loop's measuring: the measure command's output, the command line, and the
// measurements file (tune/measurements.h).
#include "tpugraphs/tune/measurements.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"

namespace tpugraphs::tune {
namespace {

using ::tpugraphs::testing::TempDir;

Config Layout(std::vector<int8_t> v) {
  Config c;
  c.layout = std::move(v);
  return c;
}

TEST(MeasureOutputTest, ReadsIndexRuntimeLinesAndIgnoresTheRest) {
  auto r =
      ParseMeasureOutput("config\tnoise_free_ns\nwarming up\n1\t20.5\n0  10\n\n2\t3e2\n", 3, "m");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<double>{10, 20.5, 300}));
}

TEST(MeasureOutputTest, EveryBadLineIsAnErrorNamingTheCommandAndTheLine) {
  struct Case {
    const char* output;
    const char* expect;
  } cases[] = {
      {"0\t1\n", "printed no runtime for 1 of the batch's 2 configurations (index 1)"},
      {"0\t1\n1\t2\n2\t3\n", "line 3 '2\t3': index 2 is not one of the batch's 0..1"},
      {"0\t1\n0\t2\n1\t1\n", "line 2 '0\t2': configuration 0 was already given on line 1"},
      {"0\t-1\n1\t1\n", "line 1 '0\t-1': the runtime is not positive"},
      {"0\t0\n1\t1\n", "line 1 '0\t0': the runtime is not positive"},
      {"0\tnan\n1\t1\n", "line 1 '0\tnan': the runtime is not a finite number"},
      {"0\tinf\n1\t1\n", "the runtime is not a finite number"},
      {"0\t1e999\n1\t1\n", "the runtime is not a finite number"},
      {"0\t12ms\n1\t1\n", "the runtime is not a finite number"},
      {"0\t1\t7\n1\t1\n", "line 1 '0\t1\t7': expected 'index<TAB>runtime'"},
      {"0\n1\t1\n", "expected 'index<TAB>runtime'"},
      {"", "printed no runtime for 2 of the batch's 2 configurations (index 0, 1)"},
  };
  for (const Case& c : cases) {
    auto r = ParseMeasureOutput(c.output, 2, "./measure.sh {}");
    ASSERT_FALSE(r.ok()) << c.output;
    EXPECT_NE(r.status().message().find("measure command `./measure.sh {}`"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << "output: " << c.output << "\nmessage: " << r.status().message();
  }
}

TEST(MeasureCommandTest, SubstitutesTheQuotedPath) {
  EXPECT_EQ(SubstituteCommand("m {} --x {}", "/t/a b.npz"), "m '/t/a b.npz' --x '/t/a b.npz'");
  EXPECT_EQ(SubstituteCommand("m", "it's.npz"), "m 'it'\\''s.npz'");
}

TEST(MeasureCommandTest, RunsThroughTheShellAndReportsFailures) {
  TempDir dir;
  auto ok =
      RunMeasureCommand("printf 'i\\tt\\n0\\t5\\n1\\t7\\n'; echo {} >&2", dir.File("b.npz"), 2);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, (std::vector<double>{5, 7}));
  auto fails = RunMeasureCommand("exit 3", dir.File("b.npz"), 1);
  ASSERT_FALSE(fails.ok());
  EXPECT_NE(fails.status().message().find("measure command `exit 3` failed (exit status 3)"),
            std::string::npos)
      << fails.status().message();
  auto killed = RunMeasureCommand("kill -9 $$", dir.File("b.npz"), 1);
  ASSERT_FALSE(killed.ok());
  EXPECT_NE(killed.status().message().find("was killed by signal 9"), std::string::npos)
      << killed.status().message();
}

TEST(MeasurementLogTest, KeepsRecordsAcrossOpensAndFindsThemByGraphAndConfig) {
  TempDir dir;
  const std::string path = dir.File("m.tsv");
  {
    auto log = MeasurementLog::Open(path);
    ASSERT_TRUE(log.ok());
    EXPECT_EQ(log->size(), 0);
    Config tile;
    tile.tile = {1.5f, 0.1f, -2};
    ASSERT_TRUE(log->Append({{"layout:x:a", 1, 12.5, 0.25, Layout({0, 1, -1})},
                             {"tile:x:k", 2, 3, std::nan(""), tile}})
                    .ok());
  }
  auto log = MeasurementLog::Open(path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->size(), 2);
  const Measurement* m = log->Find("layout:x:a", Layout({0, 1, -1}));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->round, 1);
  EXPECT_EQ(m->runtime, 12.5);
  EXPECT_EQ(m->predicted, 0.25);
  EXPECT_EQ(log->Find("layout:x:b", Layout({0, 1, -1})), nullptr);  // another graph
  EXPECT_EQ(log->Find("layout:x:a", Layout({1, 0, -1})), nullptr);  // another config
  Config tile;
  tile.tile = {1.5f, 0.1f, -2};  // 0.1f round-trips through its text
  const Measurement* t = log->Find("tile:x:k", tile);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(std::isnan(t->predicted));
  auto text = ReadFileToString(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->rfind("# tpugraphs tune measurements 1\n", 0), 0u) << *text;
}

TEST(MeasurementLogTest, ATornLastLineIsDroppedAndCutOffBeforeTheNextAppend) {
  TempDir dir;
  const std::string path = dir.File("m.tsv");
  ASSERT_TRUE(WriteFileAtomically(path,
                                  "# tpugraphs tune measurements 1\n"
                                  "layout:x:a\t1\t10\tnan\tL:0,1\n"
                                  "layout:x:a\t1\t11\tnan\tL:1,")
                  .ok());
  auto log = MeasurementLog::Open(path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->size(), 1);
  ASSERT_TRUE(log->Append({{"layout:x:a", 2, 9, 0, Layout({1, 0})}}).ok());
  auto text = ReadFileToString(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "# tpugraphs tune measurements 1\n"
            "layout:x:a\t1\t10\tnan\tL:0,1\n"
            "layout:x:a\t2\t9\t0\tL:1,0\n");
}

TEST(MeasurementLogTest, ACorruptFileIsAnErrorNamingTheFileAndLine) {
  TempDir dir;
  const std::string header = "# tpugraphs tune measurements 1\n";
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"graph\tround\n", "not a tpugraphs measurements file"},
      {header + "layout:x:a\t1\t10\tnan\n", ":2: expected 5 tab-separated fields"},
      {header + "layout:x:a\t0\t10\tnan\tL:0\n", ":2: round '0' is not an integer >= 1"},
      {header + "layout:x:a\t1\t-4\tnan\tL:0\n", ":2: runtime '-4' is not a finite number > 0"},
      {header + "layout:x:a\t1\tnan\tnan\tL:0\n", ":2: runtime 'nan'"},
      {header + "layout:x:a\t1\t4\tx\tL:0\n", ":2: predicted score 'x'"},
      {header + "layout:x:a\t1\t4\t0\tQ:0\n", ":2: the configuration must start with L: or T:"},
      {header + "layout:x:a\t1\t4\t0\tL:0,300\n", ":2: layout value '300'"},
      {header + "noid\t1\t4\t0\tL:0\n", ":2: graph 'noid' is not collection:name"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.File("bad.tsv");
    ASSERT_TRUE(WriteFileAtomically(path, c.text).ok());
    auto log = MeasurementLog::Open(path);
    ASSERT_FALSE(log.ok()) << c.text;
    EXPECT_NE(log.status().message().find(path), std::string::npos) << log.status().message();
    EXPECT_NE(log.status().message().find(c.expect), std::string::npos) << c.text << "\n"
                                                                        << log.status().message();
  }
  auto dir_as_file = MeasurementLog::Open(dir.path());
  EXPECT_FALSE(dir_as_file.ok());
}

}  // namespace
}  // namespace tpugraphs::tune
