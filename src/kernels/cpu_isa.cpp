#include "kernels/cpu_isa.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.h>

#include "linformer/cpu.h"
#include "linformer/error.h"

// Each level's table, defined by its objects (src/kernels/isa/vec_kernels.cpp compiled once per
// level with LF_ISA_NS set to the level's name).
namespace lf::isa::baseline {
const Kernels& table();
}
namespace lf::isa::avx2 {
const Kernels& table();
}
namespace lf::isa::avx512 {
const Kernels& table();
}
namespace lf::isa::avx512bf16 {
const Kernels& table();
}

namespace lf::isa {

std::atomic<const Kernels*> g_active{nullptr};

namespace {

constexpr const char* kNames[kLevels] = {"baseline", "avx2", "avx512", "avx512bf16"};

// XCR0, read only where CPUID says the OS enabled XSAVE (else XGETBV itself is #UD).
uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

bool forced_flag = false;

}  // namespace

CpuFeatures detect_cpu() {
  CpuFeatures f;
  unsigned a, b, c, d;
  const unsigned max_leaf = __get_cpuid_max(0, nullptr);
  __cpuid(0, a, b, c, d);
  f.amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;  // "AuthenticAMD"
  if (max_leaf < 1 || !__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  f.avx = (c >> 28) & 1;
  f.fma = (c >> 12) & 1;
  if (osxsave) {
    const uint64_t xcr0 = xgetbv0();
    f.os_ymm = (xcr0 & 0x6) == 0x6;
    f.os_zmm = f.os_ymm && (xcr0 & 0xE0) == 0xE0;
    f.os_amx = (xcr0 & 0x60000) == 0x60000;
  }
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned max_sub = a;
    f.avx2 = (b >> 5) & 1;
    f.avx512f = (b >> 16) & 1;
    f.avx512dq = (b >> 17) & 1;
    f.avx512cd = (b >> 28) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
    f.amx_bf16 = (d >> 22) & 1;
    if (max_sub >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      f.avx512bf16 = (a >> 5) & 1;
    }
  }
  return f;
}

const CpuFeatures& this_cpu() {
  static const CpuFeatures f = detect_cpu();
  return f;
}

ComputeType auto_precision(const CpuFeatures& f, std::string* why) {
  const auto say = [&](const char* s) {
    if (why) *why = s;
  };
  if (f.amx_bf16 && f.os_amx && supports(f, Level::avx512)) {
    say("AMX tiles run bf16 products several times faster than f32");
    return ComputeType::bf16;
  }
  if (f.amd && f.avx512bf16 && supports(f, Level::avx512)) {
    say("AMD AVX512-BF16 runs bf16 products at twice the f32 rate");
    return ComputeType::bf16;
  }
  say(f.avx512bf16 ? "AVX512-BF16 without AMX runs bf16 products at half the f32 rate"
                   : "no bf16 products in hardware");
  return ComputeType::f32;
}

const char* level_name(Level l) { return kNames[static_cast<int>(l)]; }

bool parse_level(const std::string& name, Level* out) {
  for (int i = 0; i < kLevels; ++i)
    if (name == kNames[i]) {
      *out = static_cast<Level>(i);
      return true;
    }
  return false;
}

std::string missing_features(const CpuFeatures& f, Level l) {
  std::string m;
  const auto need = [&](bool have, const char* what) {
    if (!have) m += (m.empty() ? "" : ", ") + std::string(what);
  };
  const int n = static_cast<int>(l);
  if (n >= 1) {
    need(f.avx, "AVX");
    need(f.avx2, "AVX2");
    need(f.fma, "FMA");
    need(f.os_ymm, "the OS saving AVX (YMM) state");
  }
  if (n >= 2) {
    need(f.avx512f, "AVX512F");
    need(f.avx512dq, "AVX512DQ");
    need(f.avx512bw, "AVX512BW");
    need(f.avx512vl, "AVX512VL");
    need(f.avx512cd, "AVX512CD");
    need(f.os_zmm, "the OS saving AVX-512 (ZMM, opmask) state");
  }
  if (n >= 3) need(f.avx512bf16, "AVX512-BF16");
  return m;
}

bool supports(const CpuFeatures& f, Level l) { return missing_features(f, l).empty(); }

Level best_level(const CpuFeatures& f) {
  Level best = Level::baseline;
  for (int i = 1; i < kLevels; ++i)
    if (supports(f, static_cast<Level>(i))) best = static_cast<Level>(i);
  return best;
}

Level choose_level(const CpuFeatures& f, const std::string& forced) {
  if (forced.empty() || forced == "auto") return best_level(f);
  Level l;
  if (!parse_level(forced, &l))
    fail("LINFORMER_ISA=", forced,
         ": unknown instruction-set level; choose baseline, avx2, avx512, avx512bf16 or auto");
  if (!supports(f, l)) {
    std::string runs;
    for (int i = 0; i < kLevels; ++i)
      if (supports(f, static_cast<Level>(i))) runs += (runs.empty() ? "" : ", ") + std::string(kNames[i]);
    fail("LINFORMER_ISA=", forced, ": this CPU cannot run the ", forced, " kernels (it lacks ",
         missing_features(f, l), "); it runs ", runs);
  }
  return l;
}

const Kernels& kernels_for(Level l) {
  switch (l) {
    case Level::baseline: return baseline::table();
    case Level::avx2: return avx2::table();
    case Level::avx512: return avx512::table();
    case Level::avx512bf16: return avx512bf16::table();
  }
  return baseline::table();
}

const Kernels& init_active() {
  const char* env = std::getenv("LINFORMER_ISA");
  const std::string forced = env ? env : "";
  const Level l = choose_level(this_cpu(), forced);  // throws when refused
  forced_flag = !forced.empty() && forced != "auto";
  const Kernels* k = &kernels_for(l);
  g_active.store(k, std::memory_order_release);
  return *k;
}

Level active_level() { return kernels().level; }
bool active_level_forced() {
  kernels();
  return forced_flag;
}

std::vector<Level> supported_levels() {
  std::vector<Level> out;
  for (int i = 0; i < kLevels; ++i)
    if (supports(this_cpu(), static_cast<Level>(i))) out.push_back(static_cast<Level>(i));
  return out;
}

void set_active_level(Level l) {
  choose_level(this_cpu(), level_name(l));  // throws for a level this CPU lacks
  g_active.store(&kernels_for(l), std::memory_order_release);
}

}  // namespace lf::isa

