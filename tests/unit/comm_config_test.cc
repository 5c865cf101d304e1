// readCommConfig: a collieConfig_t's fields stand over their environment variables, unset ones
// fall back to them, and a config with a bad header or a bad field is refused, naming it.
#include "src/core/comm_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace collie {
namespace {

// Sets the variables of every test to values no config below uses; unsets them after.
class CommConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& v : kEnv) setenv(v.first, v.second, 1);
  }
  void TearDown() override {
    for (const auto& v : kEnv) unsetenv(v.first);
  }
  static constexpr std::pair<const char*, const char*> kEnv[] = {
      {"COLLIE_TIMEOUT_MS", "60000"},
      {"COLLIE_NSOCKS", "2"},
      {"COLLIE_CHUNK_BYTES", "64K"},
      {"COLLIE_SOCKET_IFNAME", "eth"},
      {"COLLIE_TRANSPORT", "shm"},
      {"COLLIE_ALGO", "recursive_doubling"},
      {"COLLIE_CONNECT_TIMEOUT_MS", "45000"},
  };
};

// Expects config refused with collieInvalidArgument and a message that says `says`.
void expectRefused(const collieConfig_t& config, const std::string& says) {
  auto c = readCommConfig(&config);
  ASSERT_FALSE(c.isOk()) << "accepted, wanted a refusal saying " << says;
  EXPECT_EQ(c.status().code(), collieInvalidArgument);
  EXPECT_NE(c.status().message().find(says), std::string::npos) << c.status().message();
}

TEST_F(CommConfigTest, WithoutAConfigTheEnvironmentDecides) {
  auto c = readCommConfig(nullptr);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_EQ(c.value().timeoutMs, 60000);
  EXPECT_EQ(c.value().connectMs, 45000);
  EXPECT_EQ(c.value().tcp.nsocks, 2);
  EXPECT_EQ(c.value().chunkBytes, 64u << 10);
  EXPECT_EQ(c.value().socketIfname, "eth");
  EXPECT_TRUE(c.value().transports.shm);
  EXPECT_FALSE(c.value().transports.tcp);
  EXPECT_EQ(c.value().algorithm, "recursive_doubling");
  EXPECT_TRUE(c.value().blocking);
  EXPECT_EQ(c.value().name, "");
}

TEST_F(CommConfigTest, UnsetFieldsFallBackToTheEnvironment) {
  collieConfig_t u = COLLIE_CONFIG_INITIALIZER;
  u.commName = "dp";
  auto c = readCommConfig(&u);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_EQ(c.value().timeoutMs, 60000);
  EXPECT_EQ(c.value().tcp.nsocks, 2);
  EXPECT_EQ(c.value().socketIfname, "eth");
  EXPECT_EQ(c.value().algorithm, "recursive_doubling");
  EXPECT_EQ(c.value().name, "dp");
}

TEST_F(CommConfigTest, EverySetFieldOverridesItsVariable) {
  collieConfig_t u = COLLIE_CONFIG_INITIALIZER;
  u.blocking = 0;
  u.timeoutMs = 1500;
  u.nsocks = 5;
  u.chunkBytes = 8192;
  u.socketIfname = "lo";
  u.transports = "tcp";
  u.algorithm = "ring";
  auto c = readCommConfig(&u);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_FALSE(c.value().blocking);
  EXPECT_EQ(c.value().timeoutMs, 1500);
  EXPECT_EQ(c.value().connectMs, 45000) << "unset: COLLIE_CONNECT_TIMEOUT_MS";
  EXPECT_EQ(c.value().tcp.userTimeoutMs, 1500);
  EXPECT_EQ(c.value().tcp.nsocks, 5);
  EXPECT_EQ(c.value().chunkBytes, 8192u);
  EXPECT_EQ(c.value().socketIfname, "lo");
  EXPECT_TRUE(c.value().transports.tcp);
  EXPECT_FALSE(c.value().transports.shm);
  EXPECT_EQ(c.value().transports.restriction, "config.transports=tcp");
  EXPECT_EQ(c.value().algorithm, "ring");
  u.connectTimeoutMs = 700;
  c = readCommConfig(&u);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_EQ(c.value().connectMs, 700);
  EXPECT_EQ(c.value().timeoutMs, 1500);
  // Where neither sets init's deadline, it follows the config's timeout.
  u.connectTimeoutMs = COLLIE_CONFIG_UNDEF_INT;
  unsetenv("COLLIE_CONNECT_TIMEOUT_MS");
  c = readCommConfig(&u);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_EQ(c.value().connectMs, 1500);
  // An empty interface overrides the variable too: the address is picked as if none was set.
  u.socketIfname = "";
  c = readCommConfig(&u);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_EQ(c.value().socketIfname, "");
}

TEST_F(CommConfigTest, AConfigNotMadeFromTheInitializerIsRefused) {
  collieConfig_t u = COLLIE_CONFIG_INITIALIZER;
  u.magic = 0;
  expectRefused(u, "COLLIE_CONFIG_MAGIC");
  u = COLLIE_CONFIG_INITIALIZER;
  u.version = 0;
  expectRefused(u, "version 0 is unknown");
  u = COLLIE_CONFIG_INITIALIZER;
  u.size = sizeof(size_t) + 2 * sizeof(unsigned);
  expectRefused(u, "size " + std::to_string(u.size) + " is under");
}

TEST_F(CommConfigTest, ALargerConfigOfANewerHeaderIsReadUpToTheFieldsKnown) {
  struct Newer {
    collieConfig_t known;
    int later[4];
  } n;
  n.known = COLLIE_CONFIG_INITIALIZER;
  n.known.size = sizeof(Newer);
  n.known.version = COLLIE_VERSION_CODE + 100;
  n.known.timeoutMs = 4321;
  n.known.algorithm = "ring";
  for (int& v : n.later) v = -1;
  auto c = readCommConfig(&n.known);
  ASSERT_TRUE(c.isOk()) << c.status().message();
  EXPECT_EQ(c.value().timeoutMs, 4321);
  EXPECT_EQ(c.value().algorithm, "ring");
}

TEST_F(CommConfigTest, BadValuesAreRefusedNamingTheField) {
  struct Case {
    void (*set)(collieConfig_t*);
    const char* says;
  };
  const Case cases[] = {
      {[](collieConfig_t* u) { u->blocking = 2; }, "config.blocking=2 must be 0 or 1"},
      {[](collieConfig_t* u) { u->timeoutMs = -5; }, "config.timeoutMs=-5 must be >= 1"},
      {[](collieConfig_t* u) { u->timeoutMs = 0; }, "config.timeoutMs=0"},
      {[](collieConfig_t* u) { u->connectTimeoutMs = -1; }, "config.connectTimeoutMs=-1"},
      {[](collieConfig_t* u) { u->nsocks = 65; }, "config.nsocks=65 must be 0..64"},
      {[](collieConfig_t* u) { u->chunkBytes = 100; }, "config.chunkBytes=100 must be >= 4096"},
      {[](collieConfig_t* u) { u->transports = "tcp,pigeon"; }, "config.transports"},
      {[](collieConfig_t* u) { u->algorithm = "pigeon"; },
       "config.algorithm=pigeon is not an algorithm"},
  };
  for (const Case& k : cases) {
    collieConfig_t u = COLLIE_CONFIG_INITIALIZER;
    k.set(&u);
    expectRefused(u, k.says);
  }
  collieConfig_t u = COLLIE_CONFIG_INITIALIZER;
  u.transports = "tcp,pigeon";
  auto c = readCommConfig(&u);
  EXPECT_NE(c.status().message().find("'pigeon' is not a transport"), std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace collie
