// Command line of collie-run: what to launch and how, parsed and checked before anything starts.
#pragma once

#include <vector>

namespace collie {

constexpr int kRunUsageError = 2;  // exit code for a bad command line
constexpr int kRunMaxRanks = 4096;

struct RunOptions {
  int nranks = 1;
  bool tag_output = false;
  double timeout_s = 0;  // 0: no limit
  int port = 0;          // 0: pick a free one
  // The program and its arguments, null-terminated; they point into main's argv.
  std::vector<char*> argv;
};

// Fills *opt from main's arguments. Returns -1 when the launch should proceed, otherwise the
// exit code: 0 after printing the usage text for -h/--help, kRunUsageError after a message on
// stderr.
int parseRunArgs(int argc, char** argv, RunOptions* opt);

}  // namespace collie
