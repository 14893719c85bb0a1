#include "data/corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "linformer/error.h"

namespace lf {

namespace fs = std::filesystem;

std::vector<std::string> list_corpus_files(const std::vector<std::string>& paths) {
  LF_CHECK(!paths.empty(), "no corpus given");
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    LF_CHECK(fs::exists(p, ec), "corpus path ", p, " does not exist");
    if (fs::is_directory(p)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(p, ec); !ec && it != fs::end(it);
           it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (!name.empty() && name[0] == '.') {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file()) found.push_back(it->path().string());
      }
      LF_CHECK(!ec, "cannot read folder ", p, ": ", ec.message());
      LF_CHECK(!found.empty(), "corpus folder ", p, " holds no files");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(p);
    }
  }
  return files;
}

int64_t find_invalid_utf8(const std::string& s) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = b[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return static_cast<int64_t>(i);
    }
    if (i + len > n) return static_cast<int64_t>(i);
    for (size_t k = 1; k < len; ++k) {
      if ((b[i + k] & 0xC0) != 0x80) return static_cast<int64_t>(i);
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and values beyond U+10FFFF are invalid.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return static_cast<int64_t>(i);
    i += len;
  }
  return -1;
}

void for_each_line(const std::vector<std::string>& files,
                   const std::function<bool(const std::string&)>& fn) {
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    LF_CHECK(in, "cannot open corpus file ", f);
    std::string line;
    int64_t lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      const int64_t bad = find_invalid_utf8(line);
      LF_CHECK(bad < 0, f, ":", lineno, ": invalid UTF-8 at byte ", bad + 1,
               " of the line (the corpus must be UTF-8 text)");
      if (!fn(line)) return;
    }
    LF_CHECK(!in.bad(), "error reading ", f);
  }
}

}  // namespace lf
