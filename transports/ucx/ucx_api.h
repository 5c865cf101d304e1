// The UCX entry points the ucx transport calls, resolved with dlopen the first time a
// communicator wants UCX. Linking libucp instead would run UCX's load-time set-up (handlers for
// SIGSEGV, SIGBUS and friends that print a UCX backtrace) in every program that links Collie,
// whether it ever uses UCX or not; loaded on demand, only processes that use UCX get it.
#pragma once

#include <ucp/api/ucp.h>

#include "src/base/status.h"

namespace collie {

struct UcxApi {
  decltype(&::ucp_get_version_string) getVersionString;
  decltype(&::ucp_config_read) configRead;
  decltype(&::ucp_config_release) configRelease;
  decltype(&::ucp_config_modify) configModify;
  decltype(&::ucp_init_version) initVersion;
  decltype(&::ucp_cleanup) cleanup;
  decltype(&::ucp_context_print_info) contextPrintInfo;
  decltype(&::ucp_worker_create) workerCreate;
  decltype(&::ucp_worker_destroy) workerDestroy;
  decltype(&::ucp_worker_get_address) workerGetAddress;
  decltype(&::ucp_worker_release_address) workerReleaseAddress;
  decltype(&::ucp_worker_progress) workerProgress;
  decltype(&::ucp_worker_get_efd) workerGetEfd;
  decltype(&::ucp_worker_arm) workerArm;
  decltype(&::ucp_ep_create) epCreate;
  decltype(&::ucp_ep_close_nbx) epCloseNbx;
  decltype(&::ucp_ep_flush_nbx) epFlushNbx;
  decltype(&::ucp_tag_send_nbx) tagSendNbx;
  decltype(&::ucp_tag_recv_nbx) tagRecvNbx;
  decltype(&::ucp_tag_probe_nb) tagProbeNb;
  decltype(&::ucp_request_check_status) requestCheckStatus;
  decltype(&::ucp_request_cancel) requestCancel;
  decltype(&::ucp_request_free) requestFree;
  decltype(&::ucs_status_string) statusString;
};

// The process-wide table, loaded once; an error names the library and the symbol that is missing.
StatusOr<const UcxApi*> ucxApi();

}  // namespace collie
