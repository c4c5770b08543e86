// Bindings of Work and the backends. Every call that can block releases the GIL; Python objects
// that the progress thread keeps alive are released under the GIL (or leaked once the interpreter is gone).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "nccl_backend.hpp"
#include "process_group_ring.hpp"
#include "python_fr.hpp"

namespace py = pybind11;

namespace tinytorch::dist {
namespace {

using Keep = std::shared_ptr<void>;

bool interpreter_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

std::shared_ptr<py::object> hold(py::object o) {
  return std::shared_ptr<py::object>(std::make_unique<py::object>(std::move(o)).release(), [](py::object* p) {
    std::unique_ptr<py::object> owned(p);
    if (!interpreter_alive()) {
      owned->release();  // decref without an interpreter would crash; the process is exiting anyway
      return;
    }
    py::gil_scoped_acquire g;
    owned.reset();
  });
}

std::shared_ptr<void> keep(py::object o) {
  if (o.is_none()) return nullptr;
  return hold(std::move(o));
}

void* as_ptr(uintptr_t p) { return reinterpret_cast<void*>(p); }

// Python callbacks run on backend threads: with the GIL, and never during interpreter teardown.
void add_py_callback(Work& w, py::function fn) {
  auto f = hold(std::move(fn));
  w.add_callback([f] {
    if (!interpreter_alive()) return;
    py::gil_scoped_acquire g;
    try {
      (*f)();
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("tinytorch.distributed Work callback");
    }
  });
}

// Runs fn(kept arrays) without the GIL, inside a CallerScope that shows the flight recorder the arrays'
// shapes and the caller's stack. `arrays` is the output array or an (output, input) tuple (or None).
template <typename Fn>
auto issue(py::object arrays, Fn&& fn) {
  fr::CallerScope scope(fr::caller_info(arrays));
  auto kk = keep(std::move(arrays));
  py::gil_scoped_release r;
  return fn(kk);
}

}  // namespace

namespace fr {
void bind_flight_recorder(py::module_& m);
}

void bind_process_groups(py::module_& m) {
  fr::bind_flight_recorder(m);

  py::class_<Work, std::shared_ptr<Work>>(m, "Work")
      .def("wait", &Work::wait, py::arg("timeout") = -1.0, py::call_guard<py::gil_scoped_release>())
      .def("is_completed", &Work::is_completed)
      .def("is_success", &Work::is_success)
      .def("error_kind", [](Work& w) { return static_cast<int>(w.error_kind()); })
      .def("error_message", &Work::error_message)
      .def_property_readonly("description", &Work::description)
      .def_property_readonly("start_ns", &Work::start_ns)
      .def_property_readonly("end_ns", &Work::end_ns)
      .def("add_done_callback", &add_py_callback);

  py::class_<Backend, std::shared_ptr<Backend>>(m, "Backend")
      .def_property_readonly("rank", &Backend::rank)
      .def_property_readonly("size", &Backend::size)
      .def_property_readonly("name", &Backend::name)
      .def("shutdown", &Backend::shutdown, py::call_guard<py::gil_scoped_release>())
      .def("_set_trace_group", &Backend::set_trace_group, py::arg("name"), py::arg("desc"), py::arg("ranks"));

  py::class_<ProcessGroupRing, Backend, std::shared_ptr<ProcessGroupRing>>(m, "ProcessGroupRing")
      .def(py::init([](const std::string& host, int port, const std::string& prefix, int rank, int size, double timeout,
                       const std::string& transport, size_t segment_bytes, size_t small_bytes, size_t shm_capacity) {
             RingOptions o;
             o.timeout_s = timeout;
             o.transport = transport;
             o.segment_bytes = segment_bytes;
             o.small_bytes = small_bytes;
             o.shm_capacity = shm_capacity;
             return std::make_shared<ProcessGroupRing>(host, port, prefix, rank, size, o);
           }),
           py::arg("store_host"), py::arg("store_port"), py::arg("prefix"), py::arg("rank"), py::arg("size"),
           py::arg("timeout"), py::arg("transport") = "auto", py::arg("segment_bytes") = 1 << 20,
           py::arg("small_bytes") = 256 << 10, py::arg("shm_capacity") = 8 << 20,
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("transport", &ProcessGroupRing::transport)
      .def_property_readonly("bytes_sent", &ProcessGroupRing::bytes_sent)
      .def("allreduce",
           [](ProcessGroupRing& pg, uintptr_t p, size_t n, int t, int op, py::object k, bool a) {
             return issue(std::move(k), [&](const Keep& kk) {
               return pg.allreduce(as_ptr(p), n, dtype_from_int(t), reduce_op_from_int(op), kk, a);
             });
           })
      .def("reduce_scatter",
           [](ProcessGroupRing& pg, uintptr_t out, uintptr_t in, size_t n, int t, int op, py::object k, bool a,
              bool overwrite_input) {
             return issue(std::move(k), [&](const Keep& kk) {
               return pg.reduce_scatter(as_ptr(out), as_ptr(in), n, dtype_from_int(t), reduce_op_from_int(op), kk, a,
                                      overwrite_input);
             });
           },
           py::arg("out"), py::arg("in"), py::arg("count"), py::arg("dtype"), py::arg("op"), py::arg("keep"),
           py::arg("async_op"), py::arg("overwrite_input") = false)
      .def("allgather",
           [](ProcessGroupRing& pg, uintptr_t out, uintptr_t in, size_t n, int t, py::object k, bool a) {
             return issue(std::move(k), [&](const Keep& kk) {
               return pg.allgather(as_ptr(out), as_ptr(in), n, dtype_from_int(t), kk, a);
             });
           })
      .def("broadcast",
           [](ProcessGroupRing& pg, uintptr_t p, size_t n, int t, int root, py::object k, bool a) {
             return issue(std::move(k), [&](const Keep& kk) {
               return pg.broadcast(as_ptr(p), n, dtype_from_int(t), root, kk, a);
             });
           })
      .def("reduce",
           [](ProcessGroupRing& pg, uintptr_t p, size_t n, int t, int op, int root, py::object k, bool a) {
             return issue(std::move(k), [&](const Keep& kk) {
               return pg.reduce(as_ptr(p), n, dtype_from_int(t), reduce_op_from_int(op), root, kk, a);
             });
           })
      .def("barrier",
           [](ProcessGroupRing& pg, bool a) {
             return issue(py::none(), [&](const Keep&) { return pg.barrier(a); });
           },
           py::arg("async_op") = true)
      .def("send",
           [](ProcessGroupRing& pg, uintptr_t p, size_t n, int t, int dst, int tag, py::object k, bool a) {
             return issue(std::move(k), [&](const Keep& kk) {
               return pg.send(as_ptr(p), n, dtype_from_int(t), dst, tag, kk, a);
             });
           })
      .def("recv", [](ProcessGroupRing& pg, uintptr_t p, size_t n, int t, int src, int tag, py::object k, bool a) {
        return issue(std::move(k), [&](const Keep& kk) {
          return pg.recv(as_ptr(p), n, dtype_from_int(t), src, tag, kk, a);
        });
      });

  py::class_<NcclWork, std::shared_ptr<NcclWork>>(m, "NcclWork")
      .def("wait_stream", &NcclWork::wait_stream, py::call_guard<py::gil_scoped_release>())
      .def("synchronize", &NcclWork::synchronize, py::arg("timeout") = -1.0, py::call_guard<py::gil_scoped_release>())
      .def("is_completed", [](NcclWork& w) { return w.cpu().is_completed(); })
      .def("is_success", [](NcclWork& w) { return w.cpu().is_success(); })
      .def("error_kind", [](NcclWork& w) { return static_cast<int>(w.cpu().error_kind()); })
      .def("error_message", [](NcclWork& w) { return w.cpu().error_message(); })
      .def_property_readonly("description", [](NcclWork& w) { return w.cpu().description(); })
      .def_property_readonly("start_ns", [](NcclWork& w) { return w.cpu().start_ns(); })
      .def_property_readonly("end_ns", [](NcclWork& w) { return w.cpu().end_ns(); })
      .def("add_done_callback", [](NcclWork& w, py::function fn) { add_py_callback(w.cpu(), std::move(fn)); });

  py::class_<ProcessGroupNCCL, Backend, std::shared_ptr<ProcessGroupNCCL>>(m, "ProcessGroupNCCL")
      .def(py::init<const std::string&, int, const std::string&, int, int, double, std::vector<std::string>>(),
           py::arg("store_host"), py::arg("store_port"), py::arg("prefix"), py::arg("rank"), py::arg("size"),
           py::arg("timeout"), py::arg("library_candidates"), py::call_guard<py::gil_scoped_release>())
      .def("run", [](ProcessGroupNCCL& pg, int kind, uintptr_t send, uintptr_t recv, size_t count, int t, int op,
                     int peer, uintptr_t stream, py::object k) {
        if (kind < 0 || kind > static_cast<int>(ProcessGroupNCCL::Kind::Recv)) throw DistError("bad NCCL op kind");
        return issue(std::move(k), [&](const Keep& kk) {
          return pg.run(static_cast<ProcessGroupNCCL::Kind>(kind), send, recv, count, dtype_from_int(t),
                      reduce_op_from_int(op), peer, stream, kk);
        });
      });

  m.def("nccl_load", [](const std::vector<std::string>& candidates) {
    auto& api = nccl::load(candidates);
    int version = 0;
    api.GetVersion(&version);
    return py::make_tuple(api.nccl_path, version);
  }, "Load libnccl.so.2 (first loadable candidate, then the system path); returns (path, version).");
}

}  // namespace tinytorch::dist
