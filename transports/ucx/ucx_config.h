// UCX's configuration for a communicator: the user's UCX_* environment as UCX reads it, then
// Collie's defaults for the settings the user left unset, each only where the transport it
// tunes is in use (UCX warns of a setting no transport takes). Collie never sets UCX_*
// variables (they belong to the user); it hands its defaults to ucp_config_modify.
#pragma once

#include <ucp/api/ucp.h>

#include <string>
#include <vector>

#include "transports/ucx/ucx_api.h"

namespace collie {

// One default: the UCX transport it tunes, the field as ucp_config_modify names it (the
// transport's own field, without the UCX_<TRANSPORT>_ prefix), the variable a user sets it with,
// and Collie's value.
struct UcxDefault {
  const char* transport;
  const char* field;
  const char* env;
  const char* value;
};

// The defaults for a context that uses these transports (e.g. "tcp", "posix"), where lookup
// (getenv, or a test's) finds the environment as it is.
std::vector<UcxDefault> ucxDefaults(const std::vector<std::string>& transports,
                                    const char* (*lookup)(const char*));

// The UCX transport a resource belongs to ("tcp" of "tcp/eth0").
std::string ucxTransportOf(const std::string& resource);

// The resources a context selected, as UCX prints them ("tcp/eth0", "posix/memory", ...).
std::vector<std::string> ucxResources(const UcxApi* api, ucp_context_h context);

// ucp_init on the user's configuration; where Collie has defaults for the transports it
// selected, again with them. *resources: what the context uses.
ucs_status_t ucxInit(const UcxApi* api, const ucp_params_t& params, ucp_context_h* context,
                     std::vector<std::string>* resources);

}  // namespace collie
