// One rank's share of an AllReduce matrix: every count x dtype x op x placement (or f32 sum
// only) on an initialised communicator, each result checked against the reference. Failures go
// to the Reporter, named by case; the count of cases run goes to it as the note "cases N".
#pragma once

#include <cstddef>
#include <vector>

#include "collie/collie.h"
#include "tests/harness/process_world.h"

namespace collie {
namespace testing {

enum class CaseTypes { kAll, kFloat32SumOnly };
// The dtypes kAll runs: all but the two fp8 ones, which fp8_reduce_test.cc checks bit for bit
// and premulsum_test.cc through the collectives; here they would add a fifth to every matrix.
constexpr int kMatrixDtypes = collieNumTypes - 2;
// kMixed: odd ranks take the other placement than even ranks in every case, as a caller may.
enum class CasePlacement { kSame, kMixed };

// Returns false after a call that failed; the communicator is then aborted, and the caller
// must not use it again. On success the communicator is still the caller's to destroy.
bool runAllReduceCases(collieComm_t comm, int rank, int nranks, const std::vector<size_t>& counts,
                       CaseTypes types, Reporter& rep,
                       CasePlacement placement = CasePlacement::kSame);

}  // namespace testing
}  // namespace collie
