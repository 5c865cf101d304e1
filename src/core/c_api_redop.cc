// The C API of created reduction ops (collieRedOpCreatePreMulSum, collieRedOpDestroy), and the
// check a collective's op passes when it may be one of them.
#include <string>

#include "collie/collie.h"
#include "src/base/dtype.h"
#include "src/core/api_internal.h"
#include "src/core/communicator.h"
#include "src/memory/memory_kind.h"

namespace collie {
namespace {

constexpr const char* kCreate = "collieRedOpCreatePreMulSum";

std::string onRank(collieComm_t comm) {
  return " (rank " + std::to_string(commImpl(comm)->rank()) + ")";
}

// Where the scalar must live for residence, and whether it does.
Status checkResidence(int residence, const void* scalar) {
  if (residence == collieScalarHostImmediate) return Status::ok();
  if (residence != collieScalarDevice)
    return invalidArgument(std::string(kCreate) + ": unknown scalar residence " +
                           std::to_string(residence));
  if (!cudaBuilt())
    return invalidArgument(std::string(kCreate) +
                           ": collieScalarDevice needs a build with CUDA; a scalar in host "
                           "memory is passed with collieScalarHostImmediate");
  if (classifyPointer(scalar).kind != MemoryKind::kCuda)
    return invalidArgument(std::string(kCreate) +
                           ": collieScalarDevice with a scalar in host memory; pass "
                           "collieScalarHostImmediate for it");
  return Status::ok();
}

Status createPreMulSum(collieRedOp_t* op, void* scalar, int dtype, int residence,
                       collieComm_t comm) {
  COLLIE_RETURN_IF_ERROR(checkComm(comm));
  if (op == nullptr) return invalidArgument(std::string(kCreate) + ": op is NULL");
  if (scalar == nullptr) return invalidArgument(std::string(kCreate) + ": scalar is NULL");
  if (!validDtype(dtype))
    return invalidArgument(std::string(kCreate) + ": unknown datatype " + std::to_string(dtype));
  COLLIE_RETURN_IF_ERROR(checkResidence(residence, scalar)
                             .withContext("rank " + std::to_string(commImpl(comm)->rank())));
  COLLIE_ASSIGN_OR_RETURN(
      const int v,
      commImpl(comm)->redOps().create(static_cast<collieDataType_t>(dtype),
                                      static_cast<collieScalarResidence_t>(residence), scalar));
  *op = static_cast<collieRedOp_t>(v);
  return Status::ok();
}

}  // namespace

Status makeCollArgsOn(collieComm_t comm, Collective coll, const void* send, void* recv,
                      size_t count, int dtype, int op, int root, CollArgs* out) {
  CommImpl* c = commImpl(comm);
  if (!isCreatedRedOp(op))
    return makeCollArgs(coll, send, recv, count, dtype, op, root, c->rank(), c->size(), out);
  // Everything but the op is checked as for a sum; then the op, against this communicator.
  COLLIE_RETURN_IF_ERROR(
      makeCollArgs(coll, send, recv, count, dtype, collieSum, root, c->rank(), c->size(), out));
  const std::string call = collectiveName(coll);
  if (coll != Collective::kAllReduce && coll != Collective::kReduce &&
      coll != Collective::kReduceScatter)
    return invalidArgument(call + ": reduction op " + std::to_string(op) +
                           " given to a call that does not reduce");
  if (out->memory != MemoryKind::kHost)
    return invalidArgument(call + ": reduction op " + std::to_string(op) +
                           " (PreMulSum) works on host buffers only so far" + onRank(comm));
  Status held = c->redOps().hold(call.c_str(), op, out->dtype);
  if (!held.isOk()) return Status(held.code(), held.message() + onRank(comm));
  out->op = static_cast<collieRedOp_t>(op);
  return Status::ok();
}

}  // namespace collie

extern "C" {

collieResult_t collieRedOpCreatePreMulSum(collieRedOp_t* op, void* scalar,
                                          collieDataType_t datatype,
                                          collieScalarResidence_t residence, collieComm_t comm) {
  return collie::apiCall(comm, [&]() {
    return collie::createPreMulSum(op, scalar, collie::enumBits(datatype),
                                   collie::enumBits(residence), comm);
  });
}

collieResult_t collieRedOpDestroy(collieRedOp_t op, collieComm_t comm) {
  return collie::apiCall(comm, [&]() -> collie::Status {
    COLLIE_RETURN_IF_ERROR(collie::checkComm(comm));
    collie::Status s = collie::commImpl(comm)->redOps().destroy(collie::enumBits(op));
    if (!s.isOk()) return collie::Status(s.code(), s.message() + collie::onRank(comm));
    return s;
  });
}

}  // extern "C"
