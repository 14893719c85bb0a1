// A minimal SVG heat-map (no dependencies): one coloured cell per (row, column) with its value
// written in it, row and column labels, and a colour bar.
#pragma once
#include <string>
#include <vector>

namespace lf::analysis {

struct HeatmapOptions {
  std::string title, row_label, col_label;
  std::vector<std::string> row_names, col_names;  // default: 0, 1, ...
  double vmin = 0, vmax = 0;                       // colour range; vmin == vmax: data range
  int cell = 64;                                   // cell size in pixels
  int decimals = 3;                                // digits shown in each cell
};

// values[r][c]; all rows must have the same length.
std::string svg_heatmap(const std::vector<std::vector<double>>& values, const HeatmapOptions& opt);

// Writes the heat-map atomically to `path`.
void write_svg_heatmap(const std::string& path, const std::vector<std::vector<double>>& values,
                       const HeatmapOptions& opt);

}  // namespace lf::analysis
