// Commands that write several files (`export`, `synth` into a directory) write all of them or
// none: a failure after the first graph (a corrupt record, a path that cannot take a file)
// leaves the output directory exactly as it was, with no staging directory beside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"

namespace tpugraphs {
namespace {

using ::tpugraphs::testing::RealDataPath;
using ::tpugraphs::testing::RunCli;
using ::tpugraphs::testing::RunPython;
using ::tpugraphs::testing::TempDir;
namespace fs = std::filesystem;

// Every regular file below `dir` (relative path -> "<size> bytes, hash <h>"); empty when dir is
// missing.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    auto bytes = ReadFileToString(e.path().string());
    out[fs::path(e.path()).lexically_relative(dir).string()] =
        bytes.ok() ? std::to_string(bytes->size()) + " bytes, hash " +
                         std::to_string(std::hash<std::string>()(*bytes))
                   : "unreadable";
  }
  return out;
}

std::string FileBytes(const std::string& path) {
  auto b = ReadFileToString(path);
  return b.ok() ? *b : std::string();
}

// Names in `dir` that carry the temporary suffix.
std::vector<std::string> Temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) out.push_back(name);
  }
  return out;
}

// Ingests the three real tile files and damages a byte in the record written last (the last
// graph's), just before the index. Returns the damaged dataset's path.
std::string DatasetWithCorruptLastGraph(const TempDir& tmp) {
  const std::string data = tmp.File("d.tpug");
  auto r = RunCli({"-q", "ingest", RealDataPath("npz/tile_test"), "-o", data});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Footer (last 32 bytes): "TPUGEND1" | u64 index offset | ...
  auto py = RunPython(R"PY(
import sys, struct
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
assert b[-32:-24] == b'TPUGEND1'
index_offset = struct.unpack('<Q', bytes(b[-24:-16]))[0]
b[index_offset - 20] ^= 0x5a
open(p, 'wb').write(bytes(b))
print(index_offset)
)PY",
                      {data});
  EXPECT_EQ(py.exit_code, 0) << py.err;
  return data;
}

TEST(MultiFileOutputTest, ExportOfCorruptLaterGraphWritesNothing) {
  TempDir tmp;
  const std::string data = DatasetWithCorruptLastGraph(tmp);
  // The first graphs still read: the failure comes after some files would have been written.
  auto one = RunCli({"-q", "-j", "1", "export", data, "-o", tmp.File("first"), "--graph",
                     "0a1c5dcfa9f1f4ebcc1282a1d1ca8ecb"});
  ASSERT_EQ(one.exit_code, 0) << one.err;

  // A new output directory: not created at all.
  auto r = RunCli({"-q", "-j", "1", "export", data, "-o", tmp.File("out/tree")});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("d.tpug"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp.File("out"))) << "parent created for the output was left";
  EXPECT_TRUE(Temporaries(tmp.path()).empty());

  // An existing directory with other files: unchanged.
  fs::create_directories(tmp.File("keep/npz/tile/xla/nosplit"));
  ASSERT_TRUE(WriteFileAtomically(tmp.File("keep/notes.txt"), "mine").ok());
  ASSERT_TRUE(WriteFileAtomically(tmp.File("keep/npz/tile/xla/nosplit/old.npz"), "old").ok());
  const auto before = Snapshot(tmp.File("keep"));
  r = RunCli({"-q", "export", data, "-o", tmp.File("keep")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Snapshot(tmp.File("keep")), before);
  EXPECT_TRUE(Temporaries(tmp.path()).empty());
}

