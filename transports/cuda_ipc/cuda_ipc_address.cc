// CudaIpcAddress encoding: magic, version, then the fields in a fixed little-endian layout.
#include "transports/cuda_ipc/cuda_ipc_address.h"

#include <unistd.h>

#include <cstring>
#include <mutex>
#include <random>

namespace collie {
namespace {

constexpr char kMagic[4] = {'C', 'I', 'P', 'C'};
constexpr uint32_t kVersion = 2;
constexpr size_t kBusBytes = 32;
constexpr size_t kEncodedBytes =
    4 + 4 + 4 + 8 + 4 + kBusBytes + 8 + 8 + 8 + 2 * CudaIpcAddress::kHandleBytes;

void putU(std::string* s, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t getU(const std::string& s, size_t* at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(s[*at + i])) << (8 * i);
  *at += n;
  return v;
}

uint64_t drawToken() {
  std::random_device rd;
  uint64_t t = 0;
  while (t == 0) t = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return t;
}

}  // namespace

ProcessIdentity thisProcess() {
  static std::mutex mu;
  static ProcessIdentity cached;  // guarded by mu
  std::lock_guard<std::mutex> l(mu);
  const int32_t pid = static_cast<int32_t>(getpid());
  if (cached.token == 0 || cached.pid != pid) cached = ProcessIdentity{pid, drawToken()};
  return cached;
}

bool sameProcess(const CudaIpcAddress& a, const ProcessIdentity& self) {
  return a.token != 0 && a.token == self.token && a.pid == self.pid;
}

CudaIpcRoute cudaIpcRoute(bool sameProcess, bool sameGpu, bool canAccessPeer) {
  if (sameProcess) return CudaIpcRoute::kSameProcess;
  return sameGpu || canAccessPeer ? CudaIpcRoute::kMapped : CudaIpcRoute::kNoPeerAccess;
}

std::string CudaIpcAddress::encode() const {
  std::string s(kMagic, 4);
  putU(&s, kVersion, 4);
  putU(&s, static_cast<uint32_t>(pid), 4);
  putU(&s, token, 8);
  putU(&s, static_cast<uint32_t>(device), 4);
  std::string bus = busId.substr(0, kBusBytes - 1);
  bus.resize(kBusBytes, '\0');
  s += bus;
  putU(&s, buffer, 8);
  putU(&s, bytes, 8);
  putU(&s, event, 8);
  std::string mh = memHandle, eh = eventHandle;
  mh.resize(kHandleBytes, '\0');
  eh.resize(kHandleBytes, '\0');
  return s + mh + eh;
}

StatusOr<CudaIpcAddress> CudaIpcAddress::decode(const std::string& s) {
  if (s.size() != kEncodedBytes)
    return invalidArgument("cuda_ipc address of " + std::to_string(s.size()) + " bytes, expected " +
                           std::to_string(kEncodedBytes));
  if (memcmp(s.data(), kMagic, 4) != 0) return invalidArgument("not a cuda_ipc address (magic)");
  size_t at = 4;
  uint32_t version = static_cast<uint32_t>(getU(s, &at, 4));
  if (version != kVersion)
    return invalidArgument("cuda_ipc address version " + std::to_string(version) + ", expected " +
                           std::to_string(kVersion) + " (ranks run different Collie builds)");
  CudaIpcAddress a;
  a.pid = static_cast<int32_t>(getU(s, &at, 4));
  a.token = getU(s, &at, 8);
  a.device = static_cast<int32_t>(getU(s, &at, 4));
  a.busId = std::string(s.data() + at, strnlen(s.data() + at, kBusBytes));
  at += kBusBytes;
  a.buffer = getU(s, &at, 8);
  a.bytes = getU(s, &at, 8);
  a.event = getU(s, &at, 8);
  a.memHandle = s.substr(at, kHandleBytes);
  a.eventHandle = s.substr(at + kHandleBytes, kHandleBytes);
  if (a.device < 0 || a.bytes == 0) return invalidArgument("cuda_ipc address without a buffer");
  return a;
}

}  // namespace collie
