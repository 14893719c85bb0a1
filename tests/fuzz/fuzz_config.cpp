// The config parser on arbitrary text: refused with lf::Error, or a valid config that
// survives a round trip through its own JSON exactly.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "linformer/config.h"
#include "linformer/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const lf::Config c = lf::Config::from_json(text);
    const std::string once = c.to_json();
    const lf::Config again = lf::Config::from_json(once);
    if (again.to_json() != once) std::abort();  // the round trip must be exact
  } catch (const lf::Error&) {
  }
  // The same text as a --set override value.
  try {
    (void)lf::Config::load_with_overrides("", {"k=" + text.substr(0, 4096)});
  } catch (const lf::Error&) {
  }
  return 0;
}
