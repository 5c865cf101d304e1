// The one logger. COLLIE_DEBUG=WARN|INFO|TRACE sets the level (default WARN),
// COLLIE_DEBUG_SUBSYS=INIT,NET,COLL,ALL filters subsystems, COLLIE_DEBUG_FILE sends it to a file
// (%h = host, %p = pid). Prefix: "host:pid [rank] file:line LEVEL SUBSYS". Off levels cost one
// relaxed atomic load.
#pragma once

#include <atomic>

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

inline bool logEnabled(LogLevel level, unsigned subsys) {
  int cur = gLogLevel.load(std::memory_order_relaxed);
  if (cur < 0) return logEnabledSlow(level, subsys);
  return cur >= static_cast<int>(level) && logEnabledSlow(level, subsys);
}

}  // namespace collie

#define COLLIE_LOG(level, subsys, ...)                                                    \
  do {                                                                                    \
    if (::collie::logEnabled(::collie::LogLevel::level, ::collie::subsys))                \
      ::collie::logPrintf(::collie::LogLevel::level, ::collie::subsys, __FILE__, __LINE__, \
                          __VA_ARGS__);                                                   \
  } while (0)
#define COLLIE_WARN(subsys, ...) COLLIE_LOG(kWarn, subsys, __VA_ARGS__)
#define COLLIE_INFO(subsys, ...) COLLIE_LOG(kInfo, subsys, __VA_ARGS__)
#define COLLIE_TRACE(subsys, ...) COLLIE_LOG(kTrace, subsys, __VA_ARGS__)
