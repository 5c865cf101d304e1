// The C API of point-to-point calls and groups: argument checks, then the group or a call of its
// own. Host memory only: device buffers are refused with a clear error.
#include <climits>
#include <string>

#include "collie/collie.h"
#include "src/base/dtype.h"
#include "src/core/api_internal.h"
#include "src/core/communicator.h"
#include "src/core/group.h"

namespace collie {

Status makeP2PCall(const char* op, bool send, const void* buf, size_t count, int dtype, int peer,
                   int tag, collieComm_t comm, P2PCall* c) {
  COLLIE_RETURN_IF_ERROR(checkComm(comm));
  CommImpl* impl = commImpl(comm);
  COLLIE_RETURN_IF_ERROR(impl->checkReady(op));
  if (!validDtype(dtype))
    return invalidArgument(std::string(op) + ": unknown datatype " + std::to_string(dtype));
  if (peer < 0 || peer >= impl->size())
    return invalidArgument(std::string(op) + ": peer " + std::to_string(peer) +
                           " is out of range for " + std::to_string(impl->size()) + " ranks");
  if (tag < 0)
    return invalidArgument(std::string(op) + ": tag " + std::to_string(tag) +
                           " is negative (tags are 0 to INT_MAX)");
  const size_t esz = dtypeSize(static_cast<collieDataType_t>(dtype));
  if (count > static_cast<size_t>(PTRDIFF_MAX) / esz)
    return invalidArgument(std::string(op) + ": count " + std::to_string(count) +
                           " overflows the address space");
  if (count > 0 && buf == nullptr)
    return invalidArgument(std::string(op) + ": buffer is NULL with count " +
                           std::to_string(count));
  CollArgs where;
  where.count = count;
  where.send = buf;
  where.recv = const_cast<void*>(buf);
  COLLIE_RETURN_IF_ERROR(classifyBuffers(op, &where));
  if (where.memory != MemoryKind::kHost)
    return invalidArgument(std::string(op) +
                           ": device buffers are not supported for point-to-point calls yet");
  c->send = send;
  c->buf = const_cast<void*>(buf);
  c->count = count;
  c->dtype = static_cast<collieDataType_t>(dtype);
  c->peer = peer;
  c->tag = tag;
  return Status::ok();
}

namespace {

collieResult_t p2p(const char* op, bool send, const void* buf, size_t count, int dtype, int peer,
                   int tag, collieComm_t comm) {
  return apiCall(comm, [&]() -> Status {
    P2PCall c;
    COLLIE_RETURN_IF_ERROR(makeP2PCall(op, send, buf, count, dtype, peer, tag, comm, &c));
    if (inGroup()) {
      groupAdd(commImpl(comm), c);
      return Status::ok();
    }
    return runP2PNow(commImpl(comm), c);
  });
}

}  // namespace

}  // namespace collie

extern "C" {

collieResult_t collieSend(const void* sendbuff, size_t count, collieDataType_t datatype, int peer,
                          collieComm_t comm, void* stream) {
  (void)stream;
  return collie::p2p("send", true, sendbuff, count, collie::enumBits(datatype), peer, 0, comm);
}

collieResult_t collieRecv(void* recvbuff, size_t count, collieDataType_t datatype, int peer,
                          collieComm_t comm, void* stream) {
  (void)stream;
  return collie::p2p("recv", false, recvbuff, count, collie::enumBits(datatype), peer, 0, comm);
}

collieResult_t collieSendTagged(const void* sendbuff, size_t count, collieDataType_t datatype,
                                int peer, int tag, collieComm_t comm, void* stream) {
  (void)stream;
  return collie::p2p("send", true, sendbuff, count, collie::enumBits(datatype), peer, tag, comm);
}

collieResult_t collieRecvTagged(void* recvbuff, size_t count, collieDataType_t datatype, int peer,
                                int tag, collieComm_t comm, void* stream) {
  (void)stream;
  return collie::p2p("recv", false, recvbuff, count, collie::enumBits(datatype), peer, tag, comm);
}

collieResult_t collieRecvAny(void* recvbuff, size_t count, collieDataType_t datatype, int tag,
                             int* peer, collieComm_t comm, void* stream) {
  (void)stream;
  return collie::apiCall(comm, [&]() -> collie::Status {
    if (peer == nullptr) return collie::invalidArgument("recv any: peer is NULL");
    if (collie::inGroup())
      return collie::invalidUsage(
          "recv any: not allowed inside a group (its sender is unknown "
          "until the message comes)");
    collie::P2PCall c;
    COLLIE_RETURN_IF_ERROR(collie::makeP2PCall("recv any", false, recvbuff, count,
                                               collie::enumBits(datatype), 0, tag, comm, &c));
    return collie::commImpl(comm)->recvAny(c, peer);
  });
}

collieResult_t collieGroupStart(void) {
  collie::groupStart();
  return collieSuccess;
}

collieResult_t collieGroupEnd(void) {
  return collie::apiCall(nullptr, [] { return collie::groupEnd(); });
}

}  // extern "C"
