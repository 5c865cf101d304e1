// The collectives of the collie c10d backend: each runs on the calling thread and returns a
// finished Work, since a blocking host call beats a hand-off to another thread at small sizes.
#include <c10/util/Exception.h>

#include <numeric>

#include "process_group_collie.h"
#include "tensors.h"

namespace collie_torch {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

namespace {

const at::Tensor& one(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "collie ", op, ": expects one tensor, got ", ts.size());
  return ts[0];
}

}  // namespace

collieRedOp_t ProcessGroupCollie::redOp(const c10d::ReduceOp& op, const at::Tensor& t,
                                        const char* name) const {
  auto kind = static_cast<c10d::ReduceOp::RedOpType>(op);
  if (t.scalar_type() == at::kBool) {
    // On bool, sum and band are or and and, which max and min of 0/1 give exactly.
    if (kind == c10d::ReduceOp::SUM || kind == c10d::ReduceOp::BOR) return collieMax;
    if (kind == c10d::ReduceOp::PRODUCT || kind == c10d::ReduceOp::BAND) return collieMin;
  }
  switch (kind) {
    case c10d::ReduceOp::SUM:
      return collieSum;
    case c10d::ReduceOp::PRODUCT:
      return collieProd;
    case c10d::ReduceOp::MIN:
      return collieMin;
    case c10d::ReduceOp::MAX:
      return collieMax;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(t.scalar_type() != at::kBool, "collie ", name, ": AVG of bool is undefined");
      return collieAvg;
    default:
      TORCH_CHECK(false, "collie ", name, ": reduce op ", static_cast<int>(kind),
                  " (BAND, BOR, BXOR on integers or PREMUL_SUM) is not supported; Collie has "
                  "SUM, PRODUCT, MIN, MAX, AVG, and BAND/BOR on bool");
  }
}

WorkPtr ProcessGroupCollie::broadcast(std::vector<at::Tensor>& tensors,
                                      const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = one(tensors, "broadcast");
  collieDataType_t type = collieType(t, "broadcast");
  void* p = t.data_ptr();
  check(collieBroadcast(p, p, t.numel(), type, opts.rootRank, comm_, nullptr), comm_, "broadcast");
  return done(OpType::BROADCAST, tensors);
}

void ProcessGroupCollie::allreduceInPlace(const at::Tensor& t, const c10d::ReduceOp& reduceOp,
                                          const char* name) {
  collieDataType_t type = collieType(t, name);
  collieRedOp_t op = redOp(reduceOp, t, name);
  void* p = t.data_ptr();
  check(collieAllReduce(p, p, t.numel(), type, op, comm_, nullptr), comm_, name);
}

WorkPtr ProcessGroupCollie::allreduce(std::vector<at::Tensor>& tensors,
                                      const c10d::AllreduceOptions& opts) {
  allreduceInPlace(one(tensors, "allreduce"), opts.reduceOp, "allreduce");
  return done(OpType::ALLREDUCE, tensors);
}

WorkPtr ProcessGroupCollie::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                const c10d::AllreduceCoalescedOptions& opts) {
  for (auto& t : tensors) allreduceInPlace(t, opts.reduceOp, "allreduce_coalesced");
  return done(OpType::ALLREDUCE_COALESCED, tensors);
}

WorkPtr ProcessGroupCollie::reduce(std::vector<at::Tensor>& tensors,
                                   const c10d::ReduceOptions& opts) {
  const at::Tensor& t = one(tensors, "reduce");
  collieDataType_t type = collieType(t, "reduce");
  collieRedOp_t op = redOp(opts.reduceOp, t, "reduce");
  void* p = t.data_ptr();
  void* out = getRank() == opts.rootRank ? p : nullptr;
  check(collieReduce(p, out, t.numel(), type, op, opts.rootRank, comm_, nullptr), comm_, "reduce");
  return done(OpType::REDUCE, tensors);
}

