// The store's wire protocol, shared by the server and its client: a hello with the job's
// secret, then requests and replies, each a fixed header followed by its bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace collie {
namespace store_wire {

constexpr uint32_t kHelloMagic = 0x434c5348;  // "CLSH"
constexpr uint32_t kAckMagic = 0x434c5341;    // "CLSA"
constexpr uint32_t kReqMagic = 0x434c5352;    // "CLSR"
constexpr uint32_t kRepMagic = 0x434c5350;    // "CLSP"
constexpr uint32_t kVersion = 1;
constexpr size_t kMaxKey = 4096;
constexpr size_t kMaxValue = 16 << 20;

enum Cmd : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4 };
enum Code : uint8_t { kOk = 0, kNotFound = 1 };

struct StoreHello {
  uint32_t magic, version;
  uint8_t secret[16];
  uint64_t commId;
};
struct ReqHdr {
  uint32_t magic;
  uint8_t cmd, pad[3];
  uint32_t keyLen, valLen;
  int64_t arg;
};
struct RepHdr {
  uint32_t magic;
  uint8_t code, pad[3];
  uint64_t len;
  int64_t num;
};
static_assert(sizeof(StoreHello) == 32 && sizeof(ReqHdr) == 24 && sizeof(RepHdr) == 24, "wire");

// A CHECK carries its keys, and its reply the missing ones, one per line.
std::vector<std::string> splitLines(const std::string& s);
std::string joinLines(const std::vector<std::string>& v);

}  // namespace store_wire
}  // namespace collie
