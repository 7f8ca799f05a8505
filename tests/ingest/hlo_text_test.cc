// HLO text ingest: the two real text modules against an independent count of the file (Python),
// feature rows checked by hand, the U-Net round trip (proto -> printed text -> parsed -> same
// graph arrays), the grammar pieces, and hostile input.
#include "tpugraphs/ingest/hlo_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "ingest/raw_test_util.h"
#include "testing/hlo_text_printer.h"
#include "tpugraphs/ingest/feature_names.h"
#include "tpugraphs/ingest/hlo_graph.h"
#include "tpugraphs/ingest/ingest.h"
#include "tpugraphs/ingest/opcodes.h"
#include "tpugraphs/ingest/raw_dump.h"

namespace tpugraphs::ingest {
namespace {

using ::testing::HasSubstr;
using tpugraphs::testing::HloTextStyle;
using tpugraphs::testing::PrintHloText;
using tpugraphs::testing::RealDataPath;
using tpugraphs::testing::RunPython;
using tpugraphs::testing::TempDir;

std::string CurrentStylePath() {
  return RealDataPath("hlo_text/openxla_cpu_benchmark_graphsage_tf.hlo");
}
std::string OlderStylePath() {
  return RealDataPath("hlo_text/pt_neuron_SyncTensorsGraph.21.hlo.txt");
}

// Counts instructions, opcodes, edges (distinct operands + called computations) and the
// node_splits rule straight from the text, with nothing shared with the C++ parser.
constexpr const char* kCountScript = R"PY(
import re, sys
text = re.sub(r'/\*.*?\*/', '', open(sys.argv[1]).read(), flags=re.S)

def close(s, i):  # index of the bracket closing the one at s[i]
    depth, q, j = 0, False, i
    while j < len(s):
        c = s[j]
        if q:
            if c == '\\': j += 1
            elif c == '"': q = False
        elif c == '"': q = True
        elif c in '({[': depth += 1
        elif c in ')}]':
            depth -= 1
            if depth == 0: return j
        j += 1
    raise ValueError(s)

def split_top(s):
    parts, depth, cur, q, i = [], 0, '', False, 0
    while i < len(s):
        c = s[i]
        if q:
            if c == '\\': cur += c; i += 1; c = s[i]
            elif c == '"': q = False
        elif c == '"': q = True
        elif c in '({[': depth += 1
        elif c in ')}]': depth -= 1
        elif c == ',' and depth == 0:
            parts.append(cur.strip()); cur = ''; i += 1; continue
        cur += c; i += 1
    parts.append(cur.strip())
    return [p for p in parts if p]

comps, cur = [], None
for line in text.split('\n'):
    s = line.strip()
    if cur is None:
        m = re.match(r'^(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*\)\s*->.*)?\{$', s)
        if m and not s.startswith('HloModule'):
            cur = (m.group(2), []); comps.append(cur)
        continue
    if s == '}': cur = None; continue
    if s: cur[1].append(s)

ops, edges = {}, 0
for name, instrs in comps:
    for s in instrs:
        m = re.match(r'^(ROOT\s+)?%?([\w.\-]+)\s*=\s*', s)
        rest = s[m.end():]
        if rest.startswith('('):
            rest = rest[close(rest, 0) + 1:]
        else:
            rest = rest[re.match(r'[a-z0-9]+\[[^\]]*\](\{[^}]*\})?', rest).end():]
        rest = rest.lstrip()
        m = re.match(r'([a-z][a-z0-9\-]*)\(', rest)
        opcode = m.group(1)
        ops[opcode] = ops.get(opcode, 0) + 1
        j = close(rest, m.end() - 1)
        inner, attrs = rest[m.end():j], rest[j + 1:]
        operands = set()
        if opcode not in ('parameter', 'constant'):
            operands = {p.split()[-1].lstrip('%') for p in split_top(inner)}
        called = 0
        for a in split_top(attrs):
            k, _, v = a.partition('=')
            k = k.strip()
            if k in ('to_apply', 'calls', 'body', 'condition', 'true_computation',
                     'false_computation', 'select', 'scatter'):
                called += 1
            elif k in ('branch_computations', 'called_computations'):
                called += len(split_top(v.strip()[1:-1]))
        edges += len(operands) + called

splits, count = [0], 0
for name, instrs in comps:
    count += len(instrs)
    if 'cluster' in name or 'while' in name or 'cond' in name: splits.append(count)
if splits[-1] < count: splits.append(count)
print('nodes', count)
print('edges', edges)
print('splits', *splits)
for k in sorted(ops): print('op', k, ops[k])
)PY";

struct Counts {
  int64_t nodes = -1, edges = -1;
  std::vector<int64_t> splits;
  std::map<std::string, int64_t> opcodes;
};

Counts CountWithPython(const std::string& path) {
  auto r = RunPython(kCountScript, {path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Counts c;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "nodes") ls >> c.nodes;
    if (key == "edges") ls >> c.edges;
    if (key == "splits") {
      int64_t v;
      while (ls >> v) c.splits.push_back(v);
    }
    if (key == "op") {
      std::string name;
      int64_t n;
      ls >> name >> n;
      c.opcodes[name] = n;
    }
  }
  return c;
}

Graph LoadTextGraph(const std::string& path) {
  auto graphs = LoadRawDump(path, RawDumpOptions());
  EXPECT_TRUE(graphs.ok()) << graphs.status().ToString();
  if (!graphs.ok() || graphs->size() != 1) return Graph();
  return std::move((*graphs)[0]);
}

void ExpectMatchesIndependentCount(const std::string& path, int64_t expected_nodes) {
  const Counts c = CountWithPython(path);
  ASSERT_EQ(c.nodes, expected_nodes) << "the Python count itself";
  const Graph g = LoadTextGraph(path);
  EXPECT_EQ(g.num_nodes(), c.nodes);
  EXPECT_EQ(g.num_edges(), c.edges);
  EXPECT_EQ(g.node_splits, c.splits);
  // Configuration 0 (the stated layouts) when there is a configurable node: every dot,
  // convolution and reshape (layout_candidates_test.cc checks its values).
  int64_t configurable = 0;
  for (const char* op : {"dot", "convolution", "reshape"}) {
    if (c.opcodes.count(op)) configurable += c.opcodes.at(op);
  }
  EXPECT_EQ(g.num_config_nodes(), configurable);
  EXPECT_EQ(g.num_configs, configurable > 0 ? 1 : 0);
  std::map<std::string, int64_t> hist;
  for (uint8_t id : g.node_opcode) ++hist[std::string(OpcodeName(id))];
  EXPECT_EQ(hist, c.opcodes);
}

// The shape spans the parser reports (what tune --emit-hlo rewrites) are exactly the shapes it
// read: each instruction's own shape and each operand shape written inline, never text inside a
// string or comment. Two instructions on one line and a string that runs over a line break with
// a definition-like text inside are read as the parser reads them.
TEST(HloText, ShapeSpansAreTheShapesTheParserRead) {
  const std::string text =
      "HloModule m\n\n"
      "ENTRY %m (a: f32[2,3], b: f32[3,4]) -> f32[2,4] {\n"
      "  %a = f32[2,3]{1,0} parameter(0), metadata={op_name=\"x\n"
      "  %fake = f32[9,9]{1,0} parameter(7)\"}  %b = f32[3,4]{0,1:T(8,128)} parameter(1)\n"
      "  ROOT %d = f32[2,4]{1,0} dot(f32[2,3]{1,0} %a, /*index=1*/f32[3,4]{0,1:T(8,128)} %b), "
      "lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n";
  xla::HloModuleProto module;
  ingest::HloTextShapeSpans spans;
  ASSERT_TRUE(ingest::ParseHloText(text, "m.hlo", &module, nullptr, {}, &spans).ok());
  ASSERT_EQ(module.computations_size(), 1);
  const auto& insts = module.computations(0).instructions();
  ASSERT_EQ(insts.size(), 3);  // a, b, d: %fake is inside a string
  std::map<int64_t, std::string> name_of;
  for (const auto& inst : insts) name_of[inst.id()] = inst.name();
  auto at = [&](const ingest::HloShapeSpan& s) {
    return name_of[s.instruction_id] + " " + text.substr(s.begin, s.end - s.begin);
  };
  ASSERT_EQ(spans.definitions.size(), 3u);
  EXPECT_EQ(at(spans.definitions[0]), "a f32[2,3]{1,0}");
  EXPECT_EQ(at(spans.definitions[1]), "b f32[3,4]{0,1:T(8,128)}");
  EXPECT_EQ(at(spans.definitions[2]), "d f32[2,4]{1,0}");
  ASSERT_EQ(spans.operands.size(), 2u);
  EXPECT_EQ(at(spans.operands[0]), "a f32[2,3]{1,0}");
  EXPECT_EQ(at(spans.operands[1]), "b f32[3,4]{0,1:T(8,128)}");
  // Without spans asked for, the same module.
  xla::HloModuleProto again;
  ASSERT_TRUE(ingest::ParseHloText(text, "m.hlo", &again).ok());
  EXPECT_EQ(again.SerializeAsString(), module.SerializeAsString());
}

TEST(HloText, DetectedFromContent) {
  auto bytes = testing::ReadBytes(CurrentStylePath());
  auto kind = DetectRawDumpKind(bytes, "x");
  ASSERT_TRUE(kind.ok()) << kind.status().ToString();
  EXPECT_EQ(*kind, RawDumpKind::kHloText);
  EXPECT_TRUE(LooksLikeHloText("// comment\n/* c */ HloModule m\n"));
  EXPECT_FALSE(LooksLikeHloText("HloModulex"));
  EXPECT_TRUE(LooksLikeHloText("HloModule\nm"));  // a line break after the keyword
  EXPECT_FALSE(LooksLikeHloText(testing::ReadBytes(testing::LayoutDumpPath())));
}

TEST(HloText, CurrentStyleFileMatchesIndependentCount) {
  ExpectMatchesIndependentCount(CurrentStylePath(), 138);
}

TEST(HloText, OlderStyleFileMatchesIndependentCount) {
  ExpectMatchesIndependentCount(OlderStylePath(), 8);
}

// Index of an instruction's node: text order, computations in order.
int64_t NodeOf(const std::string& path, const std::string& name) {
  xla::HloModuleProto m;
  EXPECT_TRUE(ParseHloText(testing::ReadBytes(path), path, &m).ok());
  int64_t i = 0;
  for (const auto& c : m.computations()) {
    for (const auto& inst : c.instructions()) {
      if (inst.name() == name) return i;
      ++i;
    }
  }
  ADD_FAILURE() << name;
  return -1;
}

float Feat(const Graph& g, int64_t node, const std::string& column) {
  const auto& names = NodeFeatureNames();
  const auto it = std::find(names.begin(), names.end(), column);
  EXPECT_NE(it, names.end()) << column;
  return g.node_feat[static_cast<size_t>(node) * kNodeFeatureCount + (it - names.begin())];
}

TEST(HloText, FeatureRowsByHandCurrentStyle) {
  const Graph g = LoadTextGraph(CurrentStylePath());
  // %Slice.1 = s32[10,25]{1,0} slice(%transpose_1.1), slice={[0:10], [0:25]}
  const int64_t s = NodeOf(CurrentStylePath(), "Slice.1");
  EXPECT_EQ(g.node_opcode[s], OpcodeId("slice"));
  EXPECT_EQ(Feat(g, s, "is_root"), 0);
  EXPECT_EQ(Feat(g, s, "shape_element_type_is_s32"), 1);
  EXPECT_EQ(Feat(g, s, "shape_element_type_is_f32"), 0);
  EXPECT_EQ(Feat(g, s, "shape_dimensions_0"), 10);
  EXPECT_EQ(Feat(g, s, "shape_dimensions_1"), 25);
  EXPECT_EQ(Feat(g, s, "shape_dimensions_sum"), 35);
  EXPECT_EQ(Feat(g, s, "shape_dimensions_product"), 250);
  EXPECT_EQ(Feat(g, s, "slice_dims_limit_0"), 10);
  EXPECT_EQ(Feat(g, s, "slice_dims_limit_1"), 25);
  EXPECT_EQ(Feat(g, s, "slice_dims_limit_product"), 250);
  EXPECT_EQ(Feat(g, s, "slice_dims_stride_sum"), 2);
  EXPECT_EQ(Feat(g, s, "layout_minor_to_major_0"), 1);
  EXPECT_EQ(Feat(g, s, "layout_minor_to_major_1"), 0);
  // %transpose_1.1 = s32[10,128]{0,1} transpose(%reshape.4), dimensions={1,0}
  const int64_t t = NodeOf(CurrentStylePath(), "transpose_1.1");
  EXPECT_EQ(Feat(g, t, "dimensions_0"), 1);
  EXPECT_EQ(Feat(g, t, "dimensions_1"), 0);
  EXPECT_EQ(Feat(g, t, "layout_minor_to_major_0"), 0);
  EXPECT_EQ(Feat(g, t, "layout_minor_to_major_1"), 1);
  // ROOT %XLA_Retvals.5 = f32[1,121]{1,0} get-tuple-element(%XLA_Retvals.4), index=0
  const int64_t r = NodeOf(CurrentStylePath(), "XLA_Retvals.5");
  EXPECT_EQ(r, g.num_nodes() - 1);
  EXPECT_EQ(Feat(g, r, "is_root"), 1);
  EXPECT_EQ(Feat(g, r, "shape_element_type_is_f32"), 1);
  EXPECT_EQ(Feat(g, r, "shape_dimensions_product"), 121);
  // %arg2.1 = s32[1]{0} parameter(2), parameter_replication={false}, metadata={...}
  EXPECT_EQ(Feat(g, NodeOf(CurrentStylePath(), "arg2.1"), "parameter_number"), 2);
}

TEST(HloText, FeatureRowsByHandOlderStyle) {
  const Graph g = LoadTextGraph(OlderStylePath());
  EXPECT_EQ(g.name, "SyncTensorsGraph.21");
  // %dot.17 = f32[20,30]{1,0} dot(f32[20,30]{1,0} %p3.16, f32[30,30]{1,0} %p2.15), ...
  const int64_t d = NodeOf(OlderStylePath(), "dot.17");
  EXPECT_EQ(d, 2);
  EXPECT_EQ(g.node_opcode[d], OpcodeId("dot"));
  EXPECT_EQ(Feat(g, d, "shape_element_type_is_f32"), 1);
  EXPECT_EQ(Feat(g, d, "shape_dimensions_sum"), 50);
  EXPECT_EQ(Feat(g, d, "shape_dimensions_product"), 600);
  // The dot's edges go to p3.16 (node 0) and p2.15 (node 1).
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (int64_t i = 0; i < g.num_edges(); ++i) {
    edges.emplace_back(g.edge_index[2 * i], g.edge_index[2 * i + 1]);
  }
  EXPECT_EQ(edges, (std::vector<std::pair<int64_t, int64_t>>{
                       {2, 0}, {2, 1}, {4, 2}, {4, 3}, {6, 4}, {6, 5}, {7, 6}}));
  // ROOT %tuple.20 = (f32[20,30]{1,0}) tuple(...)
  EXPECT_EQ(Feat(g, 7, "is_root"), 1);
  EXPECT_EQ(Feat(g, 7, "shape_element_type_is_tuple"), 1);
  EXPECT_EQ(Feat(g, 7, "shape_tuple_shapes_size"), 1);
  EXPECT_EQ(Feat(g, 7, "shape_dimensions_product"), 1);  // empty product
  EXPECT_EQ(Feat(g, 0, "parameter_number"), 3);          // %p3.16 ... parameter(3)
}

void ExpectSameGraph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.num_nodes(), b.num_nodes());
  EXPECT_EQ(a.node_opcode, b.node_opcode);
  EXPECT_EQ(a.edge_index, b.edge_index);
  EXPECT_EQ(a.node_splits, b.node_splits);
  ASSERT_EQ(a.node_feat.size(), b.node_feat.size());
  int64_t differing = 0;
  for (size_t i = 0; i < a.node_feat.size(); ++i) {
    // Bitwise: the same float, not just close.
    if (std::memcmp(&a.node_feat[i], &b.node_feat[i], sizeof(float)) != 0) {
      if (differing++ < 5) {
        ADD_FAILURE() << "node " << i / kNodeFeatureCount << " feature "
                      << NodeFeatureNames()[i % kNodeFeatureCount] << ": " << a.node_feat[i]
                      << " vs " << b.node_feat[i];
      }
    }
  }
  EXPECT_EQ(differing, 0);
}

