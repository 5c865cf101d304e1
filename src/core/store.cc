// The Store: HashStore, the TCP store server and its client.
#include "src/core/store.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <thread>

#include "src/base/log.h"

namespace collie {

namespace {

constexpr uint32_t kStoreHelloMagic = 0x434c5348;  // "CLSH"
constexpr uint32_t kStoreAckMagic = 0x434c5341;    // "CLSA"
constexpr uint32_t kStoreReqMagic = 0x434c5352;    // "CLSR"
constexpr uint32_t kStoreRepMagic = 0x434c5350;    // "CLSP"
constexpr uint32_t kStoreVersion = 1;
constexpr size_t kMaxKey = 4096;
constexpr size_t kMaxValue = 16 << 20;
constexpr int kHelloTimeoutMs = 10000;

enum Cmd : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4 };

// A process that made a unique id and then forks its ranks (a launcher, a test) must not fork
// while a server thread is inside the allocator or a lock: the child would inherit that lock
// held forever. Server threads hold this mutex whenever they are not asleep in poll(), and
// fork() takes it first, so a child always sees the servers between two rounds.
std::mutex& serverWorkMu() {
  static std::mutex mu;
  return mu;
}

void guardForks() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork([] { serverWorkMu().lock(); }, [] { serverWorkMu().unlock(); },
                   [] { serverWorkMu().unlock(); });
  });
}
// The servers of this process, by the port they serve on and their job (commId): where a
// communicator is made twice from one environment, its second store would find the port taken
// by the first one's. Never destroyed: servers that static objects hold stop at exit, after
// statics made later than those objects are gone.
std::mutex& liveServersMu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<std::pair<int, uint64_t>>& liveServers() {
  static auto* live = new std::vector<std::pair<int, uint64_t>>;
  return *live;
}
void forgetServer(int port, uint64_t commId) {
  std::lock_guard<std::mutex> l(liveServersMu());
  auto& live = liveServers();
  auto it = std::find(live.begin(), live.end(), std::make_pair(port, commId));
  if (it != live.end()) live.erase(it);
}

enum Code : uint8_t { kOk = 0, kNotFound = 1 };

struct StoreHello {
  uint32_t magic, version;
  uint8_t secret[16];
  uint64_t commId;
};
struct ReqHdr {
  uint32_t magic;
  uint8_t cmd, pad[3];
  uint32_t keyLen, valLen;
  int64_t arg;
};
struct RepHdr {
  uint32_t magic;
  uint8_t code, pad[3];
  uint64_t len;
  int64_t num;
};
static_assert(sizeof(StoreHello) == 32 && sizeof(ReqHdr) == 24 && sizeof(RepHdr) == 24, "wire");

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t e = s.find('\n', pos);
    if (e == std::string::npos) e = s.size();
    out.push_back(s.substr(pos, e - pos));
    pos = e + 1;
  }
  return out;
}

std::string joinLines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& k : v) s += (s.empty() ? "" : "\n") + k;
  return s;
}

}  // namespace

// ---- HashStore ----------------------------------------------------------------------------

Status HashStore::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> l(mu_);
  data_[key] = value;
  cv_.notify_all();
  return Status::ok();
}

StatusOr<std::string> HashStore::get(const std::string& key, const Deadline& deadline) {
  std::unique_lock<std::mutex> l(mu_);
  while (data_.count(key) == 0) {
    if (deadline.expired()) return timeoutError("store: key '" + key + "' never appeared");
    cv_.wait_for(l, std::chrono::milliseconds(deadline.remainingMs(100)));
  }
  return data_[key];
}

StatusOr<int64_t> HashStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> l(mu_);
  int64_t v = data_.count(key) ? strtoll(data_[key].c_str(), nullptr, 10) : 0;
  v += delta;
  data_[key] = std::to_string(v);
  cv_.notify_all();
  return v;
}

Status HashStore::wait(const std::vector<std::string>& keys, const Deadline& deadline,
                       std::vector<std::string>* missing) {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    std::vector<std::string> miss;
    for (const auto& k : keys)
      if (!data_.count(k)) miss.push_back(k);
    if (miss.empty()) return Status::ok();
    if (deadline.expired()) {
      if (missing) *missing = miss;
      return timeoutError("store: " + std::to_string(miss.size()) + " keys never appeared");
    }
    cv_.wait_for(l, std::chrono::milliseconds(deadline.remainingMs(100)));
  }
}

// ---- StoreServer --------------------------------------------------------------------------

