// Status and StatusOr: the error value on every internal boundary (no exceptions cross threads
// or the C API). A Status carries a collieResult_t code and a message that says what, where
// (op, rank, peer) and what to do.
#pragma once

#include <string>
#include <utility>

#include "collie/collie.h"

namespace collie {

class Status {
 public:
  Status() = default;
  Status(collieResult_t code, std::string msg) : code_(code), msg_(std::move(msg)) {}

  static Status ok() { return Status(); }
  bool isOk() const { return code_ == collieSuccess; }
  collieResult_t code() const { return code_; }
  const std::string& message() const { return msg_; }
  std::string toString() const;

  // Returns a copy with "prefix: " put in front of the message.
  Status withContext(const std::string& prefix) const {
    if (isOk()) return *this;
    Status out(code_, prefix + ": " + msg_);
    out.stalledOn_ = stalledOn_;
    return out;
  }

  // The peer rank a wait ran out of time on, where this failure is that wait or a peer's abort
  // that passes it on; -1 otherwise. A stuck peer may then be the cause, so the communicator
  // listens for who else is silent.
  int stalledOn() const { return stalledOn_; }
  // Returns a copy that names peer as the one a wait stalled on.
  Status withStalledOn(int peer) const {
    Status out = *this;
    out.stalledOn_ = peer;
    return out;
  }

 private:
  collieResult_t code_ = collieSuccess;
  std::string msg_;
  int stalledOn_ = -1;
};

inline Status invalidArgument(std::string m) { return Status(collieInvalidArgument, std::move(m)); }
inline Status invalidUsage(std::string m) { return Status(collieInvalidUsage, std::move(m)); }
inline Status systemError(std::string m) { return Status(collieSystemError, std::move(m)); }
inline Status internalError(std::string m) { return Status(collieInternalError, std::move(m)); }
inline Status remoteError(std::string m) { return Status(collieRemoteError, std::move(m)); }
inline Status timeoutError(std::string m) { return Status(collieTimeout, std::move(m)); }
// A wait that ran out of time on peer: a timeout that names it (Status::stalledOn).
inline Status stalledWait(std::string m, int peer) {
  return timeoutError(std::move(m)).withStalledOn(peer);
}
// A system call failed: the message gets strerror(err).
Status errnoStatus(const std::string& what, int err);

template <typename T>
class StatusOr {
 public:
  StatusOr(Status s) : status_(std::move(s)) {}  // NOLINT: implicit by design
  StatusOr(T v) : value_(std::move(v)) {}        // NOLINT
  bool isOk() const { return status_.isOk(); }
  const Status& status() const { return status_; }
  T& value() { return value_; }
  const T& value() const { return value_; }
  T&& take() { return std::move(value_); }

 private:
  Status status_;
  T value_{};
};

}  // namespace collie

#define COLLIE_CONCAT_INNER(a, b) a##b
#define COLLIE_CONCAT(a, b) COLLIE_CONCAT_INNER(a, b)

#define COLLIE_RETURN_IF_ERROR(expr)                   \
  do {                                                 \
    ::collie::Status collie_status_ = (expr);          \
    if (!collie_status_.isOk()) return collie_status_; \
  } while (0)

#define COLLIE_ASSIGN_OR_RETURN(lhs, expr)                \
  auto COLLIE_CONCAT(collie_sor_, __LINE__) = (expr);     \
  if (!COLLIE_CONCAT(collie_sor_, __LINE__).isOk())       \
    return COLLIE_CONCAT(collie_sor_, __LINE__).status(); \
  lhs = COLLIE_CONCAT(collie_sor_, __LINE__).take()
