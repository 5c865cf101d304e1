// The receiver's check of a frame header: 48 received bytes against what this rank expects. A
// header passes exactly when it is the one the sender's encoder makes for the same op, step and
// length; anything else is an error that names the peer. Abort frames give the peer's reason.
#include "tests/fuzz/fuzz_input.h"
#include "transports/frame.h"

using collie::FrameHeader;
using collie::FrameTag;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  collie::fuzz::Input in(data, size);
  const FrameHeader h = in.take<FrameHeader>();
  FrameTag e;
  e.seq = in.take<uint64_t>();
  e.count = in.take<uint64_t>();
  e.tag = in.take<uint32_t>();
  e.coll = in.take<uint8_t>();
  e.dtype = in.take<uint8_t>();
  e.op = in.take<uint8_t>();
  e.algo = in.take<uint8_t>();
  e.root = in.take<int32_t>();
  const uint64_t commId = in.take<uint64_t>();
  const uint64_t len = in.take<uint64_t>();
  const int peer = in.take<uint16_t>();
  const std::string reason = in.rest();

  const FrameHeader mine = collie::encodeFrame(commId, e, len);
  FUZZ_CHECK(collie::checkFrame(mine, commId, e, len, peer).isOk());
  const collie::Status st = collie::checkFrame(h, commId, e, len, peer);
  FUZZ_CHECK(st.isOk() == (memcmp(&h, &mine, sizeof(h)) == 0));
  const std::string who = "peer rank " + std::to_string(peer);
  FUZZ_CHECK(st.isOk() || st.message().find(who) != std::string::npos);

  if (h.magic == collie::kAbortMagic) {
    const collie::Status a = collie::abortError(peer, h, reason);
    FUZZ_CHECK(!a.isOk() && a.message().find(who) != std::string::npos);
  }
  // The abort a failure sends, read back as the receiver does.
  const std::string wire =
      collie::encodeAbort(commId, st.isOk() ? collie::remoteError(reason) : st);
  FrameHeader ah;
  memcpy(&ah, wire.data(), sizeof(ah));
  FUZZ_CHECK(ah.magic == collie::kAbortMagic && ah.len == wire.size() - sizeof(ah));
  FUZZ_CHECK(ah.len <= collie::kMaxAbortPayload);
  return 0;
}
