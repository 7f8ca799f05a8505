#include "tpugraphs/report/svg_plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <regex>
#include <set>
#include <string>

namespace tpugraphs::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int64_t Count(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size()))
    ++n;
  return n;
}

// data-points of the series named `name`, or -1.
int64_t SeriesPoints(const std::string& svg, const std::string& escaped_name) {
  std::smatch m;
  const std::regex re(
      "data-name=\"" +
      std::regex_replace(escaped_name, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
      "\" data-points=\"([0-9]+)\"");
  if (!std::regex_search(svg, m, re)) return -1;
  return std::stoll(m[1]);
}

TEST(EscapeXmlTest, EscapesMarkupCharacters) {
  EXPECT_EQ(EscapeXml("a<b&c>\"d'e"), "a&lt;b&amp;c&gt;&quot;d&#39;e");
  EXPECT_EQ(EscapeXml("plain_name.1"), "plain_name.1");
  EXPECT_EQ(EscapeXml(""), "");
}

TEST(NiceTicksTest, KnownRanges) {
  const auto unit = NiceTicks(0, 1, 6);
  ASSERT_EQ(unit.size(), 6u);
  for (size_t i = 0; i < unit.size(); ++i) EXPECT_NEAR(unit[i], 0.2 * i, 1e-12) << i;
  EXPECT_EQ(NiceTicks(3, 97, 6), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(NiceTicks(1, 10, 6), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(NiceTicks(-0.37, 0.81, 6), (std::vector<double>{-0.5, 0, 0.5, 1}));
  const auto t = NiceTicks(-0.37, 0.81, 10);  // more ticks wanted: step 0.2
  ASSERT_EQ(t.size(), 8u);
  EXPECT_DOUBLE_EQ(t.front(), -0.4);
  EXPECT_DOUBLE_EQ(t.back(), 1.0);
  EXPECT_EQ(t[2], 0.0);  // exactly zero, not 1e-17
  // A single value is widened around it.
  const auto one = NiceTicks(5, 5, 6);
  EXPECT_LT(one.front(), 5);
  EXPECT_GT(one.back(), 5);
}

TEST(NiceTicksTest, CoverTheRangeWithANiceStep) {
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> exp10(-6, 6), u(-1, 1);
  for (int trial = 0; trial < 2000; ++trial) {
    const double scale = std::pow(10.0, exp10(gen));
    double lo = u(gen) * scale, hi = u(gen) * scale;
    if (lo > hi) std::swap(lo, hi);
    if (lo == hi) continue;
    const auto t = NiceTicks(lo, hi, 6);
    ASSERT_GE(t.size(), 3u) << lo << " " << hi;
    ASSERT_LE(t.size(), 12u) << lo << " " << hi;
    EXPECT_LE(t.front(), lo);
    EXPECT_GE(t.back(), hi);
    const double step = t[1] - t[0];
    const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
    EXPECT_TRUE(std::abs(mantissa - 1) < 1e-6 || std::abs(mantissa - 2) < 1e-6 ||
                std::abs(mantissa - 5) < 1e-6)
        << "step " << step;
    for (size_t i = 1; i < t.size(); ++i) EXPECT_NEAR(t[i] - t[i - 1], step, step * 1e-6);
    // The outer ticks are at most one step outside the data.
    EXPECT_GT(t.front() + step, lo);
    EXPECT_LT(t.back() - step, hi);
  }
}

TEST(LogTicksTest, DecadesAndSubdivisions) {
  EXPECT_EQ(LogTicks(1, 1000), (std::vector<double>{1, 10, 100, 1000}));
  EXPECT_EQ(LogTicks(2, 700), (std::vector<double>{1, 10, 100, 1000}));
  // Fewer than three decades: 1-2-5 steps, trimmed to just around the data.
  EXPECT_EQ(LogTicks(1.2, 40), (std::vector<double>{1, 2, 5, 10, 20, 50}));
  EXPECT_EQ(LogTicks(1.0, 1.3), (std::vector<double>{1, 2}));
  // Many decades: every fifth.
  const auto wide = LogTicks(1e-6, 1e12);
  ASSERT_EQ(wide.size(), 5u);
  EXPECT_DOUBLE_EQ(wide.front(), 1e-6);
  EXPECT_GE(wide.back(), 1e12);
}

TEST(FormatTickTest, ShortestFormThatSeparatesTicks) {
  EXPECT_EQ(FormatTick(0.25, 0.25), "0.25");
  EXPECT_EQ(FormatTick(0.5, 0.25), "0.50");
  EXPECT_EQ(FormatTick(2000, 500), "2000");
  EXPECT_EQ(FormatTick(-1e-17, 0.2), "0.0");  // as its neighbours 0.2, 0.4
  EXPECT_EQ(FormatTick(-0.0, 1), "0");
  EXPECT_EQ(FormatTick(1e-5, 1e-5), "1e-5");
  EXPECT_EQ(FormatTick(2e6, 1e6), "2e6");
  EXPECT_EQ(FormatTick(3.5e7, 5e6), "3.5e7");
  EXPECT_EQ(FormatTick(-0.4, 0.2), "-0.4");
}

TEST(ScaleTest, LinearAndLogMapping) {
  const Scale lin(ScaleKind::kLinear, 0, 10, 100, 200);
  EXPECT_DOUBLE_EQ(*lin.Map(0), 100);
  EXPECT_DOUBLE_EQ(*lin.Map(2.5), 125);
  EXPECT_DOUBLE_EQ(*lin.Map(10), 200);
  EXPECT_FALSE(lin.Map(11).has_value());
  EXPECT_FALSE(lin.Map(kNaN).has_value());
  const Scale log(ScaleKind::kLog, 1, 100, 300, 100);  // inverted, like a y axis
  EXPECT_DOUBLE_EQ(*log.Map(1), 300);
  EXPECT_DOUBLE_EQ(*log.Map(10), 200);
  EXPECT_DOUBLE_EQ(*log.Map(100), 100);
  EXPECT_FALSE(log.Map(0).has_value());
  EXPECT_FALSE(log.Map(-3).has_value());
}

TEST(RenderChartTest, CountsDrawnPointsAndSplitsLinesAtGaps) {
  Chart c;
  c.id = "t";
  c.title = "t";
  c.series.push_back({"line", {1, 2, 3, 4, 5}, {1, 2, kNaN, 4, 5}, {}, {}, SeriesStyle::kLine});
  c.series.push_back({"dots", {1, 2, 3}, {3, 2, 1}, {}, {}, SeriesStyle::kPoints});
  const std::string svg = RenderChart(c);
  EXPECT_EQ(SeriesPoints(svg, "line"), 4);
  EXPECT_EQ(SeriesPoints(svg, "dots"), 3);
  EXPECT_EQ(Count(svg, "<polyline"), 2);  // the NaN breaks the line
  EXPECT_EQ(Count(svg, "<circle"), 3);
  EXPECT_EQ(Count(svg, "<svg class=\"chart\" data-chart=\"t\""), 1);
  EXPECT_EQ(Count(svg, "</svg>"), 1);
}

TEST(RenderChartTest, LogAxisLeavesOutNonPositiveValues) {
  Chart c;
  c.id = "log";
  c.y.scale = ScaleKind::kLog;
  c.series.push_back({"s", {1, 2, 3, 4}, {0.1, 0, -1, 1000}, {}, {}, SeriesStyle::kPoints});
  const std::string svg = RenderChart(c);
  EXPECT_EQ(SeriesPoints(svg, "s"), 2);
  // Decade labels from 0.1 to 1000.
  for (const char* label : {">0.1<", ">1<", ">10<", ">100<", ">1000<"}) {
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  }
}

TEST(RenderChartTest, PointsLandWhereTheScaleSays) {
  Chart c;
  c.id = "pos";
  c.width = 400;
  c.height = 300;
  c.x.min = 0;
  c.x.max = 10;
  c.y.min = 0;
  c.y.max = 10;
  c.series.push_back({"", {0, 10}, {0, 10}, {}, {}, SeriesStyle::kPoints});
  const std::string svg = RenderChart(c);
  // Plot area: left 66, right width-24, bottom height-44; top under the title.
  EXPECT_NE(svg.find("cx=\"66.0\" cy=\"256.0\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("cx=\"376.0\" cy=\"38.0\""), std::string::npos);
}

TEST(RenderChartTest, DataOnTheOuterTicksIsNotDrawnOnTheFrame) {
  for (ScaleKind kind : {ScaleKind::kLinear, ScaleKind::kLog}) {
    Chart c;
    c.id = "pad";
    c.width = 400;
    c.height = 300;
    c.x.scale = c.y.scale = kind;
    c.series.push_back({"", {1, 10}, {1, 10}, {}, {}, SeriesStyle::kPoints});
    const std::string svg = RenderChart(c);
    std::vector<double> cx, cy;
    const std::regex re("cx=\"([0-9.]+)\" cy=\"([0-9.]+)\"");
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator();
         ++it) {
      cx.push_back(std::stod((*it)[1]));
      cy.push_back(std::stod((*it)[2]));
    }
    ASSERT_EQ(cx.size(), 2u);
    // Frame: x from 66 to 376, y from 38 to 256; the points keep a few pixels from it.
    EXPECT_GT(cx[0], 66 + 4);
    EXPECT_LT(cx[1], 376 - 4);
    EXPECT_LT(cy[0], 256 - 4);
    EXPECT_GT(cy[1], 38 + 4);
  }
}

TEST(RenderChartTest, EscapesNamesAndReferencesNothingExternal) {
  Chart c;
  c.id = "x<&\">";
  c.title = "graph <a&b> \"q\"";
  c.x.label = "<x>";
  c.series.push_back({"name<&\">", {1, 2}, {1, 2}, {}, {}, SeriesStyle::kLine});
  c.markers.push_back({1, "best <1>", 0});
  const std::string svg = RenderChart(c);
  EXPECT_EQ(svg.find("<a&b>"), std::string::npos);
  EXPECT_EQ(svg.find("name<"), std::string::npos);
  EXPECT_EQ(svg.find("<x>"), std::string::npos);
  EXPECT_EQ(svg.find("<1>"), std::string::npos);
  EXPECT_NE(svg.find("graph &lt;a&amp;b&gt; &quot;q&quot;"), std::string::npos);
  EXPECT_EQ(SeriesPoints(svg, "name&lt;&amp;&quot;&gt;"), 2);
  EXPECT_EQ(svg.find("http"), std::string::npos);
  EXPECT_EQ(svg.find("href"), std::string::npos);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
}

TEST(RenderChartTest, EmptyChartSaysNoData) {
  Chart c;
  c.id = "empty";
  c.series.push_back({"s", {}, {}, {}, {}, SeriesStyle::kLine});
  const std::string svg = RenderChart(c);
  EXPECT_NE(svg.find("no data"), std::string::npos);
  EXPECT_EQ(SeriesPoints(svg, "s"), 0);
}

TEST(RenderChartTest, RangeSeriesDrawsOneBarPerPoint) {
  Chart c;
  c.id = "r";
  c.y.scale = ScaleKind::kLog;
  Series s;
  s.name = "spread";
  s.style = SeriesStyle::kRange;
  s.x = {1, 2, 3};
  s.y = {1.5, kNaN, 3};
  s.y_low = {1, 1, 1};
  s.y_high = {2, 5, 30};
  c.series.push_back(s);
  const std::string svg = RenderChart(c);
  EXPECT_EQ(SeriesPoints(svg, "spread"), 3);
  EXPECT_EQ(Count(svg, "<circle"), 2);  // no median dot where it is NaN
}

TEST(RenderChartTest, SeeThroughSeriesSayTheirOpacity) {
  Chart c;
  c.id = "o";
  Series faint, solid;
  faint.name = "faint";
  faint.x = solid.x = {1, 2};
  faint.y = {1, 2};
  faint.opacity = 0.25;
  solid.name = "solid";
  solid.y = {2, 1};
  c.series = {faint, solid};
  const std::string svg = RenderChart(c);
  EXPECT_NE(svg.find("data-name=\"faint\" data-points=\"2\" opacity=\"0.25\">"), std::string::npos)
      << svg;
  EXPECT_NE(svg.find("data-name=\"solid\" data-points=\"2\">"), std::string::npos) << svg;
}

TEST(RenderBarChartTest, OneBarPerDefinedValue) {
  BarChart c;
  c.id = "bars";
  c.title = "bars";
  c.categories = {"g<1>", "g&2", "g3"};
  c.series = {{"model", {0.5, -0.25, kNaN}, 0}, {"random", {0.0, 0.1, 0.2}, 1}};
  const std::string svg = RenderBarChart(c);
  EXPECT_EQ(SeriesPoints(svg, "model"), 2);
  EXPECT_EQ(SeriesPoints(svg, "random"), 3);
  EXPECT_EQ(Count(svg, "<rect class=\"bar\""), 5);
  EXPECT_EQ(svg.find("g<1>"), std::string::npos);
  EXPECT_NE(svg.find("g&lt;1&gt;"), std::string::npos);
  EXPECT_NE(svg.find("g&amp;2"), std::string::npos);
}

TEST(PaletteTest, DistinctColoursWrapAround) {
  const auto& p = Palette();
  ASSERT_GE(p.size(), 7u);
  std::set<std::string> unique(p.begin(), p.end());
  EXPECT_EQ(unique.size(), p.size());
  EXPECT_EQ(PaletteColor(0), PaletteColor(static_cast<int>(p.size())));
}

}  // namespace
}  // namespace tpugraphs::report
