// Bindings of the communication layer: tinytorch._C._distributed.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "tcp_store.hpp"

namespace py = pybind11;

namespace tinytorch {
namespace dist {
void bind_process_groups(py::module_& m);
}

void init_distributed(py::module_& root) {
  using namespace dist;
  auto m = root.def_submodule("_distributed", "communication layer: TCPStore, process groups, ring and NCCL backends");

  static py::exception<DistError> dist_error(m, "DistError", PyExc_RuntimeError);
  static py::exception<DistTimeoutError> timeout_error(m, "DistTimeoutError", dist_error.ptr());
  static py::exception<DistNetworkError> network_error(m, "DistNetworkError", dist_error.ptr());
  static py::exception<DistStoreError> store_error(m, "DistStoreError", dist_error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const DistTimeoutError& e) {
      PyErr_SetString(timeout_error.ptr(), e.what());
    } catch (const DistNetworkError& e) {
      PyErr_SetString(network_error.ptr(), e.what());
    } catch (const DistStoreError& e) {
      PyErr_SetString(store_error.ptr(), e.what());
    } catch (const DistError& e) {
      PyErr_SetString(dist_error.ptr(), e.what());
    }
  });

  py::class_<TCPStore, std::shared_ptr<TCPStore>>(m, "TCPStore")
      .def(py::init<std::string, int, int, bool, double, bool, int>(), py::arg("host"), py::arg("port"),
           py::arg("world_size"), py::arg("is_master"), py::arg("timeout"), py::arg("wait_for_workers"),
           py::arg("master_listen_fd"), py::call_guard<py::gil_scoped_release>())
      .def("set",
           [](TCPStore& s, const std::string& k, const std::string& v) {
             py::gil_scoped_release r;
             s.set(k, v);
           })
      .def("get",
           [](TCPStore& s, const std::string& k) {
             Bytes v;
             {
               py::gil_scoped_release r;
               v = s.get(k);
             }
             return py::bytes(v);
           })
      .def("add", &TCPStore::add, py::call_guard<py::gil_scoped_release>())
      .def("compare_set",
           [](TCPStore& s, const std::string& k, const std::string& e, const std::string& d) {
             Bytes v;
             {
               py::gil_scoped_release r;
               v = s.compare_set(k, e, d);
             }
             return py::bytes(v);
           })
      .def("wait", &TCPStore::wait, py::call_guard<py::gil_scoped_release>())
      .def("check", &TCPStore::check, py::call_guard<py::gil_scoped_release>())
      .def("delete_key", &TCPStore::delete_key, py::call_guard<py::gil_scoped_release>())
      .def("num_keys", &TCPStore::num_keys, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("port", &TCPStore::port)
      .def_property_readonly("host", &TCPStore::host)
      .def_property("timeout_seconds", &TCPStore::timeout, &TCPStore::set_timeout);

  bind_process_groups(m);
}
}  // namespace tinytorch
