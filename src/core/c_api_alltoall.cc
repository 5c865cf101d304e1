// The C API of the collectives that move blocks without reducing them: AllToAll, AllToAllv,
// Gather and Scatter. Host memory only so far; each call returns with its result.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "src/base/dtype.h"
#include "src/core/api_internal.h"
#include "src/core/communicator.h"

namespace collie {

namespace {

// Where one peer's elements lie, as addresses.
struct Segment {
  uintptr_t begin, end;
  int peer;
};

// How the C API names the arguments of one side of an AllToAllv.
struct SideNames {
  const char* buff;
  const char* counts;
  const char* displs;
};
constexpr SideNames kSendNames{"sendbuff", "sendcounts", "sdispls"};
constexpr SideNames kRecvNames{"recvbuff", "recvcounts", "rdispls"};

std::string elem(const char* array, int peer) {
  return std::string(array) + "[" + std::to_string(peer) + "]";
}

// The non-empty segments of one side, checking its arrays, its sizes and its buffer.
Status segmentsOf(const SideNames& nm, const void* base, const size_t* counts, const size_t* displs,
                  size_t esz, int nranks, std::vector<Segment>* out) {
  if (counts == nullptr)
    return invalidArgument(std::string("alltoallv: ") + nm.counts + " is NULL");
  if (displs == nullptr)
    return invalidArgument(std::string("alltoallv: ") + nm.displs + " is NULL");
  const size_t limit = static_cast<size_t>(PTRDIFF_MAX) / esz;
  const uintptr_t at = reinterpret_cast<uintptr_t>(base);
  for (int j = 0; j < nranks; ++j) {
    const size_t c = counts[j], d = displs[j];
    if (c > limit || d > limit - c || (c > 0 && at + (d + c) * esz < at))
      return invalidArgument("alltoallv: " + elem(nm.displs, j) + " + " + elem(nm.counts, j) +
                             " = " + std::to_string(d) + " + " + std::to_string(c) +
                             " elements overflow the address space");
    if (c == 0) continue;
    if (base == nullptr)
      return invalidArgument(std::string("alltoallv: ") + nm.buff + " is NULL with " +
                             elem(nm.counts, j) + " = " + std::to_string(c));
    out->push_back(Segment{at + d * esz, at + (d + c) * esz, j});
  }
  return Status::ok();
}

// Two peers writing one place, or a send read from where a receive lands, would make the result
// depend on the schedule: there is no in-place form.
Status checkSegmentOverlaps(std::vector<Segment>* recv, const std::vector<Segment>& send) {
  std::sort(recv->begin(), recv->end(),
            [](const Segment& x, const Segment& y) { return x.begin < y.begin; });
  for (size_t i = 1; i < recv->size(); ++i)
    if ((*recv)[i - 1].end > (*recv)[i].begin)
      return invalidArgument("alltoallv: recvbuff's segments for ranks " +
                             std::to_string((*recv)[i - 1].peer) + " and " +
                             std::to_string((*recv)[i].peer) + " overlap (rdispls, recvcounts)");
  // Disjoint and sorted by begin: sorted by end too.
  for (const Segment& s : send) {
    auto it = std::upper_bound(recv->begin(), recv->end(), s.begin,
                               [](uintptr_t v, const Segment& r) { return v < r.end; });
    if (it != recv->end() && it->begin < s.end)
      return invalidArgument("alltoallv: sendbuff's segment for rank " + std::to_string(s.peer) +
                             " overlaps recvbuff's segment for rank " + std::to_string(it->peer) +
                             "; alltoallv has no in-place form");
  }
  return Status::ok();
}

Status runBlocks(Collective coll, const void* send, void* recv, size_t count, int dtype, int root,
                 collieComm_t comm) {
  COLLIE_RETURN_IF_ERROR(checkComm(comm));
  CommImpl* impl = commImpl(comm);
  CollArgs a;
  COLLIE_RETURN_IF_ERROR(makeCollArgs(coll, send, recv, count, dtype, collieSum, root, impl->rank(),
                                      impl->size(), &a));
  COLLIE_RETURN_IF_ERROR(requireHostMemory(a));
  return impl->run(a);
}

}  // namespace

Status makeAllToAllvArgs(const void* send, const size_t* sendCounts, const size_t* sendDispls,
                         void* recv, const size_t* recvCounts, const size_t* recvDispls, int dtype,
                         int nranks, CollArgs* out) {
  if (!validDtype(dtype))
    return invalidArgument("alltoallv: unknown datatype " + std::to_string(dtype));
  const size_t esz = dtypeSize(static_cast<collieDataType_t>(dtype));
  std::vector<Segment> sendSegs, recvSegs;
  COLLIE_RETURN_IF_ERROR(
      segmentsOf(kSendNames, send, sendCounts, sendDispls, esz, nranks, &sendSegs));
  COLLIE_RETURN_IF_ERROR(
      segmentsOf(kRecvNames, recv, recvCounts, recvDispls, esz, nranks, &recvSegs));
  COLLIE_RETURN_IF_ERROR(checkSegmentOverlaps(&recvSegs, sendSegs));
  CollArgs& a = *out;
  a.coll = Collective::kAllToAllv;
  a.send = send;
  a.recv = recv;
  a.count = 0;
  a.dtype = static_cast<collieDataType_t>(dtype);
  a.sendCounts = sendCounts;
  a.sendDispls = sendDispls;
  a.recvCounts = recvCounts;
  a.recvDispls = recvDispls;
  if (sendSegs.empty() && recvSegs.empty()) return Status::ok();
  // classifyBuffers looks at the buffers a side uses; a side without elements takes the other's.
  CollArgs where = a;
  where.count = 1;
  where.send = sendSegs.empty() ? nullptr : send;
  where.recv = recvSegs.empty() ? nullptr : recv;
  COLLIE_RETURN_IF_ERROR(classifyBuffers("alltoallv", &where));
  a.memory = where.memory;
  a.device = where.device;
  return Status::ok();
}

Status requireHostMemory(const CollArgs& a) {
  if (a.memory == MemoryKind::kHost) return Status::ok();
  return invalidArgument(std::string(collectiveName(a.coll)) +
                         ": device (CUDA) buffers are not supported for this collective yet; "
                         "pass host memory");
}

}  // namespace collie

