// The calls of a chaos trial: drawn from one random stream (the same on every rank), run, and
// checked against the test harness's independent reference.
#pragma once

#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "collie/collie.h"

namespace chaos {

enum class Kind {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecv,
  kBarrier,
  kCount
};

struct Call {
  Kind kind = Kind::kBarrier;
  collieDataType_t dt = collieFloat32;
  collieRedOp_t op = collieSum;
  size_t count = 0;  // elements of the vector, or of one rank's block for the block kinds
  bool inPlace = false;
  int root = 0;
  int tag = 0;
  const char* algo = "auto";
  std::string describe() const;
};

enum class Outcome { kRight, kWrong, kFailed, kSkipped };

class Calls {
 public:
  Calls(collieComm_t comm, size_t maxBytes);
  Call draw(std::mt19937_64& rng, int index) const;
  Outcome run(const Call& c);
  const std::string& lastWrong() const { return wrong_; }

 private:
  Outcome finish(collieResult_t r, const Call& c, size_t wrong, const std::string& bad);
  Outcome allReduce(const Call& c);
  Outcome reduceScatter(const Call& c);
  Outcome allGather(const Call& c);
  Outcome broadcast(const Call& c);
  Outcome reduce(const Call& c);
  Outcome alltoAll(const Call& c);
  Outcome gather(const Call& c);
  Outcome scatter(const Call& c);
  Outcome sendRecv(const Call& c);

  collieComm_t comm_;
  int rank_ = 0;
  int n_ = 1;
  size_t maxBytes_;
  std::vector<char> in_, out_;
  std::string wrong_;
};

}  // namespace chaos
