// Cross-memory attach helpers (see shm_cma.h).
#include "transports/shm/shm_cma.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

namespace collie {

namespace {

using Transfer = ssize_t (*)(pid_t, const struct iovec*, unsigned long, const struct iovec*,
                             unsigned long, unsigned long);

// The kernel may copy less than asked (a page it could not pin): go on from where it stopped.
Status transfer(Transfer fn, pid_t pid, char* local, char* remote, size_t bytes, int peer,
                const std::string& what) {
  while (bytes > 0) {
    struct iovec l = {local, bytes}, r = {remote, bytes};
    const ssize_t got = fn(pid, &l, 1, &r, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const int err = got < 0 ? errno : EIO;
      std::string m = what + ": single-copy access to peer rank " + std::to_string(peer) +
                      " (pid " + std::to_string(pid) + ") failed: " + std::strerror(err);
      // ESRCH: the peer process is gone.
      return err == ESRCH ? remoteError(m) : systemError(m + " (COLLIE_SHM_CMA=off turns it off)");
    }
    local += got;
    remote += got;
    bytes -= static_cast<size_t>(got);
  }
  return Status::ok();
}

}  // namespace

Status cmaRead(pid_t pid, const void* remote, void* local, size_t bytes, int peer,
               const std::string& what) {
  return transfer(process_vm_readv, pid, static_cast<char*>(local),
                  const_cast<char*>(static_cast<const char*>(remote)), bytes, peer, what);
}

Status cmaWrite(pid_t pid, void* remote, const void* local, size_t bytes, int peer,
                const std::string& what) {
  // process_vm_writev's local side is only read.
  return transfer(process_vm_writev, pid, const_cast<char*>(static_cast<const char*>(local)),
                  static_cast<char*>(remote), bytes, peer, what);
}

bool cmaProbe(pid_t pid, const void* remote, const void* expected, size_t bytes) {
  char got[64];
  if (bytes > sizeof(got) || pid <= 0) return false;
  struct iovec l = {got, bytes}, r = {const_cast<void*>(remote), bytes};
  if (process_vm_readv(pid, &l, 1, &r, 1, 0) != static_cast<ssize_t>(bytes)) return false;
  return std::memcmp(got, expected, bytes) == 0;
}

namespace {

class CmaPeerMemory : public PeerMemory {
 public:
  CmaPeerMemory(int peer, pid_t pid) : peer_(peer), pid_(pid) {}
  bool reachable(const void* remote, const void* expected, size_t bytes) override {
    return cmaProbe(pid_, remote, expected, bytes);
  }
  Status read(const void* remote, void* local, size_t bytes, const char* what) override {
    return cmaRead(pid_, remote, local, bytes, peer_, what);
  }
  Status write(void* remote, const void* local, size_t bytes, const char* what) override {
    return cmaWrite(pid_, remote, local, bytes, peer_, what);
  }

 private:
  int peer_;
  pid_t pid_;
};

}  // namespace

std::unique_ptr<PeerMemory> makeCmaPeerMemory(int peer, pid_t pid) {
  return std::make_unique<CmaPeerMemory>(peer, pid);
}

}  // namespace collie
