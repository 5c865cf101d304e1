// Writes the seed inputs of the fuzz corpora (tests/fuzz/corpus/<target>/seed-*) with the
// library's encoders and wire structs: valid inputs of each parser plus a few edge cases.
// Usage: collie-fuzz-seeds <corpus dir>. The checked-in corpora hold its output and the inputs
// fuzzing found since.
#include <netinet/in.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "src/base/hex.h"
#include "src/base/params.h"
#include "src/core/bootstrap/bootstrap.h"
#include "src/core/bootstrap/rank_record.h"
#include "src/core/bootstrap/store_wire.h"
#include "tests/fuzz/store_common.h"
#include "transports/frame.h"
#include "transports/tcp/tcp_transport.h"
#ifdef COLLIE_HAVE_UCX
#include "transports/ucx/ucx_transport.h"
#endif

namespace {

using namespace collie;
namespace wire = store_wire;

std::string gDir;

template <typename T>
std::string raw(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(v));
}

void put(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::string dir = gDir + "/" + target;
  mkdir(dir.c_str(), 0755);
  FILE* f = fopen((dir + "/seed-" + name).c_str(), "wb");
  if (f == nullptr || fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    perror(dir.c_str());
    exit(1);
  }
  fclose(f);
}

// frame_fuzz: header, expected tag, commId, length, peer, abort reason.
std::string frameInput(const FrameHeader& h, const FrameTag& t, uint64_t commId, uint64_t len,
                       const std::string& reason = "") {
  return raw(h) + raw(t.seq) + raw(t.count) + raw(t.tag) + raw(t.coll) + raw(t.dtype) + raw(t.op) +
         raw(t.algo) + raw(t.root) + raw(commId) + raw(len) + raw(uint16_t{3}) + reason;
}

void frameSeeds() {
  FrameTag t;
  t.seq = 7, t.count = 1024, t.tag = 2, t.coll = 0, t.dtype = 7, t.op = 0, t.algo = 1;
  const uint64_t comm = 0x1234;
  put("frame", "allreduce", frameInput(encodeFrame(comm, t, 4096), t, comm, 4096));
  FrameTag p2p = t;
  p2p.coll = kP2PColl, p2p.root = 1;
  put("frame", "p2p", frameInput(encodeFrame(comm, p2p, 64), p2p, comm, 64));
  FrameTag other = t;
  other.dtype = 3;
  put("frame", "disagree", frameInput(encodeFrame(comm, other, 4096), t, comm, 4096));
  const std::string abort = encodeAbort(comm, remoteError("rank 2 lost peer 1").withStalledOn(1));
  FrameHeader ah;
  memcpy(&ah, abort.data(), sizeof(ah));
  put("frame", "abort", frameInput(ah, t, comm, 4096, abort.substr(sizeof(ah))));
  FrameTag bad = t;
  bad.coll = 200, bad.dtype = 250, bad.op = 99;
  put("frame", "unknown-enums", frameInput(encodeFrame(comm, bad, 1), bad, comm, 2));
  put("frame", "short", "CLFD");
}

