// What the multi-process GPU tests share. Ranks are processes forked by ProcessWorld, and a
// process forked from one that has used CUDA cannot use CUDA, so the parent never calls CUDA:
// it asks a child of its own how many GPUs there are.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "tests/harness/process_world.h"

namespace collie {
namespace testing {

// The visible CUDA devices, counted in a child process; 0 with the reason in *why when none.
inline int gpuCountInChild(std::string* why) {
  static int count = -1;
  static std::string reason;
  if (count >= 0) {
    *why = reason;
    return count;
  }
  int fds[2];
  if (pipe(fds) != 0) return 0;
  pid_t child = fork();
  if (child == 0) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    std::string msg = e == cudaSuccess
                          ? (n == 0 ? "cudaGetDeviceCount found no CUDA device" : "")
                          : std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    if (e != cudaSuccess) n = 0;
    bool ok = write(fds[1], &n, sizeof(n)) == static_cast<ssize_t>(sizeof(n)) &&
              write(fds[1], msg.data(), msg.size()) == static_cast<ssize_t>(msg.size());
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  int n = 0;
  if (child < 0 || read(fds[0], &n, sizeof(n)) != static_cast<ssize_t>(sizeof(n))) n = 0;
  char buf[256];
  ssize_t got = child > 0 ? read(fds[0], buf, sizeof(buf)) : 0;
  reason = got > 0 ? std::string(buf, static_cast<size_t>(got)) : "the GPU probe process failed";
  close(fds[0]);
  if (child > 0) waitpid(child, nullptr, 0);
  count = n;
  *why = reason;
  return count;
}

}  // namespace testing
}  // namespace collie

// Skips the test, with the reason, unless n CUDA devices are visible.
#define COLLIE_REQUIRE_GPUS(n)                                                            \
  do {                                                                                    \
    std::string why_;                                                                     \
    const int have_ = collie::testing::gpuCountInChild(&why_);                            \
    if (have_ == 0) GTEST_SKIP() << "no GPU: " << why_;                                   \
    if (have_ < (n)) GTEST_SKIP() << "needs " << (n) << " GPUs, " << have_ << " visible"; \
  } while (0)