TEST(HloText, UNetRoundTripThroughPrintedText) {
  const tpu_graphs::ModuleTuningData mtd = testing::ParseLayoutDump();
  Graph from_proto;
  ASSERT_TRUE(BuildProgramGraph(mtd.module(), "proto", &from_proto).ok());
  ASSERT_EQ(from_proto.num_nodes(), 3163);
  TempDir dir;
  for (HloTextStyle style : {HloTextStyle::kCurrent, HloTextStyle::kOlder}) {
    SCOPED_TRACE(style == HloTextStyle::kCurrent ? "current style" : "older style");
    const std::string text = PrintHloText(mtd.module(), style);
    const std::string path = dir.File("unet.txt");
    testing::WriteBytes(path, text);
    const Graph from_text = LoadTextGraph(path);
    EXPECT_EQ(from_text.name, mtd.module().name());
    ExpectSameGraph(from_proto, from_text);
  }
}

TEST(HloText, TileKernelsRoundTrip) {
  const tpu_graphs::TuningData td = testing::ParseTileDump();
  ASSERT_GT(td.modules_size(), 0);
  for (const auto& kernel : td.modules()) {
    Graph a, b;
    ASSERT_TRUE(BuildProgramGraph(kernel.module(), "proto", &a).ok());
    xla::HloModuleProto parsed;
    const std::string text = PrintHloText(kernel.module(), HloTextStyle::kOlder);
    Status s = ParseHloText(text, "kernel", &parsed);
    ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << text;
    ASSERT_TRUE(BuildProgramGraph(parsed, "text", &b).ok());
    ExpectSameGraph(a, b);
  }
}

