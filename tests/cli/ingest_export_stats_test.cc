// End-to-end tests of `tpugraphs ingest`, `export` and `stats` on the real release tile files and
// on numpy-written variants, checked with numpy (Debian's python3) through RunPython.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <ostream>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"

namespace tpugraphs {
namespace {

using ::tpugraphs::testing::RealDataPath;
using ::tpugraphs::testing::RunCli;
using ::tpugraphs::testing::RunPython;
using ::tpugraphs::testing::TempDir;
namespace fs = std::filesystem;

// Compares every key of each original .npz with the exported one: dtype, shape, values. The
// expected dtypes are the release's; `originals` may use other widths.
const char* kCompareRelease = R"PY(
import sys, os, numpy as np
orig_dir, out_dir = sys.argv[1], sys.argv[2]
release = {'node_feat': '<f4', 'node_opcode': '|u1', 'edge_index': '<i8', 'config_feat': '<f4',
           'config_runtime': '<i8', 'config_runtime_normalizers': '<i8', 'node_config_ids': '<i8',
           'node_config_feat': '<f4', 'node_splits': '<i8'}
pairs = [l.split() for l in sys.stdin.read().strip().splitlines()]
for orig, exported in pairs:
    a = np.load(os.path.join(orig_dir, orig)); b = np.load(os.path.join(out_dir, exported))
    assert sorted(a.files) == sorted(b.files), (orig, a.files, b.files)
    for k in a.files:
        x, y = a[k], b[k]
        assert y.dtype.str == release[k], (orig, k, y.dtype.str)
        want_shape = x.shape
        if k == 'node_splits' and x.ndim == 1: want_shape = (1,) + x.shape
        assert y.shape == want_shape, (orig, k, x.shape, y.shape)
        assert np.array_equal(x.reshape(want_shape).astype(y.dtype), y), (orig, k)
        if x.dtype.kind == 'f' and x.dtype.itemsize == 4:
            assert x.tobytes() == y.astype(x.dtype).tobytes(), (orig, k, 'bits')
print('OK', len(pairs))
)PY";

testing::CommandResult ComparePairs(const std::string& orig_dir, const std::string& out_dir,
                                    const std::string& pairs) {
  TempDir tmp;
  std::ofstream(tmp.File("pairs")) << pairs;
  std::string code = std::string("import sys; sys.stdin = open(") + "'" + tmp.File("pairs") +
                     "'); exec(compile(" + "sys.argv.pop(1), 'cmp', 'exec'))";
  return RunPython(code, {kCompareRelease, orig_dir, out_dir});
}

TEST(IngestExportCliTest, RealTileFilesRoundTripToNumpyEqualArrays) {
  TempDir tmp;
  const std::string src = RealDataPath("npz/tile_test");
  auto r = RunCli({"-q", "ingest", src, "-o", tmp.File("d.tpug")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tile:xla"), std::string::npos);
  r = RunCli({"-q", "export", tmp.File("d.tpug"), "--output-dir", tmp.File("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string pairs;
  int count = 0;
  for (const auto& e : fs::directory_iterator(src)) {
    const std::string name = e.path().filename().string();
    pairs += name + " npz/tile/xla/nosplit/" + name + "\n";
    ++count;
  }
  ASSERT_EQ(count, 3);
  auto py = ComparePairs(src, tmp.File("out"), pairs);
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
  EXPECT_NE(py.out.find("OK 3"), std::string::npos) << py.out << py.err;
}

// The release's own layout files (U-Net and an RNN) and tile files with measured runtimes, as a
// whole release tree: collections and splits come from the paths, and export writes the same
// tree back with every array, dtype and shape equal.
TEST(IngestExportCliTest, RealReleaseLayoutAndTileFilesRoundTripToNumpyEqualArrays) {
  TempDir tmp;
  const std::string src = RealDataPath("npz/release");
  // Seen as <tmp>/npz/{layout,tile}/..., the release tree layout that names the collections.
  fs::create_directory_symlink(src, tmp.File("npz"));
  auto r = RunCli({"-q", "ingest", tmp.File("npz"), "-o", tmp.File("d.tpug")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* c : {"layout:xla:default", "layout:xla:random", "tile:xla"}) {
    EXPECT_NE(r.out.find(c), std::string::npos) << c << "\n" << r.out;
  }
  r = RunCli({"-q", "export", tmp.File("d.tpug"), "--output-dir", tmp.File("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("exported 4 graphs"), std::string::npos) << r.out;
  std::string pairs;
  int count = 0;
  for (const auto& e : fs::recursive_directory_iterator(src)) {
    if (e.path().extension() != ".npz") continue;
    const std::string rel = fs::path(e.path()).lexically_relative(src).string();
    pairs += rel + " npz/" + rel + "\n";
    ++count;
  }
  ASSERT_EQ(count, 4);
  auto py = ComparePairs(src, tmp.File("out"), pairs);
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
  EXPECT_NE(py.out.find("OK 4"), std::string::npos) << py.out << py.err;
}

TEST(IngestExportCliTest, StatsOfRealTileFilesMatchNumpy) {
  TempDir tmp;
  const std::string src = RealDataPath("npz/tile_test");
  ASSERT_EQ(RunCli({"-q", "ingest", src, "-o", tmp.File("d.tpug")}).exit_code, 0);
  auto r = RunCli({"-q", "stats", tmp.File("d.tpug"), "--json", "--per-graph"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ofstream(tmp.File("stats.json")) << r.out;
  auto py = RunPython(R"PY(
import sys, os, json, glob, numpy as np
stats = json.load(open(sys.argv[1])); src = sys.argv[2]
graphs = {g['name']: g for g in stats['graphs']}
tot = dict(nodes=0, edges=0, configs=0, distinct=0)
hist = {}
for f in sorted(glob.glob(os.path.join(src, '*.npz'))):
    z = np.load(f); name = os.path.basename(f)[:-4]; g = graphs[name]
    n, m, c = z['node_feat'].shape[0], z['edge_index'].shape[0], z['config_feat'].shape[0]
    d = len(np.unique(z['config_feat'], axis=0))
    assert (g['nodes'], g['edges'], g['configs'], g['distinct_configs']) == (n, m, c, d), (g, n, m, c, d)
    assert g['runtime_min'] == int(z['config_runtime'].min()) and g['runtime_max'] == int(z['config_runtime'].max())
    for op, k in zip(*np.unique(z['node_opcode'], return_counts=True)):
        hist[str(op)] = hist.get(str(op), 0) + int(k)
    tot['nodes'] += n; tot['edges'] += m; tot['configs'] += c; tot['distinct'] += d
t = stats['total']
assert (t['graphs'], t['nodes'], t['edges'], t['configs'], t['distinct_configs']) == (3, tot['nodes'], tot['edges'], tot['configs'], tot['distinct']), (t, tot)
assert t['opcode_histogram'] == hist, (t['opcode_histogram'], hist)
assert stats['collections'][0]['collection'] == 'tile:xla'
print('OK', tot)
)PY",
                      {tmp.File("stats.json"), src});
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
  EXPECT_NE(py.out.find("OK"), std::string::npos) << py.out;
  // The table form lists the collection and the totals.
  r = RunCli({"-q", "stats", tmp.File("d.tpug")});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("tile:xla"), std::string::npos);
  EXPECT_NE(r.out.find("891"), std::string::npos) << r.out;  // 32 + 807 + 52 configs
}

// Writes numpy variants of a tile and a layout file into a release tree under argv[1].
const char* kMakeVariants = R"PY(
import sys, os, numpy as np
root = sys.argv[1]; rng = np.random.default_rng(5)
def tile(n=12, m=20, c=9):
    return dict(node_feat=rng.normal(size=(n, 140)).astype('<f4'),
                node_opcode=rng.integers(0, 200, n).astype('u1'),
                edge_index=np.sort(rng.integers(0, n, (m, 2)), axis=0).astype('<i8'),
                config_feat=rng.integers(0, 64, (c, 24)).astype('<f4'),
                config_runtime=rng.integers(1000, 10**6, c).astype('<i8'),
                config_runtime_normalizers=rng.integers(1, 100, c).astype('<i8'))
def save(path, arrays, compressed):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
d = os.path.join(root, 'npz', 'tile', 'xla', 'train')
save(os.path.join(d, 'plain.npz'), tile(), False)
save(os.path.join(d, 'compressed.npz'), tile(), True)
t = tile(); save(os.path.join(d, 'fortran.npz'), {k: np.asfortranarray(v) for k, v in t.items()}, True)
t = tile(); save(os.path.join(d, 'bigendian.npz'), {k: v.astype(v.dtype.newbyteorder('>')) for k, v in t.items()}, False)
t = tile(); t['node_feat'] = t['node_feat'].astype('<f8'); save(os.path.join(d, 'float64.npz'), t, True)
t = tile(); t['edge_index'] = t['edge_index'].astype('<i4'); save(os.path.join(d, 'int32edges.npz'), t, True)
t = tile(); t['node_opcode'] = t['node_opcode'].astype('<i4'); save(os.path.join(d, 'int32opcodes.npz'), t, False)
n, m, c, nc = 30, 40, 25, 6
lay = dict(node_feat=rng.normal(size=(n, 140)).astype('<f4'),
           node_opcode=rng.integers(0, 200, n).astype('u1'),
           edge_index=np.sort(rng.integers(0, n, (m, 2)), axis=0).astype('<i8'),
           node_config_ids=np.sort(rng.choice(n, nc, replace=False)).astype('<i8'),
           node_config_feat=rng.integers(-1, 6, (c, nc, 18)).astype('<f4'),
           config_runtime=rng.integers(10**5, 10**8, c).astype('<i8'),
           node_splits=np.array([[0, 10, 30]], dtype='<i8'))
save(os.path.join(root, 'npz', 'layout', 'xla', 'random', 'valid', 'lay.npz'), lay, True)
lay2 = dict(lay); lay2['node_config_feat'] = np.asfortranarray(lay['node_config_feat'].astype('<f8'))
save(os.path.join(root, 'npz', 'layout', 'nlp', 'default', 'test', 'layf.npz'), lay2, False)
print('made')
)PY";

TEST(IngestExportCliTest, NumpyVariantsRoundTrip) {
  TempDir tmp;
  auto made = RunPython(kMakeVariants, {tmp.File("in")});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  auto r = RunCli({"-q", "ingest", tmp.File("in"), "-o", tmp.File("d.tpug"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"graphs\": 9"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layout:xla:random"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layout:nlp:default"), std::string::npos) << r.out;
  r = RunCli({"-q", "export", tmp.File("d.tpug"), "-o", tmp.File("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string pairs;
  for (const char* name :
       {"plain", "compressed", "fortran", "bigendian", "float64", "int32edges", "int32opcodes"}) {
    pairs +=
        std::string("npz/tile/xla/train/") + name + ".npz npz/tile/xla/train/" + name + ".npz\n";
  }
  pairs += "npz/layout/xla/random/valid/lay.npz npz/layout/xla/random/valid/lay.npz\n";
  pairs += "npz/layout/nlp/default/test/layf.npz npz/layout/nlp/default/test/layf.npz\n";
  auto py = ComparePairs(tmp.File("in"), tmp.File("out"), pairs);
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
  EXPECT_NE(py.out.find("OK 9"), std::string::npos) << py.out << py.err;
}

TEST(IngestExportCliTest, OutputDoesNotDependOnThreadCount) {
  TempDir tmp;
  ASSERT_EQ(RunPython(kMakeVariants, {tmp.File("in")}).exit_code, 0);
  ASSERT_EQ(RunCli({"-q", "-j", "1", "ingest", tmp.File("in"), "-o", tmp.File("a")}).exit_code, 0);
  ASSERT_EQ(RunCli({"-q", "-j", "2", "ingest", tmp.File("in"), "-o", tmp.File("b")}).exit_code, 0);
  // A streaming threshold of 0 streams every layout file; the graphs must still be identical.
  ASSERT_EQ(RunCli({"-q", "-j", "2", "ingest", tmp.File("in"), "-o", tmp.File("c"),
                    "--stream-threshold", "0"})
                .exit_code,
            0);
  std::string a = ReadFileToString(tmp.File("a")).value();
  EXPECT_EQ(a, ReadFileToString(tmp.File("b")).value());
  EXPECT_EQ(a, ReadFileToString(tmp.File("c")).value());
}

TEST(IngestExportCliTest, StatsOfNumpyVariantsMatchNumpy) {
  TempDir tmp;
  ASSERT_EQ(RunPython(kMakeVariants, {tmp.File("in")}).exit_code, 0);
  ASSERT_EQ(RunCli({"-q", "ingest", tmp.File("in"), "-o", tmp.File("d.tpug")}).exit_code, 0);
  auto r = RunCli({"-q", "stats", tmp.File("d.tpug"), "--json", "--per-graph"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ofstream(tmp.File("stats.json")) << r.out;
  auto py = RunPython(R"PY(
import sys, os, json, glob, numpy as np
stats = json.load(open(sys.argv[1])); root = sys.argv[2]
graphs = {(g['collection'], g['name']): g for g in stats['graphs']}
assert len(graphs) == 9, len(graphs)
for f in glob.glob(os.path.join(root, 'npz', '**', '*.npz'), recursive=True):
    parts = f.split(os.sep); i = parts.index('npz')
    coll = ':'.join(parts[i + 1:-2]); z = np.load(f); g = graphs[(coll, parts[-1][:-4])]
    rt = z['config_runtime']
    if 'config_feat' in z.files:
        rows = z['config_feat'].astype('<f4'); nc = 0
    else:
        rows = z['node_config_feat'].reshape(len(rt), -1); nc = z['node_config_ids'].shape[0]
    want = dict(nodes=z['node_feat'].shape[0], edges=z['edge_index'].shape[0], configs=len(rt),
                config_nodes=nc, distinct_configs=len(np.unique(rows, axis=0)),
                runtime_min=int(rt.min()), runtime_max=int(rt.max()))
    got = {k: g[k] for k in want}
    assert got == want, (f, got, want)
    spread = rt.max() / rt.min() - 1
    assert abs(g['runtime_spread'] - spread) <= 1e-8 * spread, (f, g['runtime_spread'], spread)
print('OK')
)PY",
                      {tmp.File("stats.json"), tmp.File("in")});
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
  EXPECT_NE(py.out.find("OK"), std::string::npos) << py.out;
}

// The release's U-Net file measured 294 of its 1,469 distinct layouts more than once: the noise,
// the retest Kendall and both ceilings of `stats`, recomputed with numpy from the .npz.
TEST(IngestExportCliTest, StatsMeasurementNoiseOfTheReleaseUNetMatchesNumpy) {
  TempDir tmp;
  const std::string npz = RealDataPath("npz/release/layout/xla/default/valid/unet_3d.4x4.bf16.npz");
  ASSERT_EQ(
      RunCli({"-q", "ingest", npz, "--collection", "layout:xla:default", "-o", tmp.File("d.tpug")})
          .exit_code,
      0);
  auto r = RunCli({"-q", "stats", tmp.File("d.tpug"), "--json", "--per-graph"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ofstream(tmp.File("stats.json")) << r.out;
  auto py = RunPython(R"PY(
import sys, json, math, numpy as np
g = json.load(open(sys.argv[1]))['graphs'][0]; z = np.load(sys.argv[2])
rt = z['config_runtime'].astype(np.float64)
rows = z['node_config_feat'].reshape(len(rt), -1)
_, first, inverse, counts = np.unique(rows, axis=0, return_index=True, return_inverse=True,
                                      return_counts=True)
inverse = inverse.reshape(-1)
order = np.argsort(first)                  # groups by first appearance
rank = np.empty_like(order); rank[order] = np.arange(len(order))
grp = rank[inverse]; x = np.log(rt); n = len(order)
mean = np.bincount(grp, weights=x, minlength=n) / np.bincount(grp, minlength=n)
rep = np.flatnonzero(np.bincount(grp, minlength=n) > 1)
noise = math.sqrt(((x - mean[grp]) ** 2).sum() / (len(rt) - n))
firsts = [np.flatnonzero(grp == k)[:2] for k in rep]
a = x[[f[0] for f in firsts]]; b = x[[f[1] for f in firsts]]
def tau_b(a, b):
    sa = np.sign(a[:, None] - a[None, :]); sb = np.sign(b[:, None] - b[None, :])
    iu = np.triu_indices(len(a), 1)
    sa, sb = sa[iu], sb[iu]
    return (sa * sb).sum() / math.sqrt((sa != 0).sum() * (sb != 0).sum())
erf = np.vectorize(math.erf)
def agree(t, power):
    iu = np.triu_indices(len(t), 1)
    return (erf(np.abs(t[:, None] - t[None, :])[iu] / (2 * noise)) ** power).mean()
stride = -(-n // 1000); sample = mean[::stride]
def shrink(v, bw):
    if bw == 0: return v
    w = np.exp(-0.5 * ((v[:, None] - sample[None, :]) / bw) ** 2)
    return (w * sample).sum(1) / w.sum(1)
retest = tau_b(a, b)
gaps = [abs(agree(shrink(mean[rep], 0.1 * s * noise), 2) - retest) for s in range(21)]
best = 0.1 * int(np.argmin(gaps))
want = dict(repeated_configs=len(rep), distinct_configs=n, noise=noise, retest_kendall=retest,
            noise_ceiling_upper=agree(sample, 1),
            noise_ceiling=agree(shrink(sample, best * noise), 1))
for k, v in want.items():
    assert abs(g[k] - v) <= 1e-7 * max(1, abs(v)), (k, g[k], v)
assert len(rep) == 294 and n == 1469, (len(rep), n)
print('OK', {k: round(v, 4) for k, v in want.items()})
)PY",
                      {tmp.File("stats.json"), npz});
  EXPECT_EQ(py.exit_code, 0) << py.err << py.out;
  EXPECT_NE(py.out.find("OK"), std::string::npos) << py.out;
  // The table shows the same figures per graph.
  r = RunCli({"-q", "stats", tmp.File("d.tpug"), "--per-graph"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ceiling"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 294 "), std::string::npos) << r.out;
}

TEST(IngestCliTest, MixedReleaseAndRawInputs) {
  // Release .npz files and raw dumps in one run; the kind is told from the content.
  TempDir tmp;
  auto r = RunCli({"-q", "ingest", RealDataPath("npz/tile_test"), RealDataPath("raw"), "-o",
                   tmp.File("d.tpug"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"files\": 5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"skipped\": 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layout:"), std::string::npos) << r.out;
}

// Each bad input: exit code 1, a message naming the file and the problem, nothing written.
struct BadCase {
  const char* name;
  const char* make;      // python making argv[1]/in/<file>
  const char* file;      // the bad file's name
  const char* expected;  // a fragment of the error message
};

const char* kGoodTile = R"PY(
import sys, os, io, zipfile, numpy as np
root = os.path.join(sys.argv[1], 'in'); os.makedirs(root, exist_ok=True)
rng = np.random.default_rng(1); n, m, c = 15, 15, 7
good = dict(node_feat=rng.normal(size=(n, 140)).astype('<f4'),
            node_opcode=rng.integers(0, 200, n).astype('u1'),
            edge_index=rng.integers(0, n, (m, 2)).astype('<i8'),
            config_feat=rng.integers(0, 9, (c, 24)).astype('<f4'),
            config_runtime=rng.integers(1, 99, c).astype('<i8'),
            config_runtime_normalizers=np.ones(c, dtype='<i8'))
)PY";

// Prints the case name (instead of the struct's bytes) in test listings and failures.
void PrintTo(const BadCase& bc, std::ostream* os) { *os << bc.name; }

class IngestBadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(IngestBadInputTest, FailsCleanly) {
  const BadCase& bc = GetParam();
  TempDir tmp;
  auto made = RunPython(std::string(kGoodTile) + bc.make, {tmp.path()});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  fs::create_directories(tmp.File("outdir"));
  const std::string out = tmp.File("outdir/d.tpug");
  auto r = RunCli({"-q", "ingest", tmp.File("in"), "-o", out});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find(bc.file), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(bc.expected), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::is_empty(tmp.File("outdir")));
}

INSTANTIATE_TEST_SUITE_P(
    ReleaseNpz, IngestBadInputTest,
    ::testing::Values(BadCase{"truncated_zip", R"PY(
p = os.path.join(root, 'trunc.npz'); np.savez_compressed(p, **good)
b = open(p, 'rb').read(); open(p, 'wb').write(b[:len(b) // 2])
)PY",
                              "trunc.npz", "truncated"},
                      BadCase{"flipped_byte", R"PY(
p = os.path.join(root, 'flip.npz'); np.savez(p, **good)
b = bytearray(open(p, 'rb').read()); i = b.find(good['node_feat'].tobytes()[:64]) + 100
b[i] ^= 0x01; open(p, 'wb').write(bytes(b))
)PY",
                              "flip.npz", "CRC"},
                      BadCase{"missing_key", R"PY(
g = dict(good); del g['node_opcode']; np.savez(os.path.join(root, 'nokey.npz'), **g)
)PY",
                              "nokey.npz", "missing key 'node_opcode'"},
                      BadCase{"feature_columns", R"PY(
g = dict(good); g['node_feat'] = g['node_feat'][:, :139].copy()
np.savez(os.path.join(root, 'cols.npz'), **g)
)PY",
                              "cols.npz", "node_feat has 139 columns, expected 140"},
                      BadCase{"edge_out_of_range", R"PY(
g = dict(good); g['edge_index'] = g['edge_index'].copy(); g['edge_index'][3, 1] = 15
np.savez(os.path.join(root, 'edge.npz'), **g)
)PY",
                              "edge.npz", "edge_index[3, 1] = 15 is out of range"},
                      BadCase{"declared_shape_too_large", R"PY(
buf = io.BytesIO(); np.lib.format.write_array(buf, good['node_feat']); raw = buf.getvalue()
hdr_end = raw.index(b'\n') + 1
hdr = raw[:hdr_end].replace(b'(15, 140)', b'(9999999, 140)')
assert len(hdr) == hdr_end + 5; hdr = hdr[:hdr_end - 1] + b'\n'  # drop 5 padding spaces
with zipfile.ZipFile(os.path.join(root, 'shape.npz'), 'w') as z:
    for k, v in good.items():
        if k == 'node_feat':
            z.writestr(k + '.npy', hdr + raw[hdr_end:])
        else:
            b = io.BytesIO(); np.lib.format.write_array(b, v); z.writestr(k + '.npy', b.getvalue())
)PY",
                              "shape.npz", "declares shape (9999999, 140)"},
                      BadCase{"not_a_zip", R"PY(
open(os.path.join(root, 'notes.txt'), 'w').write('this is not a dataset file\n' * 5)
)PY",
                              "notes.txt", "notes.txt: "}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(IngestCliTest, KeepGoingSkipsBadFilesAndCountsThem) {
  TempDir tmp;
  ASSERT_EQ(RunPython(std::string(kGoodTile) + R"PY(
np.savez(os.path.join(root, 'good.npz'), **good)
g = dict(good); del g['config_runtime']; np.savez(os.path.join(root, 'bad.npz'), **g)
)PY",
                      {tmp.path()})
                .exit_code,
            0);
  auto r = RunCli({"-q", "ingest", tmp.File("in"), "-o", tmp.File("d.tpug")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.npz: missing key 'config_runtime'"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp.File("d.tpug")));
  r = RunCli({"ingest", tmp.File("in"), "-o", tmp.File("d.tpug"), "--keep-going", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"graphs\": 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"skipped\": 1"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("skipped 1 of 2"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(tmp.File("d.tpug")));
}

TEST(IngestCliTest, DuplicateGraphsAreAnError) {
  TempDir tmp;
  ASSERT_EQ(RunPython(std::string(kGoodTile) + R"PY(
for d in ('a', 'b'):
    os.makedirs(os.path.join(root, d)); np.savez(os.path.join(root, d, 'same.npz'), **good)
)PY",
                      {tmp.path()})
                .exit_code,
            0);
  auto r = RunCli({"-q", "ingest", tmp.File("in"), "-o", tmp.File("d.tpug")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("duplicate graph 'same' in collection tile:xla"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(tmp.File("d.tpug")));
}

TEST(IngestCliTest, LayoutOutsideReleaseTreeNeedsCollection) {
  TempDir tmp;
  ASSERT_EQ(RunPython(kMakeVariants, {tmp.File("in")}).exit_code, 0);
  const std::string lay = tmp.File("in/npz/layout/xla/random/valid/lay.npz");
  fs::copy_file(lay, tmp.File("loose.npz"));
  auto r = RunCli({"-q", "ingest", tmp.File("loose.npz"), "-o", tmp.File("d.tpug")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--collection"), std::string::npos) << r.err;
  r = RunCli({"-q", "ingest", tmp.File("loose.npz"), "-o", tmp.File("d.tpug"), "--collection",
              "tile:xla"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is a tile collection"), std::string::npos) << r.err;
  r = RunCli({"-q", "ingest", tmp.File("loose.npz"), "-o", tmp.File("d.tpug"), "--collection",
              "layout:xla:default", "--split", "train", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("layout:xla:default"), std::string::npos);
}

TEST(IngestCliTest, ExportFiltersAndStatsOfMissingFile) {
  TempDir tmp;
  ASSERT_EQ(RunPython(kMakeVariants, {tmp.File("in")}).exit_code, 0);
  ASSERT_EQ(RunCli({"-q", "ingest", tmp.File("in"), "-o", tmp.File("d.tpug")}).exit_code, 0);
  auto r = RunCli({"-q", "export", tmp.File("d.tpug"), "-o", tmp.File("out"), "--collection",
                   "layout:xla:random"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(tmp.File("out/npz/layout/xla/random/valid/lay.npz")));
  EXPECT_FALSE(fs::exists(tmp.File("out/npz/tile")));
  // No graph matches: exit code 3 (not 1), for scripts; the same for evaluate, predict, tune.
  r = RunCli({"-q", "export", tmp.File("d.tpug"), "-o", tmp.File("out2"), "--graph", "nope"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("no graph matches"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp.File("out2")));
  r = RunCli({"-q", "evaluate", "--data", tmp.File("d.tpug"), "--baseline", "index", "--collection",
              "layout:nlp:random"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  r = RunCli({"-q", "predict", "--data", tmp.File("d.tpug"), "--baseline", "index", "--collection",
              "layout:nlp:random", "-o", tmp.File("p.csv")});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_FALSE(fs::exists(tmp.File("p.csv")));
  r = RunCli({"-q", "stats", tmp.File("missing.tpug")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("missing.tpug"), std::string::npos);
}

}  // namespace
}  // namespace tpugraphs
