// How one c10d call reduces: a Collie op (built-in, or a PreMulSum made for this call), or a
// bitwise fold of every rank's values, which Collie has no op for.
#pragma once

#include <ATen/ATen.h>
#include <collie/collie.h>

#include "torch_compat.h"

namespace collie_torch {

class Reduction {
 public:
  // Refuses (RuntimeError naming the op) what has no exact meaning on t's dtype.
  Reduction(const c10d::ReduceOp& op, const at::Tensor& t, collieComm_t comm, const char* name);
  ~Reduction();
  Reduction(const Reduction&) = delete;
  Reduction& operator=(const Reduction&) = delete;

  // BAND, BOR and BXOR on integers (and BXOR on bool): the caller gathers, then folds.
  bool bitwise() const { return bitwise_; }
  collieRedOp_t op() const { return op_; }
  collieDataType_t type() const { return type_; }  // the tensor's, checked once
  // The fold of stacked's rows (one per rank, in rank order) by the bitwise op.
  at::Tensor fold(const at::Tensor& stacked) const;

 private:
  collieRedOp_t premulSum(const c10d::ReduceOp& op, const at::Tensor& t, const char* name);

  c10d::ReduceOp::RedOpType kind_;
  collieComm_t comm_;
  collieDataType_t type_;
  collieRedOp_t op_ = collieSum;
  bool bitwise_ = false;
  bool made_ = false;  // op_ is a PreMulSum this object destroys
};

}  // namespace collie_torch
