// Status helpers.
#include "src/base/status.h"

#include <cstring>

namespace collie {

std::string Status::toString() const {
  if (isOk()) return "ok";
  return std::string(collieGetErrorString(code_)) + ": " + msg_;
}

Status errnoStatus(const std::string& what, int err) {
  return Status(collieSystemError, what + ": " + strerror(err));
}

}  // namespace collie
