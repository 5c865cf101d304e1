// Tensor checks shared by the ops.
#include "tensors.h"

#include <c10/util/Exception.h>

namespace collie_torch {

collieDataType_t collieType(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.device().is_cpu(), "collie ", op, ": only CPU tensors are supported, got ",
              t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "collie ", op, ": sparse tensors are not supported");
  TORCH_CHECK(t.is_contiguous(), "collie ", op, ": the tensor must be contiguous");
  switch (t.scalar_type()) {
    case at::kByte:
    case at::kBool:
      return collieUint8;
    case at::kChar:
      return collieInt8;
    case at::kInt:
      return collieInt32;
    case at::kLong:
      return collieInt64;
    case at::kHalf:
      return collieFloat16;
    case at::kFloat:
      return collieFloat32;
    case at::kDouble:
      return collieFloat64;
    case at::kBFloat16:
      return collieBfloat16;
    default:
      TORCH_CHECK(false, "collie ", op, ": dtype ", t.scalar_type(),
                  " is not supported (uint8, int8, int32, int64, float16, bfloat16, float32, "
                  "float64, bool are)");
  }
}

void checkSame(const std::vector<at::Tensor>& ts, const at::Tensor& t0, const char* op) {
  for (const auto& t : ts) {
    collieType(t, op);
    TORCH_CHECK(t.scalar_type() == t0.scalar_type(), "collie ", op,
                ": tensors differ in dtype: ", t.scalar_type(), " and ", t0.scalar_type());
    TORCH_CHECK(t.numel() == t0.numel(), "collie ", op, ": tensors differ in size: ", t.numel(),
                " and ", t0.numel(), " elements");
  }
}

at::Tensor flatten(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const auto& t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void unflatten(const at::Tensor& flat, std::vector<at::Tensor>& ts) {
  int64_t off = 0;
  for (auto& t : ts) {
    t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
    off += t.numel();
  }
}

}  // namespace collie_torch
