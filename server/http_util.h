// Pieces of the HTTP layer that cpp-httplib 0.11 does not have: a task queue that grows with
// the load (its own ThreadPool has a fixed size, so the admission limit would be the pool
// size, not --max-concurrent-requests), and a way for a handler to see that its client has
// gone (httplib 0.11 gives handlers no socket and no is_connection_closed()).
#pragma once
#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lf::serve {

// Starts threads as connections need them, up to max_threads; keeps them afterwards. A
// keep-alive connection holds its thread until it closes or idles out.
class ElasticPool : public httplib::TaskQueue {
 public:
  explicit ElasticPool(size_t max_threads) : max_threads_(max_threads) {}
  ~ElasticPool() override = default;
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;
  size_t threads() const;

 private:
  void work();
  const size_t max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool shutdown_ = false;
};

// The socket of the connection a request arrived on (found by its two ports and the peer's
// address; cached per thread, since a thread serves one connection at a time), or -1.
int client_socket(const httplib::Request& req);

// True when the peer has closed or reset the connection (a half-close counts as gone).
bool client_gone(int fd);

}  // namespace lf::serve
