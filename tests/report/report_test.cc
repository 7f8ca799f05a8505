#include "tpugraphs/report/report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>

#include "testing/test_util.h"
#include "tpugraphs/common/file_util.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/train/model_file.h"
#include "tpugraphs/train/trainer.h"
#include "train/train_test_util.h"

namespace tpugraphs::report {
namespace {

using ::tpugraphs::testing::TempDir;

// Parses the HTML with Python's html.parser, checks that every element is closed in order and
// that each series' data-points equals what it draws (polyline vertices, circles, bars or range
// lines). Prints "series <chart>\t<name>\t<points>" lines and "error <message>" lines.
constexpr char kParser[] = R"PY(
import sys
from html.parser import HTMLParser
VOID = {'meta', 'br', 'img', 'hr', 'input', 'link', 'area', 'base', 'col', 'embed', 'source',
        'track', 'wbr'}
class P(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.out = [], [], []
        self.chart, self.series = None, None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag not in VOID:
            self.stack.append(tag)
        if tag == 'svg' and a.get('class') == 'chart':
            self.chart = a['data-chart']
        if tag == 'g' and a.get('class') == 'series':
            self.series = {'name': a['data-name'], 'declared': int(a['data-points']),
                           'circle': 0, 'vertex': 0, 'bar': 0, 'line': 0}
        self.count(tag, a)
    def handle_startendtag(self, tag, attrs):
        self.count(tag, dict(attrs))
    def count(self, tag, a):
        s = self.series
        if s is None:
            return
        if tag == 'circle': s['circle'] += 1
        if tag == 'polyline': s['vertex'] += len(a['points'].split())
        if tag == 'rect' and a.get('class') == 'bar': s['bar'] += 1
        if tag == 'line': s['line'] += 1
    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append('unexpected </%s>, open %s' % (tag, self.stack[-3:]))
            return
        self.stack.pop()
        if tag == 'g' and self.series is not None:
            s = self.series
            drawn = s['bar'] or s['line'] or s['vertex'] or s['circle']
            if drawn != s['declared']:
                self.errors.append('%s/%s declares %d points, draws %d' %
                                   (self.chart, s['name'], s['declared'], drawn))
            self.out.append('series %s\t%s\t%d' % (self.chart, s['name'], drawn))
            self.series = None
        if tag == 'svg':
            self.chart = None
p = P()
p.feed(open(sys.argv[1], encoding='utf-8').read())
p.close()
if p.stack:
    p.errors.append('unclosed %s' % p.stack)
for line in p.out:
    print(line)
for e in p.errors:
    print('error ' + e)
)PY";

struct Parsed {
  std::vector<std::string> errors;
  // chart id -> (series name, points) in document order
  std::map<std::string, std::vector<std::pair<std::string, int64_t>>> charts;
};

Parsed ParseHtml(const std::string& path) {
  Parsed p;
  auto r = ::tpugraphs::testing::RunPython(kParser, {path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("error ", 0) == 0) {
      p.errors.push_back(line.substr(6));
    } else if (line.rfind("series ", 0) == 0) {
      const size_t t1 = line.find('\t'), t2 = line.rfind('\t');
      p.charts[line.substr(7, t1 - 7)].push_back(
          {line.substr(t1 + 1, t2 - t1 - 1), std::stoll(line.substr(t2 + 1))});
    }
  }
  return p;
}

int64_t Points(const Parsed& p, const std::string& chart, const std::string& series) {
  auto it = p.charts.find(chart);
  if (it == p.charts.end()) return -1;
  for (const auto& [name, n] : it->second) {
    if (name == series) return n;
  }
  return -2;
}

constexpr char kOddName[] = "t<0>&\"q\"";

// Tile and layout graphs: 5 train, 2 valid, 4 test each; one test graph has an awkward name.
void WriteDataset(const std::string& path) {
  auto w = io::DatasetWriter::Create(path);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  int seed = 0;
  for (TaskKind kind : {TaskKind::kTile, TaskKind::kLayout}) {
    for (int i = 0; i < 11; ++i) {
      const std::string split = i < 5 ? "train" : i < 7 ? "valid" : "test";
      std::string name = std::string("g").append(std::to_string(i));
      if (i == 7) name = kOddName;
      Graph g = train::testing::SyntheticGraph(kind, name, split, 16 + i % 5, 24, 500 + seed++);
      ASSERT_TRUE((*w)->Add(g).ok());
    }
  }
  ASSERT_TRUE((*w)->Finish().ok());
}

TrainConfig SmallConfig(const std::string& data, const std::string& collection,
                        const std::string& output, int epochs) {
  TrainConfig c;
  c.set_dataset(data);
  c.set_collection(collection);
  c.set_output(output);
  c.set_epochs(epochs);
  c.set_patience(0);
  c.set_batch_graphs(3);
  c.set_configs_per_graph(8);
  c.set_learning_rate(3e-3);
  c.mutable_model()->set_hidden_dim(8);
  c.mutable_model()->set_num_layers(2);
  c.mutable_model()->set_opcode_embedding_dim(4);
  c.mutable_model()->set_head_hidden_dim(8);
  c.set_seed(5);
  c.set_threads(1);
  return c;
}

class ReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    data_ = dir_->File("data.tpug");
    WriteDataset(data_);
    tile_ = dir_->File("tile.tpm");
    layout_ = dir_->File("layout.tpm");
    ASSERT_TRUE(train::Train(SmallConfig(data_, "tile:synth", tile_, 3)).ok());
    ASSERT_TRUE(train::Train(SmallConfig(data_, "layout:synth:random", layout_, 4)).ok());
  }
  static void TearDownTestSuite() { delete dir_; }

