// Test data for collie-perf: what each rank sends, and a host reference that counts wrong results.
//
// Inputs are small integers (scaled, for wide types, to reach the high bits) chosen per datatype,
// op and rank count so that every partial result any reduction order can form is exactly
// representable: sums stay under the type's exact-integer bound and products are powers of two
// under its exponent bound. The reference is recomputed in double from the same formula, so it
// does not depend on the library's arithmetic; only float averages get a tolerance, because the
// library may scale by 1/n in the compute precision.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collie/collie.h"

namespace collie::perf {

struct TypeInfo {
  collieDataType_t dtype;
  const char* name;  // nccl-tests spelling
  size_t size;
  bool isSigned;
  bool isFloat;
  double exactBound;  // largest magnitude of an integer the type (and a double) holds exactly
  int maxPow2;        // largest exponent e with 2^e exactly representable and in range
  double epsilon;     // unit roundoff of the type, for float averages
};

// Every datatype in collieDataType_t order; kNumTypes entries.
constexpr int kNumTypes = collieNumTypes;
const TypeInfo& typeInfo(int dtype);

constexpr int kNumOps = collieNumOps;
const char* opName(int op);

// Index of the datatype / op called name, or -1.
int findDatatype(const char* name);
int findOp(const char* name);

// Fills count elements of rank's input. rep varies the data between repetitions. first: the
// index of buf[0] in the whole vector (a block of it, for collectives that split the data).
void fillInput(void* buf, size_t count, collieDataType_t dtype, collieRedOp_t op, int nranks,
               int rank, int rep, size_t first = 0);

// Number of elements of an all-reduce result that differ from the reference of the inputs
// fillInput(…, r, rep) gives for every rank r in [0, nranks).
int64_t countWrong(const void* buf, size_t count, collieDataType_t dtype, collieRedOp_t op,
                   int nranks, int rep, size_t first = 0);

// Elements of buf that differ from what fillInput(…, source, rep, first) wrote: the check of
// collectives that copy (broadcast from source, one block of an all-gather).
int64_t countWrongCopy(const void* buf, size_t count, collieDataType_t dtype, collieRedOp_t op,
                       int nranks, int source, int rep, size_t first);

// IEEE binary16 and bfloat16 host conversions (round to nearest even).
uint16_t floatToHalf(float f);
double halfToDouble(uint16_t h);
// 8-bit floats with mbits mantissa bits, exponent bias and largest finite code maxCode
// (e4m3: 3, 7, 0x7e; e5m2: 2, 15, 0x7b): rounding to nearest even, saturating.
uint8_t doubleToFp8(double v, int mbits, int bias, int maxCode);
double fp8ToDouble(uint8_t b, int mbits, int bias, int maxCode);
uint16_t floatToBf16(float f);
double bf16ToDouble(uint16_t b);

}  // namespace collie::perf
