// Frame headers: what a receiver accepts and the errors it gives for every kind of mismatch.
#include <gtest/gtest.h>

#include "src/base/dtype.h"
#include "transports/frame.h"

namespace collie {
namespace {

FrameTag tag() {
  FrameTag t;
  t.seq = 7;
  t.count = 100;
  t.tag = 3;
  t.coll = static_cast<uint8_t>(Collective::kAllReduce);
  t.dtype = collieFloat32;
  t.op = collieSum;
  t.algo = 1;
  return t;
}

TEST(Frame, MatchingHeaderIsAccepted) {
  FrameHeader h = encodeFrame(42, tag(), 400);
  EXPECT_TRUE(checkFrame(h, 42, tag(), 400, 1).isOk());
}

TEST(Frame, GarbledHeaderIsARemoteErrorNamingThePeer) {
  FrameHeader h = encodeFrame(42, tag(), 400);
  h.magic ^= 1;
  Status s = checkFrame(h, 42, tag(), 400, 5);
  EXPECT_EQ(s.code(), collieRemoteError);
  EXPECT_NE(s.message().find("peer rank 5"), std::string::npos) << s.message();
  h = encodeFrame(43, tag(), 400);  // another communicator's frame
  EXPECT_EQ(checkFrame(h, 42, tag(), 400, 5).code(), collieRemoteError);
}

TEST(Frame, DisagreementsAreInvalidUsageAndSayWhat) {
  struct Case {
    void (*mutate)(FrameTag*);
    const char* needle;
  } cases[] = {
      {[](FrameTag* t) { t->count = 200; }, "count 200"},
      {[](FrameTag* t) { t->dtype = collieInt32; }, "int32"},
      {[](FrameTag* t) { t->op = collieMax; }, "max"},
      {[](FrameTag* t) { t->seq = 8; }, "op #8"},
  };
  for (const auto& c : cases) {
    FrameTag theirs = tag();
    c.mutate(&theirs);
    FrameHeader h = encodeFrame(42, theirs, 400);
    Status s = checkFrame(h, 42, tag(), 400, 2);
    EXPECT_EQ(s.code(), collieInvalidUsage);
    EXPECT_NE(s.message().find("disagree"), std::string::npos);
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
  }
  FrameHeader h = encodeFrame(42, tag(), 404);
  Status s = checkFrame(h, 42, tag(), 400, 2);
  EXPECT_EQ(s.code(), collieInvalidUsage);
  EXPECT_NE(s.message().find("404 bytes"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace collie
