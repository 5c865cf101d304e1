#include "tests/harness/allreduce_cases.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "src/base/dtype.h"
#include "tests/harness/reference.h"

namespace collie {
namespace testing {

bool runAllReduceCases(collieComm_t comm, int rank, int nranks, const std::vector<size_t>& counts,
                       CaseTypes types, Reporter& rep, CasePlacement placement) {
  size_t maxBytes = 0;
  for (size_t c : counts) maxBytes = std::max(maxBytes, c * 8);
  std::vector<char> in(maxBytes + 64), out(maxBytes + 64), kept(maxBytes);
  int cases = 0;
  for (size_t count : counts) {
    for (int t = 0; t < collieNumTypes; ++t) {
      for (int o = 0; o < collieNumOps; ++o) {
        for (int p = 0; p < 2; ++p) {
          const bool inPlace = (p ^ (placement == CasePlacement::kMixed ? rank & 1 : 0)) != 0;
          auto dt = static_cast<collieDataType_t>(t);
          auto op = static_cast<collieRedOp_t>(o);
          if (types == CaseTypes::kFloat32SumOnly && (dt != collieFloat32 || op != collieSum))
            continue;
          if (isFp8Dtype(dt)) continue;  // see kMatrixDtypes
          // Offsets keep the buffers unaligned for some cases.
          char* send = in.data() + (count % 3);
          char* recv = inPlace ? send : out.data() + (count % 5);
          fillInput(send, dt, op, rank, count, nranks);
          const size_t bytes = count * dtypeSize(dt);
          if (!inPlace) memset(recv, 0x5a, bytes);
          if (bytes > 0) memcpy(kept.data(), send, bytes);
          std::string what = "n=" + std::to_string(nranks) + " count=" + std::to_string(count) +
                             " " + dtypeName(dt) + " " + redOpName(op) +
                             (inPlace ? " in-place" : " out-of-place");
          ++cases;
          collieResult_t res = collieAllReduce(send, recv, count, dt, op, comm, nullptr);
          if (res != collieSuccess) {
            rep.fail(what + ": " + collieGetErrorString(res) + ": " + collieGetLastError(comm));
            collieCommAbort(comm);
            return false;
          }
          std::string bad;
          size_t wrong = countWrong(recv, dt, op, count, nranks, &bad);
          if (wrong) rep.fail(what + ": " + std::to_string(wrong) + " wrong, first " + bad);
          // Out of place the input is only read.
          if (!inPlace && bytes > 0 && memcmp(kept.data(), send, bytes) != 0)
            rep.fail(what + ": the send buffer changed");
        }
      }
    }
  }
  rep.note("cases " + std::to_string(cases));
  return true;
}

}  // namespace testing
}  // namespace collie
