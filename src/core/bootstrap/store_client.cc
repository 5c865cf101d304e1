// TcpStore: the client of a StoreServer, one request and one reply at a time.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "src/core/bootstrap/store.h"
#include "src/core/bootstrap/store_wire.h"

namespace collie {

namespace wire = store_wire;

TcpStore::~TcpStore() {
  if (fd_ >= 0) close(fd_);
}

StatusOr<std::unique_ptr<TcpStore>> TcpStore::connect(const SockAddr& server, const StoreAuth& auth,
                                                      const Deadline& deadline) {
  auto fd = connectWithRetry(server, deadline);
  if (!fd.isOk()) return fd.status().withContext("store at " + server.toString());
  return greet(fd.value(), server, auth, deadline);
}

StatusOr<std::unique_ptr<TcpStore>> TcpStore::greet(int fd, const SockAddr& server,
                                                    const StoreAuth& auth,
                                                    const Deadline& deadline) {
  std::unique_ptr<TcpStore> s(new TcpStore());
  s->server_ = server;
  s->fd_ = fd;
  tuneSocket(s->fd_, 0, 0);
  wire::StoreHello h{wire::kHelloMagic, wire::kVersion, {}, auth.commId};
  memcpy(h.secret, auth.secret, 16);
  COLLIE_RETURN_IF_ERROR(writeFull(s->fd_, &h, sizeof(h), deadline));
  uint32_t ack = 0;
  Status st = readFull(s->fd_, &ack, sizeof(ack), deadline);
  if (!st.isOk() || ack != wire::kAckMagic)
    return remoteError("store at " + server.toString() +
                       " refused this rank (wrong unique id or MASTER_ADDR/MASTER_PORT, or "
                       "another job owns the port): " +
                       st.message());
  return s;
}

StatusOr<std::unique_ptr<TcpStore>> TcpStore::connectAny(const std::vector<SockAddr>& choices,
                                                         const StoreAuth& auth,
                                                         const Deadline& deadline) {
  if (choices.size() == 1) return connect(choices[0], auth, deadline);
  // Round after round over the choices: a port that refuses, or whose listener does not answer
  // this job's hello in time (another program, another job), is passed over until the next round.
  std::string last;
  for (int round = 0;; ++round) {
    for (const SockAddr& a : choices) {
      auto fd = connectWithRetry(a, Deadline::afterMs(std::min(deadline.remainingMs(), 20)));
      if (!fd.isOk()) {
        last = a.toString() + ": " + fd.status().message();
        continue;
      }
      auto s =
          greet(fd.value(), a, auth, Deadline::afterMs(std::min(deadline.remainingMs(), 2000)));
      if (s.isOk()) return s;
      last = s.status().message();
    }
    if (deadline.expired())
      return timeoutError("no store of this job answered on any of its " +
                          std::to_string(choices.size()) + " ports (" + choices.front().toString() +
                          " and on) before the deadline; the last: " + last);
    std::this_thread::sleep_for(std::chrono::milliseconds(round < 10 ? 10 : 100));
  }
}

namespace {
std::atomic<uint64_t> gRequests{0};
}  // namespace

uint64_t TcpStore::requestsSent() { return gRequests.load(std::memory_order_relaxed); }

StatusOr<std::string> TcpStore::call(uint8_t cmd, const std::string& key, const std::string& value,
                                     int64_t arg, const Deadline& deadline, uint8_t* replyCode) {
  std::lock_guard<std::mutex> l(mu_);
  gRequests.fetch_add(1, std::memory_order_relaxed);
  if (fd_ < 0) return remoteError("store connection is closed after an earlier error");
  wire::ReqHdr h{wire::kReqMagic,
                 cmd,
                 {0, 0, 0},
                 static_cast<uint32_t>(key.size()),
                 static_cast<uint32_t>(value.size()),
                 arg};
  std::string msg(reinterpret_cast<const char*>(&h), sizeof(h));
  msg += key;
  msg += value;
  Status st = writeFull(fd_, msg.data(), msg.size(), deadline);
  wire::RepHdr r{};
  if (st.isOk()) st = readFull(fd_, &r, sizeof(r), deadline);
  if (st.isOk() && (r.magic != wire::kRepMagic || r.len > wire::kMaxValue))
    st = remoteError("garbled reply");
  std::string payload(st.isOk() ? r.len : 0, '\0');
  if (st.isOk() && r.len > 0) st = readFull(fd_, &payload[0], r.len, deadline);
  if (!st.isOk()) {
    // The stream may hold half a reply now: never reuse it.
    close(fd_);
    fd_ = -1;
    // A store that goes away is a remote failure (its rank gave up or died), not ours.
    if (st.code() == collieSystemError) st = remoteError("lost the store: " + st.message());
    return st.withContext("store at " + server_.toString());
  }
  *replyCode = r.code;
  if (cmd == wire::kAdd || cmd == wire::kCheck) payload = std::to_string(r.num) + "\n" + payload;
  return payload;
}

Status TcpStore::set(const std::string& key, const std::string& value) {
  uint8_t code = 0;
  return call(wire::kSet, key, value, 0, Deadline::afterMs(requestMs_), &code).status();
}

StatusOr<std::string> TcpStore::get(const std::string& key, const Deadline& deadline) {
  uint8_t code = 0;
  int64_t ms = deadline.remainingMs();
  // The server answers "not found" at the deadline; allow it a little longer to say so.
  auto r = call(wire::kGet, key, "", ms, Deadline::afterMs(ms + 5000), &code);
  if (!r.isOk()) return r.status();
  if (code != wire::kOk) return timeoutError("store: key '" + key + "' never appeared");
  return r;
}

StatusOr<int64_t> TcpStore::add(const std::string& key, int64_t delta) {
  uint8_t code = 0;
  auto r = call(wire::kAdd, key, "", delta, Deadline::afterMs(requestMs_), &code);
  if (!r.isOk()) return r.status();
  return static_cast<int64_t>(strtoll(r.value().c_str(), nullptr, 10));
}

Status TcpStore::wait(const std::vector<std::string>& keys, const Deadline& deadline,
                      std::vector<std::string>* missing) {
  // Polls with CHECK (backing off to 50 ms) rather than blocking in GETs: the client then always
  // knows which keys are still missing, even if the server is gone by the deadline.
  std::vector<std::string> miss = keys;
  int sleepMs = 1;
  for (;;) {
    uint8_t code = 0;
    // A look answers at once from a live store: it may take until the wait's deadline, and
    // no longer than any request.
    auto c = call(
        wire::kCheck, wire::joinLines(miss), "", 0,
        Deadline::afterMs(std::min(requestMs_, std::max<int64_t>(deadline.remainingMs(), 100))),
        &code);
    if (!c.isOk()) {
      if (missing) *missing = miss;
      return c.status();
    }
    const std::string& s = c.value();
    miss = wire::splitLines(s.substr(s.find('\n') + 1));
    if (miss.empty()) return Status::ok();
    if (deadline.expired()) {
      if (missing) *missing = miss;
      return timeoutError("store: " + std::to_string(miss.size()) + " keys never appeared");
    }
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min(sleepMs, deadline.remainingMs())));
    sleepMs = std::min(sleepMs * 2, 50);
  }
}

}  // namespace collie
