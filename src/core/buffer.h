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
#include <vector>

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
  // At least count elements: grows (dropping the contents) only when smaller; returns data().
  T* grow(size_t count) {
    if (size_ < count) resize(count);
    return data();
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
//
// Guard words (on in debug builds, or after set_guard_words(true)): every block is followed by
// kGuardBytes of a fixed pattern, and check_guards() throws if any was overwritten, so a
// kernel writing past an undersized block is caught at the end of the pass instead of
// silently corrupting its neighbour. Carver counts the guards, so sizing stays exact.
class Arena {
 public:
  static constexpr size_t kGuardBytes = kAlign;
  static constexpr unsigned char kGuardByte = 0xA5;
  static bool guard_words() { return guards_on(); }
  static void set_guard_words(bool on) { guards_on() = on; }
  static size_t guard_bytes() { return guard_words() ? kGuardBytes : 0; }

  // Ensures capacity for `bytes`; grows (dropping old contents) only when too small.
  void reserve(size_t bytes) {
    if (bytes > buf_.size()) buf_.resize(bytes);
  }
  void reset() {
    used_ = 0;
    guards_.clear();
  }
  template <typename T>
  T* alloc(size_t count) {
    const size_t bytes = aligned(count, sizeof(T)), g = guard_bytes();
    LF_CHECK(used_ + bytes + g <= buf_.size(), "arena overflow: need ", used_ + bytes + g,
             " bytes, have ", buf_.size());
    T* p = reinterpret_cast<T*>(buf_.data() + used_);
    used_ += bytes;
    if (g) {
      std::memset(buf_.data() + used_, kGuardByte, g);
      guards_.push_back(used_);
      used_ += g;
    }
    return p;
  }
  // Throws naming the first block (in carving order) whose guard word was overwritten.
  void check_guards() const {
    for (size_t i = 0; i < guards_.size(); ++i) {
      const unsigned char* g = buf_.data() + guards_[i];
      for (size_t j = 0; j < kGuardBytes; ++j)
        LF_CHECK(g[j] == kGuardByte, "arena: block ", i,
                 " was written past its end (guard at byte ", guards_[i], ")");
    }
  }
  size_t used() const { return used_; }
  size_t capacity() const { return buf_.size(); }
  static size_t aligned(size_t count, size_t elem) {
    return (count * elem + kAlign - 1) / kAlign * kAlign;
  }

 private:
  static bool& guards_on() {
#ifdef NDEBUG
    static bool on = false;
#else
    static bool on = true;
#endif
    return on;
  }
  Buffer<unsigned char> buf_;
  size_t used_ = 0;
  std::vector<size_t> guards_;  // byte offsets of the guard words
};

// Carves blocks from an arena, or (with a null arena) only counts the bytes they need, so
// one function both sizes and lays out a set of buffers.
struct Carver {
  Arena* arena = nullptr;
  size_t bytes = 0;
  template <typename T>
  T* take(size_t count) {
    bytes += Arena::aligned(count, sizeof(T)) + Arena::guard_bytes();
    return arena ? arena->alloc<T>(count) : nullptr;
  }
};

}  // namespace lf