xla::HloModuleProto MustParse(const std::string& text,
                              std::vector<std::string>* warnings = nullptr) {
  xla::HloModuleProto m;
  Status s = ParseHloText(text, "t.hlo", &m, warnings);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return m;
}

TEST(HloText, ShapesAndLayouts) {
  const auto m = MustParse(R"(HloModule m, entry_computation_layout={(f32[8,128]{1,0})->f32[]}
ENTRY e (p: f32[8,128]) -> (f32[], token[]) {
  p = f32[8,128]{1,0:T(8,128)(2,1)S(1)} parameter(0)
  d = bf16[<=4,?,3]{2,1,0} parameter(1)
  t = token[] after-all()
  /*index=3*/ x = s4[2]{0:T(1024)(128)(2,1)E(4)} parameter(2)
  ROOT r = ((f32[], s32[2]{0}), token[]) tuple(p, t)
})");
  const auto& c = m.computations(0);
  ASSERT_EQ(c.instructions_size(), 5);
  const auto& p = c.instructions(0).shape();
  EXPECT_EQ(p.element_type(), xla::F32);
  EXPECT_THAT(p.dimensions(), ::testing::ElementsAre(8, 128));
  EXPECT_THAT(p.layout().minor_to_major(), ::testing::ElementsAre(1, 0));
  ASSERT_EQ(p.layout().tiles_size(), 2);
  EXPECT_THAT(p.layout().tiles(0).dimensions(), ::testing::ElementsAre(8, 128));
  EXPECT_THAT(p.layout().tiles(1).dimensions(), ::testing::ElementsAre(2, 1));
  EXPECT_EQ(p.layout().memory_space(), 1);
  const auto& d = c.instructions(1).shape();
  EXPECT_EQ(d.element_type(), xla::BF16);
  EXPECT_THAT(d.dimensions(), ::testing::ElementsAre(4, std::numeric_limits<int64_t>::min(), 3));
  EXPECT_THAT(d.is_dynamic_dimension(), ::testing::ElementsAre(true, true, false));
  EXPECT_EQ(c.instructions(1).parameter_number(), 1);
  EXPECT_EQ(c.instructions(2).shape().element_type(), xla::TOKEN);
  EXPECT_EQ(static_cast<int>(c.instructions(3).shape().element_type()), 21);  // S4
  EXPECT_EQ(c.instructions(3).shape().layout().element_size_in_bits(), 4);
  const auto& r = c.instructions(4).shape();
  EXPECT_EQ(r.element_type(), xla::TUPLE);
  ASSERT_EQ(r.tuple_shapes_size(), 2);
  EXPECT_EQ(r.tuple_shapes(0).tuple_shapes_size(), 2);
  EXPECT_EQ(c.root_id(), c.instructions(4).id());
  EXPECT_THAT(c.instructions(4).operand_ids(),
              ::testing::ElementsAre(c.instructions(0).id(), c.instructions(2).id()));
}

