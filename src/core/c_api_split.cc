// collieCommSplit: argument checks, then CommImpl::split.
#include "collie/collie.h"
#include "src/core/api_internal.h"
#include "src/core/communicator.h"
#include "src/core/group.h"

extern "C" {

collieResult_t collieCommSplit(collieComm_t comm, int color, int key, collieComm_t* newcomm,
                               struct collieConfig_v100* config) {
  return collie::apiCall(comm, [&]() -> collie::Status {
    if (newcomm == nullptr) return collie::invalidArgument("collieCommSplit: newcomm is NULL");
    *newcomm = nullptr;
    COLLIE_RETURN_IF_ERROR(collie::checkComm(comm));
    if (color < 0 && color != COLLIE_SPLIT_NOCOLOR)
      return collie::invalidArgument("collieCommSplit: color " + std::to_string(color) +
                                     " is negative and not COLLIE_SPLIT_NOCOLOR");
    if (collie::inGroup())
      return collie::invalidUsage("collieCommSplit: not allowed inside a group");
    if (config != nullptr)
      return collie::invalidArgument("collieCommSplit: config is not supported yet");
    std::unique_ptr<collie::CommImpl> child;
    COLLIE_RETURN_IF_ERROR(
        collie::commImpl(comm)->split(color, key, /*cfg=*/nullptr, &child));
    if (child) *newcomm = collie::adoptComm(std::move(child));
    return collie::Status::ok();
  });
}

}  // extern "C"
