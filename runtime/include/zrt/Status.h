//===- Status.h - Error values of the runtime -------------------*- C++ -*-===//
//
// The runtime reports errors as values, never by throwing across its API: every
// fallible call returns a Status (or an Expected<T>) whose message says what went
// wrong and where (file, tensor, instruction) and what to do about it.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_STATUS_H
#define ZRT_STATUS_H

#include <optional>
#include <string>
#include <utility>

// nvcc's front end also reports a function returning a reference to a
// [[nodiscard]] type, so every `status = f();` in a .cu file (the assignment
// returns Status &); C++ asks it for values only. The host compiler still
// reports each Status a .cu file discards, as does nvcc (discarded object).
#ifdef __NVCC_DIAG_PRAGMA_SUPPORT__
#pragma nv_diag_suppress nodiscard_return_type
#endif

namespace zrt {

/// Success, or an error with a human-readable message.
class [[nodiscard]] Status {
public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string msg) {
    Status s;
    s.msg_ = std::move(msg);
    s.failed_ = true;
    return s;
  }
  bool isOk() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string &message() const { return msg_; }

private:
  std::string msg_;
  bool failed_ = false;
};

/// A value or the Status explaining why there is none.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  Expected(Status status) : status_(std::move(status)) {}
  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  T &operator*() { return *value_; }
  T *operator->() { return &*value_; }
  const Status &status() const { return status_; }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace zrt

#define ZRT_RETURN_IF_ERROR(expr)                                              \
  do {                                                                         \
    ::zrt::Status zrt_status_ = (expr);                                        \
    if (!zrt_status_.isOk())                                                   \
      return zrt_status_;                                                      \
  } while (0)

#endif // ZRT_STATUS_H
