#include "tpugraphs/report/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace tpugraphs::report {
namespace {

constexpr double kCharWidth = 6.6;  // average width of a 11-12 px sans-serif character
constexpr double kLegendRow = 16;

bool Placeable(double v, ScaleKind kind) {
  return std::isfinite(v) && (kind == ScaleKind::kLinear || v > 0);
}

std::string Px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

// Ticks i * step for i in [floor(lo / step), ceil(hi / step)].
std::vector<double> TicksWithStep(double lo, double hi, double step) {
  const double i0 = std::floor(lo / step + 1e-9);
  const double i1 = std::ceil(hi / step - 1e-9);
  std::vector<double> ticks;
  for (double i = i0; i <= i1 + 0.5; i += 1) {
    double v = i * step;
    if (std::abs(v) < step * 1e-9) v = 0;
    ticks.push_back(v);
  }
  if (ticks.size() < 2) ticks.push_back(ticks.back() + step);
  return ticks;
}

double NiceStep(double lo, double hi, int target) {
  const double raw = (hi - lo) / std::max(1, target - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double nice = f <= 1.0 + 1e-9 ? 1 : f <= 2.0 + 1e-9 ? 2 : f <= 5.0 + 1e-9 ? 5 : 10;
  return nice * mag;
}

// Ticks of one axis for the data range [lo, hi] (already non-empty and placeable).
std::vector<double> AxisTicks(const Axis& axis, double lo, double hi) {
  if (axis.scale == ScaleKind::kLog) return LogTicks(lo, hi);
  if (lo == hi) {
    const double d = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= d;
    hi += d;
  }
  if (axis.integer && NiceStep(lo, hi, 6) < 1) return TicksWithStep(lo, hi, 1.0);
  return NiceTicks(lo, hi, 6);
}

// Widens [*lo, *hi] by 3% of its span on each side where the data reaches the edge (and the
// bound is not fixed by the axis).
void PadEdges(const Axis& axis, double data_lo, double data_hi, double* lo, double* hi) {
  constexpr double kPad = 0.03;
  if (axis.scale == ScaleKind::kLog) {
    if (!(*lo > 0 && *hi > *lo)) return;
    const double f = std::pow(*hi / *lo, kPad);
    if (!axis.min && data_lo <= *lo * (1 + 1e-9)) *lo /= f;
    if (!axis.max && data_hi >= *hi * (1 - 1e-9)) *hi *= f;
    return;
  }
  const double span = *hi - *lo;
  if (!(span > 0)) return;
  if (!axis.min && data_lo <= *lo + span * 1e-9) *lo -= span * kPad;
  if (!axis.max && data_hi >= *hi - span * 1e-9) *hi += span * kPad;
}

double TickStep(const std::vector<double>& ticks) {
  double step = std::numeric_limits<double>::infinity();
  for (size_t i = 1; i < ticks.size(); ++i) step = std::min(step, ticks[i] - ticks[i - 1]);
  return std::isfinite(step) ? step : 1.0;
}

struct Frame {
  double left, top, right, bottom;  // plot area in pixels
};

std::string Text(double x, double y, const std::string& text, const char* anchor, const char* cls,
                 const std::string& extra = "") {
  return "<text x=\"" + Px(x) + "\" y=\"" + Px(y) + "\" text-anchor=\"" + anchor + "\" class=\"" +
         cls + "\"" + extra + ">" + EscapeXml(text) + "</text>";
}

// Legend rows under the title; returns the SVG and sets *height.
struct LegendItem {
  std::string name;
  std::string color;
  bool line = true, dashed = false;
};

std::string RenderLegend(const std::vector<LegendItem>& items, double left, double right,
                         double top, double* height) {
  std::string out;
  double x = left, y = top;
  int rows = items.empty() ? 0 : 1;
  for (const LegendItem& item : items) {
    const double w = 22 + kCharWidth * static_cast<double>(item.name.size()) + 14;
    if (x + w > right && x > left) {
      x = left;
      y += kLegendRow;
      ++rows;
    }
    const double cy = y + kLegendRow / 2;
    if (item.line) {
      out += "<line x1=\"" + Px(x) + "\" y1=\"" + Px(cy) + "\" x2=\"" + Px(x + 16) + "\" y2=\"" +
             Px(cy) + "\" stroke=\"" + item.color + "\" stroke-width=\"2\"" +
             (item.dashed ? " stroke-dasharray=\"5 3\"" : "") + "/>";
    } else {
      out += "<rect x=\"" + Px(x + 3) + "\" y=\"" + Px(cy - 5) +
             "\" width=\"10\" height=\"10\" fill=\"" + item.color + "\"/>";
    }
    out += Text(x + 20, cy + 4, item.name, "start", "legend");
    x += w;
  }
  *height = rows * kLegendRow;
  return rows == 0 ? "" : "<g class=\"legend\">" + out + "</g>";
}

std::string SvgOpen(const std::string& id, const std::string& title, int width, int height) {
  return "<svg class=\"chart\" data-chart=\"" + EscapeXml(id) + "\" width=\"" +
         std::to_string(width) + "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
         std::to_string(width) + " " + std::to_string(height) + "\" role=\"img\"><title>" +
         EscapeXml(title) + "</title>" + Text(width / 2.0, 17, title, "middle", "title");
}

std::string VerticalTicks(const Scale& scale, const std::vector<double>& ticks, const Frame& f) {
  std::string out;
  const double step = TickStep(ticks);
  for (double t : ticks) {
    auto py = scale.Map(t);
    if (!py) continue;
    out += "<line class=\"grid\" x1=\"" + Px(f.left) + "\" y1=\"" + Px(*py) + "\" x2=\"" +
           Px(f.right) + "\" y2=\"" + Px(*py) + "\"/>";
    out += Text(f.left - 5, *py + 4, FormatTick(t, scale.kind() == ScaleKind::kLog ? t : step),
                "end", "tick");
  }
  return out;
}

}  // namespace

std::string EscapeXml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

const std::vector<std::string>& Palette() {
  // Okabe & Ito (2008): distinguishable with the common colour-vision deficiencies; then a
  // neutral grey for reference series.
  static const std::vector<std::string> colors = {"#0072B2", "#E69F00", "#009E73",
                                                  "#D55E00", "#CC79A7", "#56B4E9",
                                                  "#000000", "#F0E442", "#999999"};
  return colors;
}

const std::string& PaletteColor(int i) {
  const auto& p = Palette();
  return p[static_cast<size_t>(std::max(0, i)) % p.size()];
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (lo == hi) {
    const double d = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= d;
    hi += d;
  }
  return TicksWithStep(lo, hi, NiceStep(lo, hi, std::max(2, target)));
}

std::vector<double> LogTicks(double lo, double hi) {
  const int e0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  int e1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  if (e1 <= e0) e1 = e0 + 1;
  const int decades = e1 - e0;
  std::vector<double> candidates;
  if (decades < 3) {
    for (int e = e0; e < e1; ++e) {
      for (double m : {1.0, 2.0, 5.0}) candidates.push_back(m * std::pow(10.0, e));
    }
    candidates.push_back(std::pow(10.0, e1));
    // Trim to the candidates just around [lo, hi].
    size_t first = 0, last = candidates.size() - 1;
    while (first + 1 < candidates.size() && candidates[first + 1] <= lo * (1 + 1e-9)) ++first;
    while (last > first + 1 && candidates[last - 1] >= hi * (1 - 1e-9)) --last;
    return std::vector<double>(candidates.begin() + static_cast<std::ptrdiff_t>(first),
                               candidates.begin() + static_cast<std::ptrdiff_t>(last) + 1);
  }
  const int stride = decades > 16 ? 5 : decades > 8 ? 2 : 1;
  std::vector<double> ticks;
  for (int e = e0;; e += stride) {
    ticks.push_back(std::pow(10.0, e));
    if (e >= e1) break;
  }
  return ticks;
}

std::string FormatTick(double value, double step) {
  if (std::abs(value) < std::abs(step) * 1e-9) value = 0;
  char buf[64];
  const double a = std::abs(value);
  if (value != 0 && (a >= 1e6 || a < 1e-3)) {
    // Short exponent form: "3.5e6", "1e-5".
    std::snprintf(buf, sizeof(buf), "%.3g", value);
    std::string out = buf;
    const size_t e = out.find('e');
    if (e != std::string::npos) {
      std::string exp = out.substr(e + 1);
      const bool negative = !exp.empty() && exp[0] == '-';
      if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) exp.erase(0, 1);
      while (exp.size() > 1 && exp[0] == '0') exp.erase(0, 1);
      out = out.substr(0, e + 1) + (negative ? "-" : "") + exp;
    }
    return out;
  }
  int decimals = 0;
  const double s = std::abs(step);
  while (decimals < 9) {
    const double scaled = s * std::pow(10.0, decimals);
    if (std::abs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled)) break;
    ++decimals;
  }
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  std::string out = buf;
  if (out.find_first_not_of("-0.") == std::string::npos && out[0] == '-') out.erase(0, 1);
  return out;
}

