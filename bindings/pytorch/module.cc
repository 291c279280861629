// The extension module chorus_torch._C: the creator torch.distributed calls for backend "chorus"
// (func(store, rank, size, timeout) of Backend.register_backend, PyTorch 1.13) and the process
// group's Python class, a subclass of torch.distributed.ProcessGroup.
#include <chorus/base/error.h>
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include <stdexcept>
#include <string>

#include "process_group_chorus.h"

namespace py = pybind11;

namespace chorus::torch_backend {
namespace {

c10::intrusive_ptr<ProcessGroupChorus> CreateProcessGroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  try {
    return c10::make_intrusive<ProcessGroupChorus>(store, rank, size, timeout);
  } catch (const Error& e) {
    throw std::runtime_error(std::string("chorus: creating the process group failed: ") +
                             StatusName(e.status()) + ": " + e.what());
  }
}

}  // namespace
}  // namespace chorus::torch_backend

PYBIND11_MODULE(_C, m) {
  using chorus::torch_backend::ProcessGroupChorus;
  m.doc() = "chorus as a torch.distributed backend";
  // The base class is torch's: its Python type must exist before ours derives from it.
  py::module_::import("torch.distributed");
  py::class_<ProcessGroupChorus, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupChorus>>(
      m, "ProcessGroupChorus")
      .def_property_readonly("collective", &ProcessGroupChorus::collective,
                             "The chorus collective that serves most operations")
      .def_property_readonly("plan_source", &ProcessGroupChorus::plan_source,
                             "Why chorus picked it (AUTO's reason, or the variable)")
      .def_property_readonly("p2p_transport", &ProcessGroupChorus::p2p_transport,
                             "The chorus transport of send, recv, gather, scatter and all-to-all");
  // Rendezvous blocks until every rank arrives: without the GIL, so other Python threads run.
  m.def("create_process_group", &chorus::torch_backend::CreateProcessGroup, py::arg("store"),
        py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>(),
        "Creates the chorus process group (torch.distributed's creator for backend 'chorus')");
}