struct StoreServer::Impl {
  struct Client {
    int fd;
    std::string peer;
    bool authed = false;
    std::string in, out;
    Clock::time_point helloBy;
  };
  struct Waiter {
    int fd;
    std::string key;
    Clock::time_point until;
  };
  StoreAuth auth;
  std::vector<Client> clients;
  std::vector<Waiter> waiters;
  std::map<std::string, std::string> data;
  bool stopping = false;

  static void reply(Client& c, uint8_t code, const std::string& payload, int64_t num) {
    RepHdr h{kStoreRepMagic, code, {0, 0, 0}, payload.size(), num};
    c.out.append(reinterpret_cast<const char*>(&h), sizeof(h));
    c.out += payload;
  }
  Client* find(int fd) {
    for (auto& c : clients)
      if (c.fd == fd) return &c;
    return nullptr;
  }
  // Parses what arrived; false means drop the client (a stranger or garbage).
  bool handle(Client& c, std::string* why);
  bool handleRequest(Client& c, const ReqHdr& h, const std::string& key, const std::string& val);
  void wakeWaiters(const std::string& key);
};

bool StoreServer::Impl::handle(Client& c, std::string* why) {
  if (!c.authed) {
    if (c.in.size() < sizeof(StoreHello)) return true;
    StoreHello h;
    memcpy(&h, c.in.data(), sizeof(h));
    uint8_t diff = 0;
    for (int i = 0; i < 16; ++i) diff |= h.secret[i] ^ auth.secret[i];
    if (h.magic != kStoreHelloMagic || h.version != kStoreVersion) {
      *why = "not a Collie store hello (garbage or another protocol)";
      return false;
    }
    if (diff != 0 || h.commId != auth.commId) {
      *why = "wrong secret or communicator id";
      return false;
    }
    c.authed = true;
    c.in.erase(0, sizeof(h));
    uint32_t ack = kStoreAckMagic;
    c.out.append(reinterpret_cast<const char*>(&ack), sizeof(ack));
  }
  while (c.in.size() >= sizeof(ReqHdr)) {
    ReqHdr h;
    memcpy(&h, c.in.data(), sizeof(h));
    if (h.magic != kStoreReqMagic || h.keyLen > kMaxKey * 64 || h.valLen > kMaxValue) {
      *why = "garbled request";
      return false;
    }
    size_t need = sizeof(h) + h.keyLen + h.valLen;
    if (c.in.size() < need) return true;
    std::string key = c.in.substr(sizeof(h), h.keyLen);
    std::string val = c.in.substr(sizeof(h) + h.keyLen, h.valLen);
    c.in.erase(0, need);
    if (!handleRequest(c, h, key, val)) {
      *why = "unknown request";
      return false;
    }
  }
  return true;
}

bool StoreServer::Impl::handleRequest(Client& c, const ReqHdr& h, const std::string& key,
                                      const std::string& val) {
  switch (h.cmd) {
    case kSet:
      data[key] = val;
      reply(c, kOk, "", 0);
      wakeWaiters(key);
      return true;
    case kGet: {
      auto it = data.find(key);
      if (it != data.end()) {
        reply(c, kOk, it->second, 0);
      } else {
        int64_t ms = std::max<int64_t>(0, std::min<int64_t>(h.arg, 1LL << 40));
        waiters.push_back(Waiter{c.fd, key, Clock::now() + std::chrono::milliseconds(ms)});
      }
      return true;
    }
    case kAdd: {
      int64_t v = data.count(key) ? strtoll(data[key].c_str(), nullptr, 10) : 0;
      v += h.arg;
      data[key] = std::to_string(v);
      reply(c, kOk, "", v);
      wakeWaiters(key);
      return true;
    }
    case kCheck: {
      std::vector<std::string> missing;
      for (const auto& k : splitLines(key))
        if (!data.count(k)) missing.push_back(k);
      reply(c, kOk, joinLines(missing), static_cast<int64_t>(missing.size()));
      return true;
    }
    default:
      return false;
  }
}

void StoreServer::Impl::wakeWaiters(const std::string& key) {
  for (size_t i = waiters.size(); i-- > 0;) {
    if (waiters[i].key != key) continue;
    if (Client* c = find(waiters[i].fd)) reply(*c, kOk, data[key], 0);
    waiters.erase(waiters.begin() + i);
  }
}

StoreServer::~StoreServer() { stop(); }

