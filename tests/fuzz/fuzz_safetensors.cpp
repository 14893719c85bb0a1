// The safetensors reader on arbitrary bytes: it must refuse them with lf::Error or read every
// tensor it accepted without touching memory outside the file.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_util.h"
#include "linformer/error.h"
#include "linformer/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static lf::fuzz::MemFile file("safetensors");
  file.write(data, size);
  try {
    lf::SafeTensorsReader r(file.path());
    for (const std::string& name : r.names()) {
      const lf::TensorInfo& t = r.info(name);
      if (t.end - t.begin > (64u << 20)) continue;  // data within the file; decoding is linear
      try {
        if (lf::dtype_is_float(t.dtype))
          (void)r.read_f32(name);
        else
          (void)r.read_i64(name);
      } catch (const lf::Error&) {
      }
    }
  } catch (const lf::Error&) {
  }
  return 0;
}
