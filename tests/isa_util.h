// Running kernel tests on every instruction-set level this CPU has (kernels/cpu_isa.h): a
// test suite derived from OnEveryIsa and instantiated with INSTANTIATE_ON_EVERY_ISA runs once
// per level, with that level's kernels active, and skips the levels the CPU lacks (they run
// on CPUs that have them; the dispatcher itself is tested on CPUID masks in test_cpu_isa.cpp).
#pragma once
#include <gtest/gtest.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/cpu_isa.h"

namespace lf::isa {
// gtest prints a level by its name (in test names' parameter comments and failures).
inline void PrintTo(Level l, std::ostream* os) { *os << level_name(l); }
}  // namespace lf::isa

namespace lf::test {

inline std::vector<isa::Level> all_isa_levels() {
  return {isa::Level::baseline, isa::Level::avx2, isa::Level::avx512, isa::Level::avx512bf16};
}

// Makes level l the active one for the scope, then restores the previous one.
class IsaScope {
 public:
  explicit IsaScope(isa::Level l) : prev_(isa::active_level()) { isa::set_active_level(l); }
  ~IsaScope() { isa::set_active_level(prev_); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  isa::Level prev_;
};

// Skips the test unless this CPU runs level l; else makes it active in `scope`.
#define LF_ON_ISA_LEVEL(scope, l)                                                            \
  do {                                                                                       \
    if (!::lf::isa::supports(::lf::isa::this_cpu(), l))                                      \
      GTEST_SKIP() << "this CPU lacks " << ::lf::isa::missing_features(::lf::isa::this_cpu(), \
                                                                       l);                   \
    (scope).emplace(l);                                                                      \
  } while (0)

class OnEveryIsa : public ::testing::TestWithParam<isa::Level> {
 protected:
  void SetUp() override { LF_ON_ISA_LEVEL(scope_, GetParam()); }
  std::optional<IsaScope> scope_;
};

inline std::string isa_param_name(const ::testing::TestParamInfo<isa::Level>& info) {
  return isa::level_name(info.param);
}

}  // namespace lf::test

#define INSTANTIATE_ON_EVERY_ISA(suite)                                                      \
  INSTANTIATE_TEST_SUITE_P(Isa, suite, ::testing::ValuesIn(::lf::test::all_isa_levels()), \
                           ::lf::test::isa_param_name)
