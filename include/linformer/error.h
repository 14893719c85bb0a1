// Error checks that throw with a message naming the problem.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace lf {

// Thrown for bad user input (shapes, files, configs): the message says what was expected.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(detail::concat(args...));
}

}  // namespace lf

// LF_CHECK(cond, "message parts", value, ...): throws lf::Error when cond is false.
#define LF_CHECK(cond, ...)               \
  do {                                    \
    if (!(cond)) ::lf::fail(__VA_ARGS__); \
  } while (0)

