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
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
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
};

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--seed") {
      o->seed = std::strtoull(v, nullptr, 10);
    } else if (flag == "--ops") {
      o->ops = std::atoi(v);
    } else if (flag == "--max-bytes") {
      o->maxBytes = std::strtoull(v, nullptr, 10);
    } else if (flag == "--destroy-at") {
      o->destroyAt = std::atoi(v);
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && o->ops > 0 && o->maxBytes >= 8;
}

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: collie-chaos-rank --seed S --ops N [--max-bytes B] [--destroy-at I]\n");
    return 4;
  }
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm) != collieSuccess) {
    std::fprintf(stderr, "init failed: %s\n", collieGetLastError(nullptr));
    return 4;
  }
  chaos::Calls calls(comm, o.maxBytes);
  std::mt19937_64 rng(o.seed);
  say("ready");
  for (int i = 0; i < o.ops; ++i) {
    const chaos::Call call = calls.draw(rng, i);
    if (i == o.destroyAt) {
      say("destroy " + std::to_string(i));
      collieCommDestroy(comm);
      for (;;) pause();
    }
    say("start " + std::to_string(i) + " " + call.describe());
    const chaos::Outcome out = calls.run(call);
    if (out == chaos::Outcome::kSkipped) {
      say("skip " + std::to_string(i));
      continue;
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
    say("done " + std::to_string(i));
  }
  say("finished " + std::to_string(o.ops));
  collieCommDestroy(comm);
  return 0;
}
