// The unique id a rank was handed (COLLIE_UNIQUE_ID_BYTES the application broadcast): refused
// with a clear error unless it is one collieGetUniqueId made; taken, it gives the store's address
// and the job's secret it carries.
#include <netinet/in.h>
#include <sys/socket.h>

#include "src/core/bootstrap/bootstrap.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  collie::fuzz::Input in(data, size);
  collieUniqueId id;
  const std::string raw = in.bytes(sizeof(id.internal));
  memset(&id, 0, sizeof(id));
  memcpy(id.internal, raw.data(), raw.size());
  const int nranks = 1 + in.take<uint16_t>() % 1024;
  const int rank = in.take<uint16_t>() % nranks;
  auto b = collie::bootstrapFromId(id, nranks, rank);
  if (!b.isOk()) {
    FUZZ_CHECK(b.status().code() == collieInvalidArgument);
    return 0;
  }
  const collie::BootstrapInfo& info = b.value();
  FUZZ_CHECK(info.rank == rank && info.nranks == nranks);
  const int family = info.storeAddr.family();
  FUZZ_CHECK(family == AF_INET || family == AF_INET6);
  FUZZ_CHECK(!info.storeAddr.toString().empty());
  // The server stays with the process that made the id: none was made here.
  FUZZ_CHECK(info.server == nullptr);
  return 0;
}
