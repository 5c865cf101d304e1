// How a communicator runs a call with a created op (collieRedOpCreatePreMulSum).
//
// The call's input is multiplied by the scalar into a copy (or in place where the input is the
// output), then the call runs as a sum. Every algorithm, transport and in-place rule then runs
// unchanged, and each rank's input is multiplied exactly once whatever schedule the tuner
// picks; a pre-op fused into the schedules would have to find the first touch of the input in
// each of them. The cost is one pass over the input, next to a transfer of the same bytes.
#include "src/base/dtype.h"
#include "src/core/communicator.h"
#include "src/reduce/reduce.h"

namespace collie {

Status CommImpl::executePreMulSum(const CollArgs& args, DeviceOp* device) {
  COLLIE_ASSIGN_OR_RETURN(const PreMulSumOp op, redOps_.take(args.op));
  uint64_t scalar = 0;
  COLLIE_RETURN_IF_ERROR(op.readScalar(args.op, &scalar)
                             .withContext(std::string(collectiveName(args.coll)) + " on rank " +
                                          std::to_string(rank_)));
  CollArgs sum = args;
  sum.op = collieSum;
  const bool scatter = args.coll == Collective::kReduceScatter;
  const size_t n = args.count * (scatter ? static_cast<size_t>(nranks_) : 1);
  if (n == 0 || args.send == nullptr) return execute(sum, device);
  if (args.send == args.recv && !scatter) {
    // AllReduce in place, or Reduce in place on the root: the buffer is the output.
    mulByScalar(args.recv, args.recv, n, args.dtype, &scalar);
  } else {
    // ReduceScatter's input is larger than its output: the user's other blocks stay as given.
    preMulInput_.resize(n * dtypeSize(args.dtype));
    mulByScalar(preMulInput_.data(), args.send, n, args.dtype, &scalar);
    sum.send = preMulInput_.data();
  }
  return execute(sum, device);
}

}  // namespace collie
