// What the C and C++ API implementations share: communicator checks and argument validation.
#pragma once

#include <cstring>
#include <memory>

#include "algorithms/algorithm.h"
#include "collie/collie.h"
#include "src/base/status.h"

namespace collie {

class CommImpl;

// Ok when comm is a live communicator of this process.
Status checkComm(const collieComm* comm);
CommImpl* commImpl(collieComm_t comm);
// Makes impl a live communicator of the C API (collieCommDestroy frees it).
collieComm_t registerComm(std::unique_ptr<CommImpl> impl);
// Builds the arguments of a collective from what the user passed, checking them all: null
// buffers, unknown dtype/op, byte counts that overflow, partially overlapping buffers, send and
// recv in different memories (it sets CollArgs::memory). dtype and
// op arrive as raw enum bits (see enumBits) so that a value outside the enum is never loaded as
// one.
// rank is this rank (in-place relations and root-only buffers depend on it).
Status makeCollArgs(Collective coll, const void* send, void* recv, size_t count, int dtype, int op,
                    int root, int rank, int nranks, CollArgs* out);

// makeCollArgs for a call on comm (a live communicator), where op may also be one of comm's
// created ops (collieRedOpCreatePreMulSum): checked against comm, the dtype and the memory,
// and held for the call until it runs (c_api_redop.cc).
Status makeCollArgsOn(collieComm_t comm, Collective coll, const void* send, void* recv,
                      size_t count, int dtype, int op, int root, CollArgs* out);

// What a C API call returns for s: its code, with its message as comm's (or this thread's) last
// error; reportException does so for the exception being handled.
collieResult_t reportStatus(collieComm_t comm, const Status& s);
collieResult_t reportException(collieComm_t comm);
// Runs fn as every C API call does: no exception escapes, an error becomes the last error.
template <typename Fn>
collieResult_t apiCall(collieComm_t comm, Fn&& fn) {
  try {
    return reportStatus(comm, fn());
  } catch (...) {
    return reportException(comm);
  }
}

// AllToAllv's arguments, checked as makeCollArgs checks the others: null arrays, counts and
// displacements whose byte offsets overflow, null buffers where counts are not zero, send and
// receive segments that overlap, receive segments that overlap each other.
Status makeAllToAllvArgs(const void* send, const size_t* sendCounts, const size_t* sendDispls,
                         void* recv, const size_t* recvCounts, const size_t* recvDispls, int dtype,
                         int nranks, CollArgs* out);

// The collectives that run on host memory only so far refuse device buffers.
Status requireHostMemory(const CollArgs& a);

struct P2PCall;
// Checks a send's or receive's arguments (live comm, dtype, peer, tag, buffer, host memory) and
// fills *c from them; op names the call in errors.
Status makeP2PCall(const char* op, bool send, const void* buf, size_t count, int dtype, int peer,
                   int tag, collieComm_t comm, P2PCall* c);

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
