// Drawing, running and checking the calls of a chaos trial.
#include "tests/chaos/chaos_calls.h"

#include <cmath>
#include <cstring>

#include "src/base/dtype.h"
#include "tests/harness/block_data.h"
#include "tests/harness/reference.h"

namespace chaos {

using collie::dtypeSize;
using namespace collie::testing;  // NOLINT: the harness's reference functions

namespace {

constexpr collieDataType_t kTypes[] = {collieInt8,    collieUint8,   collieInt32,   collieUint32,
                                       collieInt64,   collieUint64,  collieFloat16, collieFloat32,
                                       collieFloat64, collieBfloat16};
constexpr collieRedOp_t kOps[] = {collieSum, collieProd, collieMax, collieMin, collieAvg};
constexpr const char* kKindNames[] = {"allreduce", "reducescatter", "allgather", "broadcast",
                                      "reduce",    "alltoall",      "gather",    "scatter",
                                      "sendrecv",  "barrier"};

// Algorithms a call of kind may be forced to; one that cannot run a call is skipped.
std::vector<const char*> algorithmsFor(Kind k) {
  switch (k) {
    case Kind::kAllReduce:
      return {"auto", "auto", "ring", "tree", "rhd", "recursive_doubling"};
    case Kind::kBroadcast:
    case Kind::kReduce:
      return {"auto", "auto", "ring", "tree"};
    case Kind::kAlltoAll:
      return {"auto", "pairwise", "bruck"};
    case Kind::kGather:
    case Kind::kScatter:
      return {"auto", "binomial", "linear"};
    default:
      return {"auto"};
  }
}

bool isBlockKind(Kind k) {
  return k == Kind::kReduceScatter || k == Kind::kAllGather || k == Kind::kAlltoAll ||
         k == Kind::kGather || k == Kind::kScatter;
}

bool hasInPlace(Kind k) {
  return k == Kind::kAllReduce || k == Kind::kReduceScatter || k == Kind::kAllGather ||
         k == Kind::kBroadcast || k == Kind::kReduce || k == Kind::kGather || k == Kind::kScatter ||
         k == Kind::kAlltoAll;
}

// v as an element of dt holds it (negative values wrap in the unsigned dtypes).
double asStored(collieDataType_t dt, double v) {
  char e[8];
  storeFromDouble(e, dt, 0, v);
  return loadAsDouble(e, dt, 0);
}

// Elements of a block from src to dst (block_data.h's values) that differ from what was sent.
size_t blockWrong(const char* at, collieDataType_t dt, int src, int dst, size_t count,
                  std::string* bad) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const double want = asStored(dt, value(src, dst, i));
    if (loadAsDouble(at, dt, i) == want) continue;
    if (wrong++ == 0)
      *bad = "block from rank " + std::to_string(src) + " element " + std::to_string(i) + ": got " +
             std::to_string(loadAsDouble(at, dt, i)) + ", want " + std::to_string(want);
  }
  return wrong;
}

}  // namespace

std::string Call::describe() const {
  std::string s = kKindNames[static_cast<int>(kind)];
  if (kind == Kind::kBarrier) return s;
  s += " count " + std::to_string(count) + " " + collie::dtypeName(dt) + " " +
       collie::redOpName(op) + " root " + std::to_string(root) + " algo " + algo;
  return s + (inPlace ? " in-place" : "");
}

Calls::Calls(collieComm_t comm, size_t maxBytes)
    : comm_(comm), maxBytes_(maxBytes), in_(maxBytes + 64), out_(maxBytes + 64) {
  collieCommUserRank(comm, &rank_);
  collieCommCount(comm, &n_);
}