  static TempDir* dir_;
  static std::string data_, tile_, layout_;
};
TempDir* ReportTest::dir_ = nullptr;
std::string ReportTest::data_, ReportTest::tile_, ReportTest::layout_;

TEST_F(ReportTest, EveryChartHasOnePointPerEpochAndPerConfiguration) {
  ReportOptions o;
  o.models = {tile_, layout_};
  o.data = data_;
  o.split = "test";
  o.threads = 1;
  TempDir out;
  const std::string html_path = out.File("report.html");
  ASSERT_TRUE(WriteReport(o, html_path).ok());
  const Parsed p = ParseHtml(html_path);
  EXPECT_TRUE(p.errors.empty()) << p.errors.front();

  // Learning curves: one point per epoch of each model, overlaid.
  auto tile_file = train::ReadModelFile(tile_);
  auto layout_file = train::ReadModelFile(layout_);
  ASSERT_TRUE(tile_file.ok() && layout_file.ok());
  EXPECT_EQ(tile_file->summary().history_size(), 3);
  EXPECT_EQ(layout_file->summary().history_size(), 4);
  EXPECT_EQ(Points(p, "loss", tile_), 3);
  EXPECT_EQ(Points(p, "loss", layout_), 4);
  EXPECT_EQ(Points(p, "grad-norm", layout_), 4);
  EXPECT_EQ(Points(p, "learning-rate", tile_), 3);
  EXPECT_EQ(Points(p, "valid-" + tile_file->summary().metric_name(), tile_), 3);
  EXPECT_EQ(Points(p, "valid-valid_kendall", layout_), 4);
  // The tile model's curve is not on the layout metric's chart.
  EXPECT_EQ(Points(p, "valid-valid_kendall", tile_), -2);

  // Per-graph bars: the 4 test graphs of each model's collection, model and random baseline.
  // Evaluation 0 (tile) draws chart per-graph-0, evaluation 1 (layout) per-graph-3.
  for (const char* chart : {"per-graph-0", "per-graph-3"}) {
    EXPECT_EQ(Points(p, chart, "model"), 4) << chart;
    EXPECT_EQ(Points(p, chart, "random baseline"), 4) << chart;
  }
  // Worst 3 and best 1 (4 graphs): a scatter with one point per configuration (24) and a top-K
  // curve with K = 1..24 for each.
  for (const std::string sub : {"0", "3"}) {
    for (const std::string which : {"worst-1", "worst-2", "worst-3", "best-1"}) {
      EXPECT_EQ(Points(p, "scatter-" + sub + "-" + which, ""), 24) << sub << which;
      EXPECT_EQ(Points(p, "topk-" + sub + "-" + which, "model"), 24) << sub << which;
      EXPECT_EQ(Points(p, "topk-" + sub + "-" + which, "random ranking (expected)"), 24);
    }
    EXPECT_EQ(p.charts.count("scatter-" + sub + "-best-2"), 0u);
  }
  // Dataset panel: one range and one size point per graph.
  for (const std::string index : {"0", "1"}) {
    EXPECT_EQ(Points(p, "spread-" + index, "min..max, dot = median"), 4);
    EXPECT_EQ(Points(p, "sizes-" + index, ""), 4);
  }
}

