// Inference throughput with batch-invariant inference (Model::set_batch_invariant) off and
// on, for the shapes docs/design.md ("Batch invariance") reports:
//   build/bench/linformer_invariance_bench CONFIG.json [N,B ...]
// e.g. configs/small-linformer.json 32,1 32,32 512,1 512,32 2048,1 2048,32. max_len is raised
// to the longest N (Linformer's k stays). Prints, per shape, tokens/s of each mode (the
// median of 5 timed forwards after one warm-up, the two modes alternating) and on/off.
// INVARIANCE_ONLY=on|off runs one mode alone (for a profiler; the other column prints 0).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "linformer/config.h"
#include "linformer/model.h"
#include "linformer/rng.h"

int main(int argc, char** argv) {
  using namespace lf;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CONFIG.json N,B [N,B ...]\n", argv[0]);
    return 2;
  }
  std::vector<std::pair<int64_t, int64_t>> shapes;
  int64_t max_n = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string s = argv[i];
    const size_t comma = s.find(',');
    shapes.emplace_back(std::stoll(s.substr(0, comma)), std::stoll(s.substr(comma + 1)));
    max_n = std::max(max_n, shapes.back().first);
  }
  const char* only = std::getenv("INVARIANCE_ONLY");
  const int first = only && !std::strcmp(only, "on") ? 1 : 0;
  const int last = only && !std::strcmp(only, "off") ? 0 : 1;
  Config cfg = Config::load(argv[1]);
  cfg.max_len = std::max(cfg.max_len, max_n);
  Model m(cfg);
  m.init(1);
  std::printf(
      "%s, %d threads\n| n | batch | off tokens/s | on tokens/s | on/off "
      "|\n|---|---|---|---|---|\n",
      argv[1], omp_get_max_threads());
  for (auto [N, B] : shapes) {
    std::vector<int32_t> ids(B * N);
    for (size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<int32_t>(rng_bits(7, 0, i) % cfg.vocab_size);
    const Batch batch{ids.data(), nullptr, B, N};
    std::vector<double> secs[2];
    for (int rep = 0; rep < 6; ++rep)
      for (int on = first; on <= last; ++on) {
        m.set_batch_invariant(on == 1);
        const auto t0 = std::chrono::steady_clock::now();
        m.forward(batch, false);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (rep > 0) secs[on].push_back(s);  // the first forward of each mode warms up
      }
    double tps[2] = {0, 0};
    for (int on = first; on <= last; ++on) {
      std::sort(secs[on].begin(), secs[on].end());
      tps[on] = static_cast<double>(B * N) / secs[on][secs[on].size() / 2];
    }
    std::printf("| %lld | %lld | %.0f | %.0f | %.2f |\n", static_cast<long long>(N),
                static_cast<long long>(B), tps[0], tps[1], tps[1] / tps[0]);
    std::fflush(stdout);
  }
}
