// Aligned float buffers and a grow-only arena for activations.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "core/limits.h"
#include "linformer/error.h"

namespace lf {

constexpr size_t kAlign = 64;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// Owning, 64-byte aligned, uninitialised storage for `count` elements of T.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t count) { resize(count); }
  void resize(size_t count) {
    if (count == size_) return;
    ptr_.reset();
    size_ = 0;
    if (count == 0) return;
    // Refused up front (overflow-safe) rather than wrapping or failing deep in the allocator.
    require_memory(static_cast<double>(count) * sizeof(T),
                   "a buffer of " + std::to_string(count) + " elements");
    size_t bytes = (count * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, bytes);
    if (!p) throw std::bad_alloc();
    ptr_.reset(p);
    size_ = count;
  }
  void zero() {
    if (size_) std::memset(ptr_.get(), 0, size_ * sizeof(T));
  }
  T* data() { return static_cast<T*>(ptr_.get()); }
  const T* data() const { return static_cast<const T*>(ptr_.get()); }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }

 private:
  std::unique_ptr<void, FreeDeleter> ptr_;
  size_t size_ = 0;
};

// A bump allocator over one buffer. Callers first size it (reserve the largest shape
// they will run), then carve per-call blocks; reset() recycles everything without freeing,
// so repeated calls never touch fresh pages.
class Arena {
 public:
  // Ensures capacity for `bytes`; grows (dropping old contents) only when too small.
  void reserve(size_t bytes) {
    if (bytes > buf_.size()) buf_.resize(bytes);
  }
  void reset() { used_ = 0; }
  template <typename T>
  T* alloc(size_t count) {
    size_t bytes = (count * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    LF_CHECK(used_ + bytes <= buf_.size(), "arena overflow: need ", used_ + bytes,
             " bytes, have ", buf_.size());
    T* p = reinterpret_cast<T*>(buf_.data() + used_);
    used_ += bytes;
    return p;
  }
  size_t used() const { return used_; }
  size_t capacity() const { return buf_.size(); }
  static size_t aligned(size_t count, size_t elem) {
    return (count * elem + kAlign - 1) / kAlign * kAlign;
  }

 private:
  Buffer<unsigned char> buf_;
  size_t used_ = 0;
};

// Carves blocks from an arena, or (with a null arena) only counts the bytes they need, so
// one function both sizes and lays out a set of buffers.
struct Carver {
  Arena* arena = nullptr;
  size_t bytes = 0;
  template <typename T>
  T* take(size_t count) {
    bytes += Arena::aligned(count, sizeof(T));
    return arena ? arena->alloc<T>(count) : nullptr;
  }
};

}  // namespace lf