Call Calls::draw(std::mt19937_64& rng, int index) const {
  Call c;
  c.kind = static_cast<Kind>(rng() % static_cast<int>(Kind::kCount));
  c.dt = kTypes[rng() % (sizeof(kTypes) / sizeof(kTypes[0]))];
  c.op = kOps[rng() % (sizeof(kOps) / sizeof(kOps[0]))];
  const auto algos = algorithmsFor(c.kind);
  c.algo = algos[rng() % algos.size()];
  c.inPlace = hasInPlace(c.kind) && rng() % 2 == 0;
  c.root = static_cast<int>(rng() % static_cast<uint64_t>(n_));
  c.tag = index % 1000;
  // Sizes spread evenly over the powers of two up to maxBytes, and one call in ten is empty.
  std::uniform_real_distribution<double> lg(0, std::log2(static_cast<double>(maxBytes_)));
  size_t bytes = static_cast<size_t>(std::exp2(lg(rng)));
  if (rng() % 10 == 0) bytes = 0;
  c.count = bytes / dtypeSize(c.dt);
  if (isBlockKind(c.kind)) c.count /= static_cast<size_t>(n_);
  return c;
}

Outcome Calls::run(const Call& c) {
  if (c.kind == Kind::kBarrier) return finish(collieBarrier(comm_), c, 0, "");
  collieCommSetAlgorithm(comm_, c.algo);
  Outcome out = Outcome::kRight;
  switch (c.kind) {
    case Kind::kAllReduce:
      out = allReduce(c);
      break;
    case Kind::kReduceScatter:
      out = reduceScatter(c);
      break;
    case Kind::kAllGather:
      out = allGather(c);
      break;
    case Kind::kBroadcast:
      out = broadcast(c);
      break;
    case Kind::kReduce:
      out = reduce(c);
      break;
    case Kind::kAlltoAll:
      out = alltoAll(c);
      break;
    case Kind::kGather:
      out = gather(c);
      break;
    case Kind::kScatter:
      out = scatter(c);
      break;
    default:
      out = sendRecv(c);
      break;
  }
  collieCommSetAlgorithm(comm_, "auto");
  return out;
}

Outcome Calls::finish(collieResult_t r, const Call& c, size_t wrong, const std::string& bad) {
  if (r == collieInvalidArgument && std::strcmp(c.algo, "auto") != 0) return Outcome::kSkipped;
  if (r != collieSuccess) return Outcome::kFailed;
  if (wrong == 0) return Outcome::kRight;
  wrong_ = std::to_string(wrong) + " elements wrong; first: " + bad;
  return Outcome::kWrong;
}

Outcome Calls::allReduce(const Call& c) {
  char* send = in_.data();
  char* recv = c.inPlace ? send : out_.data();
  fillInput(send, c.dt, c.op, rank_, c.count, n_);
  collieResult_t r = collieAllReduce(send, recv, c.count, c.dt, c.op, comm_, nullptr);
  std::string bad;
  size_t wrong = r == collieSuccess ? countWrong(recv, c.dt, c.op, c.count, n_, &bad) : 0;
  return finish(r, c, wrong, bad);
}

Outcome Calls::reduceScatter(const Call& c) {
  const size_t esz = dtypeSize(c.dt), mine = static_cast<size_t>(rank_) * c.count;
  char* send = in_.data();
  char* recv = c.inPlace ? send + mine * esz : out_.data();
  fillInputAt(send, c.dt, c.op, rank_, c.count * static_cast<size_t>(n_), n_, 0);
  collieResult_t r = collieReduceScatter(send, recv, c.count, c.dt, c.op, comm_, nullptr);
  std::string bad;
  size_t wrong = r == collieSuccess ? countWrongAt(recv, c.dt, c.op, c.count, n_, mine, &bad) : 0;
  return finish(r, c, wrong, bad);
}

Outcome Calls::allGather(const Call& c) {
  const size_t esz = dtypeSize(c.dt), mine = static_cast<size_t>(rank_) * c.count;
  char* recv = out_.data();
  char* send = c.inPlace ? recv + mine * esz : in_.data();
  fillInputAt(send, c.dt, collieSum, rank_, c.count, n_, mine);
  collieResult_t r = collieAllGather(send, recv, c.count, c.dt, comm_, nullptr);
  std::string bad;
  size_t wrong = 0;
  for (int b = 0; r == collieSuccess && b < n_; ++b) {
    const size_t first = static_cast<size_t>(b) * c.count;
    wrong += countNotInputOf(recv + first * esz, c.dt, collieSum, b, c.count, n_, first, &bad);
  }
  return finish(r, c, wrong, bad);
}

