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
  // Integers below this are refused like values that do not parse (a negative deadline would
  // be none, an empty ring would take no message).
  int64_t least = INT64_MIN;
};

class Params {
 public:
  const std::vector<ParamInfo>& all() const;
  std::string getString(const char* name) const;
  // Parses an integer with optional K/M/G suffix (powers of 1024); falls back to the default
  // (with a WARN) when the value does not parse, overflows or is below the parameter's least.
  int64_t getInt(const char* name) const;
};

const Params& params();

}  // namespace collie
