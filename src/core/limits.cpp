#include "core/limits.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "linformer/error.h"

namespace lf {

namespace {

uint64_t read_mem_total() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  unsigned long long kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemTotal:") return static_cast<uint64_t>(kib) * 1024;
  }
  return 0;
}

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return b;
}

}  // namespace

uint64_t physical_memory_bytes() {
  if (const char* s = std::getenv("LINFORMER_MEMORY_LIMIT")) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (end != s && *end == '\0' && v > 0) return v;
  }
  static const uint64_t total = read_mem_total();
  return total;
}

void require_memory(double bytes, const std::string& what) {
  const uint64_t have = physical_memory_bytes();
  if (have == 0 || bytes <= static_cast<double>(have)) return;
  char need[40];
  std::snprintf(need, sizeof need, "%.0f", bytes);
  fail(what, " needs ", need, " bytes (", gib(bytes), ") but this machine has ", have, " bytes (",
       gib(static_cast<double>(have)), ") of memory");
}

}  // namespace lf