TEST(HloText, FeatureAttributes) {
  std::vector<std::string> warnings;
  const auto m = MustParse(R"(HloModule m
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}
ENTRY %e {
  %x = f32[1,8,8,4]{3,2,1,0} parameter(0)
  %k = f32[3,3,4,16]{3,2,1,0} parameter(1)
  %conv = f32[1,4,4,16]{3,2,1,0} convolution(%x, %k), window={size=3x3 stride=2x2 pad=1_1x0_-1 lhs_dilate=1x2 rhs_dilate=3x1 rhs_reversal=0x1}, dim_labels=b01f_01io->b01f, metadata={op_name="c" source_file="a, b"}
  %g = f32[1,4,4,16]{3,2,1,0} convolution(%x, %k), window={size=3x3}, dim_labels=f01b_i01o->01bf, feature_group_count=2, batch_group_count=4
  ROOT %t = (f32[1,4,4,16]{3,2,1,0}, f32[1,4,4,16]{3,2,1,0}) tuple(%conv, %g)
})",
                           &warnings);
  ASSERT_EQ(m.computations_size(), 2);
  EXPECT_EQ(m.entry_computation_name(), "e");
  const auto& e = m.computations(1);
  const auto& conv = e.instructions(2);
  ASSERT_EQ(conv.window().dimensions_size(), 2);
  const auto& w0 = conv.window().dimensions(0);
  const auto& w1 = conv.window().dimensions(1);
  EXPECT_EQ(w0.size(), 3);
  EXPECT_EQ(w0.stride(), 2);
  EXPECT_EQ(w0.padding_low(), 1);
  EXPECT_EQ(w1.padding_high(), -1);
  EXPECT_EQ(w1.base_dilation(), 2);
  EXPECT_EQ(w0.window_dilation(), 3);
  EXPECT_FALSE(w0.window_reversal());
  EXPECT_TRUE(w1.window_reversal());
  const auto& dn = conv.convolution_dimension_numbers();
  EXPECT_EQ(dn.input_batch_dimension(), 0);
  EXPECT_EQ(dn.input_feature_dimension(), 3);
  EXPECT_THAT(dn.input_spatial_dimensions(), ::testing::ElementsAre(1, 2));
  EXPECT_EQ(dn.kernel_input_feature_dimension(), 2);
  EXPECT_EQ(dn.kernel_output_feature_dimension(), 3);
  EXPECT_THAT(dn.kernel_spatial_dimensions(), ::testing::ElementsAre(0, 1));
  EXPECT_EQ(dn.output_feature_dimension(), 3);
  EXPECT_EQ(conv.feature_group_count(), 1);  // XLA omits 1
  EXPECT_EQ(conv.batch_group_count(), 1);
  const auto& g = e.instructions(3);
  EXPECT_EQ(g.window().dimensions(0).stride(), 1);  // defaults
  EXPECT_EQ(g.window().dimensions(0).window_dilation(), 1);
  EXPECT_EQ(g.convolution_dimension_numbers().input_batch_dimension(), 3);
  EXPECT_EQ(g.convolution_dimension_numbers().kernel_input_feature_dimension(), 0);
  EXPECT_THAT(g.convolution_dimension_numbers().output_spatial_dimensions(),
              ::testing::ElementsAre(0, 1));
  EXPECT_EQ(g.feature_group_count(), 2);
  EXPECT_EQ(g.batch_group_count(), 4);
  EXPECT_TRUE(warnings.empty());
}

