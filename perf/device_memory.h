// collie-perf's device buffers (--device): CUDA allocation, copies and the stream the
// collectives are enqueued on. Without CUDA in the build every call fails with the reason.
#pragma once

#include <cstddef>
#include <string>

namespace collie::perf {

class DeviceMemory {
 public:
  ~DeviceMemory();
  // Picks GPU localRank % visible GPUs, makes it current, allocates send and recv of bytes each
  // and a stream. false with *why on failure.
  bool setUp(int localRank, size_t bytes, std::string* why);
  char* send() const { return send_; }
  char* recv() const { return recv_; }
  void* stream() const { return stream_; }
  int device() const { return device_; }
  // Blocking copies (after the stream's work); false with *why on failure.
  bool toDevice(void* dst, const void* src, size_t bytes, std::string* why);
  bool toHost(void* dst, const void* src, size_t bytes, std::string* why);
  bool sync(std::string* why);  // waits for the stream

 private:
  char* send_ = nullptr;
  char* recv_ = nullptr;
  void* stream_ = nullptr;
  int device_ = -1;
};

}  // namespace collie::perf
