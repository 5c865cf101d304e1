// What a peer publishes for the UCX connect: its worker address in hex with "/pid/pid-namespace",
// "-" (no RDMA here) or "!" and why UCX failed there, as the connecting rank reads it; and the
// rank record every rank publishes beside it. An address that is taken is exactly the hex that
// was published.
#include "src/base/hex.h"
#include "src/core/bootstrap/rank_record.h"
#include "tests/fuzz/fuzz_input.h"
#include "transports/ucx/ucx_transport.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
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
