// Test data with an independent reference: rank r's input element i is a small value chosen per
// dtype and op so that the exact result is known in double (sums, products and extremes stay
// exactly representable in every dtype, half and bfloat16 included); the expected output is
// computed here from the generator, never from the library's kernels.
#pragma once

#include <cstddef>
#include <string>

#include "collie/collie.h"

namespace collie {
namespace testing {

double inputValue(collieDataType_t t, collieRedOp_t op, int rank, size_t i, int nranks);
double expectedValue(collieDataType_t t, collieRedOp_t op, size_t i, int nranks);

void fillInput(void* buf, collieDataType_t t, collieRedOp_t op, int rank, size_t count,
               int nranks);
// Number of elements off by more than the dtype's tolerance; *firstBad describes the first.
size_t countWrong(const void* buf, collieDataType_t t, collieRedOp_t op, size_t count, int nranks,
                  std::string* firstBad);

// The same for a slice: buf's element j stands for element first + j of the whole vector (a
// block of a ReduceScatter or AllGather).
void fillInputAt(void* buf, collieDataType_t t, collieRedOp_t op, int rank, size_t count,
                 int nranks, size_t first);
size_t countWrongAt(const void* buf, collieDataType_t t, collieRedOp_t op, size_t count,
                    int nranks, size_t first, std::string* firstBad);
// Elements of buf that differ from rank's input (as fillInputAt made it), e.g. after a
// Broadcast from rank or in a gathered block of rank.
size_t countNotInputOf(const void* buf, collieDataType_t t, collieRedOp_t op, int rank,
                       size_t count, int nranks, size_t first, std::string* firstBad);

double loadAsDouble(const void* buf, collieDataType_t t, size_t i);
void storeFromDouble(void* buf, collieDataType_t t, size_t i, double v);

}  // namespace testing
}  // namespace collie
