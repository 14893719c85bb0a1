#include "linformer/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "linformer/error.h"

namespace lf {
namespace {

std::string os_error(int err) { return std::strerror(err); }

// An output stream buffer over a POSIX file descriptor that remembers the first write error.
class FdOutBuf : public std::streambuf {
 public:
  explicit FdOutBuf(int fd) : fd_(fd), buf_(1 << 16) { reset_put_area(); }
  int error() const { return err_; }

 protected:
  int_type overflow(int_type ch) override {
    if (err_ || !flush_buffer()) return traits_type::eof();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }

  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (err_ || n <= 0) return err_ ? 0 : n;
    std::streamsize room = epptr() - pptr();
    if (n <= room) {
      std::memcpy(pptr(), s, static_cast<size_t>(n));
      pbump(static_cast<int>(n));
      return n;
    }
    // Large write: drain the buffer, then write straight from the caller's memory.
    if (!flush_buffer()) return 0;
    if (n < static_cast<std::streamsize>(buf_.size())) {
      std::memcpy(pptr(), s, static_cast<size_t>(n));
      pbump(static_cast<int>(n));
      return n;
    }
    return write_all(s, static_cast<size_t>(n)) ? n : 0;
  }

  int sync() override { return (!err_ && flush_buffer()) ? 0 : -1; }

 private:
  void reset_put_area() { setp(buf_.data(), buf_.data() + buf_.size()); }

  bool write_all(const char* p, size_t n) {
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        err_ = errno;
        return false;
      }
      if (w == 0) {
        err_ = EIO;
        return false;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

  bool flush_buffer() {
    size_t n = static_cast<size_t>(pptr() - pbase());
    bool ok = write_all(pbase(), n);
    reset_put_area();
    return ok;
  }

  int fd_;
  std::vector<char> buf_;
  int err_ = 0;
};

std::string parent_dir(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& writer) {
  LF_CHECK(!path.empty(), "write_file_atomic: empty path");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());

  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    int err = errno;
    fail("cannot write ", path, ": cannot create temporary file ", tmp, ": ", os_error(err));
  }
  try {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      (void)::fchmod(fd, st.st_mode & 07777);  // best effort: keep the old permissions
    }
    {
      FdOutBuf buf(fd);
      std::ostream os(&buf);
      writer(os);
      os.flush();
      if (buf.error()) fail("cannot write ", path, ": ", os_error(buf.error()));
      if (!os) fail("cannot write ", path, ": output stream failed");
    }
    if (::fsync(fd) != 0) {
      int err = errno;
      fail("cannot write ", path, ": fsync failed: ", os_error(err));
    }
    int rc = ::close(fd);
    fd = -1;
    if (rc != 0) {
      int err = errno;
      fail("cannot write ", path, ": close failed: ", os_error(err));
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      int err = errno;
      fail("cannot write ", path, ": cannot rename ", tmp, " over it: ", os_error(err));
    }
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }

  // Make the rename itself durable.
  const std::string dir = parent_dir(path);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    int err = errno;
    fail("wrote ", path, " but cannot open directory ", dir, " to sync it: ", os_error(err));
  }
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  // Some file systems cannot sync directories; that is not an error of ours.
  if (rc != 0 && err != EINVAL && err != ENOTSUP && err != EROFS) {
    fail("wrote ", path, " but cannot sync directory ", dir, ": ", os_error(err));
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_file_atomic(path, [&](std::ostream& os) {
    os.write(content.data(), static_cast<std::streamsize>(content.size()));
  });
}

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    fail("cannot open ", path, ": ", os_error(err));
  }
  std::string out;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    out.reserve(static_cast<size_t>(st.st_size));
  }
  std::vector<char> chunk(1 << 16);
  while (true) {
    ssize_t r = ::read(fd, chunk.data(), chunk.size());
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      fail("cannot read ", path, ": ", os_error(err));
    }
    if (r == 0) break;
    out.append(chunk.data(), static_cast<size_t>(r));
  }
  ::close(fd);
  return out;
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    fail("cannot open ", path, ": ", os_error(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail("cannot open ", path, ": ", os_error(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail("cannot open ", path, ": ", os_error(EISDIR));
  }
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      ::close(fd);
      map_ = p;
      data_ = static_cast<const unsigned char*>(p);
      size_ = static_cast<size_t>(st.st_size);
      return;
    }
  }
  ::close(fd);
  // Empty, special or unmappable file: read it instead.
  copy_ = read_file(path);
  data_ = reinterpret_cast<const unsigned char*>(copy_.data());
  size_ = copy_.size();
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
  if (map_) ::munmap(map_, size_);
  map_ = nullptr;
  data_ = nullptr;
  size_ = 0;
  copy_.clear();
}

MappedFile::MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this == &other) return *this;
  release();
  path_ = std::move(other.path_);
  map_ = other.map_;
  size_ = other.size_;
  copy_ = std::move(other.copy_);
  data_ = map_ ? static_cast<const unsigned char*>(map_)
               : reinterpret_cast<const unsigned char*>(copy_.data());
  other.map_ = nullptr;
  other.data_ = nullptr;
  other.size_ = 0;
  other.copy_.clear();
  return *this;
}

void check_not_an_input(const std::string& written, const std::string& what,
                        const std::vector<std::pair<std::string, std::string>>& inputs) {
  namespace fs = std::filesystem;
  if (written.empty() || written == "-") return;  // stdout
  std::error_code ec;
  const fs::path out = fs::weakly_canonical(fs::absolute(written, ec), ec);
  for (const auto& [option, path] : inputs) {
    if (path.empty() || !fs::exists(path, ec)) continue;
    const fs::path in = fs::weakly_canonical(fs::absolute(path, ec), ec);
    bool same = fs::exists(written, ec) && fs::equivalent(written, path, ec);
    // One lies inside the other (or they are the same): writing `out` replaces the input, or
    // writes into an input folder (a model, a corpus listed recursively).
    auto o = out.begin(), i = in.begin();
    for (; o != out.end() && i != in.end() && *o == *i; ++o, ++i) {
    }
    same = same || o == out.end() || i == in.end();
    LF_CHECK(!same, what, " ", written, " would overwrite the input ", path, " (", option,
             "); choose another output");
  }
}

}  // namespace lf