namespace lf {

namespace {
std::string onednn_isa_name() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_all: return "no JIT (reference code)";
    default: return "other";
  }
}
}  // namespace

CpuPaths cpu_paths() {
  CpuPaths p;
  p.kernels = isa::level_name(isa::active_level());  // decides, or throws the refusal
  p.forced = isa::active_level_forced();
  for (isa::Level l : isa::supported_levels()) p.supported.push_back(isa::level_name(l));
  p.onednn = onednn_isa_name();
  return p;
}

AutoPrecision auto_precision() {
  AutoPrecision a;
  const isa::CpuFeatures& f = isa::this_cpu();
  a.precision = isa::auto_precision(f, &a.reason);
  // oneDNN's effective ISA (its masks include the bits of the ISAs below): capped by
  // ONEDNN_MAX_CPU_ISA below the unit that makes bf16 fast, it runs no fast bf16 products
  // (below AVX-512 none at all), and bf16 would be slower or refused.
  const auto has = [](dnnl_cpu_isa_t want) {
    return (static_cast<unsigned>(dnnl_get_effective_cpu_isa()) & static_cast<unsigned>(want)) ==
           static_cast<unsigned>(want);
  };
  const bool amx = f.amx_bf16 && f.os_amx;
  if (a.precision == ComputeType::bf16 &&
      !has(amx ? dnnl_cpu_isa_avx512_core_amx : dnnl_cpu_isa_avx512_core_bf16)) {
    a.precision = ComputeType::f32;
    a.reason = "oneDNN is capped at " + onednn_isa_name() + " (ONEDNN_MAX_CPU_ISA), below the " +
               (amx ? "AMX tiles" : "bf16 units") + " that make bf16 faster";
  }
  return a;
}

ComputeType resolve_precision(const std::string& name) {
  if (name == "auto") return auto_precision().precision;
  if (name == "f32" || name == "bf16" || name == "int8") return parse_compute_type(name);
  fail("precision must be \"auto\", \"f32\", \"bf16\" or \"int8\", got \"", name, "\"");
}

std::string cpu_paths_summary() {
  const CpuPaths p = cpu_paths();
  std::string s = "kernels " + p.kernels + (p.forced ? " (forced by LINFORMER_ISA)" : "") +
                  "; this CPU runs ";
  for (size_t i = 0; i < p.supported.size(); ++i) s += (i ? ", " : "") + p.supported[i];
  return s + "; oneDNN " + p.onednn;
}

}  // namespace lf
