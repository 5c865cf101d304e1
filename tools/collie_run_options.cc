// Parsing and checking of collie-run's command line.
#include "tools/collie_run_options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace collie {
namespace {

void printUsage(FILE* out) {
  std::fputs(
      "usage: collie-run [-n N] [--tag-output] [--timeout SECONDS] [--port P] [--] PROGRAM "
      "[ARGS...]\n"
      "\n"
      "Starts N local ranks of PROGRAM with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
      "MASTER_ADDR=127.0.0.1 and MASTER_PORT set (other variables are passed on). If a rank\n"
      "exits non-zero or is killed, the others are terminated (SIGTERM, then SIGKILL after 3 s)\n"
      "and collie-run exits with that rank's status (128+S for signal S). SIGINT, SIGTERM and\n"
      "SIGHUP are forwarded to the ranks; a second one kills them.\n"
      "\n"
      "options:\n"
      "  -n N, -np N        number of ranks (default 1)\n"
      "  --tag-output       prefix each line the ranks print with [rank]\n"
      "  --timeout SECONDS  terminate the ranks after SECONDS and exit 124 (0: no limit)\n"
      "  --port P           MASTER_PORT to give the ranks (default: a free port on 127.0.0.1)\n"
      "  -h, --help         show this text\n",
      out);
}

int usageError(const std::string& msg) {
  std::fprintf(stderr, "collie-run: %s (see collie-run --help)\n", msg.c_str());
  return kRunUsageError;
}

bool parseInt(const std::string& s, long lo, long hi, int* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parseSeconds(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  // The upper bound keeps the deadline arithmetic far from overflow.
  if (*end != '\0' || !std::isfinite(v) || v < 0 || v > 1e9) return false;
  *out = v;
  return true;
}

}  // namespace

int parseRunArgs(int argc, char** argv, RunOptions* opt) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program starts here
    if (arg == "-h" || arg == "--help") {
      printUsage(stdout);
      return 0;
    }
    if (arg == "--tag-output") {
      opt->tag_output = true;
      continue;
    }
    std::string name = arg;
    std::string value;
    size_t eq = arg.find('=');
    bool inline_value = arg.compare(0, 2, "--") == 0 && eq != std::string::npos;
    if (inline_value) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    if (name != "-n" && name != "-np" && name != "--timeout" && name != "--port") {
      return usageError("unknown option '" + arg + "'");
    }
    if (!inline_value) {
      if (i + 1 >= argc) return usageError(name + " needs a value");
      value = argv[++i];
    }
    if (name == "--timeout") {
      if (!parseSeconds(value, &opt->timeout_s)) {
        return usageError("--timeout needs a number of seconds >= 0, not '" + value + "'");
      }
    } else if (name == "--port") {
      if (!parseInt(value, 1, 65535, &opt->port)) {
        return usageError("--port needs a port number in 1..65535, not '" + value + "'");
      }
    } else if (!parseInt(value, 1, kRunMaxRanks, &opt->nranks)) {
      return usageError(name + " needs a rank count in 1.." + std::to_string(kRunMaxRanks) +
                        ", not '" + value + "'");
    }
  }
  if (i >= argc) return usageError("no program to run");
  opt->argv.assign(argv + i, argv + argc);
  opt->argv.push_back(nullptr);
  return -1;
}

}  // namespace collie
