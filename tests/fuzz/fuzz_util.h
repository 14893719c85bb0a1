// Shared by the libFuzzer harnesses: the input as a file (the readers take paths), in memory
// (memfd), so that no disk is touched and nothing is left behind.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace lf::fuzz {

// A memory-backed file whose content is replaced on each write(); path() names it.
class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(memfd_create(name, 0)) {
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& path() const { return path_; }
  void write(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
  std::string path_;
};

// Models larger than this are refused by the memory check (the fuzzer's RSS limit is 2 GB).
inline void limit_memory() { setenv("LINFORMER_MEMORY_LIMIT", "268435456", 1); }

}  // namespace lf::fuzz