TEST(MultiFileOutputTest, ExportKeepGoingWritesTheOthersAndListsTheSkipped) {
  TempDir tmp;
  const std::string data = DatasetWithCorruptLastGraph(tmp);
  auto r = RunCli({"-q", "export", data, "-o", tmp.File("out"), "--keep-going"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("exported 2 graphs"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
  EXPECT_NE(r.out.find("skipped\ttile:xla\t\t"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("1 graphs could not be exported"), std::string::npos) << r.err;
  EXPECT_EQ(Snapshot(tmp.File("out")).size(), 2u);
  EXPECT_TRUE(Temporaries(tmp.path()).empty());
}

TEST(MultiFileOutputTest, ExportIntoExistingTreeReplacesItsFilesOnlyOnSuccess) {
  TempDir tmp;
  const std::string data = tmp.File("d.tpug");
  ASSERT_EQ(RunCli({"-q", "ingest", RealDataPath("npz/tile_test"), "-o", data}).exit_code, 0);
  ASSERT_EQ(RunCli({"-q", "export", data, "-o", tmp.File("ref")}).exit_code, 0);
  const auto ref = Snapshot(tmp.File("ref"));
  ASSERT_EQ(ref.size(), 3u);
  // A directory where the last file goes: the export fails before moving anything.
  const std::string last = std::prev(ref.end())->first;
  fs::create_directories(tmp.File("out") + "/" + last);
  ASSERT_TRUE(WriteFileAtomically(tmp.File("out/other.txt"), "x").ok());
  const auto before = Snapshot(tmp.File("out"));
  auto r = RunCli({"-q", "export", data, "-o", tmp.File("out")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;
  EXPECT_EQ(Snapshot(tmp.File("out")), before);
  EXPECT_TRUE(Temporaries(tmp.path()).empty());
  // Without the obstacle the files arrive, the other file stays, stale copies are replaced.
  fs::remove(tmp.File("out") + "/" + last);
  ASSERT_TRUE(WriteFileAtomically(tmp.File("out") + "/" + ref.begin()->first, "stale").ok());
  r = RunCli({"-q", "export", data, "-o", tmp.File("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto after = Snapshot(tmp.File("out"));
  EXPECT_EQ(after["other.txt"], Snapshot(tmp.File("out"))["other.txt"]);
  EXPECT_EQ(FileBytes(tmp.File("out/other.txt")), "x");
  after.erase("other.txt");
  EXPECT_EQ(after, ref);
  EXPECT_TRUE(Temporaries(tmp.path()).empty());
}

// synth into a directory where the last graph's file cannot be written (a directory is in its
// place): earlier graphs must not appear.
void CheckSynthWritesNothingOnFailure(const std::vector<std::string>& flags) {
  TempDir tmp;
  std::vector<std::string> args = {"-q", "synth", "-o", tmp.File("ref")};
  args.insert(args.end(), flags.begin(), flags.end());
  auto r = RunCli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ref = Snapshot(tmp.File("ref"));
  ASSERT_GE(ref.size(), 3u);
  const std::string last = std::prev(ref.end())->first;
  fs::create_directories(tmp.File("out") + "/" + last);
  const auto before = Snapshot(tmp.File("out"));
  args[3] = tmp.File("out");
  r = RunCli(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(last), std::string::npos) << r.err;
  EXPECT_EQ(Snapshot(tmp.File("out")), before);
  EXPECT_TRUE(fs::is_directory(tmp.File("out") + "/" + last));
  EXPECT_TRUE(Temporaries(tmp.path()).empty());
  // The same run into a fresh directory gives the reference files.
  args[3] = tmp.File("fresh/sub");
  ASSERT_EQ(RunCli(args).exit_code, 0);
  EXPECT_EQ(Snapshot(tmp.File("fresh/sub")), ref);
  EXPECT_TRUE(Temporaries(tmp.path()).empty());
}

TEST(MultiFileOutputTest, SynthTileTreeWritesNothingOnFailure) {
  CheckSynthWritesNothingOnFailure({"--task", "tile", "--graphs", "4", "--configs", "5"});
}

TEST(MultiFileOutputTest, SynthLayoutTreeWritesNothingOnFailure) {
  CheckSynthWritesNothingOnFailure(
      {"--task", "layout", "--graphs", "3", "--nodes", "40", "--configs", "4"});
}

TEST(MultiFileOutputTest, OutputThatIsAFileFailsBeforeAnyWork) {
  TempDir tmp;
  ASSERT_TRUE(WriteFileAtomically(tmp.File("plain"), "x").ok());
  auto r = RunCli({"-q", "synth", "--task", "tile", "--graphs", "2", "-o", tmp.File("plain")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << r.err;
  EXPECT_EQ(tmp.List(), std::vector<std::string>{"plain"});
}

// A staging directory left by a process that no longer exists (killed with SIGKILL) is removed
// by the next run for the same output; one of a live process is kept.
TEST(MultiFileOutputTest, StaleStagingDirectoriesOfDeadProcessesAreRemoved) {
  TempDir tmp;
  // A pid that is not running: a child that has exited.
  auto dead = testing::RunShell("sh -c 'echo $$'");
  ASSERT_EQ(dead.exit_code, 0);
  const std::string dead_pid = dead.out.substr(0, dead.out.find('\n'));
  const std::string stale = tmp.File("out.tmp-" + dead_pid + "-0");
  const std::string live = tmp.File("out.tmp-1-0");  // pid 1 always exists
  fs::create_directories(stale + "/pb");
  fs::create_directories(live);
  auto r = RunCli({"-q", "synth", "--task", "tile", "--graphs", "2", "-o", tmp.File("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
}

}  // namespace
}  // namespace tpugraphs