std::string FormatNumber(double value) {
  if (std::isnan(value)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g", value);
  return buf;
}

Scale::Scale(ScaleKind kind, double lo, double hi, double pixel_lo, double pixel_hi)
    : kind_(kind), lo_(lo), hi_(hi), pixel_lo_(pixel_lo), pixel_hi_(pixel_hi) {}

std::optional<double> Scale::Map(double v) const {
  if (!Placeable(v, kind_)) return std::nullopt;
  double t;
  if (kind_ == ScaleKind::kLog) {
    const double a = std::log10(lo_), b = std::log10(hi_);
    t = b > a ? (std::log10(v) - a) / (b - a) : 0.5;
  } else {
    t = hi_ > lo_ ? (v - lo_) / (hi_ - lo_) : 0.5;
  }
  if (t < -1e-9 || t > 1 + 1e-9) return std::nullopt;  // outside fixed bounds
  return pixel_lo_ + t * (pixel_hi_ - pixel_lo_);
}

std::string RenderChart(const Chart& chart) {
  // --- data ranges ---
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  auto take_x = [&](double v) {
    if (Placeable(v, chart.x.scale)) xlo = std::min(xlo, v), xhi = std::max(xhi, v);
  };
  auto take_y = [&](double v) {
    if (Placeable(v, chart.y.scale)) ylo = std::min(ylo, v), yhi = std::max(yhi, v);
  };
  for (const Series& s : chart.series) {
    for (size_t i = 0; i < s.x.size(); ++i) {
      const bool yv = i < s.y.size() && Placeable(s.y[i], chart.y.scale);
      const bool rv = i < s.y_low.size() && i < s.y_high.size() &&
                      Placeable(s.y_low[i], chart.y.scale) && Placeable(s.y_high[i], chart.y.scale);
      if (!Placeable(s.x[i], chart.x.scale) || !(yv || rv)) continue;
      take_x(s.x[i]);
      if (yv) take_y(s.y[i]);
      if (rv) take_y(s.y_low[i]), take_y(s.y_high[i]);
    }
  }
  const bool has_data = xlo <= xhi;
  for (const Marker& m : chart.markers) take_x(m.x);
  if (chart.x.min) xlo = *chart.x.min;
  if (chart.x.max) xhi = *chart.x.max;
  if (chart.y.min) ylo = *chart.y.min;
  if (chart.y.max) yhi = *chart.y.max;
  if (!(xlo <= xhi)) xlo = chart.x.scale == ScaleKind::kLog ? 1 : 0, xhi = xlo + 1;
  if (!(ylo <= yhi)) ylo = chart.y.scale == ScaleKind::kLog ? 1 : 0, yhi = ylo + 1;
  std::vector<double> xticks = AxisTicks(chart.x, xlo, xhi);
  std::vector<double> yticks = AxisTicks(chart.y, ylo, yhi);
  const double data_xlo = xlo, data_xhi = xhi, data_ylo = ylo, data_yhi = yhi;
  if (!chart.x.min) xlo = xticks.front();
  if (!chart.x.max) xhi = xticks.back();
  if (!chart.y.min) ylo = yticks.front();
  if (!chart.y.max) yhi = yticks.back();
  // Data on the outer ticks would sit on the frame: leave a little room there.
  PadEdges(chart.x, data_xlo, data_xhi, &xlo, &xhi);
  PadEdges(chart.y, data_ylo, data_yhi, &ylo, &yhi);

  // --- layout ---
  std::vector<LegendItem> legend;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const Series& s = chart.series[i];
    if (s.name.empty()) continue;
    legend.push_back({s.name, PaletteColor(s.color >= 0 ? s.color : static_cast<int>(i)),
                      s.style != SeriesStyle::kPoints, s.dashed});
  }
  double legend_height = 0;
  const double left = 66, right = chart.width - 24.0;
  std::string legend_svg = RenderLegend(legend, left, right, 26, &legend_height);
  Frame f{left, 32 + legend_height + 6, right, chart.height - 44.0};
  const Scale xs(chart.x.scale, xlo, xhi, f.left, f.right);
  const Scale ys(chart.y.scale, ylo, yhi, f.bottom, f.top);

  std::string out = SvgOpen(chart.id, chart.title, chart.width, chart.height);
  out += legend_svg;
  // Axes, grid and ticks.
  out += VerticalTicks(ys, yticks, f);
  const double xstep = TickStep(xticks);
  for (double t : xticks) {
    auto px = xs.Map(t);
    if (!px) continue;
    out += "<line class=\"grid\" x1=\"" + Px(*px) + "\" y1=\"" + Px(f.top) + "\" x2=\"" + Px(*px) +
           "\" y2=\"" + Px(f.bottom) + "\"/>";
    out += Text(*px, f.bottom + 15, FormatTick(t, chart.x.scale == ScaleKind::kLog ? t : xstep),
                "middle", "tick");
  }
  out += "<rect class=\"frame\" x=\"" + Px(f.left) + "\" y=\"" + Px(f.top) + "\" width=\"" +
         Px(f.right - f.left) + "\" height=\"" + Px(f.bottom - f.top) + "\"/>";
  out += Text((f.left + f.right) / 2, chart.height - 8.0, chart.x.label, "middle", "axis-label");
  const double ymid = (f.top + f.bottom) / 2;
  out += Text(14, ymid, chart.y.label, "middle", "axis-label",
              " transform=\"rotate(-90 14 " + Px(ymid) + ")\"");
  if (!has_data) {
    out += Text((f.left + f.right) / 2, ymid, "no data", "middle", "note");
  }
  // Markers.
  for (const Marker& m : chart.markers) {
    auto px = xs.Map(m.x);
    if (!px) continue;
    const std::string& color = PaletteColor(m.color);
    out += "<g class=\"marker\"><line x1=\"" + Px(*px) + "\" y1=\"" + Px(f.top) + "\" x2=\"" +
           Px(*px) + "\" y2=\"" + Px(f.bottom) + "\" stroke=\"" + color +
           "\" stroke-dasharray=\"2 3\"/>" +
           Text(*px + 3, f.top + 11, m.label, "start", "marker-label", " fill=\"" + color + "\"") +
           "</g>";
  }
  // Series.
  for (size_t si = 0; si < chart.series.size(); ++si) {
    const Series& s = chart.series[si];
    const std::string& color = PaletteColor(s.color >= 0 ? s.color : static_cast<int>(si));
    std::string body;
    int64_t count = 0;
    const bool lines = s.style == SeriesStyle::kLine || s.style == SeriesStyle::kLineAndPoints;
    const bool dots = s.style == SeriesStyle::kPoints || s.style == SeriesStyle::kLineAndPoints;
    std::string poly;
    auto flush = [&] {
      if (!poly.empty()) {
        body += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.8\"" +
                (s.dashed ? " stroke-dasharray=\"6 3\"" : "") + " points=\"" + poly + "\"/>";
      }
      poly.clear();
    };
    for (size_t i = 0; i < s.x.size(); ++i) {
      auto px = xs.Map(s.x[i]);
      if (s.style == SeriesStyle::kRange) {
        auto lo = i < s.y_low.size() ? ys.Map(s.y_low[i]) : std::nullopt;
        auto hi = i < s.y_high.size() ? ys.Map(s.y_high[i]) : std::nullopt;
        if (!px || !lo || !hi) continue;
        ++count;
        body += "<line x1=\"" + Px(*px) + "\" y1=\"" + Px(*lo) + "\" x2=\"" + Px(*px) + "\" y2=\"" +
                Px(*hi) + "\" stroke=\"" + color + "\" stroke-width=\"3\"/>";
        auto mid = i < s.y.size() ? ys.Map(s.y[i]) : std::nullopt;
        if (mid) {
          body += "<circle cx=\"" + Px(*px) + "\" cy=\"" + Px(*mid) +
                  "\" r=\"2.5\" fill=\"#fff\" stroke=\"" + color + "\"/>";
        }
        continue;
      }
      auto py = i < s.y.size() ? ys.Map(s.y[i]) : std::nullopt;
      if (!px || !py) {
        flush();
        continue;
      }
      ++count;
      if (lines) poly += (poly.empty() ? "" : " ") + Px(*px) + "," + Px(*py);
      if (dots) {
        body += "<circle cx=\"" + Px(*px) + "\" cy=\"" + Px(*py) + "\" r=\"" + Px(s.point_radius) +
                "\" fill=\"" + color + "\"" +
                (s.style == SeriesStyle::kPoints ? " fill-opacity=\"0.6\"" : "") + "/>";
      }
    }
    flush();
    std::string opacity;
    if (s.opacity < 1) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), " opacity=\"%.3g\"", std::max(0.0, s.opacity));
      opacity = buf;
    }
    out += "<g class=\"series\" data-name=\"" + EscapeXml(s.name) + "\" data-points=\"" +
           std::to_string(count) + "\"" + opacity + ">" + body + "</g>";
  }
  out += "</svg>";
  return out;
}

