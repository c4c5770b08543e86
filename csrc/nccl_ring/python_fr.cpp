// Bindings of the flight recorder, and what it learns from Python: shapes and the caller's stack.
#include "python_fr.hpp"

#include <frameobject.h>
#include <pybind11/stl.h>

#include <unordered_map>

#include "backend.hpp"

namespace py = pybind11;

namespace tinytorch::dist::fr {
namespace {

constexpr int kMaxFrames = 64;

// A code object's names, made once, and its line numbers by instruction offset (a collective is called from
// few places, so the line table is scanned once per call site). The cache holds a reference to the code
// object, so its address cannot be reused for another. Only touched with the GIL held.
struct CodeEntry {
  std::shared_ptr<const CodeInfo> info;
  std::unordered_map<int, int> line_of_lasti;
};

Frame frame_of(PyFrameObject* f) {
  static auto* cache = new std::unordered_map<PyCodeObject*, CodeEntry>();
  PyCodeObject* code = PyFrame_GetCode(f);
  auto it = cache->find(code);
  if (it == cache->end()) {
    py::handle c(reinterpret_cast<PyObject*>(code));
    auto info = std::make_shared<CodeInfo>();
    info->name = py::str(c.attr("co_name"));
    info->filename = py::str(c.attr("co_filename"));
    Py_INCREF(code);
    it = cache->emplace(code, CodeEntry{std::move(info), {}}).first;
  }
  Py_DECREF(code);
  const int lasti = PyFrame_GetLasti(f);
  auto line = it->second.line_of_lasti.find(lasti);
  if (line == it->second.line_of_lasti.end())
    line = it->second.line_of_lasti.emplace(lasti, PyFrame_GetLineNumber(f)).first;
  return Frame{it->second.info, line->second};
}

// Innermost frame first, as PyTorch's dumps list them.
std::vector<Frame> python_stack() {
  std::vector<Frame> out;
  out.reserve(16);
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  Py_XINCREF(f);
  while (f && static_cast<int>(out.size()) < kMaxFrames) {
    out.push_back(frame_of(f));
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  Py_XDECREF(f);
  return out;
}

// An array's shape (NumPy or CuPy: a tuple of ints); false for an object without one. The plain C API: this runs
// for every op, and pybind11's conversions would cost about a microsecond more.
bool shape_of(PyObject* a, std::vector<int64_t>& shape) {
  PyObject* t = PyObject_GetAttrString(a, "shape");
  if (t == nullptr || !PyTuple_Check(t)) {
    Py_XDECREF(t);
    PyErr_Clear();
    return false;
  }
  const Py_ssize_t n = PyTuple_GET_SIZE(t);
  shape.resize(n);
  for (Py_ssize_t i = 0; i < n; ++i) shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
  Py_DECREF(t);
  if (!PyErr_Occurred()) return true;
  PyErr_Clear();
  return false;
}

}  // namespace

CallerInfo caller_info(py::handle arrays) {
  CallerInfo info;
  if (!FlightRecorder::get().enabled()) return info;
  PyObject* a = arrays.ptr();
  if (PyTuple_Check(a) && PyTuple_GET_SIZE(a) == 2) {
    info.output_sizes.resize(1);
    info.input_sizes.resize(1);
    info.has_sizes = shape_of(PyTuple_GET_ITEM(a, 0), info.output_sizes[0]) &&
                     shape_of(PyTuple_GET_ITEM(a, 1), info.input_sizes[0]);
  } else if (a != Py_None) {
    info.input_sizes.resize(1);
    info.has_sizes = shape_of(a, info.input_sizes[0]);
    info.output_sizes = info.input_sizes;
  }
  if (config().include_stack_trace) info.frames = python_stack();
  return info;
}

void bind_flight_recorder(py::module_& m) {
  m.def("_fr_enabled", [] { return FlightRecorder::get().enabled(); },
        "True when the flight recorder records (TORCH_FR_BUFFER_SIZE > 0).");
  m.def("_dump_fr_trace",
        [](bool include_collectives, bool include_stack_traces, bool only_active) {
          std::string s;
          {
            py::gil_scoped_release r;
            s = FlightRecorder::get().dump(include_collectives, include_stack_traces, only_active);
          }
          return py::bytes(s);
        },
        py::arg("includeCollectives") = true, py::arg("includeStackTraces") = true, py::arg("onlyActive") = false,
        "This process's flight-recorder dump: PyTorch's pickle format, as bytes.");
  m.def("_reset_fr_recording", [] { FlightRecorder::get().reset(); }, "Drop every recorded entry.");
  m.def("_fr_on_collective_failure", &on_collective_failure, py::arg("global_rank"),
        py::call_guard<py::gil_scoped_release>(),
        "A collective outside the backends (an object collective through the store) timed out: dump, as the "
        "backends do, and ask every rank to.");
  m.def("_fr_dump_path", &dump_path, py::arg("global_rank"), "Where rank `global_rank` writes its dump.");
  m.def("_fr_write_dump", &write_dump, py::arg("global_rank"), py::arg("include_stack_traces") = true,
        py::arg("only_active") = false, py::call_guard<py::gil_scoped_release>(),
        "Write this process's dump to the rank's dump file (temporary file, then rename); returns the path.");
  py::class_<DumpWatchdog, std::shared_ptr<DumpWatchdog>>(m, "DumpWatchdog")
      .def(py::init([](const std::string& host, int port, const std::string& prefix, int rank, int world_size) {
             auto w = std::make_shared<DumpWatchdog>(host, port, prefix, rank, world_size);
             DumpWatchdog::set_active(w);
             return w;
           }),
           py::arg("store_host"), py::arg("store_port"), py::arg("prefix"), py::arg("rank"), py::arg("world_size"),
           py::call_guard<py::gil_scoped_release>())
      .def("stop", &DumpWatchdog::stop, py::call_guard<py::gil_scoped_release>());
}

}  // namespace tinytorch::dist::fr
