// collieCommSplit: argument checks, the child's settings, then CommImpl::split.
#include "collie/collie.h"
#include "src/core/api_internal.h"
#include "src/core/communicator.h"
#include "src/core/group.h"

extern "C" {

collieResult_t collieCommSplit(collieComm_t comm, int color, int key, collieComm_t* newcomm,
                               collieConfig_t* config) {
  bool started = false;  // a non-blocking child goes on in the background
  const collieResult_t r = collie::apiCall(comm, [&]() -> collie::Status {
    const std::string op = "collieCommSplit";
    if (newcomm == nullptr) return collie::invalidArgument(op + ": newcomm is NULL");
    *newcomm = nullptr;
    COLLIE_RETURN_IF_ERROR(collie::checkComm(comm));
    collie::CommImpl* parent = collie::commImpl(comm);
    COLLIE_RETURN_IF_ERROR(parent->checkReady(op.c_str()));
    if (color < 0 && color != COLLIE_SPLIT_NOCOLOR)
      return collie::invalidArgument(op + ": color " + std::to_string(color) +
                                     " is negative and not COLLIE_SPLIT_NOCOLOR");
    if (collie::inGroup()) return collie::invalidUsage(op + ": not allowed inside a group");
    // As NCCL's: no config, the parent's settings; a config, its fields over the environment.
    collie::CommConfig cfg = parent->config();
    if (config != nullptr) {
      auto read = collie::readCommConfig(config);
      if (!read.isOk()) return read.status().withContext(op);
      cfg = read.take();
    }
    std::unique_ptr<collie::CommImpl> child;
    COLLIE_RETURN_IF_ERROR(parent->split(color, key, cfg, &child));
    if (child) *newcomm = collie::registerComm(std::move(child));
    started = *newcomm != nullptr && !cfg.blocking;
    return collie::Status::ok();
  });
  return r == collieSuccess && started ? collieInProgress : r;
}

}  // extern "C"