// tcp_hello_fuzz: nranks, rank, one socket byte per lower peer, then the hello.
void tcpSeeds() {
  Identity id;
  const uint8_t secret[16] = {0x5e, 0xc7, 0x3e, 0x70, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  memcpy(id.secret, secret, 16);
  id.commId = 0x636f6d6d31ULL;
  id.nranks = 4;
  auto hello = [&](int from, int to, int idx, int n) {
    Hello h{};
    h.magic = kHelloMagic, h.version = kHelloVersion;
    memcpy(h.secret, id.secret, 16);
    h.commId = id.commId, h.from = from, h.to = to, h.sockIdx = idx, h.nsocks = n;
    h.nranks = id.nranks;
    return h;
  };
  const std::string mesh = std::string("\x02\x01\x02\x02", 4);  // 4 ranks, rank 2, 2 sockets
  put("tcp_hello", "valid", mesh + raw(hello(1, 2, 1, 2)));
  put("tcp_hello", "taken", std::string("\x02\x01\x02\x1a", 4) + raw(hello(1, 2, 1, 2)));
  Hello wrong = hello(0, 2, 0, 2);
  wrong.secret[0] ^= 1;
  put("tcp_hello", "wrong-secret", mesh + raw(wrong));
  put("tcp_hello", "out-of-range", mesh + raw(hello(-1, 2, 7, 2)));
  put("tcp_hello", "http", mesh + "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
}

void ucxSeeds() {
  put("ucx_hello", "address", "\x01" + toHex(std::string("\x00\x01\x02\xfe\xff ucx worker", 16)));
  put("ucx_hello", "address-pid",
      "\x01" + toHex(std::string("\x00\x01\x02\xfe\xff ucx worker", 16)) + "/4242/1:4026531836");
  put("ucx_hello", "no-rdma", "\x01-");
  put("ucx_hello", "failed", "\x02!UCX init failed: no usable device");
  put("ucx_hello", "record", "\x03" + encodeRankRecord({4, "host-a/boot/net", "machine-a"}));
  put("ucx_hello", "odd-hex",
      "\x01"
      "abc");
  put("ucx_hello", "upper-hex",
      "\x01"
      "ABCD");
#ifdef COLLIE_HAVE_UCX
  // The hello peer rank 2 sends rank 1 of 4 (ucx_hello_fuzz.cc's job), and one that is wrong.
  Identity id;
  const uint8_t secret[16] = {0x5e, 0xc7, 0x3e, 0x70, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  memcpy(id.secret, secret, 16);
  id.commId = 0x636f6d6d31ULL;
  id.rank = 2;
  id.nranks = 4;
  const UcxHello hello = makeUcxHello(id, 1);
  put("ucx_hello", "hello", raw(hello));
  UcxHello wrong = hello;
  wrong.secret[3] ^= 0x40;
  put("ucx_hello", "hello-wrong-secret", raw(wrong));
#endif
}

void uniqueIdSeeds() {
  collieUniqueId id;
  if (!makeUniqueId(&id).isOk()) exit(1);
  const std::string ranks = raw(uint16_t{3}) + raw(uint16_t{2});  // 4 ranks, rank 2
  put("unique_id", "made", raw(id) + ranks);
  collieUniqueId v6 = id;
  const uint16_t inet6 = AF_INET6;
  memcpy(v6.internal + 6, &inet6, 2);
  put("unique_id", "ipv6", raw(v6) + ranks);
  collieUniqueId badVersion = id;
  badVersion.internal[4] = 9;
  put("unique_id", "bad-version", raw(badVersion) + ranks);
  put("unique_id", "zeros", std::string(sizeof(id), '\0'));
}

void paramsSeeds() {
  const auto& all = params().all();
  auto seed = [&](const char* name, const std::string& value) {
    for (size_t i = 0; i < all.size(); ++i)
      if (strcmp(all[i].name, name) == 0)
        put("params", std::string(name) + "-" + std::to_string(value.size()),
            std::string(1, static_cast<char>(i)) + value);
  };
  seed("COLLIE_STRIPE_BYTES", "256K");
  seed("COLLIE_TIMEOUT_MS", "-5");
  seed("COLLIE_NSOCKS", "99999999999999999999");
  seed("COLLIE_SHM_RING_BYTES", "8589934592G");
  seed("COLLIE_CHUNK_BYTES", " +1m");
  seed("COLLIE_DEBUG", "TRACE");
  seed("COLLIE_DEBUG_SUBSYS", "INIT,,NET,ALL");
  seed("COLLIE_ALGO", "ring");
  put("params", "undeclared",
      "\xff"
      "12");
}

std::string request(uint8_t cmd, const std::string& key, const std::string& val, int64_t arg) {
  wire::ReqHdr h{wire::kReqMagic,
                 cmd,
                 {0, 0, 0},
                 static_cast<uint32_t>(key.size()),
                 static_cast<uint32_t>(val.size()),
                 arg};
  return raw(h) + key + val;
}

std::string reply(uint8_t code, const std::string& payload, int64_t num) {
  wire::RepHdr h{wire::kRepMagic, code, {0, 0, 0}, payload.size(), num};
  return raw(h) + payload;
}

void storeSeeds() {
  const StoreAuth auth = fuzz::storeAuth();
  wire::StoreHello hello{wire::kHelloMagic, wire::kVersion, {}, auth.commId};
  memcpy(hello.secret, auth.secret, 16);
  const std::string hi = raw(hello);
  put("store_server", "session",
      hi + request(wire::kSet, "addr/0", "10.0.0.1:4000", 0) +
          request(wire::kGet, "addr/0", "", 50) + request(wire::kAdd, "count", "", 5) +
          request(wire::kCheck, "addr/0\naddr/1", "", 0));
  put("store_server", "get-missing", hi + request(wire::kGet, "nope", "", 10));
  wire::StoreHello wrong = hello;
  wrong.secret[3] ^= 0x40;
  put("store_server", "wrong-secret", raw(wrong) + request(wire::kSet, "k", "v", 0));
  put("store_server", "half-hello", hi.substr(0, 20));
  put("store_server", "unknown-cmd", hi + request(9, "k", "", 0));
  put("store_server", "huge-key",
      hi + raw(wire::ReqHdr{wire::kReqMagic, wire::kSet, {}, 1u << 30, 0, 0}));
  const std::string ack = raw(wire::kAckMagic);
  // store_client_fuzz: the first byte picks its three requests (2 bits each: set get add wait).
  put("store_client", "set-get-add",
      std::string(1, 0x24) + ack + reply(wire::kOk, "", 0) + reply(wire::kOk, "value", 0) +
          reply(wire::kOk, "", 8));
  put("store_client", "wait",
      std::string(1, 0x3f) + ack + reply(wire::kOk, "b\nc", 2) + reply(wire::kOk, "", 0));
  put("store_client", "not-found", std::string(1, 0x01) + ack + reply(wire::kNotFound, "", 0));
  put("store_client", "refused", std::string(1, 0x00) + "CLSX");
  put("store_client", "huge-reply",
      std::string(1, 0x01) + ack + raw(wire::RepHdr{wire::kRepMagic, 0, {}, 1ull << 40, 0}));
}

void perfSeeds() {
  put("perf_options", "sweep", "-b\n8\n-e\n64M\n-f\n2\n-c\n1");
  put("perf_options", "all", "all_reduce\n-d\nall\n-o\nall\n-n\n5\n-w\n1");
  put("perf_options", "long", "--algo\nring\n--transport\ntcp,shm\n--repeat\n3\n--json\nx.json");
  put("perf_options", "help", "-h");
  put("perf_options", "cluster", "-bq\n-zz");
  put("perf_options", "inverted", "--minbytes=1G\n--maxbytes=1K");
  put("perf_options", "no-step", "-f\n0\n-i\n0\n-b\n1\n-e\n2");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  gDir = argv[1];
  mkdir(gDir.c_str(), 0755);
  frameSeeds();
  tcpSeeds();
  ucxSeeds();
  uniqueIdSeeds();
  paramsSeeds();
  storeSeeds();
  perfSeeds();
  return 0;
}
