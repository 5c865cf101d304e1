// All-to-all of the collie c10d backend: equal blocks, split sizes along dim 0, and lists.
#include <c10/util/Exception.h>

#include <vector>

#include "process_group_collie.h"
#include "tensors.h"

namespace collie_torch {

namespace {

// Element counts per rank of a dim-0 split (equal blocks when splits is empty).
std::vector<size_t> splitCounts(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                                const char* what) {
  int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  int64_t rowElems = rows == 0 ? 0 : t.numel() / rows;
  std::vector<size_t> counts(size);
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "collie alltoall_base: the ", what, "'s ", rows,
                " rows do not split evenly over ", size, " ranks");
    for (auto& c : counts) c = static_cast<size_t>(rows / size * rowElems);
    return counts;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "collie alltoall_base: ", what,
              " split sizes name ", splits.size(), " ranks, the group has ", size);
  int64_t sum = 0;
  for (int i = 0; i < size; ++i) {
    TORCH_CHECK(splits[i] >= 0, "collie alltoall_base: negative ", what, " split size");
    sum += splits[i];
    counts[i] = static_cast<size_t>(splits[i] * rowElems);
  }
  TORCH_CHECK(sum == rows, "collie alltoall_base: ", what, " split sizes sum to ", sum,
              ", the tensor has ", rows, " rows");
  return counts;
}

std::vector<size_t> displacements(const std::vector<size_t>& counts) {
  std::vector<size_t> d(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupCollie::alltoall_base(at::Tensor& output,
                                                                 at::Tensor& input,
                                                                 std::vector<int64_t>& outputSplits,
                                                                 std::vector<int64_t>& inputSplits,
                                                                 const c10d::AllToAllOptions&) {
  collieDataType_t type = collieType(input, "alltoall_base");
  collieType(output, "alltoall_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "collie alltoall_base: input and output differ in dtype");
  auto sc = splitCounts(input, inputSplits, getSize(), "input");
  auto rc = splitCounts(output, outputSplits, getSize(), "output");
  auto sd = displacements(sc), rd = displacements(rc);
  // collieAlltoAllv takes no in-place form: an aliased output gets a private input copy.
  at::Tensor in =
      input.data_ptr() == output.data_ptr() && input.numel() > 0 ? input.clone() : input;
  check(collieAlltoAllv(in.data_ptr(), sc.data(), sd.data(), output.data_ptr(), rc.data(),
                        rd.data(), type, comm_, nullptr),
        comm_, "alltoall_base");
  return done(c10d::OpType::ALLTOALL_BASE, {output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollie::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions&) {
  TORCH_CHECK(
      static_cast<int>(outputs.size()) == getSize() && static_cast<int>(inputs.size()) == getSize(),
      "collie alltoall: expects ", getSize(), " input and output tensors");
  collieDataType_t type = collieType(inputs[0], "alltoall");
  std::vector<size_t> sc, rc;
  for (int i = 0; i < getSize(); ++i) {
    collieType(inputs[i], "alltoall");
    collieType(outputs[i], "alltoall");
    TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                    outputs[i].scalar_type() == inputs[0].scalar_type(),
                "collie alltoall: tensors differ in dtype");
    sc.push_back(inputs[i].numel());
    rc.push_back(outputs[i].numel());
  }
  auto sd = displacements(sc), rd = displacements(rc);
  at::Tensor in = flatten(inputs);
  at::Tensor out = at::empty({static_cast<int64_t>(rd.back() + rc.back())}, inputs[0].options());
  check(collieAlltoAllv(in.data_ptr(), sc.data(), sd.data(), out.data_ptr(), rc.data(), rd.data(),
                        type, comm_, nullptr),
        comm_, "alltoall");
  unflatten(out, outputs);
  return done(c10d::OpType::ALLTOALL, outputs);
}

}  // namespace collie_torch
