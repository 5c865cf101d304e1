// Small helpers of the micro-benchmarks: page-aligned touched buffers, and the registration
// entry point of each benchmark file (main calls them in order).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace collie::micro {

class AlignedBuffer {
 public:
  AlignedBuffer(size_t bytes, int fill) : bytes_(bytes) {
    size_t rounded = (bytes + 4095) / 4096 * 4096;
    p_ = static_cast<char*>(aligned_alloc(4096, rounded ? rounded : 4096));
    if (p_) memset(p_, fill, rounded);
  }
  ~AlignedBuffer() { free(p_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  char* data() { return p_; }
  size_t size() const { return bytes_; }

 private:
  char* p_;
  size_t bytes_;
};

void registerReduceBenchmarks();
void registerFrameBenchmarks();
void registerTransportBenchmarks();

}  // namespace collie::micro
