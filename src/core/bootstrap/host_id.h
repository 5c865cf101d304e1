// Which host and which machine this process runs on, as strings ranks compare.
#pragma once

#include <string>

namespace collie {

// The machine (kernel): its boot id, else its host name. Hosts that are network namespaces or
// containers of one machine share its cores.
std::string machineId();
// The host: host name + machine + network namespace, or COLLIE_HOSTID where set.
std::string hostId(const std::string& machine);

}  // namespace collie
