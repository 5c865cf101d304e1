// Maps c10d's reduce ops onto Collie's, and folds the bitwise ones locally.
#include "reduction.h"

#include <c10/util/Exception.h>

#include <torch/csrc/distributed/c10d/Types.hpp>

#include "tensors.h"

namespace collie_torch {

namespace {

bool isBitwise(c10d::ReduceOp::RedOpType kind) {
  return kind == c10d::ReduceOp::BAND || kind == c10d::ReduceOp::BOR ||
         kind == c10d::ReduceOp::BXOR;
}

// Collie's op for kind on a tensor of dtype t (never a bitwise or PreMulSum one).
collieRedOp_t builtIn(c10d::ReduceOp::RedOpType kind, const at::Tensor& t, const char* name) {
  if (t.scalar_type() == at::kBool) {
    // On bool, sum and band are or and and, which max and min of 0/1 give exactly.
    if (kind == c10d::ReduceOp::SUM || kind == c10d::ReduceOp::BOR) return collieMax;
    if (kind == c10d::ReduceOp::PRODUCT || kind == c10d::ReduceOp::BAND) return collieMin;
    TORCH_CHECK(kind != c10d::ReduceOp::AVG, "collie ", name, ": AVG of bool is undefined");
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
      return collieAvg;
    default:
      TORCH_CHECK(false, "collie ", name, ": reduce op ", static_cast<int>(kind),
                  " is not supported");
  }
}

}  // namespace

Reduction::Reduction(const c10d::ReduceOp& op, const at::Tensor& t, collieComm_t comm,
                     const char* name)
    : kind_(static_cast<c10d::ReduceOp::RedOpType>(op)), comm_(comm), type_(collieType(t, name)) {
  if (isBitwise(kind_) && !(t.scalar_type() == at::kBool && kind_ != c10d::ReduceOp::BXOR)) {
    TORCH_CHECK(at::isIntegralType(t.scalar_type(), /*includeBool=*/true), "collie ", name,
                ": BAND, BOR and BXOR take integer or bool tensors, got ", t.scalar_type());
    bitwise_ = true;
    return;
  }
  op_ = kind_ == c10d::ReduceOp::PREMUL_SUM ? premulSum(op, t, name) : builtIn(kind_, t, name);
}

Reduction::~Reduction() {
  if (made_) collieRedOpDestroy(op_, comm_);
}

collieRedOp_t Reduction::premulSum(const c10d::ReduceOp& op, const at::Tensor& t,
                                   const char* name) {
  auto* factor = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(factor != nullptr, "collie ", name, ": PREMUL_SUM carries no factor");
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), "collie ", name,
              ": PREMUL_SUM takes floating-point tensors, got ", t.scalar_type());
  // The factor in the tensor's own dtype, as Collie's PreMulSum reads it.
  at::Tensor scalar = at::empty({1}, t.options());
  if (factor->tensor_factors.empty()) {
    scalar.fill_(factor->double_factor);
  } else {
    const at::Tensor& f = factor->tensor_factors[0];
    TORCH_CHECK(f.device().is_cpu() && f.numel() == 1, "collie ", name,
                ": the PREMUL_SUM factor must be a one-element CPU tensor");
    scalar.fill_(f.reshape({}));
  }
  collieRedOp_t made;
  collieResult_t r =
      collieRedOpCreatePreMulSum(&made, scalar.data_ptr(), type_, collieScalarHostImmediate, comm_);
  TORCH_CHECK(r == collieSuccess, "collie ", name, ": PREMUL_SUM: ", collieGetLastError(comm_));
  made_ = true;
  return made;
}

at::Tensor Reduction::fold(const at::Tensor& stacked) const {
  at::Tensor acc = stacked[0].clone();
  for (int64_t r = 1; r < stacked.size(0); ++r) {
    if (kind_ == c10d::ReduceOp::BAND) {
      acc.bitwise_and_(stacked[r]);
    } else if (kind_ == c10d::ReduceOp::BOR) {
      acc.bitwise_or_(stacked[r]);
    } else {
      acc.bitwise_xor_(stacked[r]);
    }
  }
  return acc;
}

}  // namespace collie_torch
