// The checks every collective's arguments pass before they reach the communicator (see
// api_internal.h): codes, null buffers, sizes that overflow, overlaps, memory kinds.
#include <cstdint>
#include <string>

#include "src/base/dtype.h"
#include "src/core/api_internal.h"
#include "src/memory/memory_kind.h"

namespace collie {

namespace {

bool reducesData(Collective coll) {
  return coll == Collective::kAllReduce || coll == Collective::kReduceScatter ||
         coll == Collective::kReduce;
}
bool hasRoot(Collective coll) {
  return coll == Collective::kBroadcast || coll == Collective::kReduce ||
         coll == Collective::kGather || coll == Collective::kScatter;
}

// The codes a call passes: dtype always, op where it reduces, root where it has one.
Status checkCodes(const char* op, Collective coll, int dtype, int redop, int root, int nranks) {
  if (!validDtype(dtype))
    return invalidArgument(std::string(op) + ": unknown datatype " + std::to_string(dtype));
  if (reducesData(coll) && !validRedOp(redop))
    return invalidArgument(std::string(op) + ": unknown reduction op " + std::to_string(redop));
  if (hasRoot(coll) && (root < 0 || root >= nranks))
    return invalidArgument(std::string(op) + ": root " + std::to_string(root) +
                           " is out of range for " + std::to_string(nranks) + " ranks");
  return Status::ok();
}

// What each buffer holds on this rank, in bytes (0: not used here), and where in place puts
// one inside the other.
struct BufferLayout {
  size_t sendBytes = 0, recvBytes = 0;
  size_t inPlaceOffset = 0;     // recv + offset == send
  bool recvInsideSend = false;  // ReduceScatter's and Scatter's: recv == send + offset
};

// The layout of a's buffers; off the root, the buffer it does not use becomes null.
BufferLayout layoutOf(int rank, int nranks, size_t bytes, CollArgs* a) {
  BufferLayout l;
  l.sendBytes = l.recvBytes = bytes;
  const size_t all = bytes * static_cast<size_t>(nranks);
  switch (a->coll) {
    case Collective::kReduceScatter:
      l.sendBytes = all;
      l.inPlaceOffset = static_cast<size_t>(rank) * bytes;
      l.recvInsideSend = true;
      break;
    case Collective::kAllGather:
      l.recvBytes = all;
      l.inPlaceOffset = static_cast<size_t>(rank) * bytes;
      break;
    case Collective::kBroadcast:
      if (rank != a->root) l.sendBytes = 0, a->send = nullptr;
      break;
    case Collective::kReduce:
      if (rank != a->root) l.recvBytes = 0, a->recv = nullptr;
      break;
    case Collective::kAllToAll:
      l.sendBytes = l.recvBytes = all;
      break;
    case Collective::kGather:
      l.recvBytes = rank == a->root ? all : 0;
      l.inPlaceOffset = static_cast<size_t>(rank) * bytes;
      if (rank != a->root) a->recv = nullptr;
      break;
    case Collective::kScatter:
      l.sendBytes = rank == a->root ? all : 0;
      l.inPlaceOffset = static_cast<size_t>(rank) * bytes;
      l.recvInsideSend = true;
      if (rank != a->root) a->send = nullptr;
      break;
    default:
      break;
  }
  return l;
}

const char* inPlaceRule(Collective coll) {
  switch (coll) {
    case Collective::kReduceScatter:
      return "recvbuff == sendbuff + rank * recvcount";
    case Collective::kAllGather:
      return "sendbuff == recvbuff + rank * sendcount";
    case Collective::kGather:
      return "sendbuff == recvbuff + root * count, on the root";
    case Collective::kScatter:
      return "recvbuff == sendbuff + root * count, on the root";
    default:
      return "sendbuff == recvbuff";
  }
}

// Partial overlap would make the result depend on the schedule; only the exact in-place
// relation of each collective is allowed.
Status checkOverlap(const char* op, const CollArgs& a, const BufferLayout& l) {
  const char* s = static_cast<const char*>(a.send);
  const char* r = static_cast<const char*>(a.recv);
  bool inPlace = l.recvInsideSend ? r == s + l.inPlaceOffset : s == r + l.inPlaceOffset;
  if (inPlace || !(s < r + l.recvBytes && r < s + l.sendBytes)) return Status::ok();
  return invalidArgument(std::string(op) +
                         ": sendbuff and recvbuff overlap without being in place (in place "
                         "needs " +
                         inPlaceRule(a.coll) + ")");
}

// Null buffers where the call needs them, and buffers that overlap without being in place.
Status checkBuffers(const char* op, int rank, int nranks, CollArgs* a) {
  const size_t bytes = a->count * dtypeSize(a->dtype);
  const BufferLayout l = layoutOf(rank, nranks, bytes, a);
  if (bytes > 0 && l.sendBytes > 0 && a->send == nullptr)
    return invalidArgument(std::string(op) + ": sendbuff is NULL with count " +
                           std::to_string(a->count));
  if (bytes > 0 && l.recvBytes > 0 && a->recv == nullptr)
    return invalidArgument(std::string(op) + ": recvbuff is NULL with count " +
                           std::to_string(a->count));
  if (bytes > 0 && l.sendBytes > 0 && l.recvBytes > 0) return checkOverlap(op, *a, l);
  return Status::ok();
}

}  // namespace

Status makeCollArgs(Collective coll, const void* send, void* recv, size_t count, int dtype,
                    int redop, int root, int rank, int nranks, CollArgs* out) {
  const char* op = collectiveName(coll);
  COLLIE_RETURN_IF_ERROR(checkCodes(op, coll, dtype, redop, root, nranks));
  CollArgs& a = *out;
  a.coll = coll;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = static_cast<collieDataType_t>(dtype);
  a.op = reducesData(coll) ? static_cast<collieRedOp_t>(redop) : collieSum;
  a.root = hasRoot(coll) ? root : -1;
  size_t esz = dtypeSize(a.dtype);
  if (a.count > static_cast<size_t>(PTRDIFF_MAX) / esz / static_cast<size_t>(nranks))
    return invalidArgument(std::string(op) + ": count " + std::to_string(a.count) +
                           " elements of " + dtypeName(a.dtype) + " overflows the address space");
  COLLIE_RETURN_IF_ERROR(checkBuffers(op, rank, nranks, &a));
  return classifyBuffers(op, &a);
}

Status classifyBuffers(const char* op, CollArgs* a) {
  if (a->count == 0) return Status::ok();
  // Without the CUDA driver in this process every buffer is host memory: one look, not two.
  if (!deviceMemoryPossible()) return Status::ok();
  // A buffer not used on this rank (off the root) is null: the other one decides.
  PointerInfo s = classifyPointer(a->send != nullptr ? a->send : a->recv);
  PointerInfo r = classifyPointer(a->recv != nullptr ? a->recv : a->send);
  if (s.kind != r.kind || s.device != r.device)
    return invalidArgument(std::string(op) + ": sendbuff is " + memoryKindName(s.kind) + " memory" +
                           (s.device >= 0 ? " on device " + std::to_string(s.device) : "") +
                           " but recvbuff is " + memoryKindName(r.kind) + " memory" +
                           (r.device >= 0 ? " on device " + std::to_string(r.device) : "") +
                           "; both must live in the same place");
  a->memory = s.kind;
  a->device = s.device;
  return Status::ok();
}

}  // namespace collie