extern "C" {

collieResult_t collieAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                              collieDataType_t datatype, collieComm_t comm, void* stream) {
  (void)stream;  // host memory only: the call returns with the result
  return collie::apiCall(comm, [&] {
    return collie::runBlocks(collie::Collective::kAllToAll, sendbuff, recvbuff, count,
                             collie::enumBits(datatype), -1, comm);
  });
}

collieResult_t collieAlltoAllv(const void* sendbuff, const size_t sendcounts[],
                               const size_t sdispls[], void* recvbuff, const size_t recvcounts[],
                               const size_t rdispls[], collieDataType_t datatype, collieComm_t comm,
                               void* stream) {
  (void)stream;
  return collie::apiCall(comm, [&]() -> collie::Status {
    COLLIE_RETURN_IF_ERROR(collie::checkComm(comm));
    collie::CommImpl* impl = collie::commImpl(comm);
    collie::CollArgs a;
    COLLIE_RETURN_IF_ERROR(collie::makeAllToAllvArgs(sendbuff, sendcounts, sdispls, recvbuff,
                                                     recvcounts, rdispls,
                                                     collie::enumBits(datatype), impl->size(), &a));
    COLLIE_RETURN_IF_ERROR(collie::requireHostMemory(a));
    return impl->run(a);
  });
}

collieResult_t collieGather(const void* sendbuff, void* recvbuff, size_t count,
                            collieDataType_t datatype, int root, collieComm_t comm, void* stream) {
  (void)stream;
  return collie::apiCall(comm, [&] {
    return collie::runBlocks(collie::Collective::kGather, sendbuff, recvbuff, count,
                             collie::enumBits(datatype), root, comm);
  });
}

collieResult_t collieScatter(const void* sendbuff, void* recvbuff, size_t count,
                             collieDataType_t datatype, int root, collieComm_t comm, void* stream) {
  (void)stream;
  return collie::apiCall(comm, [&] {
    return collie::runBlocks(collie::Collective::kScatter, sendbuff, recvbuff, count,
                             collie::enumBits(datatype), root, comm);
  });
}

}  // extern "C"
