// The C API of configured communicators: collieCommInitRankConfig (blocking or not) and
// collieCommFinalize.
#include <string>

#include "collie/collie.h"
#include "src/core/api_internal.h"
#include "src/core/communicator.h"

extern "C" {

collieResult_t collieCommInitRankConfig(collieComm_t* comm, int nranks, collieUniqueId commId,
                                        int rank, collieConfig_t* config) {
  bool started = false;  // a non-blocking init goes on in the background
  const collieResult_t r = collie::apiCall(nullptr, [&]() -> collie::Status {
    const std::string op = "collieCommInitRankConfig";
    if (comm == nullptr) return collie::invalidArgument(op + ": comm is NULL");
    *comm = nullptr;
    if (nranks < 1)
      return collie::invalidArgument(op + ": nranks " + std::to_string(nranks) + " must be >= 1");
    if (rank < 0 || rank >= nranks)
      return collie::invalidArgument(op + ": rank " + std::to_string(rank) +
                                     " is out of range for nranks " + std::to_string(nranks));
    auto cfg = collie::readCommConfig(config);
    if (!cfg.isOk()) return cfg.status().withContext(op);
    auto info = collie::bootstrapFromId(commId, nranks, rank);
    if (!info.isOk()) return info.status().withContext(op);
    if (!cfg.value().blocking) {
      *comm = collie::registerComm(collie::CommImpl::createInBackground(info.take(), cfg.take()));
      started = true;
      return collie::Status::ok();
    }
    auto c = collie::CommImpl::create(info.take(), cfg.value());
    if (!c.isOk()) return c.status();
    *comm = collie::registerComm(c.take());
    return collie::Status::ok();
  });
  return r == collieSuccess && started ? collieInProgress : r;
}

collieResult_t collieCommFinalize(collieComm_t comm) {
  return collie::apiCall(comm, [&]() -> collie::Status {
    COLLIE_RETURN_IF_ERROR(collie::checkComm(comm));
    return collie::commImpl(comm)->finalize();
  });
}

}  // extern "C"
