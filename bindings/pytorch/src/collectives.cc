// The collectives of the collie c10d backend: each runs on the calling thread and returns a
// finished Work, since a blocking host call beats a hand-off to another thread at small sizes.
#include <c10/util/Exception.h>

#include <numeric>

#include "process_group_collie.h"
#include "reduction.h"
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
  Reduction red(reduceOp, t, comm_, name);
  if (red.bitwise()) {
    t.copy_(red.fold(gatherRows(t, name)).view(t.sizes()));
    return;
  }
  void* p = t.data_ptr();
  check(collieAllReduce(p, p, t.numel(), red.type(), red.op(), comm_, nullptr), comm_, name);
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
  Reduction red(opts.reduceOp, t, comm_, "reduce");
  const collieDataType_t type = red.type();
  bool root = getRank() == opts.rootRank;
  if (red.bitwise()) {
    at::Tensor rows = root ? at::empty({getSize(), t.numel()}, t.options()) : at::Tensor();
    check(collieGather(t.data_ptr(), root ? rows.data_ptr() : nullptr, t.numel(), type,
                       opts.rootRank, comm_, nullptr),
          comm_, "reduce");
    if (root) t.copy_(red.fold(rows).view(t.sizes()));
    return done(OpType::REDUCE, tensors);
  }
  void* p = t.data_ptr();
  check(
      collieReduce(p, root ? p : nullptr, t.numel(), type, red.op(), opts.rootRank, comm_, nullptr),
      comm_, "reduce");
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

WorkPtr ProcessGroupCollie::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                std::vector<at::Tensor>& inputs,
                                                const c10d::AllgatherOptions&) {
  const char* name = "allgather_coalesced";
  TORCH_CHECK(!inputs.empty(), "collie ", name, ": expects at least one input tensor");
  TORCH_CHECK(static_cast<int>(outputLists.size()) == getSize(), "collie ", name, ": expects ",
              getSize(), " output lists, got ", outputLists.size());
  collieDataType_t type = collieType(inputs[0], name);
  std::vector<at::Tensor> outputs;
  for (auto& list : outputLists) {
    TORCH_CHECK(list.size() == inputs.size(), "collie ", name, ": each output list must hold ",
                inputs.size(), " tensors, like the input list");
    for (size_t i = 0; i < list.size(); ++i) {
      collieType(list[i], name);
      collieType(inputs[i], name);
      TORCH_CHECK(list[i].scalar_type() == inputs[0].scalar_type() &&
                      inputs[i].scalar_type() == inputs[0].scalar_type() &&
                      list[i].numel() == inputs[i].numel(),
                  "collie ", name, ": output ", i, " of a list differs from input ", i,
                  " in dtype or size, or the inputs differ in dtype");
      outputs.push_back(list[i]);
    }
  }
  at::Tensor flat = flatten(inputs);
  at::Tensor rows = at::empty({getSize(), flat.numel()}, flat.options());
  check(collieAllGather(flat.data_ptr(), rows.data_ptr(), flat.numel(), type, comm_, nullptr),
        comm_, name);
  for (int r = 0; r < getSize(); ++r) unflatten(rows[r], outputLists[r]);
  return done(OpType::ALLGATHER_COALESCED, outputs);
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
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "collie reduce_scatter: expects one list of ", getSize(), " input tensors");
  checkSame(inputs[0], out, "reduce_scatter");
  reduceScatter(flatten(inputs[0]), out, opts.reduceOp, "reduce_scatter");
  return done(OpType::REDUCE_SCATTER, outputs);
}

WorkPtr ProcessGroupCollie::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::ReduceScatterOptions& opts) {
  collieType(output, "_reduce_scatter_base");
  collieType(input, "_reduce_scatter_base");
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && input.numel() == output.numel() * getSize(),
      "collie _reduce_scatter_base: the input must hold ", getSize(),
      " times the output's elements of its dtype");
  reduceScatter(input, output, opts.reduceOp, "_reduce_scatter_base");
  return done(OpType::_REDUCE_SCATTER_BASE, {output});
}

void ProcessGroupCollie::reduceScatter(const at::Tensor& in, const at::Tensor& out,
                                       const c10d::ReduceOp& reduceOp, const char* name) {
  Reduction red(reduceOp, out, comm_, name);
  const collieDataType_t type = red.type();
  if (!red.bitwise()) {
    check(collieReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), type, red.op(), comm_,
                              nullptr),
          comm_, name);
    return;
  }
  // Block r of every rank's input goes to rank r, which folds the blocks it receives.
  std::vector<size_t> counts(getSize(), out.numel()), displs(getSize());
  for (int r = 0; r < getSize(); ++r) displs[r] = r * out.numel();
  at::Tensor rows = at::empty({getSize(), out.numel()}, out.options());
  check(collieAlltoAllv(in.data_ptr(), counts.data(), displs.data(), rows.data_ptr(), counts.data(),
                        displs.data(), type, comm_, nullptr),
        comm_, name);
  out.copy_(red.fold(rows).view(out.sizes()));
}

at::Tensor ProcessGroupCollie::gatherRows(const at::Tensor& t, const char* name) {
  at::Tensor rows = at::empty({getSize(), t.numel()}, t.options());
  check(collieAllGather(t.data_ptr(), rows.data_ptr(), t.numel(), collieType(t, name), comm_,
                        nullptr),
        comm_, name);
  return rows;
}

}  // namespace collie_torch