TEST_F(ReportTest, WorstGraphsComeFirst) {
  ReportOptions o;
  o.models = {layout_, tile_};
  o.data = data_;
  o.split = "test";
  o.threads = 1;
  auto html = BuildReport(o);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  for (const auto& [chart, ascending] :
       {std::pair<std::string, bool>{"per-graph-1", true}, {"per-graph-2", false}}) {
    const size_t begin = html->find("data-chart=\"" + chart + "\"");
    ASSERT_NE(begin, std::string::npos) << chart;
    const std::string svg = html->substr(begin, html->find("</svg>", begin) - begin);
    std::vector<double> values;
    const std::regex re(" model: ([^<]+)</title>");
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
         ++it) {
      values.push_back(std::stod((*it)[1]));
    }
    ASSERT_EQ(values.size(), 4u) << chart;
    // Layout (tau, higher is better): ascending; tile (error, lower is better): descending.
    EXPECT_TRUE(ascending ? std::is_sorted(values.begin(), values.end())
                          : std::is_sorted(values.rbegin(), values.rend()))
        << chart;
  }
}

TEST_F(ReportTest, EscapesGraphNamesAndReferencesNothingExternal) {
  ReportOptions o;
  o.models = {layout_};
  o.data = data_;
  o.split = "test";
  o.threads = 1;
  o.extreme_graphs = 4;  // every test graph in detail, the odd name among them
  auto html = BuildReport(o);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  EXPECT_EQ(html->find(kOddName), std::string::npos);
  EXPECT_EQ(html->find("t<0>"), std::string::npos);
  EXPECT_NE(html->find("t&lt;0&gt;&amp;&quot;q&quot;"), std::string::npos);
  for (const char* external :
       {"http", "src=", "href", "url(", "@import", "<script", "<link", "<iframe", "<img"}) {
    EXPECT_EQ(html->find(external), std::string::npos) << external;
  }
  // A few hundred KB at most for this size; bounded whatever the number of configurations.
  EXPECT_LT(html->size(), 1u << 20);
}

TEST_F(ReportTest, ScatterPlotsAreSubsampledAndTheFileStaysSmall) {
  ReportOptions o;
  o.models = {layout_, tile_};
  o.data = data_;
  o.threads = 1;  // all splits: 11 graphs per collection
  o.max_scatter_points = 10;
  o.max_top_k = 5;
  o.max_bar_graphs = 6;
  TempDir out;
  ASSERT_TRUE(WriteReport(o, out.File("r.html")).ok());
  const Parsed p = ParseHtml(out.File("r.html"));
  EXPECT_TRUE(p.errors.empty()) << p.errors.front();
  EXPECT_EQ(Points(p, "scatter-1-worst-1", ""), 10);
  EXPECT_EQ(Points(p, "topk-1-worst-1", "model"), 5);
  EXPECT_EQ(Points(p, "per-graph-1", "model"), 6);
  EXPECT_EQ(Points(p, "spread-0", "min..max, dot = median"), 11);
}

