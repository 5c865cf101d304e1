// PreMulSum ops (collieRedOpCreatePreMulSum) over real processes: 4 ranks on two simulated
// hosts, AllReduce, Reduce and ReduceScatter on every float dtype and int32, in place and out
// of place, through each algorithm that runs them, against a reference computed here; built-in
// fp8 sum, avg and max through AllReduce; the C++ RedOp; then the calls an op must refuse.
// One launch, every case inside it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "collie/collie.hpp"
#include "src/base/dtype.h"
#include "tests/harness/process_world.h"
#include "tests/harness/reference.h"

namespace collie {
namespace testing {
namespace {

constexpr int kRanks = 4;
const collieDataType_t kTypes[] = {collieFloat16,  collieFloat32,    collieFloat64,
                                   collieBfloat16, collieFloat8e4m3, collieFloat8e5m2,
                                   collieInt32};
const char* const kAlgos[] = {"auto",
                              "ring",
                              "tree",
                              "rhd",
                              "recursive_doubling",
                              "hierarchical",
                              "shm_direct",
                              "shm_single_copy",
                              "binomial",
                              "linear"};

// Values whose scaled sums are exact in every dtype: fp8 gets inputs in [-2, 2] and scalar 0.5
// (partial sums are halves up to 4), int32 scalar 3, the others integers in [-4, 4] and 2.5.
double scalarFor(collieDataType_t t) { return isFp8Dtype(t) ? 0.5 : t == collieInt32 ? 3 : 2.5; }
double input(collieDataType_t t, int r, size_t i) {
  if (isFp8Dtype(t)) return static_cast<double>((r * 5 + i * 3) % 5) - 2;
  return static_cast<double>((r * 7 + i * 13) % 9) - 4;
}
double expected(collieDataType_t t, size_t i) {
  double sum = 0;
  for (int r = 0; r < kRanks; ++r) sum += scalarFor(t) * input(t, r, i);
  return sum;
}

struct Ctx {
  collieComm_t comm;
  int rank;
  Reporter& rep;
  std::vector<char> in, out;
  int cases = 0, skipped = 0;
};

// Fills the input of coll (count per rank's output block), runs it, checks the output. False
// when the forced algorithm cannot run coll (nothing ran).
bool runCase(Ctx& c, Collective coll, collieDataType_t t, collieRedOp_t op, size_t count,
             bool inPlace, const std::string& what) {
  const size_t esz = dtypeSize(t), blocks = coll == Collective::kReduceScatter ? kRanks : 1;
  const int root = 1;
  char* send = c.in.data() + 1;
  for (size_t i = 0; i < count * blocks; ++i) storeFromDouble(send, t, i, input(t, c.rank, i));
  const size_t first = coll == Collective::kReduceScatter ? c.rank * count : 0;
  char* recv = !inPlace ? c.out.data() + 3 : send + first * esz;
  collieResult_t res = collieInternalError;
  if (coll == Collective::kAllReduce)
    res = collieAllReduce(send, recv, count, t, op, c.comm, nullptr);
  else if (coll == Collective::kReduce)
    res = collieReduce(send, recv, count, t, op, root, c.comm, nullptr);
  else
    res = collieReduceScatter(send, recv, count, t, op, c.comm, nullptr);
  const std::string err = res == collieSuccess ? "" : collieGetLastError(c.comm);
  if (res == collieInvalidArgument && err.find("cannot run") != std::string::npos) return false;
  ++c.cases;
  if (res != collieSuccess) return c.rep.fail(what + ": " + err), true;
  if (coll == Collective::kReduce && c.rank != root) return true;
  for (size_t i = 0; i < count; ++i) {
    const double got = loadAsDouble(recv, t, i), want = expected(t, first + i);
    if (got != want)
      return c.rep.fail(what + ": element " + std::to_string(first + i) + " is " +
                        std::to_string(got) + ", expected " + std::to_string(want)),
             true;
  }
  return true;
}

void algorithmCases(Ctx& c, const char* algo, const std::vector<collieRedOp_t>& ops) {
  if (collieCommSetAlgorithm(c.comm, algo) != collieSuccess) return c.rep.fail(algo);
  for (Collective coll : {Collective::kAllReduce, Collective::kReduce, Collective::kReduceScatter})
    for (size_t ti = 0; ti < ops.size(); ++ti)
      for (size_t count : {size_t{1}, size_t{3001}})
        for (bool inPlace : {false, true}) {
          const std::string what = std::string(algo) + " " + collectiveName(coll) + " " +
                                   dtypeName(kTypes[ti]) + " count=" + std::to_string(count) +
                                   (inPlace ? " in place" : "");
          if (!runCase(c, coll, kTypes[ti], ops[ti], count, inPlace, what)) ++c.skipped;
        }
}

// The built-in ops on fp8 through a collective, with the shared reference (tests/harness).
void fp8BuiltinCases(Ctx& c) {
  for (collieDataType_t t : {collieFloat8e4m3, collieFloat8e5m2})
    for (collieRedOp_t op : {collieSum, collieAvg, collieMax}) {
      const size_t count = 4099;
      fillInput(c.in.data(), t, op, c.rank, count, kRanks);
      ++c.cases;
      if (collieAllReduce(c.in.data(), c.out.data(), count, t, op, c.comm, nullptr) !=
          collieSuccess)
        return c.rep.fail(std::string("fp8 allreduce: ") + collieGetLastError(c.comm));
      std::string bad;
      if (countWrong(c.out.data(), t, op, count, kRanks, &bad) != 0)
        c.rep.fail(std::string(dtypeName(t)) + " " + redOpName(op) + ": " + bad);
    }
}

// res must be collieInvalidArgument with a message (comm's last error) that names op.
void expectInvalid(Ctx& c, collieResult_t res, const std::string& what, const std::string& op,
                   collieComm_t comm = nullptr) {
  ++c.cases;
  const std::string msg = collieGetLastError(comm != nullptr ? comm : c.comm);
  if (res != collieInvalidArgument)
    c.rep.fail(what + ": got " + collieGetErrorString(res) + ", not invalid argument");
  else if (msg.find(op) == std::string::npos)
    c.rep.fail(what + ": message does not name " + op + ": " + msg);
}

std::string opText(collieRedOp_t op) { return "op " + std::to_string(static_cast<int>(op)); }

// The calls an op refuses, all before any data moves (so every rank refuses them alike).
void errorCases(Ctx& c, Communicator& other) {
  float f = 2.0f, buf[4] = {};
  double d[4] = {};
  collieRedOp_t op;
  if (collieRedOpCreatePreMulSum(&op, &f, collieFloat32, collieScalarHostImmediate, c.comm) !=
      collieSuccess)
    return c.rep.fail("create for the error cases failed");
  if (static_cast<int>(op) < collieNumOps) c.rep.fail("a created op below collieNumOps");
  expectInvalid(c, collieAllReduce(d, d, 4, collieFloat64, op, c.comm, nullptr),
                "an op made for float given double", opText(op));
  expectInvalid(c, collieAllReduce(buf, buf, 4, collieFloat32, op, other.handle(), nullptr),
                "an op of another communicator", opText(op), other.handle());
  if (collieRedOpDestroy(op, c.comm) != collieSuccess) c.rep.fail("destroy failed");
  expectInvalid(c, collieReduce(buf, buf, 4, collieFloat32, op, 0, c.comm, nullptr),
                "a destroyed op", opText(op));
  expectInvalid(c, collieRedOpDestroy(op, c.comm), "a second destroy", opText(op));
  expectInvalid(c, collieRedOpDestroy(collieSum, c.comm), "destroying a built-in op",
                opText(collieSum));
  const auto unknown = static_cast<collieRedOp_t>(1 << 30);
  float one = 0;
  expectInvalid(c, collieReduceScatter(buf, &one, 1, collieFloat32, unknown, c.comm, nullptr),
                "an op never made", opText(unknown));
  expectInvalid(c, collieRedOpCreatePreMulSum(&op, &f, collieFloat32, collieScalarDevice, c.comm),
                "a device scalar in host memory", "collieScalar");
  expectInvalid(
      c, collieRedOpCreatePreMulSum(&op, nullptr, collieFloat32, collieScalarHostImmediate, c.comm),
      "a NULL scalar", "scalar");
}

// The scalar is copied at creation, an op destroyed after the call that took it (in a group)
// still runs, and the C++ RedOp goes wherever an op does.
void lifetimeCases(Ctx& c, Communicator& other) {
  float scalar = 2.5f;
  collieRedOp_t op;
  collieRedOpCreatePreMulSum(&op, &scalar, collieFloat32, collieScalarHostImmediate, c.comm);
  scalar = 100.0f;
  std::vector<float> v(5);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(input(collieFloat32, c.rank, i));
  collieGroupStart();
  collieAllReduce(v.data(), v.data(), v.size(), collieFloat32, op, c.comm, nullptr);
  if (collieRedOpDestroy(op, c.comm) != collieSuccess) c.rep.fail("destroy inside a group");
  ++c.cases;
  if (collieGroupEnd() != collieSuccess)
    return c.rep.fail(std::string("group: ") + collieGetLastError(nullptr));
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != expected(collieFloat32, i))
      return c.rep.fail("group/immediate: wrong element " + std::to_string(i));
  RedOp half;
  ++c.cases;
  if (!other.createPreMulSum<double>(0.5, &half)) return c.rep.fail("C++ createPreMulSum failed");
  std::vector<double> x(3, static_cast<double>(c.rank + 1)), y(3);
  Result r = other.allreduce(View<const double>(x.data(), x.size()), View<double>(y), half);
  if (!r || y[0] != 0.5 * (1 + 2 + 3 + 4)) c.rep.fail("C++ PreMulSum: " + r.toString());
  if (!half.destroy()) c.rep.fail("C++ RedOp destroy");
}

void body(int rank, Reporter& rep) {
  setenv("COLLIE_HOSTID", (rank % 2 == 0 ? "hostA" : "hostB"), 1);
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm) != collieSuccess) return rep.fail("init failed");
  // A second communicator, for the op that belongs to another one and the C++ API.
  collieUniqueId id;
  if (rank == 0) collieGetUniqueId(&id);
  collieBroadcast(&id, &id, sizeof id, collieUint8, 0, comm, nullptr);
  Communicator other;
  if (!Communicator::initRank(&other, kRanks, id, rank)) return rep.fail("second init failed");
  Ctx c{comm, rank, rep, std::vector<char>(kRanks * 3001 * 8 + 64),
        std::vector<char>(3001 * 8 + 64)};
  std::vector<collieRedOp_t> ops;
  for (collieDataType_t t : kTypes) {
    std::vector<char> s(8);
    storeFromDouble(s.data(), t, 0, scalarFor(t));
    collieRedOp_t op;
    if (collieRedOpCreatePreMulSum(&op, s.data(), t, collieScalarHostImmediate, comm) !=
        collieSuccess)
      return rep.fail(std::string("create ") + dtypeName(t) + ": " + collieGetLastError(comm));
    ops.push_back(op);
  }
  for (const char* algo : kAlgos) algorithmCases(c, algo, ops);
  collieCommSetAlgorithm(comm, "auto");
  for (collieRedOp_t op : ops) collieRedOpDestroy(op, comm);
  fp8BuiltinCases(c);
  lifetimeCases(c, other);
  errorCases(c, other);
  rep.note("cases " + std::to_string(c.cases) + " skipped " + std::to_string(c.skipped));
  collieCommDestroy(comm);
}

TEST(PreMulSum, EveryFloatDtypeAndAlgorithmMatchesReferenceAndBadOpsAreRefused) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "60000"}};
  auto out = runWorld(kRanks, opt, body);
  expectAllPassed(out);
  ASSERT_FALSE(out.empty());
  ASSERT_EQ(out[0].notes.size(), 1u);
  std::printf("%s\n", out[0].notes[0].c_str());
}

}  // namespace
}  // namespace testing
}  // namespace collie
