#include "analysis/heatmap_svg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/plot.h"

namespace lf::analysis {

namespace {

std::string esc(const std::string& s) { return svg_escape(s); }

std::string num(double v, int decimals) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

// Colour for t in [0, 1]: piecewise-linear through dark blue, teal, green and yellow.
std::array<int, 3> colour(double t) {
  static const double stops[][3] = {
      {38, 24, 95}, {40, 90, 150}, {31, 158, 137}, {110, 200, 90}, {245, 225, 30}};
  const int n = 5;
  if (!std::isfinite(t)) t = 0;
  t = std::clamp(t, 0.0, 1.0) * (n - 1);
  const int i = std::min(static_cast<int>(t), n - 2);
  const double f = t - i;
  std::array<int, 3> c{};
  for (int j = 0; j < 3; ++j)
    c[j] = static_cast<int>(std::lround(stops[i][j] + f * (stops[i + 1][j] - stops[i][j])));
  return c;
}

std::string rgb(const std::array<int, 3>& c) {
  char b[16];
  std::snprintf(b, sizeof b, "#%02x%02x%02x", c[0], c[1], c[2]);
  return b;
}

}  // namespace

std::string svg_heatmap(const std::vector<std::vector<double>>& values, const HeatmapOptions& opt) {
  LF_CHECK(!values.empty() && !values[0].empty(), "svg_heatmap: no values");
  const size_t R = values.size(), C = values[0].size();
  for (const auto& row : values)
    LF_CHECK(row.size() == C, "svg_heatmap: rows of different lengths (", row.size(), " and ", C,
             ")");
  double lo = opt.vmin, hi = opt.vmax;
  if (!(hi > lo)) {
    lo = values[0][0], hi = values[0][0];
    for (const auto& row : values)
      for (double v : row)
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (!(hi > lo)) hi = lo + 1e-9;
  }
  auto name = [](const std::vector<std::string>& names, size_t i) {
    return i < names.size() ? names[i] : std::to_string(i);
  };
  const int cs = opt.cell;
  const int left = 90, top = 60, bar_w = 18, bar_gap = 30, right = 90, bottom = 60;
  const int W = left + static_cast<int>(C) * cs + bar_gap + bar_w + right;
  const int H = top + static_cast<int>(R) * cs + bottom;
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<text x=\"" << W / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">"
    << esc(opt.title) << "</text>\n";
  for (size_t r = 0; r < R; ++r) {
    for (size_t c = 0; c < C; ++c) {
      const double v = values[r][c];
      const double t = (v - lo) / (hi - lo);
      const auto col = colour(t);
      const int x = left + static_cast<int>(c) * cs, y = top + static_cast<int>(r) * cs;
      const double lum = 0.299 * col[0] + 0.587 * col[1] + 0.114 * col[2];
      s << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << cs << "\" height=\"" << cs
        << "\" fill=\"" << rgb(col) << "\" stroke=\"white\"><title>" << esc(name(opt.row_names, r))
        << ", " << esc(name(opt.col_names, c)) << ": " << num(v, 6) << "</title></rect>\n";
      s << "<text x=\"" << x + cs / 2 << "\" y=\"" << y + cs / 2 + 4
        << "\" text-anchor=\"middle\" fill=\"" << (lum < 140 ? "white" : "black") << "\">"
        << (std::isfinite(v) ? num(v, opt.decimals) : "n/a") << "</text>\n";
    }
  }
  for (size_t r = 0; r < R; ++r)
    s << "<text x=\"" << left - 8 << "\" y=\"" << top + static_cast<int>(r) * cs + cs / 2 + 4
      << "\" text-anchor=\"end\">" << esc(name(opt.row_names, r)) << "</text>\n";
  for (size_t c = 0; c < C; ++c)
    s << "<text x=\"" << left + static_cast<int>(c) * cs + cs / 2 << "\" y=\""
      << top + static_cast<int>(R) * cs + 18 << "\" text-anchor=\"middle\">"
      << esc(name(opt.col_names, c)) << "</text>\n";
  s << "<text x=\"" << left + static_cast<int>(C) * cs / 2 << "\" y=\"" << H - 14
    << "\" text-anchor=\"middle\">" << esc(opt.col_label) << "</text>\n";
  const int ymid = top + static_cast<int>(R) * cs / 2;
  s << "<text x=\"20\" y=\"" << ymid << "\" text-anchor=\"middle\" transform=\"rotate(-90 20 "
    << ymid << ")\">" << esc(opt.row_label) << "</text>\n";
  // Colour bar: top = hi, bottom = lo.
  const int bx = left + static_cast<int>(C) * cs + bar_gap, bh = static_cast<int>(R) * cs;
  const int steps = 32;
  for (int i = 0; i < steps; ++i) {
    const double t = 1.0 - (i + 0.5) / steps;
    s << "<rect x=\"" << bx << "\" y=\"" << top + i * bh / steps << "\" width=\"" << bar_w
      << "\" height=\"" << (bh + steps - 1) / steps + 1 << "\" fill=\"" << rgb(colour(t))
      << "\"/>\n";
  }
  s << "<rect x=\"" << bx << "\" y=\"" << top << "\" width=\"" << bar_w << "\" height=\"" << bh
    << "\" fill=\"none\" stroke=\"#444\"/>\n";
  s << "<text x=\"" << bx + bar_w + 6 << "\" y=\"" << top + 10 << "\">" << num(hi, opt.decimals)
    << "</text>\n";
  s << "<text x=\"" << bx + bar_w + 6 << "\" y=\"" << top + bh << "\">" << num(lo, opt.decimals)
    << "</text>\n";
  s << "</svg>\n";
  return s.str();
}

void write_svg_heatmap(const std::string& path, const std::vector<std::vector<double>>& values,
                       const HeatmapOptions& opt) {
  write_file_atomic(path, svg_heatmap(values, opt));
}

}  // namespace lf::analysis
