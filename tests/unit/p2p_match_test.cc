// P2PMatcher: point-to-point stripes filed by (tag, seq) whatever order they and the receives
// come in, early messages kept, disagreements refused, and rendezvous messages read or refused.
#include "transports/p2p_match.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

namespace collie {
namespace {

constexpr int kPeer = 3;

FrameTag messageTag(uint32_t tag, uint64_t seq, uint64_t count) {
  FrameTag t;
  t.tag = tag;
  t.seq = seq;
  t.count = count;
  t.coll = kP2PColl;
  t.dtype = collieFloat32;
  return t;
}

// Delivers stripe i of n of the floats in data, as a stream would.
Status deliver(P2PMatcher* m, const std::vector<float>& data, uint32_t tag, uint64_t seq,
               unsigned n, unsigned i) {
  const size_t bytes = data.size() * sizeof(float);
  const StripeSpan span = p2pStripe(bytes, n, i);
  FrameHeader h =
      encodeFrame(0, p2pStripeTag(messageTag(tag, seq, data.size()), n, i), span.length);
  StripeSink k;
  COLLIE_RETURN_IF_ERROR(m->begin(h, kPeer, &k));
  memcpy(k.dst, reinterpret_cast<const char*>(data.data()) + span.offset, span.length);
  return m->end(&k);
}

std::vector<float> iota(size_t n, float from) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

TEST(P2PMatcher, StripesOutOfOrderLandInThePostedBuffer) {
  P2PMatcher m;
  const std::vector<float> data = iota(100000, 1);
  std::vector<float> got(data.size());
  Request r;
  ASSERT_TRUE(m.post(got.data(), got.size() * 4, messageTag(5, 0, data.size()), &r, kPeer).isOk());
  EXPECT_TRUE(m.waiting());
  for (unsigned i : {2u, 0u, 1u}) {
    EXPECT_FALSE(r.done);
    ASSERT_TRUE(deliver(&m, data, 5, 0, 3, i).isOk());
  }
  EXPECT_TRUE(r.done);
  EXPECT_FALSE(m.waiting());
  EXPECT_EQ(got, data);
}

TEST(P2PMatcher, EarlyMessagesAreKeptAndMatchedByTagAndNumber) {
  P2PMatcher m;
  const std::vector<float> a = iota(7, 10), b = iota(7, 20), c = iota(7, 30);
  ASSERT_TRUE(deliver(&m, a, 1, 1, 1, 0).isOk());  // tag 1, second message
  ASSERT_TRUE(deliver(&m, b, 2, 0, 1, 0).isOk());
  ASSERT_TRUE(deliver(&m, c, 1, 0, 1, 0).isOk());
  EXPECT_TRUE(m.arrived(1, 0));
  EXPECT_FALSE(m.arrived(1, 2));
  std::vector<float> got(7);
  Request r;
  ASSERT_TRUE(m.post(got.data(), 28, messageTag(1, 0, 7), &r, kPeer).isOk());
  EXPECT_TRUE(r.done);
  EXPECT_EQ(got, c);
  ASSERT_TRUE(m.post(got.data(), 28, messageTag(1, 1, 7), &r, kPeer).isOk());
  EXPECT_EQ(got, a);
  ASSERT_TRUE(m.post(got.data(), 28, messageTag(2, 0, 7), &r, kPeer).isOk());
  EXPECT_EQ(got, b);
  EXPECT_FALSE(m.waiting());
}

TEST(P2PMatcher, ACountThatDisagreesIsAUsageErrorNamingThePeer) {
  P2PMatcher posted, early;
  std::vector<float> got(8);
  Request r;
  ASSERT_TRUE(posted.post(got.data(), 32, messageTag(0, 0, 8), &r, kPeer).isOk());
  Status s = deliver(&posted, iota(9, 0), 0, 0, 1, 0);
  EXPECT_EQ(s.code(), collieInvalidUsage);
  EXPECT_NE(s.message().find("peer rank 3"), std::string::npos) << s.message();
  ASSERT_TRUE(deliver(&early, iota(9, 0), 0, 0, 1, 0).isOk());
  s = early.post(got.data(), 32, messageTag(0, 0, 8), &r, kPeer);
  EXPECT_EQ(s.code(), collieInvalidUsage);
  EXPECT_FALSE(r.done);
}

TEST(P2PMatcher, AGarbledStripeIsRefused) {
  P2PMatcher m;
  FrameHeader h = encodeFrame(0, p2pStripeTag(messageTag(0, 0, 10), 2, 0), 17);
  StripeSink k;
  EXPECT_EQ(m.begin(h, kPeer, &k).code(), collieRemoteError);
  h = encodeFrame(0, p2pStripeTag(messageTag(0, 0, 10), 1, 0), 40);
  h.dtype = 99;
  EXPECT_EQ(m.begin(h, kPeer, &k).code(), collieRemoteError);
}

// A rendezvous frame says where the data is; the receive reads it through the pull, or, refused,
// waits for the data to come as stripes.
TEST(P2PMatcher, RendezvousIsReadWhenMatchedOrFallsBackToData) {
  const std::vector<float> data = iota(5000, 3);
  for (bool refuse : {false, true}) {
    P2PMatcher m;
    int pulls = 0;
    m.setPull([&](const RendezvousBody& b, char* dst, size_t bytes, uint32_t tag, uint64_t seq,
                  bool* pulled) {
      ++pulls;
      EXPECT_EQ(tag, 4u);
      EXPECT_EQ(seq, 0u);
      *pulled = !refuse;
      if (!refuse) memcpy(dst, reinterpret_cast<const void*>(b.address), bytes);
      return Status::ok();
    });
    RendezvousBody body{reinterpret_cast<uint64_t>(data.data()), 0};
    FrameHeader h = encodeFrame(0, p2pStripeTag(messageTag(4, 0, data.size()), kP2PRendezvous, 0),
                                sizeof(body));
    StripeSink k;
    ASSERT_TRUE(m.begin(h, kPeer, &k).isOk());  // early: nothing read yet
    memcpy(k.dst, &body, sizeof(body));
    ASSERT_TRUE(m.end(&k).isOk());
    EXPECT_EQ(pulls, 0);
    std::vector<float> got(data.size());
    Request r;
    ASSERT_TRUE(
        m.post(got.data(), got.size() * 4, messageTag(4, 0, data.size()), &r, kPeer).isOk());
    EXPECT_EQ(pulls, 1);
    EXPECT_EQ(r.done, !refuse);
    if (refuse) {
      for (unsigned i : {1u, 0u}) ASSERT_TRUE(deliver(&m, data, 4, 0, 2, i).isOk());
      EXPECT_TRUE(r.done);
    }
    EXPECT_EQ(got, data);
  }
}

}  // namespace
}  // namespace collie
