#include "http_util.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace lf::serve {

void ElasticPool::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back(std::move(fn));
  if (jobs_.size() > idle_ && threads_.size() < max_threads_)
    threads_.emplace_back([this] { work(); });
  else
    cv_.notify_one();
}

void ElasticPool::work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++idle_;
      cv_.wait(lock, [&] { return shutdown_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // shut down and nothing left
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    fn();
  }
}

void ElasticPool::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

size_t ElasticPool::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

namespace {

// Address and port of a socket name.
bool name_of(const sockaddr_storage& s, std::string* addr, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (s.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&s);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    *port = ntohs(a->sin_port);
  } else if (s.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&s);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    *port = ntohs(a->sin6_port);
  } else {
    return false;
  }
  *addr = buf;
  return true;
}

bool is_socket_of(int fd, const httplib::Request& req) {
  sockaddr_storage peer{}, local{};
  socklen_t lp = sizeof peer, ll = sizeof local;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &lp) != 0) return false;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
  std::string paddr, laddr;
  int pport = -1, lport = -1;
  if (!name_of(peer, &paddr, &pport) || !name_of(local, &laddr, &lport)) return false;
  return pport == req.remote_port && lport == req.local_port && paddr == req.remote_addr;
}

}  // namespace

int client_socket(const httplib::Request& req) {
  thread_local int cached = -1;
  if (cached >= 0 && is_socket_of(cached, req)) return cached;
  cached = -1;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(d)) continue;
    if (is_socket_of(static_cast<int>(fd), req)) {
      cached = static_cast<int>(fd);
      break;
    }
  }
  closedir(d);
  return cached;
}

bool client_gone(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {  // data: a pipelined request, or the end of the stream
    char c;
    return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }
  return false;
}

}  // namespace lf::serve
