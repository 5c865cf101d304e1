// A schedule: what one rank does in one collective, as operations in issue order, built from
// the pure rank arithmetic of a pattern. The schedule simulator runs these, and tests compare
// them with the arithmetic the algorithms run.
//
// A rank issues its operations one after another without waiting, except at a wait, which
// holds the rank until an earlier operation of its own has completed. A send completes when
// its last byte has arrived; a receive completes when its data has arrived and, if it reduces,
// once the reduction is done. The k-th send from a to b matches the k-th receive on b from a.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace collie {
namespace sched {

enum class OpKind : uint8_t { kSend, kRecv, kWait };

struct Op {
  uint64_t bytes = 0;   // send, recv
  int32_t peer = -1;    // send, recv
  int32_t target = -1;  // wait: index of the operation waited for
  OpKind kind = OpKind::kWait;
  bool reduce = false;  // recv: the received bytes are reduced into the output
};

class Schedule {
 public:
  int send(int peer, uint64_t bytes) { return push(Op{bytes, peer, -1, OpKind::kSend, false}); }
  int recv(int peer, uint64_t bytes, bool reduce) {
    return push(Op{bytes, peer, -1, OpKind::kRecv, reduce});
  }
  void wait(int op) { push(Op{0, -1, op, OpKind::kWait, false}); }
  const std::vector<Op>& ops() const { return ops_; }
  size_t size() const { return ops_.size(); }
  const Op& operator[](size_t i) const { return ops_[i]; }

 private:
  int push(const Op& op) {
    ops_.push_back(op);
    return static_cast<int>(ops_.size() - 1);
  }
  std::vector<Op> ops_;
};

}  // namespace sched
}  // namespace collie
