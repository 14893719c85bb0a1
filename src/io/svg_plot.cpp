#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "linformer/file_util.h"
#include "linformer/plot.h"

namespace lf {

namespace {

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

}  // namespace

std::string svg_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

namespace {

std::string esc(const std::string& s) { return svg_escape(s); }

std::string fmt(double v) {
  char b[32];
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e5 || a < 1e-3))
    std::snprintf(b, sizeof b, "%.0e", v);
  else
    std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

// Tick positions in data space for [lo, hi].
std::vector<double> ticks(double lo, double hi, bool log) {
  std::vector<double> t;
  if (log) {
    for (double e = std::floor(std::log10(lo)); e <= std::ceil(std::log10(hi)); e += 1) {
      const double v = std::pow(10.0, e);
      if (v >= lo * 0.999 && v <= hi * 1.001) t.push_back(v);
    }
    if (t.size() < 2) {  // narrow range: fall back to linear spacing
      t.clear();
      log = false;
    } else {
      return t;
    }
  }
  const double span = hi - lo;
  const double raw = span / 6;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * span; v += step) t.push_back(v);
  return t;
}

}  // namespace

std::string svg_line_plot(const std::vector<PlotSeries>& series, const PlotOptions& o) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  auto ok = [&](double x, double y) {
    return std::isfinite(x) && std::isfinite(y) && (!o.log_x || x > 0) && (!o.log_y || y > 0);
  };
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (ok(s.x[i], s.y[i])) {
        x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
        y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
      }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 == x0) x1 = x0 + 1, x0 = o.log_x ? x0 / 2 : x0 - 1;
  if (y1 == y0) y1 = y0 * 1.1 + 1e-9, y0 = o.log_y ? y0 / 1.1 : y0 - 1;
  if (!o.log_y) {
    const double pad = 0.05 * (y1 - y0);
    y1 += pad, y0 -= pad;
  }
  const double L = 70, R = 170, T = 40, Bm = 50;
  const double W = o.width - L - R, H = o.height - T - Bm;
  auto tx = [&](double v) {
    return o.log_x ? L + W * (std::log(v) - std::log(x0)) / (std::log(x1) - std::log(x0))
                   : L + W * (v - x0) / (x1 - x0);
  };
  auto ty = [&](double v) {
    return o.log_y ? T + H - H * (std::log(v) - std::log(y0)) / (std::log(y1) - std::log(y0))
                   : T + H - H * (v - y0) / (y1 - y0);
  };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << o.width << "\" height=\""
    << o.height << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << L + W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
    << esc(o.title) << "</text>\n";
  for (double v : ticks(x0, x1, o.log_x)) {
    const double px = tx(v);
    s << "<line x1=\"" << px << "\" y1=\"" << T << "\" x2=\"" << px << "\" y2=\"" << T + H
      << "\" stroke=\"#eee\"/>\n<text x=\"" << px << "\" y=\"" << T + H + 16
      << "\" text-anchor=\"middle\">" << fmt(v) << "</text>\n";
  }
  for (double v : ticks(y0, y1, o.log_y)) {
    const double py = ty(v);
    s << "<line x1=\"" << L << "\" y1=\"" << py << "\" x2=\"" << L + W << "\" y2=\"" << py
      << "\" stroke=\"#eee\"/>\n<text x=\"" << L - 6 << "\" y=\"" << py + 4
      << "\" text-anchor=\"end\">" << fmt(v) << "</text>\n";
  }
  s << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W << "\" height=\"" << H
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  s << "<text x=\"" << L + W / 2 << "\" y=\"" << o.height - 12 << "\" text-anchor=\"middle\">"
    << esc(o.x_label) << "</text>\n";
  s << "<text transform=\"translate(16," << T + H / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << esc(o.y_label) << "</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& sr = series[k];
    const char* color = kColors[k % 10];
    std::ostringstream pts;
    int npts = 0;
    for (size_t i = 0; i < sr.x.size() && i < sr.y.size(); ++i)
      if (ok(sr.x[i], sr.y[i])) {
        pts << tx(sr.x[i]) << "," << ty(sr.y[i]) << " ";
        ++npts;
      }
    if (npts > 1)
      s << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.8\""
        << (sr.dashed ? " stroke-dasharray=\"6,4\"" : "") << " points=\"" << pts.str()
        << "\"/>\n";
    for (size_t i = 0; npts <= 20 && i < sr.x.size() && i < sr.y.size(); ++i)
      if (ok(sr.x[i], sr.y[i]))
        s << "<circle cx=\"" << tx(sr.x[i]) << "\" cy=\"" << ty(sr.y[i]) << "\" r=\"3\" fill=\""
          << color << "\"/>\n";
    const double ly = T + 14 + 18 * k;
    s << "<line x1=\"" << L + W + 10 << "\" y1=\"" << ly << "\" x2=\"" << L + W + 34
      << "\" y2=\"" << ly << "\" stroke=\"" << color << "\" stroke-width=\"2\""
      << (sr.dashed ? " stroke-dasharray=\"6,4\"" : "") << "/>\n<text x=\"" << L + W + 40
      << "\" y=\"" << ly + 4 << "\">" << esc(sr.name) << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

void write_svg_line_plot(const std::string& path, const std::vector<PlotSeries>& series,
                         const PlotOptions& opt) {
  write_file_atomic(path, svg_line_plot(series, opt));
}

}  // namespace lf
