// The COLLIE_* environment parameters: any value of any declared (or unknown) variable. Strings
// come back as set; integers parse as a reference parser reads them (K/M/G powers of 1024, no
// overflow, at least the parameter's least) or fall back to the default. The logger's own
// variables are read back by it too.
#include <fcntl.h>
#include <unistd.h>

#include <cctype>

#include "src/base/log.h"
#include "src/base/params.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

// An integer the way the README describes them, computed without strtoll's overflow rules.
bool referenceInt(const std::string& s, int64_t* out) {
  size_t i = 0;
  while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) ++i;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  const size_t digits = i;
  __int128 v = 0;
  for (; i < s.size() && isdigit(static_cast<unsigned char>(s[i])); ++i)
    if ((v = v * 10 + (s[i] - '0')) > (static_cast<__int128>(1) << 64)) return false;
  if (i == digits) return false;
  if (neg) v = -v;
  if (v > INT64_MAX || v < INT64_MIN) return false;
  __int128 mult = 1;
  if (i < s.size() && strchr("kKmMgG", s[i]) != nullptr) {
    const char c = static_cast<char>(tolower(s[i++]));
    mult = c == 'k' ? 1024 : c == 'm' ? 1024 * 1024 : 1024LL * 1024 * 1024;
  }
  if (i != s.size() || v * mult > INT64_MAX || v * mult < INT64_MIN) return false;
  *out = static_cast<int64_t>(v * mult);
  return true;
}

int gDevNull = -1;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gDevNull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  collie::fuzz::Input in(data, size);
  const auto& all = collie::params().all();
  const size_t pick = in.take<uint8_t>() % (all.size() + 1);
  const collie::ParamInfo unknown{"COLLIE_FUZZ_UNDECLARED", "", "", INT64_MIN};
  const collie::ParamInfo& p = pick < all.size() ? all[pick] : unknown;
  std::string value = in.rest();
  value = value.substr(0, value.find('\0'));
  // A log file named by the input would be created on disk: that variable keeps its default.
  if (strcmp(p.name, "COLLIE_DEBUG_FILE") == 0) value.clear();
  setenv(p.name, value.c_str(), 1);
  FUZZ_CHECK(collie::params().getString(p.name) == value);

  // getInt warns on stderr about every value it refuses: not into the fuzzer's log.
  const int saved = dup(2);
  if (gDevNull >= 0) dup2(gDevNull, 2);
  const int64_t got = collie::params().getInt(p.name);
  dup2(saved, 2);
  close(saved);
  int64_t want = 0;
  if (!referenceInt(value, &want) || want < p.least)
    want = referenceInt(p.defaultValue, &want) ? want : 0;
  FUZZ_CHECK(got == want);

  const bool logs = strncmp(p.name, "COLLIE_DEBUG", 12) == 0;
  if (logs) collie::logReload();
  unsetenv(p.name);
  if (logs) collie::logReload();
  return 0;
}
