// What the C and C++ API implementations share: communicator checks and argument validation.
#pragma once

#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "algorithms/algorithm.h"
#include "collie/collie.h"
#include "src/base/status.h"

namespace collie {

class CommImpl;

// The C API's result of s: collieSuccess, or s's code with its message kept as the last error
// of comm (when live) and of this thread.
collieResult_t report(collieComm_t comm, const Status& s);

// Runs fn (returning a Status) and reports its result; no exception crosses the C API.
template <typename Fn>
collieResult_t guarded(collieComm_t comm, Fn&& fn) {
  try {
    return report(comm, fn());
  } catch (const std::bad_alloc&) {
    return report(comm, systemError("out of memory"));
  } catch (const std::exception& e) {
    return report(comm, internalError(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return report(comm, internalError("unexpected exception"));
  }
}

// Ok when comm is a live communicator of this process.
Status checkComm(const collieComm* comm);
CommImpl* commImpl(collieComm_t comm);
// Builds the arguments of a collective from what the user passed, checking them all: null
// buffers, unknown dtype/op, byte counts that overflow, partially overlapping buffers, send and
// recv in different memories (it sets CollArgs::memory). dtype and
// op arrive as raw enum bits (see enumBits) so that a value outside the enum is never loaded as
// one.
// rank is this rank (in-place relations and root-only buffers depend on it).
Status makeCollArgs(Collective coll, const void* send, void* recv, size_t count, int dtype,
                    int op, int root, int rank, int nranks, CollArgs* out);

// AllToAllv's arguments, checked as makeCollArgs checks the others: null arrays, counts and
// displacements whose byte offsets overflow, null buffers where counts are not zero, send and
// receive segments that overlap, receive segments that overlap each other.
Status makeAllToAllvArgs(const void* send, const size_t* sendCounts, const size_t* sendDispls,
                         void* recv, const size_t* recvCounts, const size_t* recvDispls, int dtype,
                         int nranks, CollArgs* out);

// The collectives that run on host memory only so far refuse device buffers.
Status requireHostMemory(const CollArgs& a);

// Sets a->memory and a->device from where send and recv live; they must live in one place.
Status classifyBuffers(const char* op, CollArgs* a);

// The bits of an enum argument as an int, read without loading an out-of-range enum value.
template <typename E>
int enumBits(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
  int v;
  memcpy(&v, &e, sizeof(v));
  return v;
}

}  // namespace collie
