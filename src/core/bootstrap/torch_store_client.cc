// TorchStoreClient: each query is a one-byte type followed by its fields; a string or byte
// vector is a little-endian uint64 length and the bytes. Replies carry no framing of their own.
#include "src/core/bootstrap/torch_store_client.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>

namespace collie {

namespace {

// c10d's QueryType and CheckResponseType values, as the server numbers them.
constexpr uint8_t kSet = 0;
constexpr uint8_t kGet = 2;
constexpr uint8_t kCheck = 4;
constexpr uint8_t kReady = 0;
constexpr uint8_t kNotReady = 1;
// A value larger than this is not an address: the reply is garbled or from something else.
constexpr uint64_t kMaxValue = 1 << 20;

void appendU64(std::string* msg, uint64_t v) {
  for (int i = 0; i < 8; ++i) msg->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void appendString(std::string* msg, const std::string& s) {
  appendU64(msg, s.size());
  *msg += s;
}

}  // namespace

TorchStoreClient::~TorchStoreClient() {
  if (fd_ >= 0) close(fd_);
}

StatusOr<std::unique_ptr<TorchStoreClient>> TorchStoreClient::connect(const SockAddr& server,
                                                                      const Deadline& deadline) {
  auto fd = connectWithRetry(server, deadline);
  if (!fd.isOk()) return fd.status().withContext("torchrun's agent store at " + server.toString());
  std::unique_ptr<TorchStoreClient> c(new TorchStoreClient());
  c->fd_ = fd.value();
  c->server_ = server;
  tuneSocket(c->fd_, 0, 0);
  return c;
}

Status TorchStoreClient::send(const std::string& msg, const Deadline& deadline) {
  Status st = writeFull(fd_, msg.data(), msg.size(), deadline);
  return st.isOk() ? st : st.withContext("torchrun's agent store at " + server_.toString());
}

Status TorchStoreClient::set(const std::string& key, const std::string& value,
                             const Deadline& deadline) {
  std::string msg(1, static_cast<char>(kSet));
  appendString(&msg, key);
  appendString(&msg, value);
  return send(msg, deadline);
}

StatusOr<bool> TorchStoreClient::exists(const std::string& key, const Deadline& deadline) {
  std::string msg(1, static_cast<char>(kCheck));
  appendU64(&msg, 1);
  appendString(&msg, key);
  COLLIE_RETURN_IF_ERROR(send(msg, deadline));
  uint8_t answer = 0xff;
  Status st = readFull(fd_, &answer, 1, deadline);
  if (!st.isOk()) return st.withContext("torchrun's agent store at " + server_.toString());
  if (answer != kReady && answer != kNotReady)
    return remoteError("torchrun's agent store at " + server_.toString() + " answered CHECK with " +
                       std::to_string(answer) + " (not PyTorch 1.13's TCPStore protocol?)");
  return answer == kReady;
}

StatusOr<std::string> TorchStoreClient::get(const std::string& key, const Deadline& deadline) {
  int sleepMs = 1;
  for (;;) {
    COLLIE_ASSIGN_OR_RETURN(bool ready, exists(key, deadline));
    if (ready) break;
    if (deadline.expired())
      return timeoutError("key '" + key + "' never appeared in torchrun's agent store at " +
                          server_.toString() + " (did rank 0 start?)");
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min(sleepMs, deadline.remainingMs())));
    sleepMs = std::min(sleepMs * 2, 50);
  }
  std::string msg(1, static_cast<char>(kGet));
  appendString(&msg, key);
  COLLIE_RETURN_IF_ERROR(send(msg, deadline));
  unsigned char len[8];
  Status st = readFull(fd_, len, sizeof(len), deadline);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  if (st.isOk() && n > kMaxValue) st = remoteError("garbled reply to GET");
  std::string value(st.isOk() ? n : 0, '\0');
  if (st.isOk() && n > 0) st = readFull(fd_, &value[0], n, deadline);
  if (!st.isOk()) return st.withContext("torchrun's agent store at " + server_.toString());
  return value;
}

Status publishStorePort(const SockAddr& agent, const std::string& key, int port,
                        const Deadline& deadline) {
  COLLIE_ASSIGN_OR_RETURN(std::unique_ptr<TorchStoreClient> c,
                          TorchStoreClient::connect(agent, deadline));
  COLLIE_RETURN_IF_ERROR(c->set(key, std::to_string(port), deadline));
  // The agent's server takes a SET without a reply: a CHECK answered after it proves it arrived.
  COLLIE_ASSIGN_OR_RETURN(std::string echo, c->get(key, deadline));
  if (echo != std::to_string(port))
    return remoteError("torchrun's agent store at " + agent.toString() + " holds '" + echo +
                       "' under " + key + " after rank 0 set " + std::to_string(port));
  return Status::ok();
}

StatusOr<int> readStorePort(const SockAddr& agent, const std::string& key,
                            const Deadline& deadline) {
  COLLIE_ASSIGN_OR_RETURN(std::unique_ptr<TorchStoreClient> c,
                          TorchStoreClient::connect(agent, deadline));
  COLLIE_ASSIGN_OR_RETURN(std::string v, c->get(key, deadline));
  char* end = nullptr;
  const long port = strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || port <= 0 || port > 65535)
    return remoteError("torchrun's agent store at " + agent.toString() + " holds '" + v +
                       "' under " + key + ", not a port");
  return static_cast<int>(port);
}

}  // namespace collie
