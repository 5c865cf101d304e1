// The store server's side of its protocol: whatever a client connecting to it sends (the hello
// with the job's secret, then requests). The server answers with whole replies and drops the
// client at the end of its bytes; it never crashes or hangs. A fresh server per input, so that
// no input depends on the keys an earlier one set.
#include "src/core/bootstrap/store_wire.h"
#include "tests/fuzz/store_common.h"

namespace wire = collie::store_wire;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("COLLIE_DEBUG", "NONE", 1);  // every dropped client is a WARN otherwise
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bind = collie::parseSockAddr("127.0.0.1:0");
  FUZZ_CHECK(bind.isOk());
  auto server = collie::StoreServer::start(bind.value(), collie::fuzz::storeAuth());
  FUZZ_CHECK(server.isOk());
  auto fd = collie::connectWithRetry(server.value()->address(), collie::Deadline::afterMs(5000));
  FUZZ_CHECK(fd.isOk());
  std::string got;
  const std::string sent(reinterpret_cast<const char*>(data), size);
  FUZZ_CHECK(collie::fuzz::exchange(fd.value(), sent, &got, 10000));
  close(fd.value());
  server.value()->stop();

  // What came back: the ack of a good hello, then replies, the last perhaps cut short.
  if (got.empty()) return 0;
  uint32_t ack = 0;
  FUZZ_CHECK(got.size() >= sizeof(ack));
  memcpy(&ack, got.data(), sizeof(ack));
  FUZZ_CHECK(ack == wire::kAckMagic);
  FUZZ_CHECK(sent.size() >= sizeof(wire::StoreHello));
  for (size_t at = sizeof(ack); at + sizeof(wire::RepHdr) <= got.size();) {
    wire::RepHdr h;
    memcpy(&h, got.data() + at, sizeof(h));
    FUZZ_CHECK(h.magic == wire::kRepMagic && h.code <= wire::kNotFound);
    FUZZ_CHECK(h.len <= wire::kMaxValue);
    at += sizeof(h) + h.len;
  }
  return 0;
}
