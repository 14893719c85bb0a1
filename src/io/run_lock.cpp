#include "io/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "linformer/error.h"

namespace lf {

namespace fs = std::filesystem;

RunLock::RunLock(const std::string& dir, const char* what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  LF_CHECK(!ec, what, ": cannot create folder ", dir, ": ", ec.message());
  const std::string path = (fs::path(dir) / ".lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(what, ": cannot open ", path, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {0};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    if (err == EWOULDBLOCK)
      fail(what, ": ", dir, " is in use by process ", holder.empty() ? "?" : holder, " (", path,
           "); wait for it to finish, or use another folder");
    fail(what, ": cannot lock ", path, ": ", std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The lock is held all the same; only the holder's name is missing.
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

namespace {

bool is_temporary(const fs::path& p, bool is_dir) {
  const std::string n = p.filename().string();
  if (is_dir) return n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0;
  const size_t at = n.rfind(".tmp.");
  if (at == std::string::npos || at + 5 >= n.size()) return false;
  for (size_t i = at + 5; i < n.size(); ++i)
    if (n[i] < '0' || n[i] > '9') return false;
  return true;
}

void remove_in(const fs::path& dir, int depth) {
  std::error_code ec;
  std::vector<fs::path> doomed, subdirs;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const bool d = it->is_directory(ec) && !it->is_symlink(ec);
    if (is_temporary(it->path(), d))
      doomed.push_back(it->path());
    else if (d && depth > 0)
      subdirs.push_back(it->path());
  }
  for (const fs::path& p : doomed) fs::remove_all(p, ec);
  for (const fs::path& p : subdirs) remove_in(p, depth - 1);
}

}  // namespace

void remove_stale_temporaries(const std::string& dir) { remove_in(dir, 1); }

}  // namespace lf
