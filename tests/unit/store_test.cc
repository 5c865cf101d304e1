// The Store: the in-process HashStore and the TCP store server with its client, including
// deadlines and strangers.
#include "src/core/bootstrap/store.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "src/core/bootstrap/store_wire.h"

namespace collie {
namespace {

SockAddr loopback() {
  auto a = resolveHost("127.0.0.1", 0);
  EXPECT_TRUE(a.isOk());
  return a.value();
}

StoreAuth auth(uint8_t seed) {
  StoreAuth a;
  for (int i = 0; i < 16; ++i) a.secret[i] = static_cast<uint8_t>(seed + i);
  a.commId = 0x1234 + seed;
  return a;
}

void exerciseStore(Store& s) {
  ASSERT_TRUE(s.set("a", "1").isOk());
  auto v = s.get("a", Deadline::afterMs(1000));
  ASSERT_TRUE(v.isOk());
  EXPECT_EQ(v.value(), "1");
  auto missing = s.get("nope", Deadline::afterMs(100));
  EXPECT_EQ(missing.status().code(), collieTimeout);
  EXPECT_EQ(s.add("n", 2).value(), 2);
  EXPECT_EQ(s.add("n", 3).value(), 5);
  std::vector<std::string> miss;
  Status w = s.wait({"a", "b", "c"}, Deadline::afterMs(100), &miss);
  EXPECT_EQ(w.code(), collieTimeout);
  EXPECT_EQ(miss, (std::vector<std::string>{"b", "c"}));
  // A value with every byte value in it survives the trip.
  std::string bin(256, '\0');
  for (int i = 0; i < 256; ++i) bin[i] = static_cast<char>(i);
  ASSERT_TRUE(s.set("bin", bin).isOk());
  EXPECT_EQ(s.get("bin", Deadline::afterMs(1000)).value(), bin);
}

TEST(HashStore, SetGetAddWait) {
  HashStore s;
  exerciseStore(s);
}

// A counter past int64 is an error, not a wrapped (undefined) value; the counter keeps its value.
TEST(HashStore, AddPastInt64IsAnError) {
  HashStore s;
  ASSERT_TRUE(s.add("c", INT64_MAX - 1).isOk());
  auto r = s.add("c", 2);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("overflows the counter 'c'"), std::string::npos);
  auto v = s.add("c", 0);
  ASSERT_TRUE(v.isOk());
  EXPECT_EQ(v.value(), INT64_MAX - 1);
}

TEST(TcpStore, SetGetAddWait) {
  auto srv = StoreServer::start(loopback(), auth(1));
  ASSERT_TRUE(srv.isOk()) << srv.status().toString();
  auto c = TcpStore::connect(srv.value()->address(), auth(1), Deadline::afterMs(2000));
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  exerciseStore(*c.value());
}

TEST(TcpStore, BlockedGetIsAnsweredWhenTheKeyArrives) {
  auto srv = StoreServer::start(loopback(), auth(2));
  ASSERT_TRUE(srv.isOk());
  auto a = TcpStore::connect(srv.value()->address(), auth(2), Deadline::afterMs(2000));
  auto b = TcpStore::connect(srv.value()->address(), auth(2), Deadline::afterMs(2000));
  ASSERT_TRUE(a.isOk() && b.isOk());
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    b.value()->set("late", "here");
  });
  auto v = a.value()->get("late", Deadline::afterMs(5000));
  setter.join();
  ASSERT_TRUE(v.isOk()) << v.status().toString();
  EXPECT_EQ(v.value(), "here");
}

TEST(TcpStore, WrongSecretIsRefusedAndGarbageDropped) {
  auto srv = StoreServer::start(loopback(), auth(3));
  ASSERT_TRUE(srv.isOk());
  auto bad = TcpStore::connect(srv.value()->address(), auth(4), Deadline::afterMs(2000));
  EXPECT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), collieRemoteError);
  // Raw garbage, and a connection that says nothing and leaves.
  for (int k = 0; k < 3; ++k) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    const SockAddr& a = srv.value()->address();
    ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&a.ss), a.len), 0);
    char junk[100];
    memset(junk, 0x41 + k, sizeof(junk));
    if (k != 2) send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
    close(fd);
  }
  auto good = TcpStore::connect(srv.value()->address(), auth(3), Deadline::afterMs(2000));
  ASSERT_TRUE(good.isOk()) << good.status().toString();
  EXPECT_TRUE(good.value()->set("k", "v").isOk());
  EXPECT_EQ(good.value()->get("k", Deadline::afterMs(1000)).value(), "v");
}

