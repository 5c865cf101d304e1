// StoreServer: one thread polls the listener and the clients, and answers their requests.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <future>
#include <thread>

#include "src/base/log.h"
#include "src/core/bootstrap/live_servers.h"
#include "src/core/bootstrap/store.h"
#include "src/core/bootstrap/store_wire.h"

namespace collie {

namespace wire = store_wire;

namespace {

constexpr int kHelloTimeoutMs = 10000;

}  // namespace

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
  std::vector<char> recvBuf = std::vector<char>(65536);

  static void reply(Client& c, uint8_t code, const std::string& payload, int64_t num) {
    wire::RepHdr h{wire::kRepMagic, code, {0, 0, 0}, payload.size(), num};
    c.out.append(reinterpret_cast<const char*>(&h), sizeof(h));
    c.out += payload;
  }
  Client* find(int fd) {
    for (auto& c : clients)
      if (c.fd == fd) return &c;
    return nullptr;
  }
  void wakeWaiters(const std::string& key);
  // Each of these returns false where the client must go (a stranger, garbage, a lost peer).
  bool checkHello(Client& c, std::string* why);
  bool handle(Client& c, std::string* why);
  bool handleRequest(Client& c, const wire::ReqHdr& h, const std::string& key,
                     const std::string& val, std::string* why);
  bool receive(Client& c);
  bool flush(Client& c);
  bool serveClient(Client& c, short revents, Clock::time_point now);
  // The steps of one round of the server's loop.
  void pollSet(int wakeFd, int listenFd, std::vector<pollfd>* pf) const;
  int sleepMs() const;
  void acceptClients(int listenFd);
  void serveRound(const std::vector<pollfd>& pf);
  void expireWaiters(Clock::time_point now);
  void dropClients(const std::vector<int>& dead);
};

// ---- Requests ---------------------------------------------------------------------------------

bool StoreServer::Impl::checkHello(Client& c, std::string* why) {
  if (c.in.size() < sizeof(wire::StoreHello)) return true;
  wire::StoreHello h;
  memcpy(&h, c.in.data(), sizeof(h));
  uint8_t diff = 0;
  for (int i = 0; i < 16; ++i) diff |= h.secret[i] ^ auth.secret[i];
  if (h.magic != wire::kHelloMagic || h.version != wire::kVersion) {
    *why = "not a Collie store hello (garbage or another protocol)";
    return false;
  }
  if (diff != 0 || h.commId != auth.commId) {
    *why = "wrong secret or communicator id";
    return false;
  }
  c.authed = true;
  c.in.erase(0, sizeof(h));
  uint32_t ack = wire::kAckMagic;
  c.out.append(reinterpret_cast<const char*>(&ack), sizeof(ack));
  return true;
}

// Parses what arrived: the hello first, then every whole request.
bool StoreServer::Impl::handle(Client& c, std::string* why) {
  if (!c.authed) {
    if (!checkHello(c, why)) return false;
    if (!c.authed) return true;  // the rest of the hello is still on its way
  }
  while (c.in.size() >= sizeof(wire::ReqHdr)) {
    wire::ReqHdr h;
    memcpy(&h, c.in.data(), sizeof(h));
    if (h.magic != wire::kReqMagic || h.keyLen > wire::kMaxKey * 64 || h.valLen > wire::kMaxValue) {
      *why = "garbled request";
      return false;
    }
    size_t need = sizeof(h) + h.keyLen + h.valLen;
    if (c.in.size() < need) return true;
    std::string key = c.in.substr(sizeof(h), h.keyLen);
    std::string val = c.in.substr(sizeof(h) + h.keyLen, h.valLen);
    c.in.erase(0, need);
    if (!handleRequest(c, h, key, val, why)) return false;
  }
  return true;
}

bool StoreServer::Impl::handleRequest(Client& c, const wire::ReqHdr& h, const std::string& key,
                                      const std::string& val, std::string* why) {
  switch (h.cmd) {
    case wire::kSet:
      data[key] = val;
      reply(c, wire::kOk, "", 0);
      wakeWaiters(key);
      return true;
    case wire::kGet: {
      auto it = data.find(key);
      if (it != data.end()) {
        reply(c, wire::kOk, it->second, 0);
      } else {
        int64_t ms = std::max<int64_t>(0, std::min<int64_t>(h.arg, 1LL << 40));
        waiters.push_back(Waiter{c.fd, key, Clock::now() + std::chrono::milliseconds(ms)});
      }
      return true;
    }
    case wire::kAdd: {
      int64_t v = data.count(key) ? strtoll(data[key].c_str(), nullptr, 10) : 0;
      // A counter past int64 has no value to answer with: that client goes.
      if (__builtin_add_overflow(v, h.arg, &v)) {
        *why = "add overflows the counter '" + key.substr(0, 64) + "'";
        return false;
      }
      data[key] = std::to_string(v);
      reply(c, wire::kOk, "", v);
      wakeWaiters(key);
      return true;
    }
    case wire::kCheck: {
      std::vector<std::string> missing;
      for (const auto& k : wire::splitLines(key))
        if (!data.count(k)) missing.push_back(k);
      reply(c, wire::kOk, wire::joinLines(missing), static_cast<int64_t>(missing.size()));
      return true;
    }
    default:
      *why = "unknown request";
      return false;
  }
}

