// Loads libucp once per process and resolves the entry points of UcxApi.
#include "transports/ucx/ucx_api.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace collie {

namespace {

// The runtime library of the UCX API the headers describe (API major version 1 = soname 0).
constexpr const char* kUcpLibrary = "libucp.so.0";

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*fn == nullptr && missing->empty()) *missing = name;
  return *fn != nullptr;
}

Status load(UcxApi* api) {
  // Never closed: UCX keeps threads and handlers of its own that must not outlive its code.
  void* lib = dlopen(kUcpLibrary, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr)
    return systemError(std::string("cannot load the UCX library ") + kUcpLibrary + ": " +
                       dlerror() + " (install libucx0, or choose another COLLIE_TRANSPORT)");
  std::string missing;
  resolve(lib, "ucp_get_version_string", &api->getVersionString, &missing);
  resolve(lib, "ucp_config_read", &api->configRead, &missing);
  resolve(lib, "ucp_config_release", &api->configRelease, &missing);
  resolve(lib, "ucp_config_modify", &api->configModify, &missing);
  resolve(lib, "ucp_init_version", &api->initVersion, &missing);
  resolve(lib, "ucp_cleanup", &api->cleanup, &missing);
  resolve(lib, "ucp_context_print_info", &api->contextPrintInfo, &missing);
  resolve(lib, "ucp_worker_create", &api->workerCreate, &missing);
  resolve(lib, "ucp_worker_destroy", &api->workerDestroy, &missing);
  resolve(lib, "ucp_worker_get_address", &api->workerGetAddress, &missing);
  resolve(lib, "ucp_worker_release_address", &api->workerReleaseAddress, &missing);
  resolve(lib, "ucp_worker_progress", &api->workerProgress, &missing);
  resolve(lib, "ucp_worker_get_efd", &api->workerGetEfd, &missing);
  resolve(lib, "ucp_worker_arm", &api->workerArm, &missing);
  resolve(lib, "ucp_ep_create", &api->epCreate, &missing);
  resolve(lib, "ucp_ep_close_nbx", &api->epCloseNbx, &missing);
  resolve(lib, "ucp_ep_flush_nbx", &api->epFlushNbx, &missing);
  resolve(lib, "ucp_tag_send_nbx", &api->tagSendNbx, &missing);
  resolve(lib, "ucp_tag_recv_nbx", &api->tagRecvNbx, &missing);
  resolve(lib, "ucp_tag_probe_nb", &api->tagProbeNb, &missing);
  resolve(lib, "ucp_request_check_status", &api->requestCheckStatus, &missing);
  resolve(lib, "ucp_request_cancel", &api->requestCancel, &missing);
  resolve(lib, "ucp_request_free", &api->requestFree, &missing);
  // Defined in libucs, which libucp depends on: dlsym searches the dependencies too.
  resolve(lib, "ucs_status_string", &api->statusString, &missing);
  if (!missing.empty())
    return systemError(std::string("the UCX library ") + kUcpLibrary + " lacks " + missing +
                       " (this build needs UCX 1.10 or newer)");
  return Status::ok();
}

}  // namespace

StatusOr<const UcxApi*> ucxApi() {
  static std::once_flag once;
  static UcxApi api;
  static Status loaded;
  std::call_once(once, [] { loaded = load(&api); });
  if (!loaded.isOk()) return loaded;
  return static_cast<const UcxApi*>(&api);
}

}  // namespace collie