TEST(HloText, PaddingSliceSortDotIotaAndWarnings) {
  std::vector<std::string> warnings;
  const auto m = MustParse(R"(HloModule m
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}
ENTRY %e {
  %x = f32[2,8]{1,0} parameter(0)
  %a0 = f32[] constant(0)
  %pad = f32[3,10]{1,0} pad(%x, %a0), padding=0_1x2_3_1
  %sl = f32[1,2]{1,0} slice(%x), slice={[0:1], [2:8:3]}
  %ds = f32[1,2]{1,0} dynamic-slice(%x, %a0), dynamic_slice_sizes={1,2}
  %srt = f32[8]{0} sort(%x), dimensions={0}, is_stable=true, to_apply=%add
  %dot = f32[2,2]{1,0} dot(%x, %x), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={highest,default}
  %io = s32[4,5]{1,0} iota(), iota_dimension=1
  %red = f32[8]{0} reduce-window(%x, %a0), window={size=2 stride=2}, to_apply=%add, some_new_attr={1, {2}}
  ROOT %w = f32[8]{0} mystery-op(%red), some_new_attr=3, control-predecessors={%io}
})",
                           &warnings);
  const auto& e = m.computations(1);
  const auto& pad = e.instructions(2).padding_config();
  ASSERT_EQ(pad.dimensions_size(), 2);
  EXPECT_EQ(pad.dimensions(0).edge_padding_high(), 1);
  EXPECT_EQ(pad.dimensions(1).edge_padding_low(), 2);
  EXPECT_EQ(pad.dimensions(1).interior_padding(), 1);
  const auto& sl = e.instructions(3);
  ASSERT_EQ(sl.slice_dimensions_size(), 2);
  EXPECT_EQ(sl.slice_dimensions(0).stride(), 1);
  EXPECT_EQ(sl.slice_dimensions(1).start(), 2);
  EXPECT_EQ(sl.slice_dimensions(1).limit(), 8);
  EXPECT_EQ(sl.slice_dimensions(1).stride(), 3);
  EXPECT_THAT(e.instructions(4).dynamic_slice_sizes(), ::testing::ElementsAre(1, 2));
  const auto& srt = e.instructions(5);
  EXPECT_TRUE(srt.is_stable());
  EXPECT_THAT(srt.dimensions(), ::testing::ElementsAre(0));
  EXPECT_THAT(srt.called_computation_ids(), ::testing::ElementsAre(m.computations(0).id()));
  const auto& dot = e.instructions(6).dot_dimension_numbers();
  EXPECT_THAT(dot.lhs_contracting_dimensions(), ::testing::ElementsAre(1));
  EXPECT_THAT(dot.rhs_batch_dimensions(), ::testing::ElementsAre(0));
  EXPECT_THAT(e.instructions(7).dimensions(), ::testing::ElementsAre(1));
  EXPECT_THAT(e.instructions(9).control_predecessor_ids(),
              ::testing::ElementsAre(e.instructions(7).id()));
  // Unknown attribute and opcode: one warning each, with the name and the position.
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[0], HasSubstr("t.hlo:16:"));
  EXPECT_THAT(warnings[0], HasSubstr("unknown attribute 'some_new_attr'"));
  EXPECT_THAT(warnings[1], HasSubstr("t.hlo:17:"));
  EXPECT_THAT(warnings[1], HasSubstr("unknown opcode 'mystery-op'"));
}

