// What a peer publishes for the UCX connect: its worker address in hex with "/pid/pid-namespace",
// "-" (no RDMA here) or "!" and why UCX failed there, as the connecting rank reads it; and the
// rank record every rank publishes beside it. An address that is taken is exactly the hex that
// was published. The same bytes also go, as a hello, to the check every UCX endpoint's first
// message passes: one that passes carries this job's secret and names the endpoint's ranks.
#include "src/base/hex.h"
#include "src/core/bootstrap/rank_record.h"
#include "tests/fuzz/fuzz_input.h"
#include "transports/ucx/ucx_transport.h"

namespace {

// The job the hello seeds prove (tests/fuzz/seeds.cc writes them with it): rank 1 of 4, whose
// endpoint from peer rank 2 the hello arrives on.
constexpr uint8_t kSecret[16] = {0x5e, 0xc7, 0x3e, 0x70, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
constexpr uint64_t kCommId = 0x636f6d6d31ULL;

void checkHello(const uint8_t* data, size_t size) {
  collie::fuzz::Input in(data, size);
  const collie::UcxHello h = in.take<collie::UcxHello>();
  collie::Identity id;
  memcpy(id.secret, kSecret, 16);
  id.commId = kCommId;
  id.rank = 1;
  id.nranks = 4;
  const char* why = collie::ucxHelloMisfit(h, id, 2);
  FUZZ_CHECK(why != nullptr);
  if (*why != '\0') return;
  FUZZ_CHECK(memcmp(h.secret, kSecret, 16) == 0 && h.commId == kCommId);
  FUZZ_CHECK(h.from == 2 && h.to == 1 && h.nranks == 4);
  FUZZ_CHECK(*collie::ucxHelloMisfit(h, id, 3) != '\0');  // not on another peer's tag
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  checkHello(data, size);
  collie::fuzz::Input in(data, size);
  const int rank = in.take<uint8_t>();
  const std::string theirs = in.rest();
  std::string addr;
  int pid = -1;
  const std::string why = collie::UcxTransport::unusable(theirs, &addr, &pid);
  if (why.empty())
    FUZZ_CHECK(!addr.empty() && pid >= 0 &&
               collie::toHex(addr) == theirs.substr(0, theirs.find('/')));
  if (theirs.size() > 1 && theirs[0] == '!') FUZZ_CHECK(why == theirs.substr(1));

  auto rec = collie::decodeRankRecord(theirs, rank);
  if (!rec.isOk()) {
    FUZZ_CHECK(rec.status().message().find("rank " + std::to_string(rank)) != std::string::npos);
    return 0;
  }
  auto again = collie::decodeRankRecord(collie::encodeRankRecord(rec.value()), rank);
  FUZZ_CHECK(again.isOk() && again.value().nranks == rec.value().nranks &&
             again.value().host == rec.value().host &&
             again.value().machine == rec.value().machine);
  return 0;
}
