// A tile dump (TuningData) whose runs are decoded from the wire gives exactly the graphs, or the
// error, of the whole-message parse: on the real dump, on the same messages spelled differently
// on the wire (packed or unpacked bounds, fields split into occurrences that protobuf merges),
// on variants of their content, and on bytes the wire decoder must leave to protobuf.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ingest/raw_test_util.h"
#include "testing/test_util.h"
#include "tpu_graphs/tuning.pb.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "tpugraphs/ingest/raw_dump_stream.h"

namespace tpugraphs::ingest {
namespace {

using testing::ExpectSameGraph;
using testing::PutBytesField;
using testing::PutVarint;

void PutTag(int field, int wire, std::string* out) {
  PutVarint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire), out);
}

StatusOr<std::vector<Graph>> Load(const std::string& path, bool stream_tile) {
  RawDumpOptions options;
  options.stream_tile_runs = stream_tile;
  return LoadRawDump(path, options);
}

// Loads `bytes` with the wire decoder and with the whole-message parse: both succeed with the
// same graphs or fail with the same status. Returns the whole-message outcome.
StatusOr<std::vector<Graph>> ExpectSameOutcome(const std::string& bytes, const std::string& what) {
  SCOPED_TRACE(what);
  tpugraphs::testing::TempDir dir;
  const std::string path = dir.File("dump.pb");
  testing::WriteBytes(path, bytes);
  auto whole = Load(path, /*stream_tile=*/false);
  auto streamed = Load(path, /*stream_tile=*/true);
  EXPECT_EQ(whole.ok(), streamed.ok()) << (whole.ok() ? streamed : whole).status().ToString();
  if (!whole.ok() || !streamed.ok()) {
    EXPECT_EQ(whole.status().ToString(), streamed.status().ToString());
    return whole;
  }
  EXPECT_EQ(whole->size(), streamed->size());
  for (size_t i = 0; i < whole->size() && i < streamed->size(); ++i) {
    ExpectSameGraph((*streamed)[i], (*whole)[i]);
  }
  return whole;
}

void ExpectSameGraphs(const std::vector<Graph>& a, const std::vector<Graph>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ExpectSameGraph(a[i], b[i]);
}

// How a TileSizeConfig's repeated int64 field is written.
enum class Form {
  kPacked,    // one packed occurrence (none for an empty list), as protobuf writes it
  kUnpacked,  // one varint occurrence per value
  kSplit,     // the first half packed (an empty packed occurrence when there is none), the rest
              // unpacked: parsers concatenate the occurrences
};

void PutInt64s(int field, const google::protobuf::RepeatedField<int64_t>& values, Form form,
               std::string* out) {
  const int n = values.size();
  auto packed = [&](int from, int to) {
    std::string p;
    for (int i = from; i < to; ++i) PutVarint(static_cast<uint64_t>(values.Get(i)), &p);
    PutBytesField(field, p, out);
  };
  auto unpacked = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      PutTag(field, 0, out);
      PutVarint(static_cast<uint64_t>(values.Get(i)), out);
    }
  };
  switch (form) {
    case Form::kPacked:
      if (n > 0) packed(0, n);
      break;
    case Form::kUnpacked:
      unpacked(0, n);
      break;
    case Form::kSplit:
      packed(0, n / 2);
      unpacked(n / 2, n);
      break;
  }
}

std::string TileSizeConfigBytes(const tpu_graphs::TileSizeConfig& t, Form form) {
  std::string out;
  PutInt64s(1, t.kernel_bounds(), form, &out);
  PutInt64s(2, t.output_bounds(), form, &out);
  PutInt64s(3, t.input_bounds(), form, &out);
  PutInt64s(4, t.iteration_bounds(), form, &out);
  return out;
}

// A run as protobuf writes it, but for the bounds, written in `form`.
std::string RunWithBounds(const tpu_graphs::ConfigProfile& run, Form form) {
  std::string out;
  if (run.has_op_config()) {
    std::string op;
    if (run.op_config().has_tile_size_config()) {
      PutBytesField(1, TileSizeConfigBytes(run.op_config().tile_size_config(), form), &op);
    }
    PutBytesField(1, op, &out);
  }
  if (run.error()) {
    PutTag(3, 0, &out);
    PutVarint(1, &out);
  }
  if (run.has_profile()) PutBytesField(4, run.profile().SerializeAsString(), &out);
  if (run.is_default()) {
    PutTag(5, 0, &out);
    PutVarint(1, &out);
  }
  return out;
}