std::string RenderBarChart(const BarChart& chart) {
  const size_t n = chart.categories.size();
  double lo = 0, hi = 0;
  bool any = false;
  for (const auto& s : chart.series) {
    for (double v : s.values) {
      if (!std::isfinite(v)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      any = true;
    }
  }
  if (chart.y.min) lo = *chart.y.min;
  if (chart.y.max) hi = *chart.y.max;
  if (hi <= lo) hi = lo + 1;
  const std::vector<double> ticks = NiceTicks(lo, hi, 6);
  if (!chart.y.min) lo = ticks.front();
  if (!chart.y.max) hi = ticks.back();

  std::vector<LegendItem> legend;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const auto& s = chart.series[i];
    if (!s.name.empty()) {
      legend.push_back(
          {s.name, PaletteColor(s.color >= 0 ? s.color : static_cast<int>(i)), false, false});
    }
  }
  size_t longest = 0;
  for (const auto& c : chart.categories)
    longest = std::max(longest, std::min<size_t>(c.size(), 24));
  const bool rotate = n > 4 || longest > 10;
  const double label_room = rotate ? kCharWidth * 0.75 * static_cast<double>(longest) + 14 : 20;
  double legend_height = 0;
  const double left = 66, right = chart.width - 14.0;
  std::string legend_svg = RenderLegend(legend, left, right, 26, &legend_height);
  Frame f{left, 32 + legend_height + 6, right, chart.height - label_room - 24};
  const Scale ys(ScaleKind::kLinear, lo, hi, f.bottom, f.top);

  std::string out = SvgOpen(chart.id, chart.title, chart.width, chart.height);
  out += legend_svg;
  out += VerticalTicks(ys, ticks, f);
  out += "<rect class=\"frame\" x=\"" + Px(f.left) + "\" y=\"" + Px(f.top) + "\" width=\"" +
         Px(f.right - f.left) + "\" height=\"" + Px(f.bottom - f.top) + "\"/>";
  const double ymid = (f.top + f.bottom) / 2;
  out += Text(14, ymid, chart.y.label, "middle", "axis-label",
              " transform=\"rotate(-90 14 " + Px(ymid) + ")\"");
  if (!any) out += Text((f.left + f.right) / 2, ymid, "no data", "middle", "note");
  const double group = n > 0 ? (f.right - f.left) / static_cast<double>(n) : 0;
  const double nseries = static_cast<double>(std::max<size_t>(1, chart.series.size()));
  const double bar = group * 0.8 / nseries;
  const double zero = *ys.Map(std::clamp(0.0, lo, hi));
  for (size_t c = 0; c < n; ++c) {
    const double cx = f.left + group * (static_cast<double>(c) + 0.5);
    std::string label = chart.categories[c];
    if (label.size() > 24) label = label.substr(0, 23) + "~";
    if (rotate) {
      out += Text(cx + 3, f.bottom + 10, label, "end", "tick",
                  " transform=\"rotate(-45 " + Px(cx + 3) + " " + Px(f.bottom + 10) + ")\"");
    } else {
      out += Text(cx, f.bottom + 15, label, "middle", "tick");
    }
  }
  for (size_t si = 0; si < chart.series.size(); ++si) {
    const auto& s = chart.series[si];
    const std::string& color = PaletteColor(s.color >= 0 ? s.color : static_cast<int>(si));
    std::string body;
    int64_t count = 0;
    for (size_t c = 0; c < n && c < s.values.size(); ++c) {
      auto py = ys.Map(std::clamp(s.values[c], lo, hi));
      if (!std::isfinite(s.values[c]) || !py) continue;
      ++count;
      const double x0 =
          f.left + group * (static_cast<double>(c) + 0.1) + bar * static_cast<double>(si);
      body += "<rect class=\"bar\" x=\"" + Px(x0) + "\" y=\"" + Px(std::min(*py, zero)) +
              "\" width=\"" + Px(std::max(1.0, bar - 1)) + "\" height=\"" +
              Px(std::max(0.5, std::abs(*py - zero))) + "\" fill=\"" + color + "\"><title>" +
              EscapeXml(chart.categories[c] + " " + s.name + ": " + FormatNumber(s.values[c])) +
              "</title></rect>";
    }
    out += "<g class=\"series\" data-name=\"" + EscapeXml(s.name) + "\" data-points=\"" +
           std::to_string(count) + "\">" + body + "</g>";
  }
  out += "<line class=\"zero\" x1=\"" + Px(f.left) + "\" y1=\"" + Px(zero) + "\" x2=\"" +
         Px(f.right) + "\" y2=\"" + Px(zero) + "\"/>";
  out += "</svg>";
  return out;
}

}  // namespace tpugraphs::report