void StoreServer::Impl::wakeWaiters(const std::string& key) {
  for (size_t i = waiters.size(); i-- > 0;) {
    if (waiters[i].key != key) continue;
    if (Client* c = find(waiters[i].fd)) reply(*c, wire::kOk, data[key], 0);
    waiters.erase(waiters.begin() + i);
  }
}

// ---- The loop's steps -------------------------------------------------------------------------

void StoreServer::Impl::pollSet(int wakeFd, int listenFd, std::vector<pollfd>* pf) const {
  pf->clear();
  pf->push_back({wakeFd, POLLIN, 0});
  pf->push_back({listenFd, POLLIN, 0});
  for (auto& c : clients)
    pf->push_back({c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
}

// Sleep until the next waiter or hello deadline, at most 1 s.
int StoreServer::Impl::sleepMs() const {
  auto now = Clock::now();
  auto next = now + std::chrono::seconds(1);
  for (auto& w : waiters) next = std::min(next, w.until);
  for (auto& c : clients)
    if (!c.authed) next = std::min(next, c.helloBy);
  return static_cast<int>(std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1));
}

void StoreServer::Impl::acceptClients(int listenFd) {
  for (;;) {
    int fd = accept4(listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    SockAddr a;
    a.len = sizeof(a.ss);
    getpeername(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len);
    tuneSocket(fd, 0, 0);
    clients.push_back(Client{fd, a.toString(), false, "", "",
                             Clock::now() + std::chrono::milliseconds(kHelloTimeoutMs)});
  }
}

bool StoreServer::Impl::receive(Client& c) {
  ssize_t r = recv(c.fd, recvBuf.data(), recvBuf.size(), 0);
  if (r > 0) {
    c.in.append(recvBuf.data(), static_cast<size_t>(r));
    std::string why;
    if (handle(c, &why)) return true;
    COLLIE_WARN_LIMITED(kLogStore, "store: dropped a connection from %s: %s", c.peer.c_str(),
                        why.c_str());
    return false;
  }
  if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
    if (!c.authed)
      COLLIE_WARN_LIMITED(kLogStore, "store: dropped a connection from %s: closed before a hello",
                          c.peer.c_str());
    return false;
  }
  return true;
}

// Sends what the socket takes now.
bool StoreServer::Impl::flush(Client& c) {
  if (c.out.empty()) return true;
  ssize_t w = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w > 0) c.out.erase(0, static_cast<size_t>(w));
  return w >= 0 || errno == EAGAIN || errno == EINTR;
}

bool StoreServer::Impl::serveClient(Client& c, short revents, Clock::time_point now) {
  if ((revents & (POLLIN | POLLHUP | POLLERR)) && !receive(c)) return false;
  if (!c.authed && now >= c.helloBy) {
    COLLIE_WARN_LIMITED(kLogStore, "store: dropped a connection from %s: no hello within %d ms",
                        c.peer.c_str(), kHelloTimeoutMs);
    return false;
  }
  return flush(c);
}

// A get whose deadline passed is answered "not found".
void StoreServer::Impl::expireWaiters(Clock::time_point now) {
  for (size_t i = waiters.size(); i-- > 0;) {
    if (now < waiters[i].until) continue;
    if (Client* c = find(waiters[i].fd)) reply(*c, wire::kNotFound, "", 0);
    waiters.erase(waiters.begin() + i);
  }
}

void StoreServer::Impl::dropClients(const std::vector<int>& dead) {
  for (int fd : dead) {
    close(fd);
    clients.erase(std::remove_if(clients.begin(), clients.end(),
                                 [fd](const Client& c) { return c.fd == fd; }),
                  clients.end());
    waiters.erase(std::remove_if(waiters.begin(), waiters.end(),
                                 [fd](const Waiter& w) { return w.fd == fd; }),
                  waiters.end());
  }
}

// Serves the clients polled in pf (those accepted since wait for the next round).
void StoreServer::Impl::serveRound(const std::vector<pollfd>& pf) {
  const auto now = Clock::now();
  std::vector<int> dead;
  for (size_t i = 2; i < pf.size(); ++i) {
    Client* c = find(pf[i].fd);
    if (c != nullptr && !serveClient(*c, pf[i].revents, now)) dead.push_back(c->fd);
  }
  expireWaiters(now);
  dropClients(dead);
  // Replies queued by this round go out now rather than after the next poll.
  for (auto& c : clients) flush(c);
}

// ---- StoreServer ------------------------------------------------------------------------------

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
  rememberServer(s->addr_.port(), auth.commId);
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
  return serverIsLive(port, commId);
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
  for (;;) {
    m.pollSet(wakeFd_, listenFd_, &pf);
    const int ms = m.sleepMs();
    work.unlock();
    const int rc = poll(pf.data(), pf.size(), ms);
    const int err = errno;
    work.lock();
    if (rc < 0 && err != EINTR) break;
    if (pf[0].revents & POLLIN) break;  // stop() woke the thread
    if (pf[1].revents & POLLIN) m.acceptClients(listenFd_);
    m.serveRound(pf);
  }
}

}  // namespace collie
