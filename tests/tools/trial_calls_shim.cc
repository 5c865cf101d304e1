// Loaded into collie-perf with LD_PRELOAD by a test: wraps collieAllReduce and, for every call
// the tuner made one of its trials (collieCommLastAlgorithm ends in " (trial)"), counts how the
// call was placed and where its output lay, per count. At exit each process writes
// "count in_place out_of_place in_place_span out_of_place_span" lines, one per count, to
// $COLLIE_TRIAL_CALLS.<pid>; a span is the distance from the lowest output address the trials of
// that placement used to the highest.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "collie/collie.h"

namespace {

struct Placement {
  long calls = 0;
  uintptr_t lowest = UINTPTR_MAX, highest = 0;
  void add(const void* recv) {
    const auto at = reinterpret_cast<uintptr_t>(recv);
    ++calls;
    lowest = std::min(lowest, at);
    highest = std::max(highest, at);
  }
  size_t span() const { return calls ? static_cast<size_t>(highest - lowest) : 0; }
};

struct Seen {
  Placement inPlace, outOfPlace;
};

std::map<size_t, Seen>& seen() {
  static auto* m = new std::map<size_t, Seen>;
  return *m;
}

using AllReduceFn = collieResult_t (*)(const void*, void*, size_t, collieDataType_t, collieRedOp_t,
                                       collieComm_t, void*);

bool isTrial(const char* name) {
  static const char kTrial[] = " (trial)";
  const size_t n = name ? strlen(name) : 0, k = sizeof(kTrial) - 1;
  return n > k && strcmp(name + n - k, kTrial) == 0;
}

__attribute__((destructor)) void writeSeen() {
  const char* base = getenv("COLLIE_TRIAL_CALLS");
  if (base == nullptr || seen().empty()) return;
  const std::string path = std::string(base) + "." + std::to_string(getpid());
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return;
  for (const auto& [count, s] : seen())
    fprintf(f, "%zu %ld %ld %zu %zu\n", count, s.inPlace.calls, s.outOfPlace.calls,
            s.inPlace.span(), s.outOfPlace.span());
  fclose(f);
}

}  // namespace

extern "C" collieResult_t collieAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                          collieDataType_t datatype, collieRedOp_t op,
                                          collieComm_t comm, void* stream) {
  static auto real = reinterpret_cast<AllReduceFn>(dlsym(RTLD_NEXT, "collieAllReduce"));
  if (real == nullptr) abort();
  const collieResult_t r = real(sendbuff, recvbuff, count, datatype, op, comm, stream);
  const char* name = nullptr;
  if (r == collieSuccess && collieCommLastAlgorithm(comm, &name) == collieSuccess &&
      isTrial(name)) {
    Seen& s = seen()[count];
    (sendbuff == recvbuff ? s.inPlace : s.outOfPlace).add(recvbuff);
  }
  return r;
}