// The same message as `run` with every field that protobuf merges split into occurrences: the
// bools written twice (the last one counts; 7 is true as well as 1), the op_config twice (the
// first holding kernel and output bounds, the second input and iteration bounds, each in a
// tile_size_config of its own, which merge), the profile three times (the second one's
// compute_time_ns, written even when 0, replacing the first's, the third without one), fields
// out of number order.
std::string SplitRun(const tpu_graphs::ConfigProfile& run) {
  std::string out;
  PutTag(5, 0, &out);
  PutVarint(run.is_default() ? 0 : 7, &out);
  PutTag(3, 0, &out);
  PutVarint(run.error() ? 0 : 7, &out);
  std::string second_op;
  if (run.has_op_config()) {
    std::string first_op;
    if (run.op_config().has_tile_size_config()) {
      const auto& t = run.op_config().tile_size_config();
      std::string first, second;
      PutInt64s(1, t.kernel_bounds(), Form::kSplit, &first);
      PutInt64s(2, t.output_bounds(), Form::kSplit, &first);
      PutInt64s(3, t.input_bounds(), Form::kSplit, &second);
      PutInt64s(4, t.iteration_bounds(), Form::kSplit, &second);
      PutBytesField(1, first, &first_op);
      PutBytesField(1, second, &second_op);
    }
    PutBytesField(1, first_op, &out);
  }
  if (run.has_profile()) {
    std::string stale;
    PutTag(4, 0, &stale);  // compute_time_ns
    PutVarint(123456789, &stale);
    PutTag(1, 0, &stale);  // compilation_cache_hit = false, as the real profiles have it
    PutVarint(0, &stale);
    PutBytesField(4, stale, &out);
  }
  if (run.has_op_config()) PutBytesField(1, second_op, &out);
  if (run.has_profile()) {
    std::string profile = run.profile().SerializeAsString();
    PutTag(4, 0, &profile);
    PutVarint(static_cast<uint64_t>(run.profile().compute_time_ns()), &profile);
    PutBytesField(4, profile, &out);
    std::string other;     // a last occurrence without compute_time_ns leaves it as it is
    PutTag(7, 0, &other);  // profile_cache_hit = false
    PutVarint(0, &other);
    PutBytesField(4, other, &out);
  }
  PutTag(3, 0, &out);
  PutVarint(run.error() ? 1 : 0, &out);
  PutTag(5, 0, &out);
  PutVarint(run.is_default() ? 1 : 0, &out);
  return out;
}

using RunEncoder = std::function<std::string(const tpu_graphs::ConfigProfile&)>;

// A TuningData with each run written by `encode_run`; `modules_after_runs` puts each kernel's
// module after its runs, split into two occurrences (which merge).
std::string EncodeDump(const tpu_graphs::TuningData& tuning, const RunEncoder& encode_run,
                       bool modules_after_runs = false) {
  std::string out;
  for (const auto& kernel : tuning.modules()) {
    std::string k;
    if (!modules_after_runs) PutBytesField(1, kernel.module().SerializeAsString(), &k);
    if (kernel.fingerprint() != 0) {
      PutTag(2, 0, &k);
      PutVarint(kernel.fingerprint(), &k);
    }
    for (const auto& run : kernel.runs()) PutBytesField(3, encode_run(run), &k);
    for (uint64_t node : kernel.config_index_to_node()) {
      PutTag(4, 0, &k);
      PutVarint(node, &k);
    }
    if (modules_after_runs) {
      xla::HloModuleProto head = kernel.module(), tail;
      *tail.add_computations() = head.computations(head.computations_size() - 1);
      head.mutable_computations()->RemoveLast();
      PutBytesField(1, head.SerializeAsString(), &k);
      PutBytesField(1, tail.SerializeAsString(), &k);
    }
    PutBytesField(1, k, &out);
  }
  return out;
}

const std::vector<Graph>& RealDumpGraphs() {
  static const std::vector<Graph>* graphs = [] {
    auto loaded = Load(testing::TileDumpPath(), /*stream_tile=*/false);
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    return new std::vector<Graph>(loaded.ok() ? std::move(*loaded) : std::vector<Graph>{});
  }();
  return *graphs;
}

