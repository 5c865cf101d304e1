// The one logger. COLLIE_DEBUG=WARN|INFO|TRACE sets the level (default WARN),
// COLLIE_DEBUG_SUBSYS=INIT,NET,COLL,ALL filters subsystems, COLLIE_DEBUG_FILE sends it to a file
// (%h = host, %p = pid). Prefix: "host:pid [rank] file:line LEVEL SUBSYS". Off levels cost one
// relaxed atomic load.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace collie {

enum class LogLevel : int { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };
enum LogSubsys : unsigned {
  kLogInit = 1u << 0,
  kLogNet = 1u << 1,
  kLogColl = 1u << 2,
  kLogStore = 1u << 3,
  kLogAll = ~0u
};

extern std::atomic<int> gLogLevel;  // -1 until initialised from the environment

void logInit();
// Reads COLLIE_DEBUG, COLLIE_DEBUG_SUBSYS and COLLIE_DEBUG_FILE again: a process forked after
// it logged (its settings are read once) and given a new environment.
void logReload();
void logSetRank(int rank);  // the [rank] of this process's prefix; -1 before init
bool logEnabledSlow(LogLevel level, unsigned subsys);
void logPrintf(LogLevel level, unsigned subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

// One call site's budget, for messages a stranger can cause at will: a burst of kBurst per
// window of kWindowNs prints, the rest are counted and the next line that prints says so.
class LogLimiter {
 public:
  static constexpr int kBurst = 5;
  static constexpr uint64_t kWindowNs = 10000000000ull;  // 10 s
  // Whether this message may print; *held gets the count held back since the last that did.
  bool allow(uint64_t* held);
  bool allowAt(uint64_t nowNs, uint64_t* held);  // the same at a given steady-clock time

 private:
  std::mutex mu_;
  uint64_t windowStart_ = 0;  // guarded by mu_
  int printed_ = 0;           // in this window; guarded by mu_
  uint64_t held_ = 0;         // guarded by mu_
};
// " (N more like it held back)" where N > 0, else "".
std::string logHeldNote(uint64_t held);

inline bool logEnabled(LogLevel level, unsigned subsys) {
  int cur = gLogLevel.load(std::memory_order_relaxed);
  if (cur < 0) return logEnabledSlow(level, subsys);
  return cur >= static_cast<int>(level) && logEnabledSlow(level, subsys);
}

}  // namespace collie

#define COLLIE_LOG(level, subsys, ...)                                                     \
  do {                                                                                     \
    if (::collie::logEnabled(::collie::LogLevel::level, ::collie::subsys))                 \
      ::collie::logPrintf(::collie::LogLevel::level, ::collie::subsys, __FILE__, __LINE__, \
                          __VA_ARGS__);                                                    \
  } while (0)
#define COLLIE_WARN(subsys, ...) COLLIE_LOG(kWarn, subsys, __VA_ARGS__)
#define COLLIE_INFO(subsys, ...) COLLIE_LOG(kInfo, subsys, __VA_ARGS__)
#define COLLIE_TRACE(subsys, ...) COLLIE_LOG(kTrace, subsys, __VA_ARGS__)
// A WARN that strangers may provoke by the thousand: rate-limited per call site (LogLimiter).
#define COLLIE_WARN_LIMITED(subsys, fmt, ...)                                                \
  do {                                                                                       \
    static ::collie::LogLimiter collieLimiter;                                               \
    uint64_t collieHeld = 0;                                                                 \
    if (::collie::logEnabled(::collie::LogLevel::kWarn, ::collie::subsys) &&                 \
        collieLimiter.allow(&collieHeld))                                                    \
      ::collie::logPrintf(::collie::LogLevel::kWarn, ::collie::subsys, __FILE__, __LINE__,   \
                          fmt "%s", __VA_ARGS__, ::collie::logHeldNote(collieHeld).c_str()); \
  } while (0)
