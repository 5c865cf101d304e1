// The reduction ops a communicator creates (collieRedOpCreatePreMulSum), and how a call runs
// one: each rank's input multiplied by the op's scalar, then summed.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "collie/collie.h"
#include "src/base/status.h"

namespace collie {

// A created op as a call uses it.
struct PreMulSumOp {
  collieDataType_t dtype = collieFloat32;
  collieScalarResidence_t residence = collieScalarHostImmediate;
  uint64_t value = 0;                  // HostImmediate: the scalar's bytes, copied at creation
  const void* deviceScalar = nullptr;  // Device: read at each call
  // The scalar's bytes now (a Device scalar is read here); ok only with `out` holding them.
  Status readScalar(int op, uint64_t* out) const;
};

// Op values past the built-in ones.
inline bool isCreatedRedOp(int op) { return op >= collieNumOps; }

// One communicator's created ops. A call checks its op and holds it (hold) until it runs
// (take): an op may be destroyed once the calls given it have returned, and a call queued in a
// group or on the progress thread still runs with it. Thread-safe.
class RedOpTable {
 public:
  // A new op; its value is unique in the process. scalar is checked by the caller.
  StatusOr<int> create(collieDataType_t dtype, collieScalarResidence_t residence,
                       const void* scalar);
  Status destroy(int op);
  // Ok when op is a live op of this table made for dtype; holds it for one take().
  Status hold(const char* call, int op, collieDataType_t dtype);
  // The op a hold() kept, giving the hold back.
  StatusOr<PreMulSumOp> take(int op);

 private:
  struct Entry {
    PreMulSumOp op;
    int holds = 0;
    bool destroyed = false;
  };
  std::mutex mu_;
  std::unordered_map<int, Entry> ops_;  // guarded by mu_
};

}  // namespace collie
