#include "core/check.h"

namespace lf {

bool shape_checks_enabled() { return LF_DCHECK_ENABLED != 0; }

}  // namespace lf