WorkPtr ProcessGroupCollie::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                      std::vector<at::Tensor>& inputs,
                                      const c10d::AllgatherOptions&) {
  const at::Tensor& in = one(inputs, "allgather");
  collieDataType_t type = collieType(in, "allgather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
              "collie allgather: expects one list of ", getSize(), " output tensors");
  checkSame(outputs[0], in, "allgather");
  at::Tensor flat = at::empty({in.numel() * getSize()}, in.options());
  check(collieAllGather(in.data_ptr(), flat.data_ptr(), in.numel(), type, comm_, nullptr), comm_,
        "allgather");
  unflatten(flat, outputs[0]);
  return done(OpType::ALLGATHER, outputs[0]);
}

WorkPtr ProcessGroupCollie::_allgather_base(at::Tensor& output, at::Tensor& input,
                                            const c10d::AllgatherOptions&) {
  collieDataType_t type = collieType(input, "_allgather_base");
  collieType(output, "_allgather_base");
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * getSize(),
      "collie _allgather_base: the output must hold ", getSize(),
      " times the input's elements of its dtype");
  check(collieAllGather(input.data_ptr(), output.data_ptr(), input.numel(), type, comm_, nullptr),
        comm_, "_allgather_base");
  return done(OpType::_ALLGATHER_BASE, {output});
}

WorkPtr ProcessGroupCollie::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                   std::vector<at::Tensor>& inputs,
                                   const c10d::GatherOptions& opts) {
  const at::Tensor& in = one(inputs, "gather");
  collieDataType_t type = collieType(in, "gather");
  bool root = getRank() == opts.rootRank;
  at::Tensor flat;
  if (root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "collie gather: the root expects one list of ", getSize(), " output tensors");
    checkSame(outputs[0], in, "gather");
    flat = at::empty({in.numel() * getSize()}, in.options());
  }
  void* out = root ? flat.data_ptr() : nullptr;
  check(collieGather(in.data_ptr(), out, in.numel(), type, opts.rootRank, comm_, nullptr), comm_,
        "gather");
  if (!root) return done(OpType::GATHER, {});
  unflatten(flat, outputs[0]);
  return done(OpType::GATHER, outputs[0]);
}

WorkPtr ProcessGroupCollie::scatter(std::vector<at::Tensor>& outputs,
                                    std::vector<std::vector<at::Tensor>>& inputs,
                                    const c10d::ScatterOptions& opts) {
  const at::Tensor& out = one(outputs, "scatter");
  collieDataType_t type = collieType(out, "scatter");
  at::Tensor flat;
  if (getRank() == opts.rootRank) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "collie scatter: the root expects one list of ", getSize(), " input tensors");
    checkSame(inputs[0], out, "scatter");
    flat = flatten(inputs[0]);
  }
  void* in = flat.defined() ? flat.data_ptr() : nullptr;
  check(collieScatter(in, out.data_ptr(), out.numel(), type, opts.rootRank, comm_, nullptr), comm_,
        "scatter");
  return done(OpType::SCATTER, outputs);
}

WorkPtr ProcessGroupCollie::reduce_scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = one(outputs, "reduce_scatter");
  collieDataType_t type = collieType(out, "reduce_scatter");
  collieRedOp_t op = redOp(opts.reduceOp, out, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "collie reduce_scatter: expects one list of ", getSize(), " input tensors");
  checkSame(inputs[0], out, "reduce_scatter");
  at::Tensor flat = flatten(inputs[0]);
  check(collieReduceScatter(flat.data_ptr(), out.data_ptr(), out.numel(), type, op, comm_, nullptr),
        comm_, "reduce_scatter");
  return done(OpType::REDUCE_SCATTER, outputs);
}

WorkPtr ProcessGroupCollie::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::ReduceScatterOptions& opts) {
  collieDataType_t type = collieType(output, "_reduce_scatter_base");
  collieType(input, "_reduce_scatter_base");
  collieRedOp_t op = redOp(opts.reduceOp, output, "_reduce_scatter_base");
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && input.numel() == output.numel() * getSize(),
      "collie _reduce_scatter_base: the input must hold ", getSize(),
      " times the output's elements of its dtype");
  check(collieReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(), type, op, comm_,
                            nullptr),
        comm_, "_reduce_scatter_base");
  return done(OpType::_REDUCE_SCATTER_BASE, {output});
}

}  // namespace collie_torch