// A hello that arrives in two pieces is answered once it is whole.
TEST(TcpStore, HelloInPiecesIsAccepted) {
  auto srv = StoreServer::start(loopback(), auth(9));
  ASSERT_TRUE(srv.isOk());
  store_wire::StoreHello h{store_wire::kHelloMagic, store_wire::kVersion, {}, auth(9).commId};
  memcpy(h.secret, auth(9).secret, sizeof(h.secret));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};  // a server that never answers fails the test, not hangs it
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const SockAddr& a = srv.value()->address();
  ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&a.ss), a.len), 0);
  const char* p = reinterpret_cast<const char*>(&h);
  ASSERT_EQ(send(fd, p, 10, MSG_NOSIGNAL), 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(send(fd, p + 10, sizeof(h) - 10, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(h) - 10));
  uint32_t ack = 0;
  EXPECT_EQ(recv(fd, &ack, sizeof(ack), MSG_WAITALL), static_cast<ssize_t>(sizeof(ack)));
  EXPECT_EQ(ack, store_wire::kAckMagic);
  close(fd);
}

TEST(StoreServer, IsLiveInThisProcessUntilItStops) {
  auto srv = StoreServer::start(loopback(), auth(10));
  ASSERT_TRUE(srv.isOk());
  const int port = srv.value()->address().port();
  EXPECT_TRUE(StoreServer::servesInThisProcess(port, auth(10).commId));
  EXPECT_FALSE(StoreServer::servesInThisProcess(port, auth(11).commId));
  srv.value()->stop();
  EXPECT_FALSE(StoreServer::servesInThisProcess(port, auth(10).commId));
}

TEST(StoreWire, LinesRoundTrip) {
  const std::vector<std::string> keys{"a", "rank/3/addr", "x y"};
  EXPECT_EQ(store_wire::joinLines(keys), "a\nrank/3/addr\nx y");
  EXPECT_EQ(store_wire::splitLines(store_wire::joinLines(keys)), keys);
  EXPECT_TRUE(store_wire::splitLines("").empty());
  EXPECT_EQ(store_wire::joinLines({}), "");
}

TEST(TcpStore, ConnectToNobodyTimesOut) {
  SockAddr a = loopback();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  bind(fd, reinterpret_cast<sockaddr*>(&a.ss), a.len);  // reserve a port, never listen
  socklen_t l = sizeof(a.ss);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a.ss), &l);
  auto c = TcpStore::connect(a, auth(5), Deadline::afterMs(300));
  close(fd);
  EXPECT_FALSE(c.isOk());
  EXPECT_EQ(c.status().code(), collieTimeout) << c.status().toString();
}

// A store whose server stops answering (its process stopped) is lost after the request
// timeout the communicator gives its client (COLLIE_TIMEOUT_MS), not after a fixed minute.
TEST(TcpStore, ARequestToASilentServerEndsAtTheRequestTimeout) {
  int portPipe[2];
  ASSERT_EQ(pipe(portPipe), 0);
  const pid_t server = fork();
  ASSERT_GE(server, 0);
  if (server == 0) {
    auto srv = StoreServer::start(loopback(), auth(6));
    const int port = srv.isOk() ? srv.value()->address().port() : -1;
    if (write(portPipe[1], &port, sizeof(port)) != sizeof(port)) _exit(1);
    for (;;) pause();
  }
  int port = -1;
  ASSERT_EQ(read(portPipe[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  close(portPipe[0]);
  close(portPipe[1]);
  ASSERT_GT(port, 0);
  SockAddr a = loopback();
  a.setPort(port);
  auto c = TcpStore::connect(a, auth(6), Deadline::afterMs(2000));
  ASSERT_TRUE(c.isOk()) << c.status().toString();
  ASSERT_TRUE(c.value()->set("before", "1").isOk());
  kill(server, SIGSTOP);
  // The stop takes effect when a thread of the server takes the signal, which on a busy machine
  // may come after its store thread has served the next request: wait until it has stopped.
  int stopped = -1;
  for (int i = 0; i < 200 && waitpid(server, &stopped, WUNTRACED | WNOHANG) == 0; ++i)
    usleep(100000);
  if (!WIFSTOPPED(stopped)) kill(server, SIGKILL), waitpid(server, nullptr, 0);
  ASSERT_TRUE(WIFSTOPPED(stopped)) << "the server did not stop within 20 s";
  // In a child, so that a request that does not end cannot stop the test: it has 20 s.
  const pid_t client = fork();
  ASSERT_GE(client, 0);
  if (client == 0) {
    c.value()->setRequestTimeoutMs(300);
    _exit(c.value()->set("during", "1").isOk() ? 1 : 0);
  }
  int st = -1;
  for (int i = 0; i < 200 && waitpid(client, &st, WNOHANG) == 0; ++i) usleep(100000);
  const bool ended = WIFEXITED(st);
  if (!ended) kill(client, SIGKILL), waitpid(client, &st, 0);
  kill(server, SIGKILL);
  waitpid(server, nullptr, 0);
  ASSERT_TRUE(ended) << "the request to the stopped server did not end within 20 s";
  EXPECT_EQ(WEXITSTATUS(st), 0) << "the request succeeded";
}

}  // namespace
}  // namespace collie