// A module in the syntax of recent XLA dumps (scheduled module header, fusions, while loops,
// async copies, custom calls, collectives, JSON backend configs, iota replica groups, index
// comments): parses without warnings and matches the independent count.
constexpr const char* kRecentSyntax =
    R"HLO(HloModule jit_step, is_scheduled=true, entry_computation_layout={(f32[8,128]{1,0}, s32[]{:T(128)})->(f32[8,128]{1,0}, s32[])}, allow_spmd_sharding_propagation_to_output={true}, frontend_attributes={fingerprint_before_lhs="abc"}

%region_0.1 (Arg_0.2: f32[], Arg_1.3: f32[]) -> f32[] {
  %Arg_0.2 = f32[] parameter(0), metadata={op_name="jit(step)/reduce_sum"}
  %Arg_1.3 = f32[] parameter(1)
  ROOT %add.4 = f32[] add(f32[] %Arg_0.2, f32[] %Arg_1.3)
}

%fused_computation (param_0.1: f32[8,128], param_1.2: f32[]) -> f32[8] {
  %param_0.1 = f32[8,128]{1,0:T(8,128)} parameter(0)
  %param_1.2 = f32[] parameter(1)
  ROOT %reduce.1 = f32[8]{0:T(256)} reduce(%param_0.1, %param_1.2), dimensions={1}, to_apply=%region_0.1
}

%cond (p: (s32[], f32[8,128])) -> pred[] {
  %p = (s32[], f32[8,128]{1,0}) parameter(0)
  %gte = s32[] get-tuple-element(%p), index=0
  %c = s32[] constant(10)
  ROOT %lt = pred[] compare(%gte, %c), direction=LT, type=SIGNED
}

%body (p.1: (s32[], f32[8,128])) -> (s32[], f32[8,128]) {
  %p.1 = (s32[], f32[8,128]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p.1), index=0
  %x = f32[8,128]{1,0} get-tuple-element(%p.1), index=1
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  %cc = f32[8,128]{1,0} custom-call(%x), custom_call_target="Sharding", sharding={devices=[2,1]<=[2]}, api_version=API_VERSION_STATUS_RETURNING, backend_config={"a": {"b": [1, 2]}}, output_to_operand_aliasing={{}: (0, {})}
  %ar = f32[8,128]{1,0} all-reduce(%cc), channel_id=1, replica_groups=[1,2]<=[2], use_global_device_ids=true, to_apply=%region_0.1
  ROOT %t = (s32[], f32[8,128]{1,0}) tuple(%i2, /*index=1*/%ar)
}

