// Minimal SVG line charts (no dependencies): loss curves, benchmark sweeps, spectra.
#pragma once
#include <string>
#include <vector>

namespace lf {

struct PlotSeries {
  std::string name;
  std::vector<double> x, y;
  bool dashed = false;
};

struct PlotOptions {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  int width = 760, height = 460;
};

// Escapes <, > and & for SVG text.
std::string svg_escape(const std::string& s);

// Renders the series as an SVG document (axes, ticks, legend).
std::string svg_line_plot(const std::vector<PlotSeries>& series, const PlotOptions& opt);

// Writes the plot atomically to `path`.
void write_svg_line_plot(const std::string& path, const std::vector<PlotSeries>& series,
                         const PlotOptions& opt);

}  // namespace lf
