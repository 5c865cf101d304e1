// The one place that knows which c10d class a backend derives from: torch 1.x registers a
// ProcessGroup subclass, torch >= 2 a Backend subclass; everything else is shared.
#pragma once

#include <torch/version.h>

#include <torch/csrc/distributed/c10d/Work.hpp>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
namespace collie_torch {
using BackendBase = c10d::Backend;
}  // namespace collie_torch
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
namespace collie_torch {
using BackendBase = c10d::ProcessGroup;
}  // namespace collie_torch
#endif
