#pragma once
// Errors are values inside the libraries; only the tools turn them into stderr lines and
// exit codes. Result<T> is a minimal expected<T, Error>.
#include <string>
#include <utility>
#include <variant>

namespace gbx {

enum class ErrorKind {
  Usage,     // bad argument or option value
  Input,     // bad ROM, bad file, bad data
  Template,  // generator: leftover placeholder, unknown operand, missing template
  Compile,   // clang / NVRTC diagnostics (log carried in `detail`)
  Cache,     // cache I/O that could not be recovered from
  NoDevice,  // no CUDA driver / device
  Runtime,   // anything else at run time
};

struct Error {
  ErrorKind kind = ErrorKind::Runtime;
  std::string message;  // one line, names the problem
  std::string detail;   // optional multi-line context (compiler log, diff)
};

inline Error make_error(ErrorKind kind, std::string message, std::string detail = {}) {
  return Error{kind, std::move(message), std::move(detail)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return value(); }
  const Error& error() const { return std::get<1>(v_); }
  Error take_error() { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

struct Unit {};
using Status = Result<Unit>;
inline Status ok_status() { return Unit{}; }

}  // namespace gbx
