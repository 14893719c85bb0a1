#include "metrics.h"

#include <unistd.h>

#include <cstdio>

namespace lf::serve {

namespace {

std::vector<double> seconds_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

std::vector<double> powers_of_two(double top) {
  std::vector<double> b;
  for (double v = 1; v <= top; v *= 2) b.push_back(v);
  return b;
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void header(std::string* out, const char* name, const char* type, const char* help) {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::write(std::string* out, const std::string& name, const char* help) const {
  header(out, name.c_str(), "histogram", help);
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    const std::string le = i < bounds_.size() ? num(bounds_[i]) : "+Inf";
    *out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cum) + "\n";
  }
  *out += name + "_sum " + num(sum_) + "\n";
  *out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : total_(seconds_buckets()),
      tokenization_(seconds_buckets()),
      queue_(seconds_buckets()),
      inference_(seconds_buckets()),
      input_length_(powers_of_two(1 << 20)),
      batch_size_(powers_of_two(1 << 16)),
      batch_tokens_(powers_of_two(1 << 24)) {}

void Metrics::request_started(const std::string& route) {
  std::lock_guard<std::mutex> lock(mu_);
  ++count_[route];
}

void Metrics::request_done(const std::string& route, bool ok, const std::string& error_type) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ok)
    ++success_[route];
  else
    ++failure_[{route, error_type}];
}

void Metrics::request_phases(double total, double tokenization, double queue, double inference) {
  total_.observe(total);
  tokenization_.observe(tokenization);
  queue_.observe(queue);
  inference_.observe(inference);
}

void Metrics::input_length(int64_t tokens) { input_length_.observe(static_cast<double>(tokens)); }

void Metrics::batch(int64_t sequences, int64_t padded_tokens) {
  batch_size_.observe(static_cast<double>(sequences));
  batch_tokens_.observe(static_cast<double>(padded_tokens));
}

std::string Metrics::render() const {
  std::string o;
  {
    std::lock_guard<std::mutex> lock(mu_);
    header(&o, "linformer_request_count", "counter", "Requests received on the model routes");
    for (auto& [route, n] : count_)
      o += "linformer_request_count{route=\"" + route + "\"} " + std::to_string(n) + "\n";
    header(&o, "linformer_request_success", "counter", "Requests answered with status 200");
    for (auto& [route, n] : success_)
      o += "linformer_request_success{route=\"" + route + "\"} " + std::to_string(n) + "\n";
    header(&o, "linformer_request_failure", "counter",
           "Requests refused or failed, by error type (validation, tokenizer, overloaded, "
           "unhealthy, unauthorized, payload_too_large, client_closed, backend)");
    for (auto& [key, n] : failure_)
      o += "linformer_request_failure{route=\"" + key.first + "\",err=\"" + key.second + "\"} " +
           std::to_string(n) + "\n";
  }
  total_.write(&o, "linformer_request_duration_seconds",
               "Time from receiving a request to its answer");
  tokenization_.write(&o, "linformer_request_tokenization_duration_seconds",
                      "Time spent parsing, validating and tokenizing a request");
  queue_.write(&o, "linformer_request_queue_duration_seconds",
               "Time a request waited for its first batch");
  inference_.write(&o, "linformer_request_inference_duration_seconds",
                   "Time the model computed the batches holding a request");
  input_length_.write(&o, "linformer_request_input_length", "Tokens per input");
  batch_size_.write(&o, "linformer_batch_size", "Sequences per batch the model ran");
  batch_tokens_.write(
      &o, "linformer_batch_tokens",
      "Tokens per batch the model ran, padding included (sequences x padded length)");
  header(&o, "linformer_queue_size", "gauge", "Sequences waiting for the model");
  o += "linformer_queue_size " + std::to_string(queue_size.load()) + "\n";
  header(&o, "linformer_requests_in_flight", "gauge", "Requests admitted and not yet answered");
  o += "linformer_requests_in_flight " + std::to_string(in_flight.load()) + "\n";
  header(&o, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes");
  o += "process_resident_memory_bytes " + std::to_string(resident_bytes()) + "\n";
  return o;
}

int64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace lf::serve