bool Streams(const std::string& bytes) {
  return TryStreamTileDump(bytes, "dump.pb", {}).has_value();
}

TEST(RawTileStream, RealDumpDecodesToTheWholeMessageGraphs) {
  const std::string path = testing::TileDumpPath();
  const std::string bytes = testing::ReadBytes(path);
  auto streamed = TryStreamTileDump(bytes, path, {});
  ASSERT_TRUE(streamed.has_value()) << "the real tile dump must take the wire decoder";
  ASSERT_TRUE(streamed->ok()) << streamed->status().ToString();
  ASSERT_EQ(RealDumpGraphs().size(), 15u);
  int configs = 0;
  for (const Graph& g : RealDumpGraphs()) configs += static_cast<int>(g.num_configs);
  EXPECT_EQ(configs, 752);  // 754 runs, 2 of them errors
  ExpectSameGraphs(**streamed, RealDumpGraphs());

  auto loaded = Load(path, /*stream_tile=*/true);  // what LoadRawDump does by default
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectSameGraphs(*loaded, RealDumpGraphs());
}

// The same messages spelled differently on the wire: the decoder takes them all, and the graphs
// are those of the real dump (the file stem, hence the names, aside).
TEST(RawTileStream, WireSpellingsOfTheSameMessages) {
  const tpu_graphs::TuningData tuning = testing::ParseTileDump();
  const std::string original = tuning.SerializeAsString();
  struct Spelling {
    const char* name;
    std::string bytes;
  };
  const std::vector<Spelling> spellings = {
      {"re-encoded", EncodeDump(tuning, [](const auto& r) { return r.SerializeAsString(); })},
      {"packed bounds",
       EncodeDump(tuning, [](const auto& r) { return RunWithBounds(r, Form::kPacked); })},
      {"unpacked bounds",
       EncodeDump(tuning, [](const auto& r) { return RunWithBounds(r, Form::kUnpacked); })},
      {"split bounds",
       EncodeDump(tuning, [](const auto& r) { return RunWithBounds(r, Form::kSplit); })},
      {"split occurrences", EncodeDump(tuning, SplitRun)},
      {"module after runs, in two occurrences",
       EncodeDump(
           tuning, [](const auto& r) { return r.SerializeAsString(); },
           /*modules_after_runs=*/true)},
  };
  for (const Spelling& s : spellings) {
    SCOPED_TRACE(s.name);
    // protobuf reads the spelling as the very same message.
    tpu_graphs::TuningData reparsed;
    ASSERT_TRUE(reparsed.ParseFromString(s.bytes));
    EXPECT_TRUE(reparsed.SerializeAsString() == original);  // (too long to print)
    EXPECT_TRUE(Streams(s.bytes));
    auto whole = ExpectSameOutcome(s.bytes, s.name);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    ASSERT_EQ(whole->size(), RealDumpGraphs().size());
    for (size_t i = 0; i < whole->size(); ++i) {
      Graph renamed = (*whole)[i];
      renamed.name = RealDumpGraphs()[i].name;
      ExpectSameGraph(renamed, RealDumpGraphs()[i]);
    }
  }
  // The spellings are really different bytes.
  EXPECT_NE(spellings[2].bytes, spellings[1].bytes);
  EXPECT_NE(spellings[3].bytes, spellings[1].bytes);
  EXPECT_NE(spellings[4].bytes, spellings[1].bytes);
}

