// The store client's side of its protocol: whatever the server it connected to answers (the ack
// of its hello, then replies). The first input byte picks three requests (set, get, add or wait);
// the rest is the server's stream, sent whole and then closed. A bad or short answer is an
// error, and the connection is not used again; never a crash or a hang.
#include <thread>

#include "src/core/bootstrap/store_wire.h"
#include "tests/fuzz/store_common.h"

namespace {

int gListenFd = -1;
collie::SockAddr gAddr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("COLLIE_DEBUG", "NONE", 1);
  auto a = collie::parseSockAddr("127.0.0.1:0");
  FUZZ_CHECK(a.isOk());
  gAddr = a.value();
  auto fd = collie::listenOn(&gAddr, 16);
  FUZZ_CHECK(fd.isOk());
  gListenFd = fd.value();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  collie::fuzz::Input in(data, size);
  const uint8_t ops = in.take<uint8_t>();
  const std::string answer = in.rest();
  bool closed = false;
  std::thread server([&] {
    pollfd p{gListenFd, POLLIN, 0};
    int n;
    while ((n = poll(&p, 1, 10000)) < 0 && errno == EINTR) {
    }
    FUZZ_CHECK(n == 1);
    const int fd = accept4(gListenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    FUZZ_CHECK(fd >= 0);
    std::string requests;
    closed = collie::fuzz::exchange(fd, answer, &requests, 10000);
    close(fd);
  });
  {
    auto store = collie::TcpStore::connect(gAddr, collie::fuzz::storeAuth(),
                                           collie::Deadline::afterMs(5000));
    if (store.isOk()) {
      collie::TcpStore& s = *store.value();
      s.setRequestTimeoutMs(5000);
      for (int i = 0; i < 3; ++i) {
        switch ((ops >> (2 * i)) & 3) {
          case 0:
            (void)s.set("key", "value");
            break;
          case 1:
            (void)s.get("key", collie::Deadline::afterMs(100));
            break;
          case 2:
            (void)s.add("counter", 3);
            break;
          default: {
            std::vector<std::string> missing;
            const collie::Status st =
                s.wait({"a", "b", "c"}, collie::Deadline::afterMs(20), &missing);
            FUZZ_CHECK(st.isOk() || !missing.empty());
          }
        }
      }
    }
  }  // the store's socket closes here: the server's side sees the end
  server.join();
  FUZZ_CHECK(closed);
  return 0;
}
