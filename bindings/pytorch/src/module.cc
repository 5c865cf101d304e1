// The Python module collie_torch._C: the backend class and the creator c10d calls.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group_collie.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  // The base class and the Store must be known to pybind before they are named here.
  py::module::import("torch.distributed");
  py::class_<collie_torch::ProcessGroupCollie, c10::intrusive_ptr<collie_torch::ProcessGroupCollie>,
             collie_torch::BackendBase>(m, "ProcessGroupCollie")
      .def(py::init<const c10::intrusive_ptr<c10d::Store>&, int, int, std::chrono::milliseconds>(),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>());
}
