// File helpers: crash-safe (atomic) writes, whole-file reads and read-only mappings.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace lf {

// Writes a file so that `path` always holds either its old content or the complete new one.
// `writer` streams the content into a temporary file `path + ".tmp.<pid>"` in the same
// directory; the file is then flushed, fsync'ed and renamed over `path`, and the directory is
// fsync'ed. On any failure the temporary file is removed: an exception thrown by `writer` is
// rethrown as is, an OS failure throws lf::Error naming the path and the OS error.
// An existing `path` keeps its permission bits.
void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& writer);

// Convenience: write_file_atomic with fixed content.
void write_file_atomic(const std::string& path, const std::string& content);

// Reads a whole file. Throws lf::Error "cannot open <path>: <reason>" (or "cannot read ...").
std::string read_file(const std::string& path);

// Refuses (lf::Error) to write `written` - a file or folder a command creates or replaces -
// when it is one of `inputs` (option name, path), a folder that contains one, or lies inside
// an input folder, following symbolic and hard links:
// "<what> <written> would overwrite the input <path> (<option>)".
// Empty and missing input paths, and an empty or "-" (stdout) `written`, are ignored.
void check_not_an_input(const std::string& written, const std::string& what,
                        const std::vector<std::pair<std::string, std::string>>& inputs);

// A read-only view of a whole file: memory-mapped when possible, otherwise read into memory.
// Move-only. The file should not be truncated while mapped (writers here replace files by
// rename, which leaves an existing mapping intact).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws lf::Error "cannot open <path>: ..."
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;  // non-null when mmap'ed
  std::string copy_;     // holds the bytes when not mmap'ed
};

}  // namespace lf
