// The cuda_ipc address bytes, on the CPU: every field round trips, handles keep every byte
// value, and short, foreign or other-version bytes are rejected with a reason. And connect's
// decisions: which process published an address (two processes with one pid in two PID
// namespaces are two), and how a peer's buffer is reached.
#include "transports/cuda_ipc/cuda_ipc_address.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

namespace collie {
namespace {

CudaIpcAddress sample() {
  CudaIpcAddress a;
  a.pid = 123456;
  a.token = 0x0123456789abcdefull;
  a.device = 3;
  a.busId = "0000:19:00.0";
  a.buffer = 0x7f0012345000ull;
  a.bytes = 64ull << 20;
  a.event = 0x55550000aaaaull;
  for (size_t i = 0; i < CudaIpcAddress::kHandleBytes; ++i) {
    a.memHandle += static_cast<char>(i * 7);
    a.eventHandle += static_cast<char>(255 - i);
  }
  return a;
}

TEST(CudaIpcAddress, RoundTrips) {
  CudaIpcAddress a = sample();
  auto b = CudaIpcAddress::decode(a.encode());
  ASSERT_TRUE(b.isOk()) << b.status().toString();
  EXPECT_EQ(b.value().pid, a.pid);
  EXPECT_EQ(b.value().token, a.token);
  EXPECT_EQ(b.value().device, a.device);
  EXPECT_EQ(b.value().busId, a.busId);
  EXPECT_EQ(b.value().buffer, a.buffer);
  EXPECT_EQ(b.value().bytes, a.bytes);
  EXPECT_EQ(b.value().event, a.event);
  EXPECT_EQ(b.value().memHandle, a.memHandle);
  EXPECT_EQ(b.value().eventHandle, a.eventHandle);
}

TEST(CudaIpcAddress, BadBytesAreRejected) {
  std::string good = sample().encode();
  EXPECT_EQ(CudaIpcAddress::decode(good.substr(1)).status().code(), collieInvalidArgument);
  std::string foreign = good;
  foreign[0] = 'X';
  EXPECT_EQ(CudaIpcAddress::decode(foreign).status().code(), collieInvalidArgument);
  std::string version = good;
  version[4] = 9;
  auto v = CudaIpcAddress::decode(version);
  EXPECT_EQ(v.status().code(), collieInvalidArgument);
  EXPECT_NE(v.status().message().find("version"), std::string::npos);
  CudaIpcAddress empty = sample();
  empty.bytes = 0;
  EXPECT_EQ(CudaIpcAddress::decode(empty.encode()).status().code(), collieInvalidArgument);
}

// Runs in a new PID namespace as its pid 1 (unshare, then fork) and writes that process's
// identity to fd. Returns the exit code of the intermediate child: 0, or 77 when the kernel
// refuses unshare(CLONE_NEWPID) (no privilege).
int identityInNewPidNamespace(int fd) {
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    if (unshare(CLONE_NEWPID) != 0) _exit(77);
    pid_t inner = fork();  // the first child after unshare is pid 1 of the new namespace
    if (inner < 0) _exit(1);
    if (inner == 0) {
      ProcessIdentity me = thisProcess();
      _exit(write(fd, &me, sizeof(me)) == static_cast<ssize_t>(sizeof(me)) ? 0 : 1);
    }
    int st = 0;
    waitpid(inner, &st, 0);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
  }
  int st = 0;
  waitpid(child, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

TEST(CudaIpcSameness, EqualPidsInTwoPidNamespacesAreTwoProcesses) {
  thisProcess();  // the parent draws its token first: the children must not keep it
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ProcessIdentity ids[2];
  for (auto& id : ids) {
    int rc = identityInNewPidNamespace(fds[1]);
    if (rc == 77) {
      close(fds[0]);
      close(fds[1]);
      GTEST_SKIP() << "unshare(CLONE_NEWPID) is not permitted here";
    }
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(read(fds[0], &id, sizeof(id)), static_cast<ssize_t>(sizeof(id)));
  }
  close(fds[0]);
  close(fds[1]);
  ASSERT_EQ(ids[0].pid, 1);
  ASSERT_EQ(ids[1].pid, 1);  // a pid-only check would call them one process
  CudaIpcAddress fromFirst = sample();
  fromFirst.pid = ids[0].pid;
  fromFirst.token = ids[0].token;
  auto decoded = CudaIpcAddress::decode(fromFirst.encode());
  ASSERT_TRUE(decoded.isOk()) << decoded.status().toString();
  EXPECT_FALSE(sameProcess(decoded.value(), ids[1]));
  EXPECT_TRUE(sameProcess(decoded.value(), ids[0]));
  EXPECT_FALSE(sameProcess(decoded.value(), thisProcess()));
}

TEST(CudaIpcSameness, OwnAddressIsThisProcessAndAForkIsNot) {
  const ProcessIdentity me = thisProcess();
  CudaIpcAddress a = sample();
  a.pid = me.pid;
  a.token = me.token;
  EXPECT_TRUE(sameProcess(CudaIpcAddress::decode(a.encode()).value(), thisProcess()));
  CudaIpcAddress noToken = a;
  noToken.token = 0;
  EXPECT_FALSE(sameProcess(noToken, me));
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ProcessIdentity c = thisProcess();
    _exit(write(fds[1], &c, sizeof(c)) == static_cast<ssize_t>(sizeof(c)) ? 0 : 1);
  }
  ProcessIdentity c;
  ASSERT_EQ(read(fds[0], &c, sizeof(c)), static_cast<ssize_t>(sizeof(c)));
  waitpid(child, nullptr, 0);
  close(fds[0]);
  close(fds[1]);
  EXPECT_EQ(c.pid, child);
  EXPECT_NE(c.token, me.token);
  EXPECT_FALSE(sameProcess(a, c));
}

TEST(CudaIpcRoute, MapsOnOneGpuOrWithPeerAccessElseRefuses) {
  EXPECT_EQ(cudaIpcRoute(true, false, false), CudaIpcRoute::kSameProcess);
  EXPECT_EQ(cudaIpcRoute(true, true, true), CudaIpcRoute::kSameProcess);
  EXPECT_EQ(cudaIpcRoute(false, true, false), CudaIpcRoute::kMapped);
  EXPECT_EQ(cudaIpcRoute(false, false, true), CudaIpcRoute::kMapped);
  EXPECT_EQ(cudaIpcRoute(false, false, false), CudaIpcRoute::kNoPeerAccess);
}

}  // namespace
}  // namespace collie
