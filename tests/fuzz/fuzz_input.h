// What the fuzz targets share: the entry point libFuzzer calls, a reader that takes fields off
// the front of the input (zeros once it runs out), and the check that stops on a broken rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace collie::fuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  // The next sizeof(T) bytes as a T, zero-filled past the end.
  template <typename T>
  T take() {
    T v{};
    const size_t n = left_ < sizeof(T) ? left_ : sizeof(T);
    memcpy(&v, p_, n);
    p_ += n;
    left_ -= n;
    return v;
  }
  std::string bytes(size_t n) {
    if (n > left_) n = left_;
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    left_ -= n;
    return s;
  }
  std::string rest() { return bytes(left_); }
  size_t left() const { return left_; }

 private:
  const uint8_t* p_;
  size_t left_;
};

// A rule the code under test must keep: a broken one is a finding, like a crash.
#define FUZZ_CHECK(cond)                                                            \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                      \
    }                                                                               \
  } while (0)

}  // namespace collie::fuzz
