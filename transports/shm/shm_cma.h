// Single-copy access to another process's memory on this host (cross-memory attach:
// process_vm_readv / process_vm_writev). The kernel copies straight between the two address
// spaces, so a peer's user buffer is read or written without a bounce through shared memory.
// Linux only; it needs the right to ptrace the peer (same user, and no Yama or seccomp rule
// against it), which cmaProbe checks.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>

#include "src/base/status.h"
#include "transports/transport.h"

namespace collie {

// Copies bytes from remote (an address in process pid) into local. peer and what name the
// failure.
Status cmaRead(pid_t pid, const void* remote, void* local, size_t bytes, int peer,
               const std::string& what);
// Copies bytes from local into remote (an address in process pid).
Status cmaWrite(pid_t pid, void* remote, const void* local, size_t bytes, int peer,
                const std::string& what);
// Whether this process may read process pid's memory and remote really is expected there:
// reads bytes (at most 64) from remote and compares them with expected, so that a pid that
// names another process (another pid namespace) is not mistaken for the peer.
bool cmaProbe(pid_t pid, const void* remote, const void* expected, size_t bytes);

// Peer rank peer's memory through cross-memory attach; pid 0 (a peer in another PID namespace,
// whose pid means nothing here) reaches nothing.
std::unique_ptr<PeerMemory> makeCmaPeerMemory(int peer, pid_t pid);

}  // namespace collie
