// The dtype and reduction-op tables, listed once: name, enum, element size.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collie/collie.h"

namespace collie {

// X(enumerator, short name, element bytes)
#define COLLIE_DTYPES(X)           \
  X(collieInt8, "int8", 1)         \
  X(collieUint8, "uint8", 1)       \
  X(collieInt32, "int32", 4)       \
  X(collieUint32, "uint32", 4)     \
  X(collieInt64, "int64", 8)       \
  X(collieUint64, "uint64", 8)     \
  X(collieFloat16, "half", 2)      \
  X(collieFloat32, "float", 4)     \
  X(collieFloat64, "double", 8)    \
  X(collieBfloat16, "bfloat16", 2) \
  X(collieFloat8e4m3, "f8e4m3", 1) \
  X(collieFloat8e5m2, "f8e5m2", 1)

// X(enumerator, short name)
#define COLLIE_REDOPS(X) \
  X(collieSum, "sum")    \
  X(collieProd, "prod")  \
  X(collieMax, "max")    \
  X(collieMin, "min")    \
  X(collieAvg, "avg")

inline bool validDtype(int t) { return t >= 0 && t < collieNumTypes; }
inline bool validRedOp(int op) { return op >= 0 && op < collieNumOps; }

inline size_t dtypeSize(collieDataType_t t) {
  switch (t) {
#define COLLIE_X(e, n, s) \
  case e:                 \
    return s;
    COLLIE_DTYPES(COLLIE_X)
#undef COLLIE_X
    default:
      return 0;
  }
}

inline const char* dtypeName(collieDataType_t t) {
  switch (t) {
#define COLLIE_X(e, n, s) \
  case e:                 \
    return n;
    COLLIE_DTYPES(COLLIE_X)
#undef COLLIE_X
    default:
      return "unknown";
  }
}

inline const char* redOpName(collieRedOp_t op) {
  switch (op) {
#define COLLIE_X(e, n) \
  case e:              \
    return n;
    COLLIE_REDOPS(COLLIE_X)
#undef COLLIE_X
    default:
      return "unknown";
  }
}

inline bool isFp8Dtype(collieDataType_t t) {
  return t == collieFloat8e4m3 || t == collieFloat8e5m2;
}

inline bool isFloatDtype(collieDataType_t t) {
  return t == collieFloat16 || t == collieFloat32 || t == collieFloat64 || t == collieBfloat16 ||
         isFp8Dtype(t);
}

}  // namespace collie

namespace collie {

// X(enumerator, name used in messages and by collie-perf)
#define COLLIE_COLLECTIVES(X)        \
  X(kAllReduce, "allreduce")         \
  X(kReduceScatter, "reducescatter") \
  X(kAllGather, "allgather")         \
  X(kBroadcast, "broadcast")         \
  X(kReduce, "reduce")               \
  X(kBarrier, "barrier")             \
  X(kAllToAll, "alltoall")           \
  X(kAllToAllv, "alltoallv")         \
  X(kGather, "gather")               \
  X(kScatter, "scatter")             \
  X(kSendRecv, "sendrecv")

enum class Collective : uint8_t {
#define COLLIE_X(e, n) e,
  COLLIE_COLLECTIVES(COLLIE_X)
#undef COLLIE_X
};

// The collectives every ring-like schedule runs (the five reductions and gathers, the barrier).
inline bool isClassicCollective(Collective c) { return c <= Collective::kBarrier; }

inline const char* collectiveName(Collective c) {
  switch (c) {
#define COLLIE_X(e, n) \
  case Collective::e:  \
    return n;
    COLLIE_COLLECTIVES(COLLIE_X)
#undef COLLIE_X
  }
  return "unknown";
}

}  // namespace collie
