// Level-gated logging to stderr or COLLIE_DEBUG_FILE.
#include "src/base/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

#include "src/base/params.h"

namespace collie {

std::atomic<int> gLogLevel{-1};
static std::atomic<unsigned> gLogSubsys{kLogAll};
static std::atomic<int> gLogRank{-1};
static std::once_flag gLogOnce;
static FILE* gLogFile = stderr;
static std::mutex gLogMu;  // serialises whole lines
static char gHost[64] = "?";

static LogLevel parseLevel(const std::string& s) {
  if (s == "TRACE") return LogLevel::kTrace;
  if (s == "INFO") return LogLevel::kInfo;
  if (s == "NONE" || s == "OFF") return LogLevel::kNone;
  return LogLevel::kWarn;
}

static unsigned parseSubsys(const std::string& s) {
  if (s.empty() || s == "ALL") return kLogAll;
  unsigned mask = 0;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string w = s.substr(pos, end - pos);
    if (w == "INIT") mask |= kLogInit;
    if (w == "NET") mask |= kLogNet;
    if (w == "COLL") mask |= kLogColl;
    if (w == "STORE") mask |= kLogStore;
    if (w == "ALL") mask |= kLogAll;
    pos = end + 1;
  }
  return mask;
}

static std::string expandPath(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[++i];
      if (c == 'h')
        out += gHost;
      else if (c == 'p')
        out += std::to_string(getpid());
      else
        out += c;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

static void loadLogConfig() {
  gethostname(gHost, sizeof(gHost) - 1);
  gLogSubsys.store(parseSubsys(params().getString("COLLIE_DEBUG_SUBSYS")));
  std::string file = params().getString("COLLIE_DEBUG_FILE");
  if (!file.empty()) {
    FILE* f = fopen(expandPath(file).c_str(), "a");
    if (f) gLogFile = f;
  }
  gLogLevel.store(static_cast<int>(parseLevel(params().getString("COLLIE_DEBUG"))));
}

void logInit() { std::call_once(gLogOnce, loadLogConfig); }

void logReload() {
  std::lock_guard<std::mutex> l(gLogMu);
  if (gLogFile != stderr) fclose(gLogFile);
  gLogFile = stderr;
  loadLogConfig();
}

void logSetRank(int rank) { gLogRank.store(rank); }

bool logEnabledSlow(LogLevel level, unsigned subsys) {
  if (gLogLevel.load(std::memory_order_relaxed) < 0) logInit();
  return gLogLevel.load(std::memory_order_relaxed) >= static_cast<int>(level) &&
         (gLogSubsys.load(std::memory_order_relaxed) & subsys) != 0;
}

static const char* levelName(LogLevel l) {
  switch (l) {
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kTrace:
      return "TRACE";
    default:
      return "";
  }
}

static const char* subsysName(unsigned s) {
  switch (s) {
    case kLogInit:
      return "INIT";
    case kLogNet:
      return "NET";
    case kLogColl:
      return "COLL";
    case kLogStore:
      return "STORE";
    default:
      return "ALL";
  }
}

void logPrintf(LogLevel level, unsigned subsys, const char* file, int line, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  std::lock_guard<std::mutex> lock(gLogMu);
  fprintf(gLogFile, "%s:%d [%d] %s:%d COLLIE %s %s %s\n", gHost, static_cast<int>(getpid()),
          gLogRank.load(), base, line, levelName(level), subsysName(subsys), msg);
  fflush(gLogFile);
}

bool LogLimiter::allow(uint64_t* held) {
  return allowAt(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::steady_clock::now().time_since_epoch())
                                           .count()),
                 held);
}

bool LogLimiter::allowAt(uint64_t now, uint64_t* held) {
  std::lock_guard<std::mutex> l(mu_);
  if (printed_ == 0 || now - windowStart_ >= kWindowNs) {
    windowStart_ = now;
    printed_ = 0;
  }
  if (printed_ >= kBurst) {
    ++held_;
    return false;
  }
  ++printed_;
  *held = held_;
  held_ = 0;
  return true;
}

std::string logHeldNote(uint64_t held) {
  if (held == 0) return "";
  return " (" + std::to_string(held) + " more like it held back)";
}

}  // namespace collie
