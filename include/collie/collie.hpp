// Collie C++ API: a RAII Communicator over the C API's communicator, results instead of
// exceptions, typed views (pointer + count) for C++17, and asynchronous calls returning a
// Work. Blocking calls on host memory run in the calling thread. The classes marked COLLIE_API
// are exported: their out-of-line members are the library's C++ ABI; inline ones are compiled
// into the caller.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "collie/collie.h"

namespace collie {

// 16-bit float types as raw bits, for typed views of half and bfloat16 buffers.
struct Half {
  uint16_t bits;
};
struct Bfloat16 {
  uint16_t bits;
};
// 8-bit float types as raw bits (collieFloat8e4m3, collieFloat8e5m2).
struct Float8e4m3 {
  uint8_t bits;
};
struct Float8e5m2 {
  uint8_t bits;
};

template <typename T>
struct DataTypeOf;
#define COLLIE_DTYPE_OF(T, E)                    \
  template <>                                    \
  struct DataTypeOf<T> {                         \
    static constexpr collieDataType_t value = E; \
  };
COLLIE_DTYPE_OF(int8_t, collieInt8)
COLLIE_DTYPE_OF(uint8_t, collieUint8)
COLLIE_DTYPE_OF(int32_t, collieInt32)
COLLIE_DTYPE_OF(uint32_t, collieUint32)
COLLIE_DTYPE_OF(int64_t, collieInt64)
COLLIE_DTYPE_OF(uint64_t, collieUint64)
COLLIE_DTYPE_OF(Half, collieFloat16)
COLLIE_DTYPE_OF(float, collieFloat32)
COLLIE_DTYPE_OF(double, collieFloat64)
COLLIE_DTYPE_OF(Bfloat16, collieBfloat16)
COLLIE_DTYPE_OF(Float8e4m3, collieFloat8e4m3)
COLLIE_DTYPE_OF(Float8e5m2, collieFloat8e5m2)
#undef COLLIE_DTYPE_OF

// A contiguous run of elements, like std::span in C++20.
template <typename T>
struct View {
  T* data = nullptr;
  size_t size = 0;
  View() = default;
  View(T* d, size_t n) : data(d), size(n) {}
  template <typename C>
  View(C& c) : data(c.data()), size(c.size()) {}  // NOLINT: any container with data()/size()
};

// The outcome of a call: a code and the message of the failure (op, rank, peer, what to do).
class COLLIE_API Result {
 public:
  Result() = default;
  Result(collieResult_t code, std::string message) : code_(code), message_(std::move(message)) {}
  bool ok() const { return code_ == collieSuccess; }
  explicit operator bool() const { return ok(); }
  collieResult_t code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string toString() const;

 private:
  collieResult_t code_ = collieSuccess;
  std::string message_;
};

class WorkState;

// An asynchronous operation; the buffers must stay untouched until it completes.
class COLLIE_API Work {
 public:
  Work() = default;
  // Waits up to timeout; collieInProgress if it is still running then (it goes on).
  Result wait(std::chrono::milliseconds timeout = std::chrono::milliseconds::max());
  bool test();  // true once complete (successfully or not)
  bool valid() const { return state_ != nullptr || !immediate_.ok(); }

 private:
  friend class Communicator;
  std::shared_ptr<WorkState> state_;
  Result immediate_;  // an error found before the op was queued
};

// A group as a scope (collieGroupStart / collieGroupEnd): the calls made on this thread while it
// is open, on any communicators, are posted together and completed by end(). A group left open
// ends when it goes out of scope, its result lost: call end() to see it. Groups nest.
class Group {
 public:
  Group() { collieGroupStart(); }
  ~Group() {
    if (open_) collieGroupEnd();
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  Result end() {
    if (!open_) return Result(collieInvalidUsage, "this group has ended already");
    open_ = false;
    const collieResult_t r = collieGroupEnd();
    return r == collieSuccess ? Result() : Result(r, collieGetLastError(nullptr));
  }

 private:
  bool open_ = true;
};

// A reduction op a Communicator made (Communicator::createPreMulSum), destroyed with this
// object; it converts to collieRedOp_t, so it goes wherever an op is taken. Move-only, and it
// must not outlive its Communicator.
class COLLIE_API RedOp {
 public:
  RedOp() = default;
  ~RedOp();
  RedOp(RedOp&& o) noexcept : comm_(o.comm_), op_(o.op_) { o.comm_ = nullptr; }
  RedOp& operator=(RedOp&& o) noexcept;
  RedOp(const RedOp&) = delete;
  RedOp& operator=(const RedOp&) = delete;

  bool valid() const { return comm_ != nullptr; }
  collieRedOp_t handle() const { return op_; }
  operator collieRedOp_t() const { return op_; }  // NOLINT: implicit by design
  // Destroys the op now (collieRedOpDestroy); the object is then empty.
  Result destroy();

