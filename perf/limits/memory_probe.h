// Memory-bandwidth probes of collie-limits: glibc memcpy, a copy with streaming stores, and
// c = a + b over float32 with streaming stores ("read two, write one"), each on one thread or
// on several at once (own buffers per thread, all started together).
#pragma once

#include <cstddef>
#include <string>

namespace collie::limits {

enum class Kernel { kMemcpy, kStreamCopy, kAddStream, kAddCached };

const char* kernelName(Kernel k);

// GB/s (1e9 B/s) of bytes written, summed over threads: the best of `runs` timed passes over
// `bytes`-sized buffers. Threads are pinned to CPUs 0..threads-1 where the machine has them.
double measureMemory(Kernel kernel, size_t bytes, int threads, int runs);

}  // namespace collie::limits
