// Layout configurations of graph-only dumps: the configurable nodes against the real dump's
// config_index_to_node, configuration 0 of the real HLO text files against an independent
// reading of the text (Python), and the alternatives' validity, distinctness and determinism.
#include "tpugraphs/ingest/layout_candidates.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "ingest/raw_test_util.h"
#include "testing/hlo_text_printer.h"
#include "tpugraphs/ingest/hlo_text.h"
#include "tpugraphs/ingest/raw_dump.h"
#include "tpugraphs/io/dataset.h"

namespace tpugraphs::ingest {
namespace {

using tpugraphs::testing::RealDataPath;
using tpugraphs::testing::RunPython;
using tpugraphs::testing::TempDir;

std::string GraphsageHloPath() {
  return RealDataPath("hlo_text/openxla_cpu_benchmark_graphsage_tf.hlo");
}
std::string NeuronHloPath() {
  return RealDataPath("hlo_text/pt_neuron_SyncTensorsGraph.21.hlo.txt");
}

Graph Load(const std::string& path, int64_t candidates = 0, uint64_t seed = 1,
           const std::string& collection = "") {
  RawDumpOptions o;
  o.layout_candidates = candidates;
  o.layout_seed = seed;
  o.collection = collection;
  auto graphs = LoadRawDump(path, o);
  EXPECT_TRUE(graphs.ok()) << graphs.status().ToString();
  if (!graphs.ok() || graphs->size() != 1) return Graph();
  return std::move((*graphs)[0]);
}

// Reads the text with nothing shared with the C++ parser: for every dot, convolution and reshape
// (node index = position in the text), the minor_to_major of its result shape and of its
// operands' defining instructions (output, input[, kernel]), written into 18 slots as the release
// featurises a layout configuration (first 6 values of each tensor, -1 padded). One line per node:
// "<node> <name> <18 values>".
constexpr const char* kConfig0Script = R"PY(
import re, sys
text = re.sub(r'/\*.*?\*/', '', open(sys.argv[1]).read(), flags=re.S)

def close(s, i):
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
    parts, depth, cur = [], 0, ''
    for c in s:
        if c in '({[': depth += 1
        elif c in ')}]': depth -= 1
        elif c == ',' and depth == 0:
            parts.append(cur.strip()); cur = ''; continue
        cur += c
    parts.append(cur.strip())
    return [p for p in parts if p]

def layout(shape):  # minor_to_major of an array shape string, [] if none is written
    m = re.match(r'^[a-z0-9]+\[[^\]]*\](\{([^}]*)\})?', shape)
    if not m or m.group(2) is None: return []
    dims = m.group(2).split(':')[0].strip()
    return [int(x) for x in dims.split(',')] if dims else []

comps, cur = [], None
for line in text.split('\n'):
    s = line.strip()
    if cur is None:
        if re.match(r'^(ENTRY\s+)?%?[\w.\-]+\s*(\(.*\)\s*->.*)?\{$', s) and not s.startswith('HloModule'):
            cur = []; comps.append(cur)
        continue
    if s == '}': cur = None; continue
    if s: cur.append(s)

node = 0
for instrs in comps:
    shapes = {}
    for s in instrs:
        m = re.match(r'^(ROOT\s+)?%?([\w.\-]+)\s*=\s*', s)
        name, rest = m.group(2), s[m.end():]
        if rest.startswith('('):
            end = close(rest, 0) + 1
        else:
            end = re.match(r'[a-z0-9]+\[[^\]]*\](\{[^}]*\})?', rest).end()
        shape, rest = rest[:end], rest[end:].lstrip()
        shapes[name] = shape
        m = re.match(r'([a-z][a-z0-9\-]*)\(', rest)
        opcode = m.group(1)
        inner = rest[m.end():close(rest, m.end() - 1)]
        operands = [p.split()[-1].lstrip('%') for p in split_top(inner)]
        if opcode in ('dot', 'convolution', 'reshape') and operands:
            tensors = [shape] + [shapes[o] for o in operands[:1 if opcode == 'reshape' else 2]]
            feat = [-1] * 18
            for t, sh in enumerate(tensors):
                for i, v in enumerate(layout(sh)[:6]): feat[6 * t + i] = v
            print(node, name, *feat)
        node += 1
)PY";

struct Row {
  int64_t node;
  std::string name;
  std::vector<int> feat;
};

std::vector<Row> Config0WithPython(const std::string& path) {
  auto r = RunPython(kConfig0Script, {path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<Row> rows;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    Row row;
    ls >> row.node >> row.name;
    int v;
    while (ls >> v) row.feat.push_back(v);
    EXPECT_EQ(row.feat.size(), 18u) << line;
    rows.push_back(std::move(row));
  }
  return rows;
}

void ExpectConfig0MatchesPython(const std::string& path, size_t expected_nodes) {
  const std::vector<Row> rows = Config0WithPython(path);
  ASSERT_EQ(rows.size(), expected_nodes) << "the Python reading itself";
  const Graph g = Load(path);
  ASSERT_EQ(g.num_configs, 1);
  ASSERT_EQ(g.num_config_nodes(), static_cast<int64_t>(rows.size()));
  ASSERT_EQ(g.config_node_names.size(), rows.size());
  EXPECT_EQ(g.config_runtime, std::vector<int64_t>{0});
  for (size_t k = 0; k < rows.size(); ++k) {
    EXPECT_EQ(g.node_config_ids[k], rows[k].node) << rows[k].name;
    EXPECT_EQ(g.config_node_names[k], rows[k].name);
    for (int j = 0; j < kLayoutConfigFeatureCount; ++j) {
      EXPECT_EQ(g.node_config_feat[k * kLayoutConfigFeatureCount + j], rows[k].feat[j])
          << rows[k].name << " slot " << j;
    }
  }
}

TEST(LayoutCandidates, Config0OfTheCurrentStyleFileMatchesAnIndependentReading) {
  // 6 dots and 21 reshapes.
  ExpectConfig0MatchesPython(GraphsageHloPath(), 27);
}

TEST(LayoutCandidates, Config0OfTheOlderStyleFileMatchesAnIndependentReading) {
  ExpectConfig0MatchesPython(NeuronHloPath(), 1);
}

TEST(LayoutCandidates, Config0RowsByHand) {
  const Graph g = Load(GraphsageHloPath());
  auto row = [&](const std::string& name) {
    const auto it = std::find(g.config_node_names.begin(), g.config_node_names.end(), name);
    EXPECT_NE(it, g.config_node_names.end()) << name;
    const size_t k = static_cast<size_t>(it - g.config_node_names.begin());
    return std::vector<int>(g.node_config_feat.begin() + k * kLayoutConfigFeatureCount,
                            g.node_config_feat.begin() + (k + 1) * kLayoutConfigFeatureCount);
  };
  // %Reshape_2.1 = bf16[1,10,50]{2,1,0} reshape(%embedding_lookup_1.3), where
  // %embedding_lookup_1.3 = bf16[10,50]{1,0}: output {2,1,0}, input {1,0}, no kernel.
  EXPECT_EQ(row("Reshape_2.1"),
            std::vector<int>({2, 1, 0, -1, -1, -1, 1, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}));
  // %MatMul_1.10 = bf16[1,128]{1,0} dot(%embedding_lookup.3, %MatMul_1.9), both operands
  // rank 2 with {1,0}.
  EXPECT_EQ(row("MatMul_1.10"),
            std::vector<int>({1, 0, -1, -1, -1, -1, 1, 0, -1, -1, -1, -1, 1, 0, -1, -1, -1, -1}));
  // %shape.22 = s32[1]{0} reshape(%mul_2.1) with %mul_2.1 a scalar s32[]: its input has no
  // layout to choose.
  EXPECT_EQ(row("shape.22"), std::vector<int>({0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                               -1, -1, -1, -1, -1}));
}

// The release chose as configurable exactly the convolutions, dots and reshapes; the real U-Net
// module, as a bare HloModuleProto and printed as HLO text, gets the dump's own
// config_index_to_node.
TEST(LayoutCandidates, ConfigurableNodesAreThoseOfTheRealDump) {
  const auto dump = testing::ParseLayoutDump();
  const std::vector<int64_t> expected(dump.config_index_to_node().begin(),
                                      dump.config_index_to_node().end());
  ASSERT_EQ(expected.size(), 62u);
  auto nodes = FindConfigurableNodes(dump.module(), "unet");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  std::vector<int64_t> got;
  int conv = 0, reshape = 0;
  for (const auto& c : *nodes) {
    got.push_back(c.node);
    conv += c.opcode == "convolution";
    reshape += c.opcode == "reshape";
    EXPECT_EQ(c.tensors.size(), c.opcode == "reshape" ? 2u : 3u) << c.instruction;
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(conv, 53);
  EXPECT_EQ(reshape, 9);

  TempDir dir;
  testing::WriteBytes(dir.File("unet.pb"), dump.module().SerializeAsString());
  const Graph from_proto = Load(dir.File("unet.pb"));
  EXPECT_EQ(from_proto.node_config_ids, expected);
  EXPECT_EQ(from_proto.num_configs, 1);

  testing::WriteBytes(
      dir.File("unet.hlo"),
      tpugraphs::testing::PrintHloText(dump.module(), tpugraphs::testing::HloTextStyle::kCurrent));
  const Graph from_text = Load(dir.File("unet.hlo"));
  EXPECT_EQ(from_text.node_config_ids, expected);
  EXPECT_EQ(from_text.node_config_feat, from_proto.node_config_feat);
  EXPECT_EQ(from_text.config_node_names, from_proto.config_node_names);
  // The dump with its runs names the same instructions, streamed or parsed whole.
  std::vector<std::string> names;
  for (const auto& c : *nodes) names.push_back(c.instruction);
  EXPECT_EQ(from_proto.config_node_names, names);
  for (bool stream : {true, false}) {
    RawDumpOptions o;
    o.stream_layout_runs = stream;
    auto runs = LoadRawDump(testing::LayoutDumpPath(), o);
    ASSERT_TRUE(runs.ok()) << runs.status().ToString();
    EXPECT_EQ((*runs)[0].num_configs, 112);
    EXPECT_EQ((*runs)[0].config_node_names, names) << "stream " << stream;
  }
  // Node 660, the first convolution: bf16[2,96,96,96,32]{4,3,2,1,0} (ingest-spec 8.1), its
  // input the same shape, its kernel rank 5 too, all row-major in this module.
  const auto it = std::find(expected.begin(), expected.end(), 660);
  ASSERT_NE(it, expected.end());
  const size_t k = static_cast<size_t>(it - expected.begin());
  EXPECT_EQ(
      std::vector<int>(from_text.node_config_feat.begin() + k * kLayoutConfigFeatureCount,
                       from_text.node_config_feat.begin() + k * kLayoutConfigFeatureCount + 6),
      std::vector<int>({4, 3, 2, 1, 0, -1}));
}

// The features of the permutation a candidate gives tensor t of node k, or {} if -1.
std::vector<int64_t> Block(const Graph& g, int64_t c, int64_t k, int t) {
  const int8_t* v = g.node_config_feat.data() +
                    (c * g.num_config_nodes() + k) * kLayoutConfigFeatureCount + 6 * t;
  std::vector<int64_t> out;
  for (int i = 0; i < 6 && v[i] >= 0; ++i) out.push_back(v[i]);
  return out;
}

TEST(LayoutCandidates, AlternativesAreValidDistinctAndDeterministic) {
  xla::HloModuleProto module;
  ASSERT_TRUE(ParseHloText(testing::ReadBytes(GraphsageHloPath()), "x", &module).ok());
  auto nodes = FindConfigurableNodes(module, "x");
  ASSERT_TRUE(nodes.ok());
  const Graph g = Load(GraphsageHloPath(), 60, 7);
  ASSERT_EQ(g.num_configs, 61);
  EXPECT_EQ(g.config_runtime, std::vector<int64_t>(61, 0));
  const int64_t nc = g.num_config_nodes();
  const size_t row = static_cast<size_t>(nc) * kLayoutConfigFeatureCount;
  std::set<std::vector<int8_t>> distinct;
  for (int64_t c = 0; c < g.num_configs; ++c) {
    distinct.emplace(g.node_config_feat.begin() + c * row,
                     g.node_config_feat.begin() + (c + 1) * row);
    if (c == 0) continue;
    int changed_nodes = 0;
    for (int64_t k = 0; k < nc; ++k) {
      const auto& node = (*nodes)[static_cast<size_t>(k)];
      bool changed = false;
      for (int t = 0; t < 3; ++t) {
        const std::vector<int64_t> got = Block(g, c, k, t), base = Block(g, 0, k, t);
        if (got == base) continue;
        changed = true;
        ASSERT_LT(static_cast<size_t>(t), node.tensors.size());
        const LayoutTensor& tensor = node.tensors[static_cast<size_t>(t)];
        // A full permutation of the tensor's dimensions ...
        ASSERT_GE(tensor.rank, 2);
        std::vector<int64_t> sorted = got;
        std::sort(sorted.begin(), sorted.end());
        std::vector<int64_t> iota(static_cast<size_t>(tensor.rank));
        for (size_t d = 0; d < iota.size(); ++d) iota[d] = static_cast<int64_t>(d);
        EXPECT_EQ(sorted, iota) << node.instruction;
        // ... with another minor pair, the rest in the stated order.
        std::vector<int64_t> stated = tensor.minor_to_major;
        EXPECT_FALSE(got[0] == stated[0] && got[1] == stated[1]) << node.instruction;
        std::vector<int64_t> rest;
        for (int64_t d : stated) {
          if (d != got[0] && d != got[1]) rest.push_back(d);
        }
        EXPECT_EQ(std::vector<int64_t>(got.begin() + 2, got.end()), rest) << node.instruction;
      }
      changed_nodes += changed;
    }
    EXPECT_GE(changed_nodes, 1) << "config " << c;
    EXPECT_LE(changed_nodes, 3) << "config " << c;
  }
  EXPECT_EQ(distinct.size(), 61u);

  EXPECT_EQ(Load(GraphsageHloPath(), 60, 7).node_config_feat, g.node_config_feat);
  const Graph other = Load(GraphsageHloPath(), 60, 8);
  EXPECT_NE(other.node_config_feat, g.node_config_feat);
  // The same configuration 0 whatever the seed and count.
  EXPECT_TRUE(std::equal(other.node_config_feat.begin(), other.node_config_feat.begin() + row,
                         g.node_config_feat.begin()));
}

TEST(LayoutCandidates, ASmallSpaceIsEnumeratedExactly) {
  // One dot with three rank-2 tensors: 2^3 layouts, 7 besides the stated one.
  const Graph g = Load(NeuronHloPath(), 20, 1);
  ASSERT_EQ(g.num_configs, 8);
  std::set<std::vector<int8_t>> distinct;
  for (int64_t c = 0; c < 8; ++c) {
    distinct.emplace(g.node_config_feat.begin() + c * 18, g.node_config_feat.begin() + c * 18 + 18);
    for (int t = 0; t < 3; ++t) {
      const auto b = Block(g, c, 0, t);
      EXPECT_TRUE(b == std::vector<int64_t>({1, 0}) || b == std::vector<int64_t>({0, 1}));
    }
  }
  EXPECT_EQ(distinct.size(), 8u);
}

TEST(LayoutCandidates, ModulesWithoutConfigurableNodesOrInTileCollectionsGetNoConfigs) {
  TempDir dir;
  testing::WriteBytes(dir.File("add.hlo"),
                      "HloModule add\n"
                      "ENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n"
                      "  ROOT a = f32[2,3]{1,0} add(p, p)\n}\n");
  const Graph none = Load(dir.File("add.hlo"), 10);
  EXPECT_EQ(none.num_configs, 0);
  EXPECT_TRUE(none.node_config_ids.empty());

  const Graph tile = Load(NeuronHloPath(), 10, 1, "tile:xla");
  EXPECT_TRUE(tile.is_tile());
  EXPECT_EQ(tile.num_configs, 0);
  EXPECT_TRUE(tile.node_config_ids.empty());
  EXPECT_TRUE(tile.config_node_names.empty());
}

TEST(LayoutCandidates, ALayoutThatIsNotAPermutationIsAnError) {
  TempDir dir;
  for (const char* layout : {"{0,0}", "{1}", "{2,0}"}) {
    const std::string path = dir.File("bad.hlo");
    testing::WriteBytes(path, std::string("HloModule bad\nENTRY e {\n  p = f32[2,3]{1,0} "
                                          "parameter(0)\n  ROOT r = f32[3,2]") +
                                  layout + " reshape(p)\n}\n");
    auto graphs = LoadRawDump(path, RawDumpOptions());
    ASSERT_FALSE(graphs.ok()) << layout;
    EXPECT_NE(graphs.status().message().find("bad.hlo: instruction r: layout " +
                                             std::string(layout) + " is not a permutation"),
              std::string::npos)
        << graphs.status().ToString();
  }
}

TEST(LayoutCandidates, NamesAndZeroRuntimesSurviveTheDataset) {
  TempDir dir;
  const Graph g = Load(GraphsageHloPath(), 5, 2);
  auto w = io::DatasetWriter::Create(dir.File("d.tpug"));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Add(g).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  auto r = io::DatasetReader::Open(dir.File("d.tpug"));
  ASSERT_TRUE(r.ok());
  auto back = (*r)->ReadGraph(0, true);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->config_node_names, g.config_node_names);
  EXPECT_EQ(back->node_config_feat, g.node_config_feat);
  EXPECT_EQ(back->config_runtime, std::vector<int64_t>(6, 0));
}

}  // namespace
}  // namespace tpugraphs::ingest
