// The accepting side of the TCP mesh: the 56-byte hello a connecting peer sends, checked against
// this rank's identity and the sockets it still waits for. A hello that passes names a socket
// that exists and is free; the same hello a second time is refused.
#include <vector>

#include "tests/fuzz/fuzz_input.h"
#include "transports/tcp/tcp_transport.h"

namespace {

// The job's identity the seeds prove (tests/fuzz/seeds.cc writes hellos with it).
constexpr uint8_t kSecret[16] = {0x5e, 0xc7, 0x3e, 0x70, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
constexpr uint64_t kCommId = 0x636f6d6d31ULL;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  collie::fuzz::Input in(data, size);
  collie::Identity id;
  memcpy(id.secret, kSecret, 16);
  id.commId = kCommId;
  id.nranks = 2 + in.take<uint8_t>() % 7;
  id.rank = 1 + in.take<uint8_t>() % (id.nranks - 1);
  // Sockets to each lower peer (0: another transport) and which of them are connected already.
  std::vector<int> socks(static_cast<size_t>(id.nranks), 0);
  std::vector<std::vector<int>> fds(static_cast<size_t>(id.nranks));
  for (int p = 0; p < id.rank; ++p) {
    const uint8_t b = in.take<uint8_t>();
    socks[p] = b % 5;
    fds[p].assign(static_cast<size_t>(socks[p]), -1);
    for (int s = 0; s < socks[p]; ++s)
      if (b & (8 << s)) fds[p][s] = 100 + s;
  }
  const collie::Hello h = in.take<collie::Hello>();
  const char* why = collie::helloMisfit(h, id, socks, fds);
  FUZZ_CHECK(why != nullptr);
  if (*why != '\0') return 0;
  FUZZ_CHECK(h.from >= 0 && h.from < id.rank && h.to == id.rank && h.nranks == id.nranks);
  FUZZ_CHECK(memcmp(h.secret, kSecret, 16) == 0 && h.commId == kCommId);
  int& slot = fds.at(static_cast<size_t>(h.from)).at(static_cast<size_t>(h.sockIdx));
  FUZZ_CHECK(slot < 0);
  slot = 3;  // taken, as acceptPeers records it
  FUZZ_CHECK(*collie::helloMisfit(h, id, socks, fds) != '\0');
  return 0;
}