// Variants of the content that the decoder takes: the same graphs or the same error as the
// whole-message parse.
TEST(RawTileStream, ContentVariantsGiveTheWholeMessageOutcome) {
  const tpu_graphs::TuningData tuning = testing::ParseTileDump();
  ASSERT_EQ(tuning.modules_size(), 15);
  struct Variant {
    std::string name;
    tpu_graphs::TuningData tuning;
    bool ok;
  };
  std::vector<Variant> variants;
  auto add = [&](const std::string& name, bool ok,
                 const std::function<void(tpu_graphs::TuningData*)>& change) {
    Variant v{name, tuning, ok};
    change(&v.tuning);
    variants.push_back(std::move(v));
  };
  add("a run without op_config", true,
      [](tpu_graphs::TuningData* t) { t->mutable_modules(1)->mutable_runs(3)->clear_op_config(); });
  add("an op_config without tile_size_config", true, [](tpu_graphs::TuningData* t) {
    t->mutable_modules(2)->mutable_runs(0)->mutable_op_config()->clear_tile_size_config();
  });
  add("runs without profile, error runs, runtimes 1 and -5", true, [](tpu_graphs::TuningData* t) {
    int changed = 0;
    for (auto& run : *t->mutable_modules(1)->mutable_runs()) {
      if (run.is_default()) continue;
      switch (changed++) {
        case 0:
          run.clear_profile();
          break;
        case 1:
          run.set_error(true);
          break;
        case 2:
          run.mutable_profile()->set_compute_time_ns(1);
          break;
        case 3:
          run.mutable_profile()->set_compute_time_ns(-5);
          break;
      }
    }
  });
  add("the default moved to another run", true, [](tpu_graphs::TuningData* t) {
    auto* runs = t->mutable_modules(3)->mutable_runs();
    for (auto& run : *runs) run.set_is_default(false);
    runs->Mutable(runs->size() - 1)->set_is_default(true);
  });
  add("negative, long and wrapping bounds, kernel extras", true, [](tpu_graphs::TuningData* t) {
    auto* k = t->mutable_modules(8);
    k->set_fingerprint(0xfedcba9876543210u);
    k->add_config_index_to_node(3);
    k->add_config_index_to_node(uint64_t{1} << 40);
    for (int r = 0; r < k->runs_size(); ++r) {
      auto* c = k->mutable_runs(r)->mutable_op_config()->mutable_tile_size_config();
      c->add_kernel_bounds(-3 - r);
      for (int i = 0; i < 9; ++i) c->add_output_bounds(int64_t{1} << (20 + i));  // wraps
      c->add_input_bounds(std::numeric_limits<int64_t>::min());
      c->add_iteration_bounds(r);
    }
  });
  add("the same module name twice", true,
      [](tpu_graphs::TuningData* t) { *t->add_modules() = t->modules(8); });
  add("every kernel skipped", true, [](tpu_graphs::TuningData* t) {
    for (auto& k : *t->mutable_modules()) k.mutable_runs()->DeleteSubrange(1, k.runs_size() - 1);
  });
  add("no valid default run", false, [](tpu_graphs::TuningData* t) {
    for (auto& run : *t->mutable_modules(5)->mutable_runs()) run.set_is_default(false);
  });
  add("a default run that is an error", false, [](tpu_graphs::TuningData* t) {
    for (auto& run : *t->mutable_modules(6)->mutable_runs()) {
      if (run.is_default()) run.set_error(true);
    }
  });
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    const std::string bytes = v.tuning.SerializeAsString();
    auto streamed = TryStreamTileDump(bytes, "dump.pb", {});
    ASSERT_TRUE(streamed.has_value());
    EXPECT_EQ(streamed->ok(), v.ok) << streamed->status().ToString();
    auto whole = ExpectSameOutcome(bytes, v.name);
    EXPECT_EQ(whole.ok(), v.ok) << whole.status().ToString();
  }
}

