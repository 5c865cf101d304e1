// A small deterministic random number generator (xoshiro256**, seeded by splitmix64) whose
// output is the same on every platform and compiler, unlike std:: distributions. Its whole
// state is four words, so a checkpoint can save and restore it exactly.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace collie {
namespace train {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }

  void reseed(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix(seed);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n) without modulo bias (Lemire's multiply-shift with rejection).
  uint64_t below(uint64_t n) {
    for (;;) {
      const unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
      const uint64_t low = static_cast<uint64_t>(m);
      if (low >= n || low >= (0 - n) % n) return static_cast<uint64_t>(m >> 64);
    }
  }

  // Standard normal by Box-Muller; one value per call keeps the state simple to save.
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1], so log() is finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  const std::array<uint64_t, 4>& state() const { return s_; }
  void setState(const std::array<uint64_t, 4>& s) { s_ = s; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::array<uint64_t, 4> s_{};
};

}  // namespace train
}  // namespace collie