Outcome Calls::broadcast(const Call& c) {
  char* recv = out_.data();
  char* send = c.inPlace ? recv : in_.data();
  if (rank_ == c.root) fillInput(send, c.dt, collieSum, c.root, c.count, n_);
  collieResult_t r = collieBroadcast(send, recv, c.count, c.dt, c.root, comm_, nullptr);
  std::string bad;
  size_t wrong =
      r == collieSuccess ? countNotInputOf(recv, c.dt, collieSum, c.root, c.count, n_, 0, &bad) : 0;
  return finish(r, c, wrong, bad);
}

Outcome Calls::reduce(const Call& c) {
  char* send = in_.data();
  char* recv = c.inPlace ? send : out_.data();
  fillInput(send, c.dt, c.op, rank_, c.count, n_);
  collieResult_t r = collieReduce(send, recv, c.count, c.dt, c.op, c.root, comm_, nullptr);
  std::string bad;
  size_t wrong =
      r == collieSuccess && rank_ == c.root ? countWrong(recv, c.dt, c.op, c.count, n_, &bad) : 0;
  return finish(r, c, wrong, bad);
}

Outcome Calls::alltoAll(const Call& c) {
  const size_t block = c.count * dtypeSize(c.dt);
  char* send = in_.data();
  char* recv = c.inPlace ? send : out_.data();
  for (int j = 0; j < n_; ++j) fillBlock(send + j * block, c.dt, rank_, j, c.count);
  collieResult_t r = collieAlltoAll(send, recv, c.count, c.dt, comm_, nullptr);
  std::string bad;
  size_t wrong = 0;
  for (int j = 0; r == collieSuccess && j < n_; ++j)
    wrong += blockWrong(recv + j * block, c.dt, j, rank_, c.count, &bad);
  return finish(r, c, wrong, bad);
}

Outcome Calls::gather(const Call& c) {
  const size_t block = c.count * dtypeSize(c.dt);
  char* recv = out_.data();
  const bool root = rank_ == c.root;
  char* send = c.inPlace && root ? recv + c.root * block : in_.data();
  fillBlock(send, c.dt, rank_, c.root, c.count);
  collieResult_t r = collieGather(send, recv, c.count, c.dt, c.root, comm_, nullptr);
  std::string bad;
  size_t wrong = 0;
  for (int j = 0; r == collieSuccess && root && j < n_; ++j)
    wrong += blockWrong(recv + j * block, c.dt, j, c.root, c.count, &bad);
  return finish(r, c, wrong, bad);
}

Outcome Calls::scatter(const Call& c) {
  const size_t block = c.count * dtypeSize(c.dt);
  char* send = in_.data();
  const bool root = rank_ == c.root;
  char* recv = c.inPlace && root ? send + c.root * block : out_.data();
  if (root)
    for (int j = 0; j < n_; ++j) fillBlock(send + j * block, c.dt, c.root, j, c.count);
  collieResult_t r = collieScatter(send, recv, c.count, c.dt, c.root, comm_, nullptr);
  std::string bad;
  size_t wrong = r == collieSuccess ? blockWrong(recv, c.dt, c.root, rank_, c.count, &bad) : 0;
  return finish(r, c, wrong, bad);
}

Outcome Calls::sendRecv(const Call& c) {
  const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
  fillBlock(in_.data(), c.dt, rank_, next, c.count);
  collieGroupStart();
  collieResult_t s = collieSendTagged(in_.data(), c.count, c.dt, next, c.tag, comm_, nullptr);
  collieResult_t v = collieRecvTagged(out_.data(), c.count, c.dt, prev, c.tag, comm_, nullptr);
  collieResult_t r = collieGroupEnd();
  if (r == collieSuccess) r = s != collieSuccess ? s : v;
  std::string bad;
  size_t wrong = r == collieSuccess ? blockWrong(out_.data(), c.dt, prev, rank_, c.count, &bad) : 0;
  return finish(r, c, wrong, bad);
}

}  // namespace chaos
