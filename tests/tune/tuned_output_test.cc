// RewriteHloLayouts (what `tpugraphs tune --emit-hlo` writes): the chosen layouts go into the
// instructions' shapes and the module header's entry_computation_layout follows the entry
// parameters' and result's new layouts; everything else stays byte-identical, and ingesting the
// emitted text gives back the chosen configuration as its default.
#include "tpugraphs/tune/tuned_output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/ingest/layout_candidates.h"
#include "tpugraphs/ingest/load_graphs.h"
#include "tpugraphs/tune/search_space.h"

namespace tpugraphs::tune {
namespace {

using ::testing::HasSubstr;
using tpugraphs::testing::TempDir;

// Parameter 0 is a tuple (nested parentheses and commas in the header), parameter 1 an array
// with tiles; p, w and the root d are the space's three variables (each {1,0} or {0,1}).
constexpr char kBody[] = R"(
ENTRY main (t: (f32[2,3], s32[]), p: f32[8,128], w: f32[128,16]) -> f32[8,16] {
  t = (f32[2,3]{1,0}, s32[]) parameter(0)
  p = f32[8,128]{1,0:T(8,128)} parameter(1)
  w = f32[128,16]{1,0} parameter(2)
  ROOT d = f32[8,16]{1,0} dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
)";
constexpr char kHeader[] =
    "HloModule m, is_scheduled=true, entry_computation_layout={((f32[2,3]{1,0}, s32[]), "
    "f32[8,128]{1,0:T(8,128)}, f32[128,16]{1,0})->f32[8,16]{1,0}}, "
    "frontend_attributes={note=\"a,b)->{\"}";

// A module loaded as `tune` loads it, with its layout space.
struct Loaded {
  ingest::LoadedGraphs in;
  std::unique_ptr<SearchSpace> space;
};

Loaded Load(const TempDir& dir, const std::string& name, const std::string& text) {
  Loaded l;
  const std::string path = dir.File(name);
  EXPECT_TRUE(WriteFileAtomically(path, text).ok());
  auto in = ingest::LoadGraphs(path, {});
  EXPECT_TRUE(in.ok()) << in.status().ToString();
  if (!in.ok()) return l;
  l.in = std::move(*in);
  EXPECT_TRUE(l.in.hlo_text);
  EXPECT_EQ(l.in.graphs.size(), 1u);
  if (l.in.graphs.size() != 1) return l;
  auto space = SearchSpace::FromModule(l.in.graphs[0], l.in.module, path);
  EXPECT_TRUE(space.ok()) << space.status().ToString();
  if (space.ok()) l.space = std::make_unique<SearchSpace>(std::move(*space));
  return l;
}

// `c` with the variable that stands for instruction `name` set to `m2m`.
Config SetLayout(const Loaded& l, Config c, const std::string& name,
                 const std::vector<int64_t>& m2m) {
  const auto& vars = l.space->variables();
  for (size_t v = 0; v < vars.size(); ++v) {
    if (ingest::InstructionNamesOfNodes(l.in.module, {vars[v].array_node})[0] != name) continue;
    for (const auto& s : vars[v].slots) {
      int8_t* b = c.layout.data() + s.node * kLayoutConfigFeatureCount + s.tensor * 6;
      for (size_t d = 0; d < 6; ++d) b[d] = d < m2m.size() ? static_cast<int8_t>(m2m[d]) : -1;
    }
    EXPECT_EQ(l.space->Get(c, v), m2m);
    EXPECT_TRUE(l.space->Check(c).ok()) << l.space->Check(c).ToString();
    return c;
  }
  ADD_FAILURE() << "no variable for instruction " << name;
  return c;
}

// The shape text of instruction `name` ("  name = SHAPE opcode(...").
std::string InstructionShape(const std::string& text, const std::string& name) {
  const std::string key = " " + name + " = ";
  const size_t at = text.find(key);
  if (at == std::string::npos) return "";
  const size_t b = at + key.size();
  const size_t e = text.find(' ', text.find(']', b));
  return text.substr(b, e - b);
}

// The parameter shapes and the result shape of the header's entry_computation_layout, split at
// the commas at bracket depth 0 (an independent reading for the test).
std::vector<std::string> EntryLayoutShapes(const std::string& text) {
  const std::string key = "entry_computation_layout={(";
  size_t i = text.find(key);
  if (i == std::string::npos || i > text.find('\n')) return {};
  i += key.size();
  std::vector<std::string> shapes(1);
  int depth = 0;
  for (; i < text.size(); ++i) {
    const char ch = text[i];
    if (depth == 0 && ch == ')') break;
    if (depth == 0 && ch == ',') {
      shapes.emplace_back();
      ++i;  // ", "
      continue;
    }
    if (ch == '(' || ch == '[' || ch == '{') ++depth;
    if (ch == ')' || ch == ']' || ch == '}') --depth;
    shapes.back().push_back(ch);
  }
  const size_t r = i + 3;  // ")->"
  shapes.push_back(text.substr(r, text.find("}, ", r) - r));
  return shapes;
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

TEST(RewriteHloLayoutsTest, EntryParameterLayoutGoesIntoTheHeaderAndRoundTrips) {
  TempDir dir;
  const std::string text = std::string(kHeader) + "\n" + kBody;
  const Loaded l = Load(dir, "m.hlo", text);
  ASSERT_NE(l.space, nullptr);
  ASSERT_EQ(l.space->variables().size(), 3u);
  const Config c = SetLayout(l, l.space->base(), "p", {0, 1});
  auto out = RewriteHloLayouts(l.in.text, dir.File("m.hlo"), l.in.module, l.in.spans, *l.space, c);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(InstructionShape(*out, "p"), "f32[8,128]{0,1:T(8,128)}");
  const auto before = EntryLayoutShapes(text);
  const auto after = EntryLayoutShapes(*out);
  ASSERT_EQ(before.size(), 4u);
  ASSERT_EQ(after.size(), 4u);
  EXPECT_EQ(before[0], "(f32[2,3]{1,0}, s32[])");
  EXPECT_EQ(after[1], InstructionShape(*out, "p"));  // the header agrees with the instruction
  EXPECT_EQ(after[0], before[0]);                    // the tuple parameter, unchanged
  EXPECT_EQ(after[2], before[2]);
  EXPECT_EQ(after[3], before[3]);
  // Exactly that shape changed in the header; the body changed in p's line only.
  std::string want_header = FirstLine(text);
  want_header.replace(want_header.find("f32[8,128]{1,0:"), 15, "f32[8,128]{0,1:");
  EXPECT_EQ(FirstLine(*out), want_header);
  std::string want = text;
  want.replace(want.find("f32[8,128]{1,0:"), 15, "f32[8,128]{0,1:");
  want.replace(want.find("f32[8,128]{1,0:"), 15, "f32[8,128]{0,1:");
  EXPECT_EQ(*out, want);
  // Round trip: the emitted module's own layouts are the chosen configuration.
  const Loaded back = Load(dir, "back.hlo", *out);
  ASSERT_NE(back.space, nullptr);
  EXPECT_EQ(back.in.graphs[0].node_config_ids, l.in.graphs[0].node_config_ids);
  EXPECT_EQ(back.space->base().layout, c.layout);
  EXPECT_NE(c.layout, l.space->base().layout);
}

TEST(RewriteHloLayoutsTest, RootLayoutGoesIntoTheHeaderResult) {
  TempDir dir;
  const std::string text = std::string(kHeader) + "\n" + kBody;
  const Loaded l = Load(dir, "m.hlo", text);
  ASSERT_NE(l.space, nullptr);
  Config c = SetLayout(l, l.space->base(), "d", {0, 1});
  c = SetLayout(l, c, "w", {0, 1});
  auto out = RewriteHloLayouts(l.in.text, dir.File("m.hlo"), l.in.module, l.in.spans, *l.space, c);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto before = EntryLayoutShapes(text);
  const auto after = EntryLayoutShapes(*out);
  ASSERT_EQ(after.size(), 4u);
  EXPECT_EQ(after[0], before[0]);
  EXPECT_EQ(after[1], before[1]);  // p keeps its layout: byte-identical
  EXPECT_EQ(after[2], "f32[128,16]{0,1}");
  EXPECT_EQ(after[2], InstructionShape(*out, "w"));
  EXPECT_EQ(after[3], "f32[8,16]{0,1}");
  EXPECT_EQ(after[3], InstructionShape(*out, "d"));
  // The rest of the header, the attribute after it included, is unchanged.
  EXPECT_THAT(FirstLine(*out), HasSubstr("}, frontend_attributes={note=\"a,b)->{\"}"));
  EXPECT_EQ(FirstLine(*out).size(), FirstLine(text).size());
  const Loaded back = Load(dir, "back.hlo", *out);
  ASSERT_NE(back.space, nullptr);
  EXPECT_EQ(back.space->base().layout, c.layout);
  // The default configuration leaves the whole text as it was.
  auto same = RewriteHloLayouts(l.in.text, dir.File("m.hlo"), l.in.module, l.in.spans, *l.space,
                                l.space->base());
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(*same, text);
}

TEST(RewriteHloLayoutsTest, ModuleWithoutEntryComputationLayout) {
  TempDir dir;
  const std::string text = std::string("HloModule m, is_scheduled=true\n") + kBody;
  const Loaded l = Load(dir, "m.hlo", text);
  ASSERT_NE(l.space, nullptr);
  Config c = SetLayout(l, l.space->base(), "p", {0, 1});
  c = SetLayout(l, c, "d", {0, 1});
  auto out = RewriteHloLayouts(l.in.text, dir.File("m.hlo"), l.in.module, l.in.spans, *l.space, c);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(FirstLine(*out), "HloModule m, is_scheduled=true");
  EXPECT_EQ(InstructionShape(*out, "p"), "f32[8,128]{0,1:T(8,128)}");
  EXPECT_EQ(InstructionShape(*out, "d"), "f32[8,16]{0,1}");
  const Loaded back = Load(dir, "back.hlo", *out);
  ASSERT_NE(back.space, nullptr);
  EXPECT_EQ(back.space->base().layout, c.layout);
  // A bare header, no attributes at all.
  const std::string bare = std::string("HloModule m\n") + kBody;
  const Loaded lb = Load(dir, "bare.hlo", bare);
  ASSERT_NE(lb.space, nullptr);
  auto outb = RewriteHloLayouts(lb.in.text, dir.File("bare.hlo"), lb.in.module, lb.in.spans,
                                *lb.space, SetLayout(lb, lb.space->base(), "p", {0, 1}));
  ASSERT_TRUE(outb.ok()) << outb.status().ToString();
  EXPECT_EQ(FirstLine(*outb), "HloModule m");
  EXPECT_EQ(InstructionShape(*outb, "p"), "f32[8,128]{0,1:T(8,128)}");
}

// The older text style writes operand shapes inline ("dot(f32[20,30]{1,0} %a, ...)"). Each is
// rewritten once, the scan moves forward (a rewrite that rescanned the same name never ended:
// the watchdog turns such a hang into a failure), a longer name that starts with a variable's
// name is left alone, and tiles after ':' are kept.
TEST(RewriteHloLayoutsTest, InlineOperandShapesAreRewrittenOnceMovingForward) {
  TempDir dir;
  const std::string text =
      "HloModule old\n\n"
      "ENTRY %old (a: f32[20,30], b: f32[30,30]) -> f32[20,30] {\n"
      "  %a = f32[20,30]{1,0:T(8,128)} parameter(0)\n"
      "  %b = f32[30,30]{1,0} parameter(1)\n"
      "  %ab = f32[20,30]{1,0} copy(f32[20,30]{1,0:T(8,128)} %a)\n"
      "  %dot.1 = f32[20,30]{1,0} dot(f32[20,30]{1,0:T(8,128)} %a, f32[30,30]{1,0} %b), "
      "lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name=\"f32[2]{0} %a\"}\n"
      "  %add.2 = f32[20,30]{1,0} add(f32[20,30]{1,0:T(8,128)} %a, f32[20,30]{1,0} %ab)\n"
      "  ROOT %dot.3 = f32[20,30]{1,0} dot(f32[20,30]{1,0} %add.2, f32[30,30]{1,0} %b), "
      "lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n";
  const Loaded l = Load(dir, "old.hlo", text);
  ASSERT_NE(l.space, nullptr);
  Config c = SetLayout(l, l.space->base(), "a", {0, 1});
  c = SetLayout(l, c, "b", {0, 1});
  testing::Watchdog watchdog(60, "RewriteHloLayouts on an older-style module");
  auto out =
      RewriteHloLayouts(l.in.text, dir.File("old.hlo"), l.in.module, l.in.spans, *l.space, c);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::string want = text;
  for (size_t at = want.find("{1,0:T(8,128)}"); at != std::string::npos;
       at = want.find("{1,0:T(8,128)}", at + 1)) {
    want.replace(at, 4, "{0,1");
  }
  for (size_t at = want.find("f32[30,30]{1,0}"); at != std::string::npos;
       at = want.find("f32[30,30]{1,0}", at + 1)) {
    want.replace(at, 15, "f32[30,30]{0,1}");
  }
  EXPECT_EQ(*out, want);
  // The string attribute that looks like an operand is not touched; %ab keeps its layout.
  EXPECT_THAT(*out, HasSubstr("metadata={op_name=\"f32[2]{0} %a\"}"));
  EXPECT_THAT(*out, HasSubstr("  %ab = f32[20,30]{1,0} copy("));
  const Loaded back = Load(dir, "back.hlo", *out);
  ASSERT_NE(back.space, nullptr);
  EXPECT_EQ(back.space->base().layout, c.layout);
}

// Today's XLA prints "/*index=N*/" before every fifth element of a long tuple, in the header's
// entry_computation_layout too; layouts there may carry tiles and a memory space, and parameters
// may be nested tuples. Parameter 5 of such a header follows its instruction's new layout.
TEST(RewriteHloLayoutsTest, HeaderWithIndexCommentsNestedTuplesAndMemorySpaces) {
  TempDir dir;
  const std::string header =
      "HloModule idx, entry_computation_layout={(f32[2]{0}, f32[2]{0}, (f32[2]{0}, (s32[], "
      "f32[3,3]{1,0})), f32[2]{0},f32[2]{0}, /*index=5*/f32[8,128]{1,0:T(8,128)S(1)}, "
      "f32[128,16]{1,0})->(f32[8,16]{1,0}, f32[2]{0})}, num_partitions=1";
  const std::string body =
      "\n\nENTRY main {\n"
      "  p0 = f32[2]{0} parameter(0)\n"
      "  p1 = f32[2]{0} parameter(1)\n"
      "  p2 = (f32[2]{0}, (s32[], f32[3,3]{1,0})) parameter(2)\n"
      "  p3 = f32[2]{0} parameter(3)\n"
      "  p4 = f32[2]{0} parameter(4)\n"
      "  p5 = f32[8,128]{1,0:T(8,128)S(1)} parameter(5)\n"
      "  p6 = f32[128,16]{1,0} parameter(6)\n"
      "  d = f32[8,16]{1,0} dot(p5, p6), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  ROOT t = (f32[8,16]{1,0}, f32[2]{0}) tuple(d, p0)\n"
      "}\n";
  const std::string text = header + body;
  const Loaded l = Load(dir, "idx.hlo", text);
  ASSERT_NE(l.space, nullptr);
  Config c = SetLayout(l, l.space->base(), "p5", {0, 1});
  c = SetLayout(l, c, "p6", {0, 1});
  auto out =
      RewriteHloLayouts(l.in.text, dir.File("idx.hlo"), l.in.module, l.in.spans, *l.space, c);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  std::string want = text;
  want.replace(want.find("/*index=5*/f32[8,128]{1,0:"), 26, "/*index=5*/f32[8,128]{0,1:");
  want.replace(want.find("f32[128,16]{1,0})->"), 19, "f32[128,16]{0,1})->");
  want.replace(want.find("p5 = f32[8,128]{1,0:"), 20, "p5 = f32[8,128]{0,1:");
  want.replace(want.find("p6 = f32[128,16]{1,0}"), 21, "p6 = f32[128,16]{0,1}");
  EXPECT_EQ(*out, want);
  const Loaded back = Load(dir, "back.hlo", *out);
  ASSERT_NE(back.space, nullptr);
  EXPECT_EQ(back.space->base().layout, c.layout);
}

// A module of many thousand instructions in the older style, each line naming variables inline:
// the rewrite reads the text once (a search per instruction over the whole output was quadratic
// and, with the rescan, never ended). Bounded by the watchdog, not timed.
TEST(RewriteHloLayoutsTest, LargeOlderStyleModuleFinishes) {
  TempDir dir;
  std::string text =
      "HloModule big\n\nENTRY %big (a: f32[16,16], b: f32[16,16]) -> f32[16,16] {\n"
      "  %a = f32[16,16]{1,0} parameter(0)\n  %b = f32[16,16]{1,0} parameter(1)\n";
  std::string prev = "%a";
  for (int i = 0; i < 4000; ++i) {
    const std::string d = "%dot." + std::to_string(i);
    text += "  " + d + " = f32[16,16]{1,0} dot(f32[16,16]{1,0} " + prev +
            ", f32[16,16]{1,0} %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n";
    prev = d;
  }
  text += "  ROOT %r = f32[16,16]{1,0} add(f32[16,16]{1,0} " + prev + ", f32[16,16]{1,0} %a)\n}\n";
  const Loaded l = Load(dir, "big.hlo", text);
  ASSERT_NE(l.space, nullptr);
  Rng rng(7);
  const Config c = l.space->Random(rng);
  testing::Watchdog watchdog(120, "RewriteHloLayouts on a 4,000-instruction module");
  auto out =
      RewriteHloLayouts(l.in.text, dir.File("big.hlo"), l.in.module, l.in.spans, *l.space, c);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Loaded back = Load(dir, "back.hlo", *out);
  ASSERT_NE(back.space, nullptr);
  EXPECT_EQ(back.space->base().layout, c.layout);
}

TEST(RewriteHloLayoutsTest, HeaderThatDoesNotFitIsAClearError) {
  TempDir dir;
  struct Case {
    std::string layout, error;
  };
  const Case cases[] = {
      {"{f32[8,128]{1,0}}", "expected {(parameter shapes)->result shape}"},
      {"{((f32[2,3]{1,0}, s32[]), f32[8,128]{1,0}, f32[128,16]{1,0}) f32[8,16]{1,0}}",
       "expected '->' after the parameter shapes"},
      {"{((f32[2,3]{1,0}, s32[]), f32[8,128]{1,0}, f32[128,16]{1,0})->}", "no result shape"},
      {"{((f32[2,3]{1,0}, s32[]), , f32[128,16]{1,0})->f32[8,16]{1,0}}",
       "an empty parameter shape"},
      {"{((f32[2,3]{1,0}, s32[]))->f32[8,16]{1,0}}",
       "has 1 parameter shapes, no shape for parameter 1 (instruction p)"},
      {"{((f32[2,3]{1,0}, s32[]), f32[8,64]{1,0}, f32[128,16]{1,0})->f32[8,16]{1,0}}",
       "does not match instruction p (f32[8,128])"},
      {"{((f32[2,3]{1,0}, s32[]), (f32[8,128]{1,0}), f32[128,16]{1,0})->f32[8,16]{1,0}}",
       "is not an array shape like instruction p's f32[8,128]"},
      {"{((f32[2,3]{1,0}, s32[]), f32[8,128]{1,0}x, f32[128,16]{1,0})->f32[8,16]{1,0}}",
       "is not a well-formed array shape"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.layout);
    const std::string text =
        "HloModule m, entry_computation_layout=" + k.layout + "\n" + std::string(kBody);
    const Loaded l = Load(dir, "bad.hlo", text);
    ASSERT_NE(l.space, nullptr);
    auto out = RewriteHloLayouts(l.in.text, dir.File("bad.hlo"), l.in.module, l.in.spans, *l.space,
                                 SetLayout(l, l.space->base(), "p", {0, 1}));
    ASSERT_FALSE(out.ok());
    EXPECT_THAT(out.status().message(), HasSubstr(dir.File("bad.hlo") + ": "));
    EXPECT_THAT(out.status().message(), HasSubstr("entry_computation_layout"));
    EXPECT_THAT(out.status().message(), HasSubstr(k.error));
  }
}

}  // namespace
}  // namespace tpugraphs::tune