 private:
  friend class Communicator;
  collieComm_t comm_ = nullptr;
  collieRedOp_t op_ = collieSum;
};

// A communicator's settings (collieConfig_t, see collie.h): each one set overrides its environment
// variable for that communicator only. Setters chain: Config().name("dp").timeoutMs(5000).
class Config {
 public:
  Config& blocking(bool on) { return set(&collieConfig_t::blocking, on ? 1 : 0); }
  Config& timeoutMs(int ms) { return set(&collieConfig_t::timeoutMs, ms); }
  Config& connectTimeoutMs(int ms) { return set(&collieConfig_t::connectTimeoutMs, ms); }
  Config& nsocks(int n) { return set(&collieConfig_t::nsocks, n); }
  Config& chunkBytes(int bytes) { return set(&collieConfig_t::chunkBytes, bytes); }
  Config& name(std::string v) { return set(&name_, std::move(v)); }
  Config& socketIfname(std::string v) { return set(&ifname_, std::move(v)); }
  Config& transports(std::string v) { return set(&transports_, std::move(v)); }
  Config& algorithm(std::string v) { return set(&algorithm_, std::move(v)); }
  // The C struct; its strings point into this Config, which must outlive its use.
  collieConfig_t toC() const {
    collieConfig_t c = c_;
    c.commName = str(name_);
    c.socketIfname = str(ifname_);
    c.transports = str(transports_);
    c.algorithm = str(algorithm_);
    return c;
  }

 private:
  Config& set(int collieConfig_t::*field, int v) {
    c_.*field = v;
    return *this;
  }
  Config& set(std::optional<std::string>* field, std::string v) {
    *field = std::move(v);
    return *this;
  }
  static const char* str(const std::optional<std::string>& v) {
    return v ? v->c_str() : COLLIE_CONFIG_UNDEF_PTR;
  }
  collieConfig_t c_ = COLLIE_CONFIG_INITIALIZER;
  std::optional<std::string> name_, ifname_, transports_, algorithm_;
};

class COLLIE_API Communicator {
 public:
  Communicator() = default;
  ~Communicator();
  Communicator(Communicator&& o) noexcept : comm_(o.comm_) { o.comm_ = nullptr; }
  Communicator& operator=(Communicator&& o) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  static Result initFromEnv(Communicator* out);
  static Result initRank(Communicator* out, int nranks, const collieUniqueId& id, int rank);

  bool valid() const { return comm_ != nullptr; }
  int rank() const;
  int size() const;
  collieComm_t handle() const { return comm_; }

  Result allreduce(const void* send, void* recv, size_t count, collieDataType_t dtype,
                   collieRedOp_t op);
  Work allreduceAsync(const void* send, void* recv, size_t count, collieDataType_t dtype,
                      collieRedOp_t op);

  template <typename T>
  Result allreduce(View<const T> send, View<T> recv, collieRedOp_t op = collieSum) {
    if (send.size != recv.size) return sizeMismatch();
    return allreduce(send.data, recv.data, recv.size, DataTypeOf<T>::value, op);
  }
  template <typename T>
  Result allreduce(View<T> inout, collieRedOp_t op = collieSum) {
    return allreduce(inout.data, inout.data, inout.size, DataTypeOf<T>::value, op);
  }
  template <typename T>
  Work allreduceAsync(View<T> inout, collieRedOp_t op = collieSum) {
    return allreduceAsync(inout.data, inout.data, inout.size, DataTypeOf<T>::value, op);
  }

