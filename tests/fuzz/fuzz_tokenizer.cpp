// The Hugging Face tokenizer readers on arbitrary bytes. The first byte picks the layout:
// 0 tokenizer.json, 1 vocab.txt, 2 vocab.json + merges.txt (the rest split at the first
// 0xff 0x00 0xff 0x00 separator); after a second separator comes a text to encode. Refused
// with lf::Error, or a tokenizer whose ids are in range and whose decode succeeds.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "linformer/error.h"
#include "linformer/tokenizer.h"

namespace {

std::string folder() {
  static const std::string dir = [] {
    std::string d = (std::filesystem::temp_directory_path() /
                     ("lf_fuzz_tokenizer_" + std::to_string(getpid())))
                        .string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

void put(const std::string& path, const std::string& s) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// Splits s at the first separator: {before, after} (after empty when there is none).
std::pair<std::string, std::string> cut(const std::string& s) {
  static const std::string sep("\xff\x00\xff\x00", 4);
  const size_t p = s.find(sep);
  if (p == std::string::npos) return {s, ""};
  return {s.substr(0, p), s.substr(p + 4)};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int kind = data[0] % 3;
  const std::string dir = folder();
  for (const char* f : {"tokenizer.json", "vocab.txt", "vocab.json", "merges.txt"})
    std::filesystem::remove(dir + "/" + f);
  auto [first, rest] = cut(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  std::string text;
  if (kind == 0) {
    put(dir + "/tokenizer.json", first);
    text = rest;
  } else if (kind == 1) {
    put(dir + "/vocab.txt", first);
    text = rest;
  } else {
    auto [merges, t] = cut(rest);
    put(dir + "/vocab.json", first);
    put(dir + "/merges.txt", merges);
    text = t;
  }
  try {
    const lf::Tokenizer tok(dir);
    const lf::SpecialIds& s = tok.special();
    for (int32_t id : {s.cls, s.sep, s.pad, s.unk, s.mask})
      if (id < -1 || id >= tok.vocab_size()) std::abort();
    std::vector<int32_t> ids;
    try {
      ids = tok.encode(text);
    } catch (const lf::Error&) {
      return 0;  // invalid UTF-8 text
    }
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    (void)tok.decode(ids);
    for (int32_t id : ids) (void)tok.piece(id);
  } catch (const lf::Error&) {
  }
  return 0;
}
