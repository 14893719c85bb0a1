// The server's Prometheus metrics (text exposition format 0.0.4): counters, gauges and
// histograms with fixed buckets, safe to update from any thread.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace lf::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends the HELP and TYPE lines, NAME_bucket{le="..."} lines, NAME_sum and NAME_count.
  void write(std::string* out, const std::string& name, const char* help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last: +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  // A request on a model route finished: status class, its error type when it failed.
  void request_done(const std::string& route, bool ok, const std::string& error_type);
  void request_started(const std::string& route);
  // Seconds spent by one successful request in each phase.
  void request_phases(double total, double tokenization, double queue, double inference);
  void input_length(int64_t tokens);
  void batch(int64_t sequences, int64_t padded_tokens);
  std::atomic<int64_t> queue_size{0};  // sequences waiting for the model
  std::atomic<int64_t> in_flight{0};   // requests admitted and not yet answered
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> count_, success_;
  std::map<std::pair<std::string, std::string>, uint64_t> failure_;
  Histogram total_, tokenization_, queue_, inference_, input_length_, batch_size_, batch_tokens_;
};

// Resident memory of this process in bytes (from /proc/self/statm; 0 if unreadable).
int64_t resident_bytes();

}  // namespace lf::serve