  // The other collectives, with the C API's buffer conventions (see collie.h).
  Result reduceScatter(const void* send, void* recv, size_t recvcount, collieDataType_t dtype,
                       collieRedOp_t op);
  Result allgather(const void* send, void* recv, size_t sendcount, collieDataType_t dtype);
  Result broadcast(const void* send, void* recv, size_t count, collieDataType_t dtype, int root);
  Result reduce(const void* send, void* recv, size_t count, collieDataType_t dtype,
                collieRedOp_t op, int root);
  Result barrier();
  template <typename T>
  Result reduceScatter(View<const T> send, View<T> recv, collieRedOp_t op = collieSum) {
    if (send.size != recv.size * static_cast<size_t>(size())) return sizeMismatch();
    return reduceScatter(send.data, recv.data, recv.size, DataTypeOf<T>::value, op);
  }
  template <typename T>
  Result allgather(View<const T> send, View<T> recv) {
    if (recv.size != send.size * static_cast<size_t>(size())) return sizeMismatch();
    return allgather(send.data, recv.data, send.size, DataTypeOf<T>::value);
  }
  template <typename T>
  Result broadcast(View<T> inout, int root) {
    return broadcast(inout.data, inout.data, inout.size, DataTypeOf<T>::value, root);
  }
  // All-to-all, gather and scatter with the C API's buffer conventions (see collie.h); host
  // memory only so far.
  Result alltoall(const void* send, void* recv, size_t count, collieDataType_t dtype);
  Result alltoallv(const void* send, const size_t* sendcounts, const size_t* sdispls, void* recv,
                   const size_t* recvcounts, const size_t* rdispls, collieDataType_t dtype);
  Result gather(const void* send, void* recv, size_t count, collieDataType_t dtype, int root);
  Result scatter(const void* send, void* recv, size_t count, collieDataType_t dtype, int root);
  // Asynchronous forms, in call order with every other operation. The buffers, and for
  // alltoallvAsync the four count and displacement arrays, must stay valid and untouched until
  // the Work completes.
  Work alltoallAsync(const void* send, void* recv, size_t count, collieDataType_t dtype);
  Work alltoallvAsync(const void* send, const size_t* sendcounts, const size_t* sdispls, void* recv,
                      const size_t* recvcounts, const size_t* rdispls, collieDataType_t dtype);
  Work gatherAsync(const void* send, void* recv, size_t count, collieDataType_t dtype, int root);
  Work scatterAsync(const void* send, void* recv, size_t count, collieDataType_t dtype, int root);
  template <typename T>
  Result alltoall(View<const T> send, View<T> recv) {
    const size_t n = static_cast<size_t>(size());
    if (n == 0 || send.size != recv.size || send.size % n != 0) return sizeMismatch();
    return alltoall(send.data, recv.data, send.size / n, DataTypeOf<T>::value);
  }
  // "ring", "tree", ... for the following collectives; "auto" (or "") gives it to the tuner.
  Result setAlgorithm(const std::string& name);
  std::string lastAlgorithm() const;

  // Point-to-point (see collie.h): a send matches the peer's receive from this rank with the
  // same tag, in order per pair and tag. Blocking outside a Group; inside one, posted and
  // completed by its end().
  Result send(const void* buf, size_t count, collieDataType_t dtype, int peer, int tag = 0);
  Result recv(void* buf, size_t count, collieDataType_t dtype, int peer, int tag = 0);
  // Posted on the progress thread, which completes them while later calls go on: a receive
  // posted before this rank's send to the same peer does not wait for it. Not inside a Group.
  Work sendAsync(const void* buf, size_t count, collieDataType_t dtype, int peer, int tag = 0);
  Work recvAsync(void* buf, size_t count, collieDataType_t dtype, int peer, int tag = 0);
  // The first message with tag from any peer; *peer names its sender. Not inside a Group.
  Result recvAny(void* buf, size_t count, collieDataType_t dtype, int tag, int* peer);
  template <typename T>
  Result send(View<const T> data, int peer, int tag = 0) {
    return send(data.data, data.size, DataTypeOf<T>::value, peer, tag);
  }
  template <typename T>
  Result recv(View<T> data, int peer, int tag = 0) {
    return recv(data.data, data.size, DataTypeOf<T>::value, peer, tag);
  }

  // Makes pending operations fail, tells the peers and frees the communicator.
  Result abort();

  // collieCommSplit: collective over this communicator; the ranks that pass one color make *out,
  // ranked by key. kNoColor (or an error) leaves *out empty. Without a config the child has this
  // communicator's settings. A non-blocking child gives collieInProgress with *out valid: poll
  // its asyncError() until it is no longer collieInProgress.
  static constexpr int kNoColor = COLLIE_SPLIT_NOCOLOR;
  Result split(int color, int key, Communicator* out) const;
  Result split(int color, int key, Communicator* out, const Config& config) const;

  // An op that multiplies each rank's input by scalar before the sum (PreMulSum, see
  // collieRedOpCreatePreMulSum; the scalar's value is copied now). It works with allreduce,
  // reduce and reduceScatter on this communicator, for T's dtype only.
  template <typename T>
  Result createPreMulSum(T scalar, RedOp* out) {
    return createPreMulSum(&scalar, DataTypeOf<T>::value, out);
  }
  Result createPreMulSum(const void* scalar, collieDataType_t dtype, RedOp* out);

  // collieCommInitRankConfig. A non-blocking config (blocking(false)) gives collieInProgress
  // with *out valid: poll asyncError() until it is no longer collieInProgress.
  static Result initRank(Communicator* out, int nranks, const collieUniqueId& id, int rank,
                         const Config& config);
  // collieCommGetAsyncError: ok, collieInProgress (init or non-blocking ops in flight) or the
  // first error, with its message.
  Result asyncError() const;
  // collieCommFinalize: completes every operation issued and refuses new ones; the destructor
  // then frees the communicator. Non-blocking: collieInProgress, then see asyncError().
  Result finalize();

 private:
  static Result sizeMismatch();
  collieComm_t comm_ = nullptr;
};

}  // namespace collie
