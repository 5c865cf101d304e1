// The transports' AddressExchange over an in-process store: ranks as threads.
#include "src/core/bootstrap/store_exchange.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "src/core/bootstrap/store.h"

namespace collie {
namespace {

TEST(StoreExchange, EveryRankGetsWhatEachOfTheRanksAskedForPublished) {
  constexpr int n = 4;
  HashStore store;
  std::vector<std::vector<std::string>> got(n);
  std::vector<Status> st(n);
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      StoreExchange ex(&store, r);
      // Each rank asks for the others in descending order: values come back in that order.
      std::vector<int> others;
      for (int p = n - 1; p >= 0; --p)
        if (p != r) others.push_back(p);
      st[r] = ex.exchange("addr", "rank-" + std::to_string(r), others, Deadline::afterMs(5000),
                          &got[r]);
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(st[r].isOk()) << st[r].toString();
    std::vector<std::string> want;
    for (int p = n - 1; p >= 0; --p)
      if (p != r) want.push_back("rank-" + std::to_string(p));
    EXPECT_EQ(got[r], want) << "rank " << r;
  }
}

TEST(StoreExchange, KeysOfOneNameAreApartFromAnother) {
  HashStore store;
  StoreExchange a(&store, 0);
  ASSERT_TRUE(a.publish("tcp", "1.2.3.4:5").isOk());
  ASSERT_TRUE(a.publish("shm", "/collie-x").isOk());
  std::vector<std::string> v;
  ASSERT_TRUE(a.collect("shm", {0}, Deadline::afterMs(1000), &v).isOk());
  EXPECT_EQ(v, std::vector<std::string>{"/collie-x"});
}

TEST(StoreExchange, ARankThatNeverPublishesEndsTheCollectAtTheDeadline) {
  HashStore store;
  StoreExchange ex(&store, 0);
  ASSERT_TRUE(ex.publish("ucx", "-").isOk());
  std::vector<std::string> v;
  const Deadline d = Deadline::afterMs(200);
  Status s = ex.collect("ucx", {0, 1}, d, &v);
  EXPECT_EQ(s.code(), collieTimeout) << s.toString();
  EXPECT_TRUE(d.expired());
}

}  // namespace
}  // namespace collie