StatusOr<std::unique_ptr<StoreServer>> StoreServer::start(SockAddr bindAddr,
                                                          const StoreAuth& auth) {
  std::unique_ptr<StoreServer> s(new StoreServer());
  s->impl_.reset(new Impl());
  s->impl_->auth = auth;
  s->addr_ = bindAddr;
  COLLIE_ASSIGN_OR_RETURN(s->listenFd_, listenOn(&s->addr_, 1024));
  s->wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->wakeFd_ < 0) return errnoStatus("eventfd", errno);
  COLLIE_INFO(kLogStore, "store serving on %s", s->addr_.toString().c_str());
  s->ownerPid_ = getpid();
  {
    std::lock_guard<std::mutex> l(liveServersMu());
    liveServers().emplace_back(s->addr_.port(), auth.commId);
  }
  guardForks();
  // Return only once the thread runs its loop, so that a fork right after start() never
  // catches it half-born.
  std::promise<void> running;
  std::future<void> isRunning = running.get_future();
  StoreServer* raw = s.get();
  s->thread_ = std::thread([raw, &running] { raw->loop(&running); });
  isRunning.wait();
  return s;
}

bool StoreServer::ownedByThisProcess() const { return ownerPid_ == getpid(); }

bool StoreServer::servesInThisProcess(int port, uint64_t commId) {
  std::lock_guard<std::mutex> l(liveServersMu());
  const auto& live = liveServers();
  return std::find(live.begin(), live.end(), std::make_pair(port, commId)) != live.end();
}

void StoreServer::stop() {
  if (impl_ && ownerPid_ >= 0) forgetServer(addr_.port(), impl_->auth.commId);
  if (thread_.joinable() && !ownedByThisProcess()) {
    // A forked copy: the thread lives in the parent only; leave the parent's sockets alone.
    thread_.detach();
    impl_.reset();
    return;
  }
  if (thread_.joinable()) {
    uint64_t one = 1;
    ssize_t w = write(wakeFd_, &one, sizeof(one));
    (void)w;
    thread_.join();
  }
  if (impl_) {
    for (auto& c : impl_->clients) close(c.fd);
    impl_->clients.clear();
  }
  if (listenFd_ >= 0) close(listenFd_), listenFd_ = -1;
  if (wakeFd_ >= 0) close(wakeFd_), wakeFd_ = -1;
}

void StoreServer::loop(std::promise<void>* running) {
  std::unique_lock<std::mutex> work(serverWorkMu());  // released only around poll()
  running->set_value();
  Impl& m = *impl_;
  std::vector<pollfd> pf;
  std::vector<char> buf(65536);
  for (;;) {
    pf.clear();
    pf.push_back({wakeFd_, POLLIN, 0});
    pf.push_back({listenFd_, POLLIN, 0});
    for (auto& c : m.clients)
      pf.push_back({c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    // Sleep until the next waiter or hello deadline, at most 1 s.
    auto now = Clock::now();
    auto next = now + std::chrono::seconds(1);
    for (auto& w : m.waiters) next = std::min(next, w.until);
    for (auto& c : m.clients)
      if (!c.authed) next = std::min(next, c.helloBy);
    int ms = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1));
    work.unlock();
    int rc = poll(pf.data(), pf.size(), ms);
    work.lock();
    if (rc < 0 && errno != EINTR) break;
    if (pf[0].revents & POLLIN) break;
    if (pf[1].revents & POLLIN) {
      for (;;) {
        int fd = accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        SockAddr a;
        a.len = sizeof(a.ss);
        getpeername(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len);
        tuneSocket(fd, 0, 0);
        m.clients.push_back(
            Impl::Client{fd, a.toString(), false, "", "",
                         Clock::now() + std::chrono::milliseconds(kHelloTimeoutMs)});
      }
    }
    now = Clock::now();
    std::vector<int> dead;
    for (size_t i = 2; i < pf.size(); ++i) {
      Impl::Client* c = m.find(pf[i].fd);
      if (c == nullptr) continue;
      std::string why;
      if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t r = recv(c->fd, buf.data(), buf.size(), 0);
        if (r > 0) {
          c->in.append(buf.data(), static_cast<size_t>(r));
          if (!m.handle(*c, &why)) {
            COLLIE_WARN(kLogStore, "store: dropped a connection from %s: %s", c->peer.c_str(),
                        why.c_str());
            dead.push_back(c->fd);
            continue;
          }
        } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
          if (!c->authed)
            COLLIE_WARN(kLogStore, "store: dropped a connection from %s: closed before a hello",
                        c->peer.c_str());
          dead.push_back(c->fd);
          continue;
        }
      }
      if (!c->authed && now >= c->helloBy) {
        COLLIE_WARN(kLogStore, "store: dropped a connection from %s: no hello within %d ms",
                    c->peer.c_str(), kHelloTimeoutMs);
        dead.push_back(c->fd);
        continue;
      }
      if (!c->out.empty()) {
        ssize_t w = send(c->fd, c->out.data(), c->out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
          c->out.erase(0, static_cast<size_t>(w));
        else if (w < 0 && errno != EAGAIN && errno != EINTR)
          dead.push_back(c->fd);
      }
    }
    for (size_t i = m.waiters.size(); i-- > 0;) {
      if (now < m.waiters[i].until) continue;
      if (Impl::Client* c = m.find(m.waiters[i].fd)) Impl::reply(*c, kNotFound, "", 0);
      m.waiters.erase(m.waiters.begin() + i);
    }
    for (int fd : dead) {
      close(fd);
      m.clients.erase(std::remove_if(m.clients.begin(), m.clients.end(),
                                     [fd](const Impl::Client& c) { return c.fd == fd; }),
                      m.clients.end());
      m.waiters.erase(std::remove_if(m.waiters.begin(), m.waiters.end(),
                                     [fd](const Impl::Waiter& w) { return w.fd == fd; }),
                      m.waiters.end());
    }
    // Replies queued by this round go out now rather than after the next poll.
    for (auto& c : m.clients) {
      if (c.out.empty()) continue;
      ssize_t w = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) c.out.erase(0, static_cast<size_t>(w));
    }
  }
}

