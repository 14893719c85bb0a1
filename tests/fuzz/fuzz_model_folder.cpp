// Loading a model folder from arbitrary bytes: the input is config.json, a 0xff 0x00 0xff 0x00
// separator, then model.safetensors (without a separator: the whole input is the safetensors
// file and the configuration comes from its metadata). Refused with lf::Error, or a model
// that runs a forward pass.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_util.h"
#include "linformer/checkpoint.h"
#include "linformer/error.h"
#include "linformer/model.h"

namespace {

std::string folder() {
  static const std::string dir = [] {
    std::string d =
        (std::filesystem::temp_directory_path() / ("lf_fuzz_model_" + std::to_string(getpid())))
            .string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

void put(const std::string& path, const char* p, size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(p, static_cast<std::streamsize>(n));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lf::fuzz::limit_memory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = folder();
  const char* p = reinterpret_cast<const char*>(data);
  const char sep[4] = {'\xff', '\0', '\xff', '\0'};
  const char* cut = static_cast<const char*>(memmem(p, size, sep, 4));
  std::filesystem::remove(dir + "/config.json");
  if (cut) {
    put(dir + "/config.json", p, static_cast<size_t>(cut - p));
    put(dir + "/model.safetensors", cut + 4, size - static_cast<size_t>(cut - p) - 4);
  } else {
    put(dir + "/model.safetensors", p, size);
  }
  try {
    lf::LoadOptions lo;
    lo.init_missing = true;  // more inputs reach the forward pass
    auto model = lf::load_model(dir, lo);
    const lf::Config& c = model->config();
    const int64_t N = std::min<int64_t>(c.max_len, 8);
    std::vector<int32_t> ids(N, static_cast<int32_t>(c.cls_id));
    model->forward(lf::Batch{ids.data(), nullptr, 1, N}, false);
  } catch (const lf::Error&) {
  }
  return 0;
}
