// The hello every TCP connection of a communicator begins with: who dials whom, proved by the
// job's secret. Shared by the dialling and the accepting side of the mesh.
#pragma once

#include <cstdint>
#include <string>

namespace collie {

constexpr uint32_t kHelloMagic = 0x434c4849;  // "CLHI"
constexpr uint32_t kHelloVersion = 1;

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint8_t secret[16];
  uint64_t commId;
  int32_t from, to, sockIdx, nsocks, nranks;
  uint32_t pad;
};
static_assert(sizeof(Hello) == 56, "hello is 56 bytes");

// Compares two secrets in constant time, so a stranger learns nothing from timing.
bool secretEqual(const uint8_t* a, const uint8_t* b);
// The address at the other end of fd, for messages ("?" where unknown).
std::string peerName(int fd);

}  // namespace collie
