// Host and machine identity from the host name, the boot id and the network namespace.
#include "src/core/bootstrap/host_id.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "src/base/params.h"

namespace collie {

namespace {

// Records are split at spaces.
std::string noSpaces(std::string id) {
  for (char& c : id)
    if (c == ' ') c = '_';
  return id;
}

std::string hostName() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

std::string machineId() {
  std::string id = hostName();
  if (FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {0};
    if (fgets(boot, sizeof(boot), f)) id = std::string(boot, strcspn(boot, "\n"));
    fclose(f);
  }
  return id.empty() ? "unknown" : noSpaces(id);
}

std::string hostId(const std::string& machine) {
  std::string forced = params().getString("COLLIE_HOSTID");
  if (!forced.empty()) return noSpaces(forced);
  std::string id = hostName() + "/" + machine;
  char ns[128] = {0};
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
  if (n > 0) id += "/" + std::string(ns, static_cast<size_t>(n));
  return noSpaces(id);
}

}  // namespace collie
