// Python bindings of the autograd engine. The per-op entry points (_record, grad mode) are plain
// METH_FASTCALL functions: they run once per recorded op, where pybind11's dispatch would cost more
// than the recording itself.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sstream>

#include "engine/engine.h"
#include "engine/profiler.h"

namespace tinytorch {

namespace py = pybind11;
using namespace autograd;

namespace {

struct Names {  // interned attribute names of tinytorch.Tensor
  PyObject* grad_fn = PyUnicode_InternFromString("_grad_fn");
  PyObject* output_nr = PyUnicode_InternFromString("_output_nr");
  PyObject* requires_grad = PyUnicode_InternFromString("_requires_grad");
  PyObject* grad_acc = PyUnicode_InternFromString("_grad_acc");
  PyObject* vc = PyUnicode_InternFromString("_vc");
};

const Names& names() {
  static const Names n;
  return n;
}

py::object get_attr(PyObject* obj, PyObject* name) {
  PyObject* value = PyObject_GetAttr(obj, name);
  if (!value) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

bool is_tensor(PyObject* obj) {
  const py::object& cls = Engine::get().tensor_class;
  return cls && PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(cls.ptr()));
}

NodePtr grad_accumulator(PyObject* tensor) {
  py::object existing = get_attr(tensor, names().grad_acc);
  if (!existing.is_none()) return existing.cast<NodePtr>();
  PyObject* ref = PyWeakref_NewRef(tensor, nullptr);
  if (!ref) throw py::error_already_set();
  NodePtr node = make_node<AccumulateGrad>(py::reinterpret_steal<py::object>(ref));
  if (PyObject_SetAttr(tensor, names().grad_acc, py::cast(node).ptr()) < 0) throw py::error_already_set();
  return node;
}

// The edge a gradient for `tensor` flows along: its grad_fn, its leaf accumulator, or nothing.
Edge gradient_edge(PyObject* tensor) {
  if (!is_tensor(tensor)) return {};
  py::object grad_fn = get_attr(tensor, names().grad_fn);
  if (!grad_fn.is_none()) {
    return {grad_fn.cast<NodePtr>(), get_attr(tensor, names().output_nr).cast<uint32_t>()};
  }
  if (!PyObject_IsTrue(get_attr(tensor, names().requires_grad).ptr())) return {};
  return {grad_accumulator(tensor), 0};
}

// The Python type of recorded nodes named `name`: PyTorch gives each node kind its own class
// (type(y.grad_fn).__name__ == "SumBackward0", which graph printers such as torchviz read), so each name gets a
// subclass of PyNode that adds nothing to its layout and takes its deallocator: a node's object can then be
// switched to it in place. None (the object stays a PyNode) where this Python's subclass layout differs.
PyObject* node_type(PyObject* name) {
  Engine& e = Engine::get();
  if (!e.node_types) e.node_types = py::dict();
  if (PyObject* known = PyDict_GetItemWithError(e.node_types.ptr(), name)) return known;
  if (PyErr_Occurred()) throw py::error_already_set();
  py::object base = py::type::of<PyNode>();
  py::dict ns;
  ns["__slots__"] = py::tuple();
  ns["__module__"] = py::str("builtins");  // repr <class 'SumBackward0'>, as PyTorch's
  py::object made = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(&PyType_Type))(
      py::reinterpret_borrow<py::str>(name), py::make_tuple(base), ns);
  auto* t = reinterpret_cast<PyTypeObject*>(made.ptr());
  auto* b = reinterpret_cast<PyTypeObject*>(base.ptr());
  // The flags that change where an instance keeps its dict or weak references (Python 3.12+).
  unsigned long layout = 0;
#ifdef Py_TPFLAGS_MANAGED_DICT
  layout |= Py_TPFLAGS_MANAGED_DICT;
#endif
#ifdef Py_TPFLAGS_MANAGED_WEAKREF
  layout |= Py_TPFLAGS_MANAGED_WEAKREF;
#endif
  py::object result = py::none();
  if (t->tp_basicsize == b->tp_basicsize && t->tp_itemsize == b->tp_itemsize &&
      t->tp_dictoffset == b->tp_dictoffset && t->tp_weaklistoffset == b->tp_weaklistoffset &&
      ((t->tp_flags ^ b->tp_flags) & layout) == 0) {
    // Instances are only ever made by PyNode and switched here: they are not tracked by the GC and are
    // freed as PyNode frees them.
    t->tp_flags &= ~static_cast<unsigned long>(Py_TPFLAGS_HAVE_GC);
    t->tp_dealloc = b->tp_dealloc;
    t->tp_free = b->tp_free;
    t->tp_traverse = b->tp_traverse;
    t->tp_clear = b->tp_clear;
    PyType_Modified(t);
    result = made;
  }
  if (PyDict_SetItem(e.node_types.ptr(), name, result.ptr()) < 0) throw py::error_already_set();
  return result.ptr();
}

// A node as a Python object, of its name's type when it is a PyNode (node_type).
py::object node_object(const NodePtr& node, PyObject* name = nullptr) {
  py::object obj = py::cast(node);
  if (Py_TYPE(obj.ptr()) != reinterpret_cast<PyTypeObject*>(py::type::of<PyNode>().ptr())) return obj;
  py::str owned;
  if (name == nullptr) {
    owned = py::str(node->name());
    name = owned.ptr();
  }
  PyObject* type = node_type(name);
  if (type != Py_None) {
    PyTypeObject* old = Py_TYPE(obj.ptr());
    Py_INCREF(type);
    Py_SET_TYPE(obj.ptr(), reinterpret_cast<PyTypeObject*>(type));
    Py_DECREF(old);
  }
  return obj;
}

// Records the version of each saved tensor (backward checks it) and which of the node's own
// outputs each one aliases (a saved output has no history of its own to name in that error).
void note_saved(PyNode& node, const py::tuple& saved, PyObject* outputs, bool multi) {
  std::vector<int64_t> versions(saved.size(), 0);
  std::vector<int64_t> output_nrs(saved.size(), -1);
  for (size_t i = 0; i < saved.size(); ++i) {
    py::handle t = saved[i];
    if (t.is_none()) continue;
    py::object counter = get_attr(t.ptr(), names().vc);
    if (counter.is_none()) continue;
    versions[i] = py::reinterpret_borrow<py::list>(counter)[0].cast<int64_t>();
    if (!get_attr(t.ptr(), names().grad_fn).is_none()) continue;
    const Py_ssize_t n_out = multi ? PyTuple_GET_SIZE(outputs) : 1;
    for (Py_ssize_t k = 0; k < n_out; ++k) {
      PyObject* out = multi ? PyTuple_GET_ITEM(outputs, k) : outputs;
      if (out == Py_None || out == t.ptr()) continue;
      if (get_attr(out, names().vc).ptr() == counter.ptr()) {
        output_nrs[i] = k;
        break;
      }
    }
  }
  node.set_saved_versions(std::move(versions));
  node.set_saved_output_nrs(std::move(output_nrs));
}

// _record(name, fn, outputs, inputs, saved=None, device=-1, custom=False) -> Node
// Records the backward of one op: fn(*grads of outputs) -> grads of inputs. `outputs` is a tensor
// or a tuple of tensors (None for outputs that get no gradient); `inputs` a tuple of the op's
// inputs (anything that is not a tensor gets no edge); `saved` the tensors fn reads, checked
// against in-place modification and freed after backward.
PyObject* record(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  try {
    if (nargs < 4 || nargs > 7) {
      PyErr_SetString(PyExc_TypeError, "_record(name, fn, outputs, inputs, saved=None, device=-1, custom=False)");
      return nullptr;
    }
    if (!PyTuple_Check(args[3])) {
      PyErr_SetString(PyExc_TypeError, "_record: inputs must be a tuple");
      return nullptr;
    }
    PyObject* inputs = args[3];
    std::vector<Edge> edges;
    const Py_ssize_t n_in = PyTuple_GET_SIZE(inputs);
    edges.reserve(n_in);
    for (Py_ssize_t i = 0; i < n_in; ++i) edges.push_back(gradient_edge(PyTuple_GET_ITEM(inputs, i)));

    PyObject* outputs = args[2];
    const bool multi = PyTuple_Check(outputs);
    const uint32_t n_out = multi ? static_cast<uint32_t>(PyTuple_GET_SIZE(outputs)) : 1;
    py::object saved = nargs > 4 ? py::reinterpret_borrow<py::object>(args[4]) : py::none();
    py::object fn = py::reinterpret_borrow<py::object>(args[1]);
    if (saved_tensors_hooks_active() && Engine::get().saved_tensors_packer) {
      // The hooks take over what fn keeps alive; the node then holds no saved tensor itself.
      fn = Engine::get().saved_tensors_packer(fn, saved);
      saved = py::none();
    }
    const bool custom = nargs > 6 && PyObject_IsTrue(args[6]);
    auto node = make_node<PyNode>(py::reinterpret_borrow<py::str>(args[0]), std::move(fn), std::move(edges), n_out,
                                  saved, custom);
    if (nargs > 5 && args[5] != Py_None) node->device = static_cast<int>(PyLong_AsLong(args[5]));
    if (!saved.is_none()) note_saved(*node, py::reinterpret_borrow<py::tuple>(saved), outputs, multi);
    if (Engine::get().anomaly_enabled.load()) {
      py::dict metadata;
      py::list stack = py::module_::import("traceback").attr("format_stack")();
      metadata["traceback_"] = py::str("").attr("join")(stack);
      node->metadata = std::move(metadata);
    }
    py::object wrapper = node_object(node, args[0]);
    for (uint32_t i = 0; i < n_out; ++i) {
      PyObject* out = multi ? PyTuple_GET_ITEM(outputs, i) : outputs;
      if (out == Py_None) continue;
      if (PyObject_SetAttr(out, names().grad_fn, wrapper.ptr()) < 0) throw py::error_already_set();
      if (PyObject_SetAttr(out, names().requires_grad, Py_True) < 0) throw py::error_already_set();
      if (i > 0 && PyObject_SetAttr(out, names().output_nr, py::int_(i).ptr()) < 0) throw py::error_already_set();
    }
    return wrapper.release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

PyObject* is_grad_enabled(PyObject*, PyObject* const*, Py_ssize_t) {
  return PyBool_FromLong(grad_mode_enabled());
}

PyObject* set_grad_enabled(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 1) {
    PyErr_SetString(PyExc_TypeError, "_set_grad_enabled(mode: bool)");
    return nullptr;
  }
  int mode = PyObject_IsTrue(args[0]);
  if (mode < 0) return nullptr;
  set_grad_mode(mode != 0);
  Py_RETURN_NONE;
}

PyMethodDef fast_methods[] = {
    {"_record", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(record)), METH_FASTCALL,
     "Record the backward node of one op."},
    {"_grad_enabled", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(is_grad_enabled)), METH_FASTCALL,
     "Whether grad mode is on for this thread."},
    {"_set_grad_enabled", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(set_grad_enabled)),
     METH_FASTCALL, "Turn grad mode on or off for this thread."},
    {nullptr, nullptr, 0, nullptr},
};

