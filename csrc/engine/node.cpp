#include "engine/node.h"

#include "engine/engine.h"

namespace tinytorch::autograd {

namespace {

int64_t tensor_version(PyObject* tensor) {
  // `_vc` is the version counter shared by a tensor and its views: None (never modified) or [n].
  py::object counter = py::reinterpret_steal<py::object>(PyObject_GetAttrString(tensor, "_vc"));
  if (!counter) throw py::error_already_set();
  if (counter.is_none()) return 0;
  return py::reinterpret_borrow<py::list>(counter)[0].cast<int64_t>();
}

std::string describe_tensor(const py::handle& tensor) {
  std::string shape;
  for (auto dim : py::tuple(tensor.attr("shape"))) {
    if (!shape.empty()) shape += ", ";
    shape += py::str(dim).cast<std::string>();
  }
  return "[" + tensor.attr("type")().cast<std::string>() + " [" + shape + "]]";
}

}  // namespace

py::object Node::tensor_pre_hooks(uint32_t index) {
  if (!tensor_hooks) return py::object();
  PyObject* hooks = PyDict_GetItem(tensor_hooks.ptr(), py::int_(index).ptr());  // borrowed
  return hooks ? py::reinterpret_borrow<py::object>(hooks) : py::object();
}

// PyTorch names the forward op: the node's name without its "Backward<n>" suffix.
static std::string forward_op_name(const std::string& node_name) {
  const size_t pos = node_name.rfind("Backward");
  return pos == std::string::npos || pos == 0 ? node_name : node_name.substr(0, pos);
}

void PyNode::check_saved_versions() const {
  if (saved_.is_none()) return;
  py::tuple saved = py::reinterpret_borrow<py::tuple>(saved_);
  for (size_t i = 0; i < saved.size(); ++i) {
    if (saved[i].is_none()) continue;
    int64_t now = tensor_version(saved[i].ptr());
    if (now == saved_versions_[i]) continue;
    // An output saved by its own node is an alias without history: name this node, as PyTorch does.
    std::string origin;
    const int64_t own_output = i < saved_output_nrs_.size() ? saved_output_nrs_[i] : -1;
    py::object producer = saved[i].attr("_grad_fn");
    if (own_output >= 0) {
      origin = ", which is output " + std::to_string(own_output) + " of " + forward_op_name(name()) + ",";
    } else if (!producer.is_none()) {
      origin = ", which is output " + py::str(saved[i].attr("_output_nr")).cast<std::string>() + " of " +
               forward_op_name(producer.attr("name")().cast<std::string>()) + ",";
    }
    throw std::runtime_error(
        "one of the variables needed for gradient computation has been modified by an inplace operation: " +
        describe_tensor(saved[i]) + origin + " is at version " + std::to_string(now) + "; expected version " +
        std::to_string(saved_versions_[i]) +
        " instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, "
        "with tinytorch.autograd.set_detect_anomaly(True).");
  }
}

std::vector<py::object> PyNode::apply(std::vector<py::object>& grads) {
  if (released_) {
    throw std::runtime_error(
        "Trying to backward through the graph a second time (or directly access saved tensors after they have "
        "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
        "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
        "if you need to access saved tensors after calling backward.");
  }
  check_saved_versions();
  const size_t n = next_edges.size();
  bool any = false;
  std::vector<PyObject*> args(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    args[i] = grads[i] ? grads[i].ptr() : Py_None;
    any = any || args[i] != Py_None;
  }
  if (!any && !call_with_no_grads_) return std::vector<py::object>(n, py::none());
  PyObject* raw = PyObject_Vectorcall(fn_.ptr(), args.data(), args.size(), nullptr);
  if (!raw) throw py::error_already_set();
  py::object result = py::reinterpret_steal<py::object>(raw);
  std::vector<py::object> out;
  out.reserve(n);
  if (PyTuple_Check(raw)) {
    const size_t got = PyTuple_GET_SIZE(raw);
    if (got != n) {
      throw std::runtime_error("function " + name() + " returned an incorrect number of gradients (expected " +
                               std::to_string(n) + ", got " + std::to_string(got) + ")");
    }
    for (size_t i = 0; i < n; ++i) out.push_back(py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(raw, i)));
  } else {
    if (n != 1) {
      throw std::runtime_error("function " + name() + " returned an incorrect number of gradients (expected " +
                               std::to_string(n) + ", got 1)");
    }
    out.push_back(std::move(result));
  }
  return out;
}

void PyNode::release_variables() {
  if (saved_.is_none()) return;  // nothing saved: the node may run again, as in PyTorch
  released_ = true;
  fn_ = py::none();
  saved_ = py::none();
}

py::object AccumulateGrad::variable() const {
#if PY_VERSION_HEX >= 0x030D0000
  PyObject* obj = nullptr;
  if (PyWeakref_GetRef(variable_ref.ptr(), &obj) < 0) throw py::error_already_set();
  return obj ? py::reinterpret_steal<py::object>(obj) : py::none();
#else
  PyObject* obj = PyWeakref_GetObject(variable_ref.ptr());  // borrowed; Py_None once the leaf died
  return py::reinterpret_borrow<py::object>(obj);
#endif
}

py::object AccumulateGrad::tensor_pre_hooks(uint32_t index) {
  // Hooks on a leaf live on the leaf itself so that they outlive any one accumulator.
  py::object var = variable();
  if (var.is_none()) return py::object();
  return var.attr("_backward_hooks");
}

std::vector<py::object> AccumulateGrad::apply(std::vector<py::object>& grads) {
  py::object var = variable();
  if (var.is_none() || !grads[0] || grads[0].is_none()) return {};
  if (!var.attr("_grad_fn").is_none()) {
    throw std::runtime_error("leaf variable has been moved into the graph interior");
  }
  // Take the gradient out of the input buffer: if nothing else refers to it (tensor and array),
  // .grad may adopt it without a copy (PyTorch's "steal"); otherwise a later in-place += on one
  // .grad would change a tensor someone else sees (AddBackward gives one tensor to both inputs).
  py::object grad = std::move(grads[0]);
  bool steal = Py_REFCNT(grad.ptr()) == 1;
  if (steal) {
    PyObject* data = PyObject_GetAttrString(grad.ptr(), "_data");
    if (!data) throw py::error_already_set();
    steal = Py_REFCNT(data) == 2;  // the tensor's reference and ours
    Py_DECREF(data);
  }
  Engine::get().accumulate_grad_fn(var, grad, steal);
  return {};
}

}  // namespace tinytorch::autograd
