// collie-chaos-rank: one rank of a chaos trial (tests/chaos/chaos.py). Every rank draws the
// same random mix of collectives and point-to-point calls from one seed (kind, size, dtype, op,
// algorithm, in place or not, root), checks each result against the test harness's reference,
// and reports its progress on stdout, one flushed line per step, so that the driver can pick
// the moment of a fault and judge the trial after it:
//   ready | start I KIND | done I | skip I (a forced algorithm that cannot run the call) |
//   destroy I | finished N
// Exit codes: 0 every call done and right, 2 a wrong result, 3 a call failed (Collie's message
// on stderr), 4 bad usage or a failed init.
//
//   collie-chaos-rank --seed S --ops N [--max-bytes B] [--destroy-at I]
// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: collieCommInitFromEnv's environment.)
// With --destroy-at I this rank destroys its communicator before call I, then waits to be
// killed: its peers must fail naming it although its process lives on.
// The soak (make soak): --soak-from K counts this process's file descriptors, mappings of files
// and shared memory, and threads after call K and again at the end, and exits 5 if they grew;
// --quiet prints a line per tenth of the calls instead of one per step.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "tests/chaos/chaos_calls.h"

namespace {

struct Options {
  uint64_t seed = 1;
  int ops = 100;
  size_t maxBytes = 1 << 20;
  int destroyAt = -1;
  int soakFrom = -1;
  bool quiet = false;
};

// What a leak would grow: open descriptors, mappings, threads.
struct Resources {
  size_t fds = 0, maps = 0, threads = 0;
  std::string describe() const {
    return std::to_string(fds) + " fds, " + std::to_string(maps) + " mappings, " +
           std::to_string(threads) + " threads";
  }
};

size_t entries(const char* dir) {
  size_t n = 0;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

Resources resources() {
  Resources r;
  r.fds = entries("/proc/self/fd") - 1;  // less the one opendir holds
  r.threads = entries("/proc/self/task");
  // Mappings of files and shared memory (a path in the last field): the anonymous ones come and
  // go with the allocator's arenas (many of them under AddressSanitizer), a leaked segment, file
  // or library stays named.
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) r.maps += line.find(" /") != std::string::npos;
  return r;
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag != "--quiet" && i + 1 >= argc) return false;
    const char* v = argv[i + 1];
    if (flag == "--quiet") {
      o->quiet = true;
      --i;
    } else if (flag == "--seed") {
      o->seed = std::strtoull(v, nullptr, 10);
    } else if (flag == "--ops") {
      o->ops = std::atoi(v);
    } else if (flag == "--max-bytes") {
      o->maxBytes = std::strtoull(v, nullptr, 10);
    } else if (flag == "--destroy-at") {
      o->destroyAt = std::atoi(v);
    } else if (flag == "--soak-from") {
      o->soakFrom = std::atoi(v);
    } else {
      return false;
    }
  }
  return o->ops > 0 && o->maxBytes >= 8;
}

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// Runs call i; returns the exit code it calls for, or -1 to go on.
int runCall(chaos::Calls& calls, const chaos::Call& call, int i, const Options& o,
            collieComm_t comm) {
  if (!o.quiet) say("start " + std::to_string(i) + " " + call.describe());
  const chaos::Outcome out = calls.run(call);
  if (out == chaos::Outcome::kSkipped) {
    if (!o.quiet) say("skip " + std::to_string(i));
    return -1;
  }
  if (out == chaos::Outcome::kFailed) {
    std::fprintf(stderr, "call %d (%s) failed: %s\n", i, call.describe().c_str(),
                 collieGetLastError(comm));
    return 3;
  }
  if (out == chaos::Outcome::kWrong) {
    std::fprintf(stderr, "call %d (%s) gave a wrong result: %s\n", i, call.describe().c_str(),
                 calls.lastWrong().c_str());
    return 2;
  }
  if (!o.quiet) say("done " + std::to_string(i));
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: collie-chaos-rank --seed S --ops N [--max-bytes B] [--destroy-at I] "
                 "[--soak-from K] [--quiet]\n");
    return 4;
  }
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm) != collieSuccess) {
    std::fprintf(stderr, "init failed: %s\n", collieGetLastError(nullptr));
    return 4;
  }
  chaos::Calls calls(comm, o.maxBytes);
  std::mt19937_64 rng(o.seed);
  Resources after;
  say("ready");
  for (int i = 0; i < o.ops; ++i) {
    const chaos::Call call = calls.draw(rng, i);
    if (i == o.destroyAt) {
      say("destroy " + std::to_string(i));
      collieCommDestroy(comm);
      for (;;) pause();
    }
    const int code = runCall(calls, call, i, o, comm);
    if (code >= 0) {
      // As a program should: destroying the failed communicator lets the peers read this
      // rank's abort before the connections close (an exit alone may reset them unread).
      collieCommDestroy(comm);
      return code;
    }
    if (i + 1 == o.soakFrom) after = resources();
    if (o.quiet && (i + 1) % std::max(1, o.ops / 10) == 0)
      say(std::to_string(i + 1) + " of " + std::to_string(o.ops) + " calls done");
  }
  say("finished " + std::to_string(o.ops));
  if (o.soakFrom > 0 && o.soakFrom < o.ops) {
    const Resources end = resources();
    say("after call " + std::to_string(o.soakFrom) + ": " + after.describe() +
        "; at the end: " + end.describe());
    if (end.fds > after.fds || end.maps > after.maps || end.threads > after.threads) {
      std::fprintf(stderr, "resources grew: %s after call %d, %s at the end\n",
                   after.describe().c_str(), o.soakFrom, end.describe().c_str());
      return 5;
    }
  }
  collieCommDestroy(comm);
  return 0;
}