// Bytes the decoder must leave to the whole-message parse: the outcome, graphs or error, is the
// whole-message parse's.
TEST(RawTileStream, UnusualBytesFallBackToTheWholeMessageParse) {
  const tpu_graphs::TuningData tuning = testing::ParseTileDump();
  const std::string original = tuning.SerializeAsString();
  struct Case {
    std::string name;
    std::string bytes;
  };
  std::vector<Case> cases;
  for (size_t cut : {original.size() - 1, original.size() / 2, size_t{3}}) {
    cases.push_back({"truncated to " + std::to_string(cut) + " bytes", original.substr(0, cut)});
  }
  // The dump with `extra` appended to the bytes of the last run of the last kernel.
  auto with_last_run = [&](const std::string& extra) {
    tpu_graphs::TuningData t = tuning;
    auto* last_kernel = t.mutable_modules(t.modules_size() - 1);
    const std::string last = last_kernel->runs(last_kernel->runs_size() - 1).SerializeAsString();
    last_kernel->mutable_runs()->RemoveLast();
    std::string out;
    for (int i = 0; i < t.modules_size(); ++i) {
      std::string kernel = t.modules(i).SerializeAsString();
      if (i == t.modules_size() - 1) PutBytesField(3, last + extra, &kernel);
      PutBytesField(1, kernel, &out);
    }
    return out;
  };
  // Nothing appended: the dump as it is, which the decoder takes.
  ASSERT_EQ(with_last_run(""), original);
  ASSERT_TRUE(Streams(original));
  {
    std::string extra;
    PutTag(9, 0, &extra);  // no such field: protobuf keeps it as an unknown field
    PutVarint(7, &extra);
    cases.push_back({"unknown run field", with_last_run(extra)});
  }
  {
    std::string extra;
    PutBytesField(2, "", &extra);  // a module_config: switches the oneof away from op_config
    cases.push_back({"module_config after op_config", with_last_run(extra)});
  }
  {
    std::string extra;
    PutTag(4, 0, &extra);  // profile with the wire type of a varint: an unknown field
    PutVarint(1, &extra);
    cases.push_back({"profile as a varint", with_last_run(extra)});
  }
  {
    // is_default = 1 with its tag spelled in 6 bytes: protobuf reads tags of at most 5.
    const std::string extra("\xa8\x80\x80\x80\x80\x00\x01", 7);
    cases.push_back({"six-byte tag", with_last_run(extra)});
  }
  {
    // An empty profile whose length is spelled in 6 bytes: protobuf reads at most 5.
    const std::string extra("\x22\x80\x80\x80\x80\x80\x00", 7);
    cases.push_back({"six-byte length", with_last_run(extra)});
  }
  {
    std::string extra;
    std::string config;
    PutTag(1, 0, &config);
    config.append(11, '\xff');  // a varint longer than 10 bytes
    std::string op;
    PutBytesField(1, config, &op);
    PutBytesField(1, op, &extra);
    cases.push_back({"11-byte varint in the bounds", with_last_run(extra)});
  }
  {
    std::string extra, config, op;
    config.append("\x0a\x02\x05\x85", 4);  // packed kernel_bounds whose last varint runs over
    config.append("\x01", 1);
    PutBytesField(1, config, &op);
    PutBytesField(1, op, &extra);
    cases.push_back({"packed varint past its length", with_last_run(extra)});
  }
  {
    std::string bytes = original;
    PutTag(2, 0, &bytes);  // a top-level field TuningData does not have
    PutVarint(1, &bytes);
    cases.push_back({"unknown top-level field", bytes});
  }
  {
    tpu_graphs::TuningData t = tuning;
    t.mutable_modules(4)->clear_module();
    cases.push_back({"a kernel without module", t.SerializeAsString()});
  }
  {
    std::string bytes;
    PutBytesField(1, "", &bytes);
    cases.push_back({"one empty kernel", bytes});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_FALSE(Streams(c.bytes));
    static_cast<void>(ExpectSameOutcome(c.bytes, c.name));
  }
  // Truncation is an error, worded by the whole-message parse.
  tpugraphs::testing::TempDir dir;
  testing::WriteBytes(dir.File("cut.pb"), cases[0].bytes);
  auto loaded = LoadRawDump(dir.File("cut.pb"), {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("not a raw XLA dump"), std::string::npos)
      << loaded.status().ToString();
}

// protobuf refuses messages nested deeper than its recursion limit (100): the module inside a
// TuningData is 2 deep, so it gets 2 levels less than it would parsed alone. Tuple shapes nested
// ever deeper in one instruction cross that limit; decoder and whole parse cross it together.
TEST(RawTileStream, RecursionLimitOfTheModule) {
  const tpu_graphs::TuningData tuning = testing::ParseTileDump();
  int accepted = 0, refused = 0;
  for (int depth = 90; depth <= 100; ++depth) {
    SCOPED_TRACE(depth);
    tpu_graphs::TuningData t = tuning;
    auto* shape = t.mutable_modules(8)
                      ->mutable_module()
                      ->mutable_computations(0)
                      ->mutable_instructions(0)
                      ->mutable_shape();
    for (int d = 0; d < depth; ++d) shape = shape->add_tuple_shapes();
    shape->set_element_type(xla::F32);
    const std::string bytes = t.SerializeAsString();
    tpu_graphs::TuningData reparsed;
    const bool protobuf_parses = reparsed.ParseFromString(bytes);
    EXPECT_EQ(Streams(bytes), protobuf_parses);
    static_cast<void>(ExpectSameOutcome(bytes, "depth " + std::to_string(depth)));
    (protobuf_parses ? accepted : refused) += 1;
  }
  // The range covers the limit.
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace tpugraphs::ingest
