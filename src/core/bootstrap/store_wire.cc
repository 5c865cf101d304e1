// The line helpers of the store's wire protocol.
#include "src/core/bootstrap/store_wire.h"

namespace collie {
namespace store_wire {

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t e = s.find('\n', pos);
    if (e == std::string::npos) e = s.size();
    out.push_back(s.substr(pos, e - pos));
    pos = e + 1;
  }
  return out;
}

std::string joinLines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& k : v) s += (s.empty() ? "" : "\n") + k;
  return s;
}

}  // namespace store_wire
}  // namespace collie