TEST_F(ReportTest, ModelFilesWithoutHistoryShowTheirValidationMetric) {
  auto file = train::ReadModelFile(layout_);
  ASSERT_TRUE(file.ok());
  file->mutable_summary()->clear_history();
  TempDir out;
  const std::string old_model = out.File("old.tpm");
  ASSERT_TRUE(train::WriteModelFile(old_model, *file, train::kFileKindModel).ok());
  ReportOptions o;
  o.models = {old_model, tile_};
  const std::string html_path = out.File("curves.html");
  ASSERT_TRUE(WriteReport(o, html_path).ok());
  const Parsed p = ParseHtml(html_path);
  EXPECT_TRUE(p.errors.empty()) << p.errors.front();
  EXPECT_EQ(Points(p, "valid-valid_kendall", old_model), file->summary().epoch_metric_size());
  EXPECT_EQ(Points(p, "loss", old_model), -2);  // no history, no loss curve
  EXPECT_EQ(Points(p, "loss", tile_), 3);
  EXPECT_EQ(p.charts.count("per-graph-0"), 0u);  // no dataset, no ranking section
  auto html = ReadFileToString(html_path);
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("No per-epoch training history"), std::string::npos);
}

TEST_F(ReportTest, BadInputNamesTheFileAndWritesNothing) {
  TempDir out;
  const std::string html = out.File("r.html");
  ReportOptions o;
  o.models = {dir_->File("missing.tpm")};
  auto st = WriteReport(o, html);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("missing.tpm"), std::string::npos) << st.ToString();
  // A dataset is not a model file.
  o.models = {data_};
  st = WriteReport(o, html);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("data.tpug"), std::string::npos) << st.ToString();
  // A dataset without graphs of the model's task.
  const std::string tile_only = out.File("tile_only.tpug");
  {
    auto w = io::DatasetWriter::Create(tile_only);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(
        (*w)->Add(train::testing::SyntheticGraph(TaskKind::kTile, "x", "test", 12, 8, 1)).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  o.models = {layout_};
  o.data = tile_only;
  st = WriteReport(o, html);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("tile_only.tpug"), std::string::npos) << st.ToString();
  EXPECT_TRUE(out.List() == std::vector<std::string>{"tile_only.tpug"});
}

// --- tune traces ---

constexpr char kTraceHeader[] =
    "graph\tround\tmeasured\tnew\tbest_runtime\tdefault_runtime\tspeedup\tbatch_kendall\tseconds"
    "\toutput\n";
constexpr char kGraphA[] = "layout:synth:random:prog3";
constexpr char kGraphB[] = "layout:xla:default:a<b>&c";

// Two graphs, three rounds each, as `tune --measure-cmd` prints them (rounds interleaved).
// With nan_speedup the default configuration was never measured.
std::string TwoGraphTrace(bool nan_speedup) {
  const std::string def = nan_speedup ? "nan" : "12";
  auto sp = [&](const char* v) { return nan_speedup ? std::string("nan") : std::string(v); };
  std::string t = kTraceHeader;
  t += std::string(kGraphA) + "\t1\t4\t4\t9.5\t" + def + "\t" + sp("1.263") +
       "\tnan\t0.5\tout/tuned dir/prog3.tsv\n";
  t += std::string(kGraphB) + "\t1\t4\t4\t0.002\t" + def + "\t" + sp("6000") +
       "\tnan\t0.4\tout/tuned dir/b.tsv\n";
  t += std::string(kGraphA) + "\t2\t8\t4\t8.25\t" + def + "\t" + sp("1.455") +
       "\t0.4\t1.1\tout/tuned dir/prog3.tsv\n";
  t += std::string(kGraphB) + "\t2\t7\t3\t0.0015\t" + def + "\t" + sp("8000") +
       "\t-0.3333\t0.9\tout/tuned dir/b.tsv\n";
  t += std::string(kGraphA) + "\t3\t12\t4\t8\t" + def + "\t" + sp("1.5") +
       "\t0.6667\t1.6\tout/tuned dir/prog3.tsv\n";
  t += std::string(kGraphB) + "\t3\t11\t4\t0.0015\t" + def + "\t" + sp("8000") +
       "\t1\t1.3\tout/tuned dir/b.tsv\n";
  return t;
}

int64_t CountOf(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size()))
    ++n;
  return n;
}

