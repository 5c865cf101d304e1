// StreamConnection over scripted byte streams: the wait loop reads a stream with no receive
// posted on it only now and then, and what arrives there (an abort) still ends the wait; a
// connection with nothing pending reads all its streams at once.
#include "transports/stream_connection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/step_tag.h"

namespace collie {
namespace {

// Bytes queued for the reader; counts the reads. Writes are kept, as much as the peer takes.
class ScriptedStream : public ByteStream {
 public:
  explicit ScriptedStream(int* reads) : reads_(reads) {}
  void queue(const void* p, size_t n) {
    in_.insert(in_.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
  }
  // What a peer that aborts writes: the abort's header, then its reason.
  void queueAbort(uint64_t comm, const std::string& reason) {
    const std::string frame = encodeAbort(comm, remoteError(reason));
    queue(frame.data(), frame.size());
  }
  // From now on a write fails with -err (the peer is gone).
  void failWrites(int err) { writeErr_ = -err; }
  // Once the queued bytes are read, reads fail with -err (the link reset or timed out).
  void failReads(int err) { readErr_ = -err; }
  // From now on writes take at most n more bytes (-1: all they are given).
  void takeWrites(ssize_t n) { room_ = n; }
  const std::string& written() const { return out_; }
  ssize_t writev(const iovec* iov, int n) override {
    if (writeErr_ != 0) return writeErr_;
    size_t took = 0;
    for (int i = 0; i < n; ++i) {
      size_t part = iov[i].iov_len;
      if (room_ >= 0) part = std::min(part, static_cast<size_t>(room_) - took);
      out_.append(static_cast<const char*>(iov[i].iov_base), part);
      took += part;
    }
    if (room_ >= 0) room_ -= static_cast<ssize_t>(took);
    return static_cast<ssize_t>(took);
  }
  ssize_t read(void* buf, size_t n) override {
    ++*reads_;
    if (at_ == in_.size() && readErr_ != 0) return readErr_;
    const size_t take = std::min(n, in_.size() - at_);
    if (take > 0) memcpy(buf, in_.data() + at_, take);
    at_ += take;
    return static_cast<ssize_t>(take);  // 0: nothing there now
  }
  int pollFd() const override { return -1; }
  void shutdownWrite() override {}

 private:
  int* reads_;
  ssize_t writeErr_ = 0;
  ssize_t readErr_ = 0;
  ssize_t room_ = -1;
  std::string out_;
  std::vector<char> in_;
  size_t at_ = 0;
};

constexpr uint64_t kComm = 42;

TEST(StreamConnection, AStreamWithNothingPostedIsReadNowAndThenAndAnAbortThereEndsTheWait) {
  int reads[2] = {0, 0};
  auto posted = std::make_unique<ScriptedStream>(&reads[0]);
  auto idle = std::make_unique<ScriptedStream>(&reads[1]);
  const std::string reason = "rank 1 lost peer rank 5";
  idle->queueAbort(kComm, reason);
  std::vector<std::unique_ptr<ByteStream>> streams;
  streams.push_back(std::move(posted));
  streams.push_back(std::move(idle));
  StreamConnection conn(1, kComm, std::move(streams), StreamOptions{});

  // A small receive goes on the first stream (round robin starts there); nothing comes on it.
  char buf[8];
  Request rr;
  ASSERT_TRUE(conn.irecv(buf, sizeof(buf), stepTag(0), &rr).isOk());
  Status st;
  int calls = 0;
  while (st.isOk() && calls < 100) {
    bool progressed = false;
    st = conn.progress(&progressed);
    ++calls;
    if (st.isOk()) {
      EXPECT_EQ(reads[1], 0) << "the idle stream was read at call " << calls;
    }
  }
  EXPECT_EQ(st.code(), collieRemoteError) << st.toString();
  EXPECT_NE(st.message().find("peer rank 1 aborted: " + reason), std::string::npos) << st.message();
  EXPECT_GT(calls, 1);         // not read at once: the wait does not pay for it every time
  EXPECT_LE(calls, 16);        // but noticed within one round of the idle streams
  EXPECT_GE(reads[0], calls);  // the stream with the receive posted: every call
}

// With nothing posted at all the connection is progressed only after poll() found one of its
// streams readable: it reads every stream at once, stashing a header that came early, so that
// poll() stops reporting it and the rank can sleep.
// A peer that aborted and then exited: a send to it fails, and the reason it sent first, unread
// on a stream with nothing posted, is what the error says (before: "send failed (Connection
// reset by peer)", which blamed the peer for an error elsewhere).
TEST(StreamConnection, ASendToAPeerGoneAfterItsAbortReportsTheAbort) {
  int reads = 0;
  auto stream = std::make_unique<ScriptedStream>(&reads);
  const std::string reason = "rank 1 lost peer rank 0";
  stream->queueAbort(kComm, reason);
  stream->failWrites(ECONNRESET);
  std::vector<std::unique_ptr<ByteStream>> streams;
  streams.push_back(std::move(stream));
  StreamConnection conn(1, kComm, std::move(streams), StreamOptions{});
  const char data[64] = {};
  Request sq;
  ASSERT_TRUE(conn.isend(data, sizeof(data), stepTag(0), &sq).isOk());
  bool progressed = false;
  const Status st = conn.progress(&progressed);
  EXPECT_EQ(st.code(), collieRemoteError) << st.toString();
  EXPECT_NE(st.message().find("peer rank 1 aborted: " + reason), std::string::npos)
      << st.toString();
}

// After a failure the communicator listens for each peer's abort (CommImpl::silentPeers): the
// rest of a frame begun and whole data frames are read past, not into the posted buffer, up to
// the abort behind them.
TEST(StreamConnection, ListeningAfterAFailureReadsPastDataToThePeersAbort) {
  int reads = 0;
  auto owned = std::make_unique<ScriptedStream>(&reads);
  ScriptedStream* stream = owned.get();
  const FrameHeader begun = encodeFrame(kComm, stepTag(0), 100);
  stream->queue(&begun, sizeof(begun));
  const std::vector<char> body(100, 'x');
  stream->queue(body.data(), 40);
  std::vector<std::unique_ptr<ByteStream>> streams;
  streams.push_back(std::move(owned));
  StreamConnection conn(1, kComm, std::move(streams), StreamOptions{});
  std::vector<char> buf(100, '.');
  Request rr;
  ASSERT_TRUE(conn.irecv(buf.data(), buf.size(), stepTag(0), &rr).isOk());
  bool progressed = false;
  ASSERT_TRUE(conn.progress(&progressed).isOk());
  ASSERT_FALSE(rr.done);
  EXPECT_EQ(buf[39], 'x');
  EXPECT_EQ(buf[40], '.');

  EXPECT_EQ(conn.listenAfterFailure(), Connection::Word::kNothing);
  stream->queue(body.data() + 40, 60);  // the rest of the frame begun
  const FrameHeader next = encodeFrame(kComm, stepTag(1), 10);
  stream->queue(&next, sizeof(next));
  stream->queue(body.data(), 10);
  EXPECT_EQ(conn.listenAfterFailure(), Connection::Word::kNothing);
  EXPECT_EQ(buf[40], '.') << "the rest of the frame went into the buffer no one waits on";
  stream->queueAbort(kComm, "rank 1: timed out");
  EXPECT_EQ(conn.listenAfterFailure(), Connection::Word::kHeard);
  EXPECT_EQ(conn.listenAfterFailure(), Connection::Word::kHeard);
}

// A rank that heard its peer's abort first still owes it its own, which waited behind a frame
// begun that the peer did not take: it goes on as the rank listens (the peer listens for it).
TEST(StreamConnection, ListeningAfterHearingThePeerStillSendsThisRanksAbort) {
  int reads = 0;
  auto owned = std::make_unique<ScriptedStream>(&reads);
  ScriptedStream* stream = owned.get();
  std::vector<std::unique_ptr<ByteStream>> streams;
  streams.push_back(std::move(owned));
  StreamConnection conn(1, kComm, std::move(streams), StreamOptions{});
  stream->takeWrites(sizeof(FrameHeader) + 20);  // the peer takes part of a frame, then stops
  const std::vector<char> data(100, 'd');
  Request sq;
  ASSERT_TRUE(conn.isend(data.data(), data.size(), stepTag(0), &sq).isOk());
  bool progressed = false;
  ASSERT_TRUE(conn.progress(&progressed).isOk());
  ASSERT_FALSE(sq.done);
  const std::string reason = "rank 0: timed out waiting for peer rank 3";
  conn.sendAbort(stalledWait(reason, 3));  // gives up on a peer that takes nothing
  EXPECT_TRUE(conn.abortPending());
  stream->queueAbort(kComm, "rank 1: timed out waiting for peer rank 2");
  EXPECT_EQ(conn.listenAfterFailure(), Connection::Word::kHeard);
  stream->takeWrites(-1);  // the peer listens, and reads again
  EXPECT_EQ(conn.listenAfterFailure(), Connection::Word::kHeard);
  EXPECT_FALSE(conn.abortPending());
  const std::string& out = stream->written();
  ASSERT_EQ(out.size(), 2 * sizeof(FrameHeader) + data.size() + reason.size());
  FrameHeader h{};
  memcpy(&h, out.data() + sizeof(FrameHeader) + data.size(), sizeof(h));
  EXPECT_EQ(h.magic, kAbortMagic);
  EXPECT_EQ(out.substr(out.size() - reason.size()), reason);
}

// A garbled frame while listening is a word too: the peer is not silent, and the connection
// fails saying what came.
TEST(StreamConnection, ListeningAfterAFailureTakesAGarbledFrameAsAWord) {
  int reads = 0;
  auto owned = std::make_unique<ScriptedStream>(&reads);
  FrameHeader junk{};
  junk.magic = 0x1234;
  owned->queue(&junk, sizeof(junk));
  std::vector<std::unique_ptr<ByteStream>> streams;
  streams.push_back(std::move(owned));
  StreamConnection conn(1, kComm, std::move(streams), StreamOptions{});
  EXPECT_EQ(conn.listenAfterFailure(), Connection::Word::kHeard);
  bool progressed = false;
  EXPECT_FALSE(conn.progress(&progressed).isOk());
}

// A link that times out while this rank listens is no word from the peer: it is lost (dead or
// cut off), and named so, not taken as the peer's report. An abort read first stays the word.
TEST(StreamConnection, ALinkLostWhileListeningIsLostNotHeard) {
  int reads = 0;
  auto owned = std::make_unique<ScriptedStream>(&reads);
  ScriptedStream* stream = owned.get();
  std::vector<std::unique_ptr<ByteStream>> streams;
  streams.push_back(std::move(owned));
  StreamConnection conn(1, kComm, std::move(streams), StreamOptions{});
  EXPECT_EQ(conn.listenAfterFailure(), Connection::Word::kNothing);
  stream->failReads(ETIMEDOUT);
  EXPECT_EQ(conn.listenAfterFailure(), Connection::Word::kLost);
  EXPECT_EQ(conn.listenAfterFailure(), Connection::Word::kLost);

  int reads2 = 0;
  auto owned2 = std::make_unique<ScriptedStream>(&reads2);
  owned2->queueAbort(kComm, "rank 1: timed out waiting for peer rank 2");
  owned2->failReads(ECONNRESET);
  std::vector<std::unique_ptr<ByteStream>> streams2;
  streams2.push_back(std::move(owned2));
  StreamConnection told(1, kComm, std::move(streams2), StreamOptions{});
  EXPECT_EQ(told.listenAfterFailure(), Connection::Word::kHeard);
  EXPECT_EQ(told.listenAfterFailure(), Connection::Word::kHeard);
}

// Two connections joined back to back: what one writes, the other reads.
struct Pair {
  int reads[2] = {0, 0};
  ScriptedStream* out;
  ScriptedStream* in;
  std::unique_ptr<StreamConnection> sender, receiver;
  Pair() {
    auto a = std::make_unique<ScriptedStream>(&reads[0]);
    auto b = std::make_unique<ScriptedStream>(&reads[1]);
    out = a.get();
    in = b.get();
    std::vector<std::unique_ptr<ByteStream>> sa, sb;
    sa.push_back(std::move(a));
    sb.push_back(std::move(b));
    sender = std::make_unique<StreamConnection>(1, kComm, std::move(sa), StreamOptions{});
    receiver = std::make_unique<StreamConnection>(0, kComm, std::move(sb), StreamOptions{});
  }
  // Sends failure's abort and returns the error it gives the receiver, waiting on a receive.
  Status abortWith(const Status& failure) {
    sender->sendAbort(failure);
    in->queue(out->written().data(), out->written().size());
    char buf[8];
    Request rr;
    EXPECT_TRUE(receiver->irecv(buf, sizeof(buf), stepTag(0), &rr).isOk());
    bool progressed = false;
    return receiver->progress(&progressed);
  }
};

// The peer a wait stalled on travels in the abort's header, not in its text: the receiver's
// error names it, so the communicator listens for a stuck peer without reading the message.
TEST(StreamConnection, AnAbortCarriesThePeerTheFailedWaitStalledOn) {
  Pair p;
  const Status st = p.abortWith(stalledWait("rank 0: allreduce stalled", 3).withContext("op #2"));
  EXPECT_EQ(st.code(), collieRemoteError) << st.toString();
  EXPECT_EQ(st.stalledOn(), 3) << st.toString();
  EXPECT_NE(st.message().find("peer rank 0 aborted: op #2: rank 0: allreduce stalled"),
            std::string::npos)
      << st.message();
}

TEST(StreamConnection, AnAbortOfAFailureThatIsNoStalledWaitNamesNoPeer) {
  Pair p;
  const Status st =
      p.abortWith(remoteError("rank 0 lost peer rank 2: timed out waiting for "
                              "peer rank 2, as the text says"));
  EXPECT_EQ(st.code(), collieRemoteError) << st.toString();
  EXPECT_EQ(st.stalledOn(), -1) << st.toString();
}

// A peer's abort that names a stalled peer, passed on in this rank's own abort, names it again.
TEST(StreamConnection, AnAbortPassedOnKeepsTheStalledPeer) {
  Pair first;
  const Status heard = first.abortWith(stalledWait("timed out", 5));
  Pair second;
  const Status st = second.abortWith(heard.withContext("allreduce on rank 0"));
  EXPECT_EQ(st.stalledOn(), 5) << st.toString();
}

TEST(StreamConnection, WithNothingPostedEveryStreamIsReadAtOnce) {
  int reads[2] = {0, 0};
  auto first = std::make_unique<ScriptedStream>(&reads[0]);
  auto second = std::make_unique<ScriptedStream>(&reads[1]);
  FrameHeader h = encodeFrame(kComm, stepTag(1), 4);
  second->queue(&h, sizeof(h));
  std::vector<std::unique_ptr<ByteStream>> streams;
  streams.push_back(std::move(first));
  streams.push_back(std::move(second));
  StreamConnection conn(1, kComm, std::move(streams), StreamOptions{});
  bool progressed = false;
  ASSERT_TRUE(conn.progress(&progressed).isOk());
  EXPECT_EQ(reads[0], 1);
  EXPECT_EQ(reads[1], 1);
  EXPECT_TRUE(progressed);
}

TEST(StreamConnection, AFrameOnAStreamItsReceiveIsPostedOnLaterIsReadThen) {
  int reads[2] = {0, 0};
  auto first = std::make_unique<ScriptedStream>(&reads[0]);
  auto second = std::make_unique<ScriptedStream>(&reads[1]);
  // Two small messages, one per stream in round-robin order, both already there.
  const char a[4] = {'a', 'b', 'c', 'd'}, b[4] = {'w', 'x', 'y', 'z'};
  FrameHeader ha = encodeFrame(kComm, stepTag(0), sizeof(a)),
              hb = encodeFrame(kComm, stepTag(1), 4);
  first->queue(&ha, sizeof(ha));
  first->queue(a, sizeof(a));
  second->queue(&hb, sizeof(hb));
  second->queue(b, sizeof(b));
  std::vector<std::unique_ptr<ByteStream>> streams;
  streams.push_back(std::move(first));
  streams.push_back(std::move(second));
  StreamConnection conn(1, kComm, std::move(streams), StreamOptions{});

  char got[2][4] = {};
  Request r0, r1;
  ASSERT_TRUE(conn.irecv(got[0], 4, stepTag(0), &r0).isOk());
  bool progressed = false;
  ASSERT_TRUE(conn.progress(&progressed).isOk());
  EXPECT_TRUE(r0.done);
  ASSERT_TRUE(conn.irecv(got[1], 4, stepTag(1), &r1).isOk());
  ASSERT_TRUE(conn.progress(&progressed).isOk());
  EXPECT_TRUE(r1.done);
  EXPECT_EQ(memcmp(got[0], a, 4), 0);
  EXPECT_EQ(memcmp(got[1], b, 4), 0);
}

}  // namespace
}  // namespace collie