ENTRY %main.10 (Arg_0.1: f32[8,128], Arg_1.2: s32[]) -> (f32[8,128], s32[]) {
  %Arg_0.1 = f32[8,128]{1,0} parameter(0), sharding={replicated}
  %Arg_1.2 = s32[] parameter(1)
  %zero = f32[] constant(0)
  %fusion = f32[8]{0} fusion(%Arg_0.1, %zero), kind=kInput, calls=%fused_computation, backend_config={"flag":"x, y"}
  %bc = f32[8,128]{1,0} broadcast(%fusion), dimensions={0}
  %tup = (s32[], f32[8,128]{1,0}) tuple(%Arg_1.2, %bc)
  %w = (s32[], f32[8,128]{1,0}) while(%tup), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"10"}}
  %r = f32[8,128]{1,0} get-tuple-element(%w), index=1
  %cs = (f32[8,128]{1,0:S(1)}, f32[8,128]{1,0}, u32[]) copy-start(%r), cross_program_prefetch_index=0
  %cd = f32[8,128]{1,0} copy-done(%cs)
  %dyn = f32[1,128]{1,0} dynamic-slice(%cd, %Arg_1.2, %Arg_1.2), dynamic_slice_sizes={1,128}
  %cv = f32[1,128]{1,0} convolution(%dyn, %cd), window={size=1 pad=0_0}, dim_labels=bf_io->bf, operand_precision={highest,highest}
  %d = f32[1,8]{1,0} dot(%cv, %cd), lhs_contracting_dims={1}, rhs_contracting_dims={1}, algorithm=dot_f32_f32_f32
  %rw = f32[1,4]{1,0} reduce-window(%d, %zero), window={size=1x2 stride=1x2}, to_apply=%region_0.1
  %pd = f32[1,10]{1,0} pad(%rw, %zero), padding=0_0x1_2_1
  ROOT %out = (f32[8,128]{1,0}, s32[], f32[1,10]{1,0}) tuple(%cd, %Arg_1.2, %pd), metadata={op_name="jit(step)/out" source_file="/x.py" source_line=7}
}
)HLO";

TEST(HloText, RecentDumpSyntaxMatchesIndependentCount) {
  std::vector<std::string> warnings;
  const auto m = MustParse(kRecentSyntax, &warnings);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  EXPECT_EQ(m.computations_size(), 5);
  EXPECT_EQ(m.entry_computation_name(), "main.10");
  TempDir dir;
  const std::string path = dir.File("module_0001.jit_step.after_optimizations.txt");
  testing::WriteBytes(path, kRecentSyntax);
  ExpectMatchesIndependentCount(path, 34);
}

TEST(HloText, WarningsAreCapped) {
  std::string text = "HloModule m\nENTRY e {\n";
  for (int i = 0; i < 50; ++i) {
    text += "  p" + std::to_string(i) + " = f32[] parameter(" + std::to_string(i) + "), attr" +
            std::to_string(i) + "=1\n";
  }
  text += "}\n";
  std::vector<std::string> warnings;
  MustParse(text, &warnings);
  ASSERT_EQ(warnings.size(), 21u);
  EXPECT_THAT(warnings[0], HasSubstr("t.hlo:3:"));
  EXPECT_THAT(warnings[0], HasSubstr("unknown attribute 'attr0'"));
  EXPECT_EQ(warnings[20], "t.hlo: 30 more warnings (unknown opcodes or attributes) not shown");
}

struct BadText {
  std::string name, text, message;
};

std::string Deep(int n) {
  std::string s = "HloModule m\nENTRY e {\n  ROOT p = ";
  for (int i = 0; i < n; ++i) s += "(";
  s += "f32[]";
  for (int i = 0; i < n; ++i) s += ")";
  return s + " parameter(0)\n}\n";
}