TEST(TuneTraceReportTest, TwoGraphsThreeRoundsWithoutAModel) {
  TempDir dir;
  const std::string trace = dir.File("trace.tsv");
  ASSERT_TRUE(WriteFileAtomically(trace, TwoGraphTrace(false)).ok());
  ReportOptions o;
  o.tune_traces = {trace};
  const std::string html_path = dir.File("tune.html");
  ASSERT_TRUE(WriteReport(o, html_path).ok());
  auto html = ReadFileToString(html_path);
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find(">Tuning loops</h2>"), std::string::npos);
  EXPECT_NE(html->find(">" + trace + "</h3>"), std::string::npos);
  EXPECT_NE(html->find(kGraphA), std::string::npos);
  EXPECT_NE(html->find("layout:xla:default:a&lt;b&gt;&amp;c"), std::string::npos);
  EXPECT_EQ(html->find("a<b>"), std::string::npos);
  // No model: no model table, no learning curves.
  EXPECT_EQ(html->find("id=\"models\""), std::string::npos);
  EXPECT_EQ(html->find("data-chart=\"loss\""), std::string::npos);
  // One SVG per chart.
  EXPECT_EQ(CountOf(*html, "<svg class=\"chart\""), 2);
  EXPECT_EQ(CountOf(*html, "data-chart=\"tune-best-0\""), 1);
  EXPECT_EQ(CountOf(*html, "data-chart=\"tune-kendall-0\""), 1);
  EXPECT_NE(html->find("speedup over the default"), std::string::npos);
  const Parsed p = ParseHtml(html_path);
  EXPECT_TRUE(p.errors.empty()) << p.errors.front();
  EXPECT_EQ(Points(p, "tune-best-0", kGraphA), 3);
  EXPECT_EQ(Points(p, "tune-best-0", kGraphB), 3);
  EXPECT_EQ(Points(p, "tune-kendall-0", kGraphA), 2);  // round 1 is nan
  EXPECT_EQ(Points(p, "tune-kendall-0", kGraphB), 2);
  // The table: rounds, final measured, best runtime and speedup of each graph.
  EXPECT_NE(html->find("<td>" + std::string(kGraphA) +
                       "</td><td>3</td><td>12</td><td>8</td>"
                       "<td>1.5</td>"),
            std::string::npos);
  EXPECT_NE(html->find("<td>layout:xla:default:a&lt;b&gt;&amp;c</td><td>3</td><td>11</td>"
                       "<td>0.0015</td><td>8000</td>"),
            std::string::npos);
}

TEST(TuneTraceReportTest, NanSpeedupsShowTheBestRuntimeOnALogAxis) {
  TempDir dir;
  const std::string trace = dir.File("trace.tsv");
  ASSERT_TRUE(WriteFileAtomically(trace, TwoGraphTrace(true)).ok());
  ReportOptions o;
  o.tune_traces = {trace};
  ASSERT_TRUE(WriteReport(o, dir.File("r.html")).ok());
  auto html = ReadFileToString(dir.File("r.html"));
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("Best runtime so far"), std::string::npos);
  EXPECT_NE(html->find("best runtime (log)"), std::string::npos);
  const Parsed p = ParseHtml(dir.File("r.html"));
  EXPECT_TRUE(p.errors.empty()) << p.errors.front();
  EXPECT_EQ(Points(p, "tune-best-0", kGraphA), 3);
  EXPECT_EQ(Points(p, "tune-best-0", kGraphB), 3);
  EXPECT_NE(html->find("<td>0.0015</td><td>nan</td>"), std::string::npos);
}

// Benchmarks write methods as series with their own x positions and rounds.
TEST(TuneTraceReportTest, SeriesWithTheirOwnXValuesAndRounds) {
  TempDir dir;
  std::string t = kTraceHeader;
  t += "loop\t1\t8\t8\t5\t10\t2\t0.5\t1\tx\n";
  t += "loop\t2\t16\t8\t4\t10\t2.5\t0.7\t2\tx\n";
  t += "random x10\t1\t10\t10\t6\t10\t1.667\tnan\t0\tx\n";
  t += "random x10\t5\t50\t40\t4.5\t10\t2.222\tnan\t0\tx\n";
  t += "random x10\t9\t90\t40\t4\t10\t2.5\tnan\t0\tx\n";
  ASSERT_TRUE(WriteFileAtomically(dir.File("bench.tsv"), t).ok());
  ReportOptions o;
  o.tune_traces = {dir.File("bench.tsv")};
  ASSERT_TRUE(WriteReport(o, dir.File("r.html")).ok());
  const Parsed p = ParseHtml(dir.File("r.html"));
  EXPECT_TRUE(p.errors.empty()) << p.errors.front();
  EXPECT_EQ(Points(p, "tune-best-0", "loop"), 2);
  EXPECT_EQ(Points(p, "tune-best-0", "random x10"), 3);
  EXPECT_EQ(Points(p, "tune-kendall-0", "loop"), 2);
  EXPECT_EQ(Points(p, "tune-kendall-0", "random x10"), 0);
}