py::dict& lazy_dict(py::object& slot) {
  if (!slot) slot = py::dict();
  return reinterpret_cast<py::dict&>(slot);
}

std::vector<Edge> edges_of(const py::sequence& tensors) {
  std::vector<Edge> edges;
  for (auto t : tensors) edges.push_back(gradient_edge(t.ptr()));
  return edges;
}

}  // namespace

void init_engine(py::module_& m) {
  py::class_<Node, NodePtr>(m, "Node", "A node of the backward graph: the derivative of one forward op.")
      .def("name", &Node::name)
      .def_property_readonly("next_functions",
                             [](const Node& n) {
                               py::tuple result(n.next_edges.size());
                               for (size_t i = 0; i < n.next_edges.size(); ++i) {
                                 const Edge& e = n.next_edges[i];
                                 result[i] = py::make_tuple(e.function ? node_object(e.function) : py::none(), e.input_nr);
                               }
                               return result;
                             })
      .def_property_readonly("metadata", [](Node& n) { return lazy_dict(n.metadata); })
      .def("_hook_dict",
           [](Node& n, const std::string& kind, int index) -> py::dict {
             if (kind == "pre") return lazy_dict(n.pre_hooks);
             if (kind == "post") return lazy_dict(n.post_hooks);
             if (kind == "retains_grad") return lazy_dict(n.retains_grad_hooks);
             if (kind == "tensor") {
               py::dict& by_index = lazy_dict(n.tensor_hooks);
               py::int_ key(index);
               if (!by_index.contains(key)) by_index[key] = py::dict();
               return by_index[key];
             }
             throw py::value_error("unknown hook kind " + kind);
           })
      .def("_sequence_nr", [](const Node& n) { return n.sequence_nr; })
      .def_property_readonly("_num_inputs", [](const Node& n) { return n.num_inputs; })
      .def("__repr__", [](const Node& n) {
        std::ostringstream out;
        out << "<" << n.name() << " object at " << static_cast<const void*>(&n) << ">";
        return out.str();
      });

  py::class_<PyNode, Node, std::shared_ptr<PyNode>>(m, "PyNode")
      .def_property_readonly("_saved_tensors", [](const PyNode& n) { return n.saved(); });

  py::class_<AccumulateGrad, Node, std::shared_ptr<AccumulateGrad>>(m, "AccumulateGrad")
      .def_property_readonly("variable", &AccumulateGrad::variable);

  for (PyMethodDef* def = fast_methods; def->ml_name; ++def) {
    m.add_object(def->ml_name, py::reinterpret_steal<py::object>(PyCFunction_NewEx(def, nullptr, m.attr("__name__").ptr())));
  }

  m.def(
      "_run_backward",
      [](const py::sequence& roots, const py::sequence& grads, bool keep_graph, bool create_graph,
         bool accumulate_grad, const py::sequence& inputs) {
        std::vector<Edge> root_edges;
        for (size_t i = 0; i < roots.size(); ++i) {
          Edge edge = gradient_edge(roots[i].ptr());
          if (!edge.is_valid()) {
            throw std::runtime_error("element " + std::to_string(i) +
                                     " of tensors does not require grad and does not have a grad_fn");
          }
          root_edges.push_back(std::move(edge));
        }
        std::vector<py::object> seeds;
        for (auto g : grads) seeds.push_back(py::reinterpret_borrow<py::object>(g));
        return Engine::get().execute(root_edges, std::move(seeds), keep_graph, create_graph, accumulate_grad,
                                     edges_of(inputs));
      },
      "Run backward from `roots` seeded with `grads`; returns the gradients captured for `inputs`.");
  m.def("_queue_callback", [](py::object cb) { Engine::get().queue_callback(std::move(cb)); },
        "Run `cb` once the current backward has finished (before it returns).");
  m.def("_is_checkpoint_valid", []() { return Engine::get().is_checkpoint_valid(); },
        "False while a node of a grad() or backward(inputs=...) call runs on this thread.");
  m.def("_set_multithreading_enabled", [](bool on) { set_multithreading(on); },
        "Per thread: whether backward runs device nodes on their device threads (default) or on the caller.");
  m.def("_is_multithreading_enabled", []() { return multithreading_enabled(); });
  m.def("_current_graph_task_id", []() { return Engine::get().current_graph_task_id(); },
        "An id of the backward call running on this thread (0 outside backward).");
  m.def("_current_node", []() -> py::object {
    NodePtr node = current_node();
    return node ? node_object(node) : py::none();
  });
  m.def("_grad_accumulator", [](py::object tensor) { return grad_accumulator(tensor.ptr()); });
  m.def("_set_engine_helpers", [](py::object tensor_class, py::object accumulate, py::object check_nan, py::object device_init) {
    Engine& e = Engine::get();
    e.tensor_class = std::move(tensor_class);
    e.accumulate_grad_fn = std::move(accumulate);
    e.check_nan_fn = std::move(check_nan);
    e.device_init_fn = std::move(device_init);
  });
  m.def("_set_saved_tensors_packer", [](py::object packer) { Engine::get().saved_tensors_packer = std::move(packer); },
        "Set the (fn, saved) -> fn callable that packs a node's saved tensors under saved_tensors_hooks.");
  m.def("_set_saved_tensors_hooks_active", [](bool on) { set_saved_tensors_hooks_active(on); },
        "Per thread: whether nodes recorded now have their saved tensors packed.");
  m.def(
      "_set_anomaly_enabled",
      [](bool on, bool check_nan) {
        Engine::get().anomaly_enabled = on;
        Engine::get().anomaly_check_nan = check_nan;
      },
      py::arg("on"), py::arg("check_nan") = true);
  m.def("_anomaly_check_nan", []() { return Engine::get().anomaly_check_nan.load(); });
  m.def("_is_anomaly_enabled", []() { return Engine::get().anomaly_enabled.load(); });
  m.def("_profiler_enable", [](bool on) { NodeProfiler::get().set_enabled(on); },
        "Record a span for every backward node the engine runs (tinytorch.profiler).");
  m.def("_profiler_take", []() {
    py::list out;
    for (auto& s : NodeProfiler::get().take()) out.append(py::make_tuple(s.name, s.start_ns, s.end_ns, s.thread_id));
    return out;
  }, "The recorded (name, start_ns, end_ns, thread_id) spans; clears them.");
  m.def("_monotonic_ns", &NodeProfiler::now_ns, "The profiler's clock (CLOCK_MONOTONIC).");
  m.def("_engine_shutdown", []() { Engine::get().shutdown(); }, "Join the engine's threads (at interpreter exit).");
}

}  // namespace tinytorch
