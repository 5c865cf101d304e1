// The one typed registry of environment parameters: every COLLIE_* variable is declared here
// with its default and a one-line description (printed by `collie-perf --params`, copied into
// the README). Values are read from the environment on each get (cheap enough for init paths;
// hot paths cache them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace collie {

struct ParamInfo {
  const char* name;
  const char* defaultValue;
  const char* description;
};

class Params {
 public:
  const std::vector<ParamInfo>& all() const;
  std::string getString(const char* name) const;
  // Parses an integer with optional K/M/G suffix (powers of 1024); falls back to the default
  // (with a WARN) when the value does not parse.
  int64_t getInt(const char* name) const;
};

const Params& params();

}  // namespace collie