TEST(TuneTraceReportTest, AHeaderAloneDrawsEmptyCharts) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.File("t.tsv"), kTraceHeader).ok());
  ReportOptions o;
  o.tune_traces = {dir.File("t.tsv")};
  auto html = BuildReport(o);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  EXPECT_NE(html->find("0 series, 0 rows"), std::string::npos);
  EXPECT_EQ(CountOf(*html, "no data"), 2);
}

TEST(TuneTraceReportTest, ManySeriesAreGreyUnderTheirMedian) {
  TempDir dir;
  std::string t = kTraceHeader;
  // 13 graphs; graph i measures 4 per round and ends after 2 + i % 3 rounds; best runtime 1,
  // default and speedup i + round + 1.
  for (int i = 0; i < 13; ++i) {
    for (int round = 1; round <= 2 + i % 3; ++round) {
      char row[96];
      std::snprintf(row, sizeof(row), "g%d\t%d\t%d\t4\t1\t%d\t%d\t0.5\t1\tout\n", i, round,
                    4 * round, i + round + 1, i + round + 1);
      t += row;
    }
  }
  ASSERT_TRUE(WriteFileAtomically(dir.File("many.tsv"), t).ok());
  ReportOptions o;
  o.tune_traces = {dir.File("many.tsv")};
  ASSERT_TRUE(WriteReport(o, dir.File("r.html")).ok());
  auto html = ReadFileToString(dir.File("r.html"));
  ASSERT_TRUE(html.ok());
  const Parsed p = ParseHtml(dir.File("r.html"));
  EXPECT_TRUE(p.errors.empty()) << p.errors.front();
  // Every series drawn (the first one named in the legend), plus the median at x = 4, 8, 12, 16.
  EXPECT_EQ(Points(p, "tune-best-0", "each of the 13 series"), 2);
  EXPECT_EQ(p.charts.at("tune-best-0").size(), 14u);
  EXPECT_EQ(Points(p, "tune-best-0", "median"), 4);
  EXPECT_EQ(Points(p, "tune-kendall-0", "median"), 4);
  EXPECT_EQ(Points(p, "tune-best-0", "g1"), -2);  // not in the legend
  EXPECT_NE(html->find("13 series, each in light grey"), std::string::npos);
  EXPECT_NE(html->find("opacity=\"0.35\""), std::string::npos);
  EXPECT_EQ(CountOf(*html, "<tr><td>g"), 13);  // the table lists every series
}

TEST_F(ReportTest, ModelsAndTuneTracesTogether) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.File("a.tsv"), TwoGraphTrace(false)).ok());
  ASSERT_TRUE(WriteFileAtomically(dir.File("b.tsv"), TwoGraphTrace(true)).ok());
  ReportOptions o;
  o.models = {layout_};
  o.tune_traces = {dir.File("a.tsv"), dir.File("b.tsv")};
  ASSERT_TRUE(WriteReport(o, dir.File("r.html")).ok());
  const Parsed p = ParseHtml(dir.File("r.html"));
  EXPECT_TRUE(p.errors.empty()) << p.errors.front();
  EXPECT_EQ(Points(p, "loss", layout_), 4);
  EXPECT_EQ(Points(p, "tune-best-0", kGraphA), 3);
  EXPECT_EQ(Points(p, "tune-best-1", kGraphA), 3);
  EXPECT_EQ(Points(p, "tune-kendall-1", kGraphB), 2);
}

TEST(TuneTraceReportTest, NeitherModelNorTraceIsAUsageError) {
  TempDir dir;
  ReportOptions o;
  auto st = WriteReport(o, dir.File("no/such/dir/r.html"));
  EXPECT_EQ(st.code(), StatusCode::kUsage) << st.ToString();
  EXPECT_NE(st.message().find("--tune-trace"), std::string::npos) << st.ToString();
  EXPECT_EQ(BuildReport(o).status().code(), StatusCode::kUsage);
}

