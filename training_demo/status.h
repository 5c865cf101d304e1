// The error type of the training demo: ok, or a message that says what failed, where (file,
// rank, option) and what to do. The demo is single-threaded apart from Collie's own progress
// thread, so a plain value with a string is all it needs.
#pragma once

#include <string>
#include <utility>

namespace collie {
namespace train {

class Status {
 public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  std::string message_;
};

#define COLLIE_TRAIN_RETURN_IF_ERROR(expr)    \
  do {                                        \
    ::collie::train::Status status_ = (expr); \
    if (!status_.ok()) return status_;        \
  } while (0)

}  // namespace train
}  // namespace collie
