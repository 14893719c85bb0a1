// The corpus reader on arbitrary bytes: lines of a file with UTF-8 checks, and the UTF-8
// validator against a reference decoder written here.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "data/corpus.h"
#include "fuzz_util.h"
#include "linformer/error.h"

namespace {

// Offset of the first invalid UTF-8 sequence (RFC 3629: no overlongs, no surrogates, at most
// U+10FFFF), or -1.
int64_t reference_invalid_utf8(const std::string& s) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned c = b[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07;
    } else {
      return static_cast<int64_t>(i);
    }
    if (i + len > n) return static_cast<int64_t>(i);
    for (size_t k = 1; k < len; ++k) {
      if ((b[i + k] & 0xc0) != 0x80) return static_cast<int64_t>(i);
      cp = (cp << 6) | (b[i + k] & 0x3f);
    }
    const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return static_cast<int64_t>(i);
    i += len;
  }
  return -1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static lf::fuzz::MemFile file("corpus.txt");
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (lf::find_invalid_utf8(text) != reference_invalid_utf8(text)) std::abort();
  file.write(data, size);
  try {
    size_t bytes = 0;
    lf::for_each_line({file.path()}, [&](const std::string& line) {
      if (line.empty() || lf::find_invalid_utf8(line) >= 0) std::abort();
      bytes += line.size();
      return true;
    });
    if (bytes > size) std::abort();
  } catch (const lf::Error&) {
  }
  return 0;
}
