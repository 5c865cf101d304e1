// What the GPU tests share: skipping where no CUDA device is visible.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "src/memory/memory_kind.h"

// Skips the test, with the reason, unless a CUDA device is visible.
#define COLLIE_REQUIRE_GPU()                                                     \
  do {                                                                           \
    std::string why_;                                                            \
    if (collie::cudaDeviceCount(&why_) == 0) GTEST_SKIP() << "no GPU: " << why_; \
  } while (0)
