// Shape checks at kernel and layer entry. LF_DCHECK(cond, "message parts", value, ...) throws
// lf::Error like LF_CHECK when cond is false, but only in builds that compile the checks in:
// debug builds (no NDEBUG) and any build configured with -DLINFORMER_CHECKS=ON (make sanitize
// does). Elsewhere the condition is type-checked but never evaluated: Release kernels pay
// nothing. Checks at the model boundary (user input) use LF_CHECK and are always on.
#pragma once
#include "linformer/error.h"

#if !defined(NDEBUG) || defined(LINFORMER_CHECKS)
#define LF_DCHECK_ENABLED 1
#define LF_DCHECK(cond, ...) LF_CHECK(cond, __VA_ARGS__)
#else
#define LF_DCHECK_ENABLED 0
#define LF_DCHECK(cond, ...)                \
  do {                                      \
    if (false) LF_CHECK(cond, __VA_ARGS__); \
  } while (0)
#endif

namespace lf {

// Whether the library was built with LF_DCHECK compiled in (tests of the checks skip if not).
bool shape_checks_enabled();

}  // namespace lf