TEST(TuneTraceReportTest, BadTracesNameTheFileAndLineAndWriteNothing) {
  TempDir dir;
  const std::string html = dir.File("r.html");
  const std::string trace = dir.File("trace.tsv");
  ReportOptions o;
  o.tune_traces = {trace};
  // A missing file.
  auto st = WriteReport(o, html);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  EXPECT_NE(st.message().find(trace), std::string::npos) << st.ToString();
  const std::string good_row = "g\t1\t4\t4\t1.5\t2\t1.333\t0.5\t1\tout file.tsv\n";
  const std::string header = kTraceHeader;
  std::string no_speedup = header;
  no_speedup.replace(no_speedup.find("\tspeedup"), 8, "");
  struct Case {
    std::string text;
    std::string where;  // "trace.tsv:LINE:"
    std::string says;
  };
  const std::vector<Case> cases = {
      {"", ":1:", "header"},
      {no_speedup + "g\t1\t4\t4\t1.5\t2\t0.5\t1\tout\n", ":1:", "no column \"speedup\""},
      {header.substr(0, header.size() - 1) + "\tnotes\n" + good_row,
       ":1:", "unknown column \"notes\""},
      {"graph\tgraph\t" + header.substr(6), ":1:", "twice"},
      {header + good_row + "g\t2\t8\t4\t1.5\t2\t1.333\t0.5\t1\n", ":3:", "found 9"},
      {header + good_row + good_row + "g\t2\t8\t4\t1.5\t2\t1.333\t0.5\t1\tout\textra\n",
       ":4:", "found 11"},
      {header + "g\tone\t4\t4\t1.5\t2\t1.333\t0.5\t1\tout\n", ":2:", "round \"one\""},
      {header + "g\t0\t4\t4\t1.5\t2\t1.333\t0.5\t1\tout\n", ":2:", "round \"0\""},
      {header + good_row + "g\t2\t8.5\t4\t1.5\t2\t1.333\t0.5\t1\tout\n", ":3:", "measured"},
      {header + "g\t1\t4\t-1\t1.5\t2\t1.333\t0.5\t1\tout\n", ":2:", "new \"-1\""},
      {header + "\n" + good_row + "g\t2\t8\t4\tfast\t2\t1.333\t0.5\t1\tout\n",
       ":4:", "best_runtime \"fast\""},
      {header + "g\t1\t4\t4\tnan\t2\t1.333\t0.5\t1\tout\n", ":2:", "best_runtime \"nan\""},
      {header + "g\t1\t4\t4\t1.5\t-2\t1.333\t0.5\t1\tout\n", ":2:", "default_runtime"},
      {header + "g\t1\t4\t4\t1.5\t2\t1.3x\t0.5\t1\tout\n", ":2:", "speedup \"1.3x\""},
      {header + "g\t1\t4\t4\t1.5\t2\t1.333\t1.5\t1\tout\n", ":2:", "batch_kendall \"1.5\""},
      {header + "g\t1\t4\t4\t1.5\t2\t1.333\t0.5\t\tout\n", ":2:", "seconds \"\""},
      {header + "\t1\t4\t4\t1.5\t2\t1.333\t0.5\t1\tout\n", ":2:", "empty graph"},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(WriteFileAtomically(trace, c.text).ok());
    st = WriteReport(o, html);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(st.message().find(trace + c.where), std::string::npos) << st.ToString() << "\n"
                                                                     << c.text;
    EXPECT_NE(st.message().find(c.says), std::string::npos) << st.ToString() << "\n" << c.text;
  }
  // A model next to a bad trace: the trace's error, before any model is read.
  o.models = {dir.File("missing.tpm")};
  st = WriteReport(o, html);
  EXPECT_NE(st.message().find(trace + ":2:"), std::string::npos) << st.ToString();
  EXPECT_TRUE(dir.List() == std::vector<std::string>{"trace.tsv"});
}

}  // namespace
}  // namespace tpugraphs::report