// ---- TcpStore (client) ----------------------------------------------------------------------

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
  StoreHello h{kStoreHelloMagic, kStoreVersion, {}, auth.commId};
  memcpy(h.secret, auth.secret, 16);
  COLLIE_RETURN_IF_ERROR(writeFull(s->fd_, &h, sizeof(h), deadline));
  uint32_t ack = 0;
  Status st = readFull(s->fd_, &ack, sizeof(ack), deadline);
  if (!st.isOk() || ack != kStoreAckMagic)
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

StatusOr<std::string> TcpStore::call(uint8_t cmd, const std::string& key, const std::string& value,
                                     int64_t arg, const Deadline& deadline, uint8_t* replyCode) {
  std::lock_guard<std::mutex> l(mu_);
  if (fd_ < 0) return remoteError("store connection is closed after an earlier error");
  ReqHdr h{kStoreReqMagic,
           cmd,
           {0, 0, 0},
           static_cast<uint32_t>(key.size()),
           static_cast<uint32_t>(value.size()),
           arg};
  std::string msg(reinterpret_cast<const char*>(&h), sizeof(h));
  msg += key;
  msg += value;
  Status st = writeFull(fd_, msg.data(), msg.size(), deadline);
  RepHdr r{};
  if (st.isOk()) st = readFull(fd_, &r, sizeof(r), deadline);
  if (st.isOk() && (r.magic != kStoreRepMagic || r.len > kMaxValue))
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
  if (cmd == kAdd || cmd == kCheck) payload = std::to_string(r.num) + "\n" + payload;
  return payload;
}

Status TcpStore::set(const std::string& key, const std::string& value) {
  uint8_t code = 0;
  return call(kSet, key, value, 0, Deadline::afterMs(requestMs_), &code).status();
}

StatusOr<std::string> TcpStore::get(const std::string& key, const Deadline& deadline) {
  uint8_t code = 0;
  int64_t ms = deadline.remainingMs();
  // The server answers "not found" at the deadline; allow it a little longer to say so.
  auto r = call(kGet, key, "", ms, Deadline::afterMs(ms + 5000), &code);
  if (!r.isOk()) return r.status();
  if (code != kOk) return timeoutError("store: key '" + key + "' never appeared");
  return r;
}

StatusOr<int64_t> TcpStore::add(const std::string& key, int64_t delta) {
  uint8_t code = 0;
  auto r = call(kAdd, key, "", delta, Deadline::afterMs(requestMs_), &code);
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
        kCheck, joinLines(miss), "", 0,
        Deadline::afterMs(std::min(requestMs_, std::max<int64_t>(deadline.remainingMs(), 100))),
        &code);
    if (!c.isOk()) {
      if (missing) *missing = miss;
      return c.status();
    }
    const std::string& s = c.value();
    miss = splitLines(s.substr(s.find('\n') + 1));
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
