// Tensor checks shared by the ops: what Collie can take, and the element type it sees.
#pragma once

#include <ATen/ATen.h>
#include <collie/collie.h>

#include <vector>

namespace collie_torch {

// Collie's datatype for a CPU, dense, contiguous tensor of a supported dtype; otherwise a
// RuntimeError naming the op and what is wrong (never a silently wrong answer).
collieDataType_t collieType(const at::Tensor& t, const char* op);

// Checks every tensor as collieType does, and that all share t0's dtype and element count.
void checkSame(const std::vector<at::Tensor>& ts, const at::Tensor& t0, const char* op);

// One contiguous buffer holding the tensors one after another (flattened).
at::Tensor flatten(const std::vector<at::Tensor>& ts);

// Copies consecutive pieces of flat into the tensors.
void unflatten(const at::Tensor& flat, std::vector<at::Tensor>& ts);

}  // namespace collie_torch
