// The NCCL backend's host-side logic, without NCCL or a GPU: rank 0's id reaches every rank
// byte for byte through a HashStore and a TcpStore, garbled ids and late ids are errors, and
// two ranks on one GPU are refused with a message that says how to fix the launch.
#include "src/backends/nccl/nccl_bootstrap.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "src/base/hex.h"

namespace collie {
namespace {

constexpr size_t kIdBytes = 128;

// An id with every byte value, zeros and high bits included, unlike any text.
std::string binaryId(uint32_t seed) {
  std::mt19937 rng(seed);
  std::string id(kIdBytes, '\0');
  for (size_t i = 0; i < kIdBytes; ++i) id[i] = static_cast<char>(i < 4 ? 0 : rng());
  id[5] = '\xff';
  return id;
}

void shareAmong(std::vector<Store*> stores, const std::string& want) {
  const int n = static_cast<int>(stores.size());
  std::vector<std::string> got(n);
  std::vector<Status> st(n);
  int made = 0;
  std::vector<std::thread> ts;
  for (int r = n - 1; r >= 0; --r)  // the readers start first and wait
    ts.emplace_back([&, r] {
      st[r] = shareNcclId(
          stores[r], "ncclid", r, kIdBytes,
          [&](std::string* out) {
            ++made;
            *out = want;
            return Status::ok();
          },
          Deadline::afterMs(5000), &got[r]);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(made, 1);  // rank 0 only
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(st[r].isOk()) << st[r].toString();
    EXPECT_EQ(got[r], want) << "rank " << r;
  }
}

TEST(NcclBootstrap, IdRoundTripsThroughAHashStore) {
  HashStore store;
  shareAmong({&store, &store, &store, &store}, binaryId(1));
}

TEST(NcclBootstrap, IdRoundTripsThroughATcpStore) {
  auto addr = resolveHost("127.0.0.1", 0);
  ASSERT_TRUE(addr.isOk());
  StoreAuth auth;
  auth.commId = 77;
  auto srv = StoreServer::start(addr.value(), auth);
  ASSERT_TRUE(srv.isOk()) << srv.status().toString();
  std::vector<std::unique_ptr<TcpStore>> clients;
  std::vector<Store*> stores;
  for (int r = 0; r < 3; ++r) {
    auto c = TcpStore::connect(srv.value()->address(), auth, Deadline::afterMs(5000));
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    clients.push_back(c.take());
    stores.push_back(clients.back().get());
  }
  shareAmong(stores, binaryId(2));
  srv.value()->stop();
}

TEST(NcclBootstrap, MissingIdTimesOut) {
  HashStore store;
  std::string id;
  Status s = shareNcclId(&store, "ncclid", 1, kIdBytes, nullptr, Deadline::afterMs(50), &id);
  EXPECT_EQ(s.code(), collieTimeout) << s.toString();
  EXPECT_NE(s.message().find("rank 0's NCCL unique id"), std::string::npos) << s.message();
}

TEST(NcclBootstrap, GarbledOrShortIdIsAnError) {
  HashStore store;
  std::string id;
  ASSERT_TRUE(store.set("bad", "zz").isOk());
  EXPECT_EQ(shareNcclId(&store, "bad", 1, kIdBytes, nullptr, Deadline::afterMs(1000), &id).code(),
            collieRemoteError);
  ASSERT_TRUE(store.set("short", toHex("abc")).isOk());
  EXPECT_EQ(shareNcclId(&store, "short", 1, kIdBytes, nullptr, Deadline::afterMs(1000), &id).code(),
            collieRemoteError);
}

TEST(NcclBootstrap, FailingIdMakerIsReported) {
  HashStore store;
  std::string id;
  Status s = shareNcclId(
      &store, "ncclid", 0, kIdBytes, [](std::string*) { return systemError("no NCCL here"); },
      Deadline::afterMs(1000), &id);
  EXPECT_EQ(s.code(), collieSystemError);
  EXPECT_NE(s.message().find("no NCCL here"), std::string::npos);
}

TEST(NcclBootstrap, TwoRanksOnOneGpuAreRefusedWithTheFix) {
  std::vector<std::string> hosts = {"h1", "h1", "h2", "h2"};
  EXPECT_TRUE(
      checkOneGpuPerRank(hosts, {"0000:01:00.0", "0000:02:00.0", "0000:01:00.0", "0000:02:00.0"}, 0)
          .isOk());
  Status s = checkOneGpuPerRank(
      hosts, {"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:03:00.0"}, 1);
  EXPECT_EQ(s.code(), collieInvalidUsage);
  EXPECT_NE(s.message().find("ranks 2 and 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("CUDA_VISIBLE_DEVICES"), std::string::npos) << s.message();
}

TEST(Hex, RoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  std::string back;
  ASSERT_TRUE(fromHex(toHex(all), &back));
  EXPECT_EQ(back, all);
  EXPECT_FALSE(fromHex("abc", &back));
  EXPECT_FALSE(fromHex("0g", &back));
}

}  // namespace
}  // namespace collie
