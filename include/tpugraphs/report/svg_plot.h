// A small SVG plotting module for self-contained HTML reports (docs/report.md): axes with nice
// ticks, linear and log scales, lines, scatter points, vertical range bars, grouped bars,
// legends and a colour-blind-safe palette (Okabe and Ito). Output is plain SVG text with no
// scripts, fonts or external references, ready to be inlined in HTML.
//
// Every chart is an <svg class="chart" data-chart="ID" ...> element; every series is a
// <g class="series" data-name="NAME" data-points="N"> group, N being the number of data points
// drawn (points that cannot be placed, NaN or non-positive on a log axis, are left out and not
// counted). Lines are <polyline> elements (a gap in the data starts a new one), scatter points
// <circle> elements, bars <rect class="bar"> elements. All text is XML-escaped.
//
// Thread-safety: pure functions.
#ifndef TPUGRAPHS_REPORT_SVG_PLOT_H_
#define TPUGRAPHS_REPORT_SVG_PLOT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tpugraphs::report {

// Escapes & < > " ' for XML text and attribute values.
std::string EscapeXml(std::string_view text);

// The palette: the eight Okabe-Ito colours in an order that keeps the first ones far apart,
// then grey (index 8) for reference series.
const std::vector<std::string>& Palette();
// Palette()[i % size].
const std::string& PaletteColor(int i);

// "Nice" linear ticks covering [lo, hi]: a step of 1, 2 or 5 times a power of ten chosen so that
// about `target` ticks cover the range; the first tick is <= lo and the last >= hi (the axis
// extends to them). lo == hi is widened around the value. REQUIRES: finite lo <= hi, target >= 2.
std::vector<double> NiceTicks(double lo, double hi, int target = 6);
// Log-scale ticks covering [lo, hi] (REQUIRES: 0 < lo <= hi, finite): the powers of ten from
// the one at or below lo to the one at or above hi (every second or fifth one when there are
// many); with fewer than three decades also 2x and 5x in between.
std::vector<double> LogTicks(double lo, double hi);
// Tick label: the shortest of %g-style forms that tells ticks `step` apart ("0.25", "1e-05",
// "2000"); never "-0".
std::string FormatTick(double value, double step);
// Short number for labels and tables: 4 significant digits, "nan" for NaN.
std::string FormatNumber(double value);

enum class ScaleKind { kLinear, kLog };

// A data range mapped to a pixel range, linear or log10.
class Scale {
 public:
  Scale(ScaleKind kind, double lo, double hi, double pixel_lo, double pixel_hi);
  ScaleKind kind() const { return kind_; }
  double lo() const { return lo_; }
  double hi() const { return hi_; }
  // Pixel position of `v`; nullopt when v cannot be placed (NaN, infinite, <= 0 on log).
  std::optional<double> Map(double v) const;

 private:
  ScaleKind kind_;
  double lo_, hi_, pixel_lo_, pixel_hi_;
};

struct Axis {
  std::string label;
  ScaleKind scale = ScaleKind::kLinear;
  // Fixed bounds; otherwise taken from the data (and extended to the outer ticks).
  std::optional<double> min, max;
  // Integer-only ticks (e.g. epochs): a step below 1 becomes 1.
  bool integer = false;
};

enum class SeriesStyle { kLine, kPoints, kLineAndPoints, kRange };

struct Series {
  std::string name;  // shown in the legend (empty: not listed)
  std::vector<double> x, y;
  // kRange: one vertical bar per x from y_low to y_high, with a dot at y (NaN: no dot).
  std::vector<double> y_low, y_high;
  SeriesStyle style = SeriesStyle::kLine;
  int color = -1;  // palette index; -1 = position in the chart
  bool dashed = false;
  double point_radius = 2.5;
  // Below 1: the series is drawn see-through (e.g. many light background lines; the legend
  // entry stays opaque).
  double opacity = 1;
};

// A vertical marker line at x with a short label (e.g. the best epoch).
struct Marker {
  double x = 0;
  std::string label;
  int color = -1;
};

struct Chart {
  std::string id;  // data-chart attribute
  std::string title;
  int width = 560, height = 320;
  Axis x, y;
  std::vector<Series> series;
  std::vector<Marker> markers;
};

// Renders a line / scatter / range chart. Charts without any placeable point render their axes
// and a "no data" note.
std::string RenderChart(const Chart& chart);

// Grouped vertical bars: one group per category, one bar per series in each group.
struct BarChart {
  std::string id;
  std::string title;
  int width = 560, height = 320;
  std::vector<std::string> categories;  // x labels (rotated, truncated to 24 characters)
  struct Bars {
    std::string name;
    std::vector<double> values;  // one per category; NaN draws nothing
    int color = -1;
  };
  std::vector<Bars> series;
  Axis y;  // label and bounds; the scale is always linear and includes 0
};

std::string RenderBarChart(const BarChart& chart);

}  // namespace tpugraphs::report

#endif  // TPUGRAPHS_REPORT_SVG_PLOT_H_