TEST(HloText, HostileInputIsAnErrorWithPosition) {
  const std::vector<BadText> cases = {
      {"empty", "", "t.hlo:1:1: expected 'HloModule'"},
      {"no computation", "HloModule m\n", "t.hlo:2:1: expected a computation"},
      {"unknown operand", "HloModule m\nENTRY e {\n  ROOT a = f32[] add(x, y)\n}\n",
       "t.hlo:3:22: unknown operand 'x'"},
      {"cycle", "HloModule m\nENTRY e {\n  a = f32[] add(b, b)\n  ROOT b = f32[] add(a, a)\n}\n",
       "t.hlo:3:17: unknown operand 'b'"},
      {"self use", "HloModule m\nENTRY e {\n  ROOT a = f32[] negate(a)\n}\n",
       "unknown operand 'a'"},
      {"deep tuple", Deep(100), "tuple shapes nested deeper than 64 levels"},
      {"deep brackets",
       "HloModule m\nENTRY e {\n  ROOT c = f32[] constant(" + std::string(500, '{') + ")\n}\n",
       "brackets nested deeper than 64 levels"},
      {"huge dimension",
       "HloModule m\nENTRY e {\n  ROOT p = f32[99999999999999999999] parameter(0)\n}\n",
       "t.hlo:3:16: a dimension size does not fit a 64-bit integer"},
      {"huge shape",
       "HloModule m\nENTRY e {\n  ROOT p = f32[4294967296,4294967296] parameter(0)\n}\n",
       "t.hlo:3:12: shape has more than 2^63-1 elements"},
      {"many dims",
       [] {
         std::string s = "HloModule m\nENTRY e {\n  ROOT p = f32[1";
         for (int i = 0; i < 100; ++i) s += ",1";
         return s + "] parameter(0)\n}\n";
       }(),
       "shape has more than 64 dimensions"},
      {"unknown computation", "HloModule m\nENTRY e {\n  ROOT a = f32[] call(), to_apply=nope\n}\n",
       "t.hlo:3:35: unknown computation 'nope'"},
      {"recursive computation", "HloModule m\nENTRY e {\n  ROOT a = f32[] call(), to_apply=e\n}\n",
       "unknown computation 'e'"},
      {"duplicate instruction",
       "HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  ROOT a = f32[] parameter(1)\n}\n",
       "t.hlo:4:8: instruction 'a' is defined twice"},
      {"two roots",
       "HloModule m\nENTRY e {\n  ROOT a = f32[] parameter(0)\n  ROOT b = f32[] parameter(1)\n}\n",
       "t.hlo:4:3: a second ROOT"},
      {"missing brace", "HloModule m\nENTRY e {\n  ROOT a = f32[] parameter(0)\n",
       "t.hlo:4:1: expected '}' closing computation e, found end of file"},
      {"bad shape", "HloModule m\nENTRY e {\n  ROOT a = f33[] parameter(0)\n}\n",
       "t.hlo:3:12: expected a shape"},
      {"unterminated string",
       "HloModule m\nENTRY e {\n  ROOT a = f32[] parameter(0), metadata={op_name=\"x}\n}\n",
       "unterminated string"},
      {"bad dim_labels",
       "HloModule m\nENTRY e {\n  x = f32[1] parameter(0)\n  ROOT c = f32[1] convolution(x, x), "
       "dim_labels=b0f_0io->bf\n}\n",
       "bad dim_labels part 'bf'"},
      {"window mismatch",
       "HloModule m\nENTRY e {\n  x = f32[1] parameter(0)\n  ROOT c = f32[1] reduce-window(x, x), "
       "window={size=2x2 stride=1}\n}\n",
       "window fields have different numbers of dimensions"},
      {"two modules", "HloModule m\nENTRY e {\n  ROOT a = f32[] parameter(0)\n}\nHloModule n\n",
       "t.hlo:5:1: a second HloModule"},
      {"binary junk", std::string("HloModule m\nENTRY e {\n  ROOT a = f32[] \x01\xff(", 40),
       "t.hlo:3:18: expected an opcode, found '\\x01'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    xla::HloModuleProto m;
    Status s = ParseHloText(c.text, "t.hlo", &m);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
}

TEST(HloText, CliRejectsHostileFileAndWritesNothing) {
  TempDir dir;
  const std::string in = dir.File("bad.hlo");
  testing::WriteBytes(in, Deep(10000));
  const std::string out = dir.File("out.tpug");
  auto r = tpugraphs::testing::RunCli({"ingest", in, "-o", out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(in + ":3:"));
  EXPECT_THAT(r.err, HasSubstr("nested deeper than"));
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(dir.List(), std::vector<std::string>{"bad.hlo"});
}

TEST(HloText, CliDumpDirectoryReadsOneStagePerModule) {
  TempDir dir;
  const std::string dump = dir.File("dump");
  std::filesystem::create_directories(dump);
  const std::string before =
      "HloModule jit_f\nENTRY main {\n  p = f32[4]{0} parameter(0)\n  n = f32[4]{0} "
      "negate(p)\n  ROOT a = f32[4]{0} add(n, p)\n}\n";
  const std::string after =
      "HloModule jit_f\nENTRY main {\n  p = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} "
      "negate(p)\n}\n";
  testing::WriteBytes(dump + "/module_0001.jit_f.before_optimizations.txt", before);
  testing::WriteBytes(dump + "/module_0001.jit_f.after_optimizations.txt", after);
  testing::WriteBytes(dump + "/module_0001.jit_f.after_optimizations-buffer-assignment.txt",
                      "BufferAssignment:\nallocation 0: size 16\n");
  testing::WriteBytes(dump + "/module_0001.jit_f.ir-no-opt.ll", "; ModuleID\n");
  for (const auto& [stage, nodes] :
       std::vector<std::pair<std::string, int>>{{"", 2}, {"before_optimizations", 3}}) {
    SCOPED_TRACE(stage);
    const std::string out = dir.File("out" + stage + ".tpug");
    std::vector<std::string> args = {"ingest", dump, "-o", out, "--json"};
    if (!stage.empty()) {
      args.push_back("--hlo-stage");
      args.push_back(stage);
    }
    auto r = tpugraphs::testing::RunCli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("\"files\": 1, \"graphs\": 1"));
    EXPECT_THAT(r.out, HasSubstr("\"collection\": \"layout:xla:custom\", \"graphs\": 1, "
                                 "\"nodes\": " +
                                 std::to_string(nodes)));
  }
  EXPECT_TRUE(IsXlaDumpFileName("module_0001.jit_f.after_optimizations.txt"));
  EXPECT_FALSE(IsXlaDumpFileName("module_x.txt"));
  EXPECT_TRUE(IsXlaDumpOfStage("module_0001.jit_f.after_optimizations.txt", "after_optimizations"));
  EXPECT_FALSE(IsXlaDumpOfStage("module_0001.jit_f.after_optimizations-buffer-assignment.txt",
                                "after_optimizations"));
}

}  // namespace
}  // namespace tpugraphs::ingest
