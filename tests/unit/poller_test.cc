// The Poller's wait: a request that completes in the round where another connection fails is
// done, and the failure ends the next wait that needs that connection.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transports/transport.h"

namespace collie {
namespace {

// A connection that completes its one posted receive on its first progress call, or that
// fails on every call (its peer aborted).
class FakeConnection : public Connection {
 public:
  FakeConnection(int peer, bool fails) : peer_(peer), fails_(fails) {}
  int peer() const override { return peer_; }
  Status isend(const void*, size_t, const FrameTag&, Request*) override {
    return internalError("not used");
  }
  Status irecv(void*, size_t bytes, const FrameTag& tag, Request* req) override {
    req->peer = peer_;
    req->bytes = bytes;
    req->tag = tag;
    posted_ = req;
    return Status::ok();
  }
  Status progress(bool* progressed) override {
    ++calls;
    if (fails_)
      return remoteError("peer rank " + std::to_string(peer_) + " aborted: a later op failed");
    if (posted_ != nullptr) {
      posted_->done = true;
      posted_ = nullptr;
      *progressed = true;
    }
    return Status::ok();
  }
  void appendPollFds(std::vector<struct pollfd>*) const override {}
  void sendAbort(const Status&) override {}
  bool hasPending() const override { return fails_ || posted_ != nullptr; }
  int calls = 0;

 private:
  int peer_;
  bool fails_;
  Request* posted_ = nullptr;
};

TEST(Poller, ARequestDoneInTheRoundAnotherConnectionFailsIsDone) {
  for (bool failingFirst : {true, false}) {
    SCOPED_TRACE(failingFirst ? "the failing connection first" : "the failing connection last");
    FakeConnection good(1, false), bad(2, true);
    std::vector<Connection*> conns = failingFirst ? std::vector<Connection*>{&bad, &good}
                                                  : std::vector<Connection*>{&good, &bad};
    Poller poller(conns, 0, nullptr);
    Request req;
    char byte = 0;
    ASSERT_TRUE(good.irecv(&byte, 1, FrameTag{}, &req).isOk());
    Status st = poller.wait(&req, Deadline::afterMs(5000), "test op");
    EXPECT_TRUE(st.isOk()) << st.message();
    EXPECT_TRUE(req.done);
    EXPECT_GE(bad.calls, 1);

    // The failure is not lost: the next wait on the failed peer returns it.
    Request never;
    never.peer = 2;
    st = poller.wait(&never, Deadline::afterMs(5000), "test op");
    EXPECT_EQ(st.code(), collieRemoteError);
    EXPECT_NE(st.message().find("peer rank 2 aborted"), std::string::npos) << st.message();
  }
}

TEST(Poller, AFailureEndsTheWaitOfARequestThatIsNotDone) {
  FakeConnection good(1, false), bad(2, true);
  Poller poller({&good, &bad}, 0, nullptr);
  Request req;
  req.peer = 1;  // posted nowhere: never completes
  Status st = poller.wait(&req, Deadline::afterMs(5000), "test op");
  EXPECT_EQ(st.code(), collieRemoteError) << st.message();
}

}  // namespace
}  // namespace collie
