// Bytes as lower-case hex and back: how binary addresses and ids travel through the Store,
// whose values are text.
#pragma once

#include <string>

namespace collie {

inline std::string toHex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) s += kDigits[c >> 4], s += kDigits[c & 15];
  return s;
}

// false (and *bytes unspecified) when s is not an even-length run of hex digits.
inline bool fromHex(const std::string& s, std::string* bytes) {
  auto digit = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (s.size() % 2 != 0) return false;
  bytes->clear();
  for (size_t i = 0; i < s.size(); i += 2) {
    int hi = digit(s[i]), lo = digit(s[i + 1]);
    if (hi < 0 || lo < 0) return false;
    *bytes += static_cast<char>(hi << 4 | lo);
  }
  return true;
}

}  // namespace collie
