// Node and Edge: the recorded backward graph (PyTorch's torch/csrc/autograd/function.h, in small).
//
// A Node is the backward of one forward op. Its inputs are the gradients of the op's outputs; its
// outputs are the gradients of the op's inputs, sent along next_edges to the nodes that produced
// those inputs (or to a leaf's AccumulateGrad). Gradients are Python tensors, so every touch of a
// py::object in here happens with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace tinytorch::autograd {

namespace py = pybind11;

struct Node;
using NodePtr = std::shared_ptr<Node>;

struct Edge {
  NodePtr function;       // null: the input needs no gradient
  uint32_t input_nr = 0;  // which input of `function` this gradient feeds
  bool is_valid() const { return function != nullptr; }
};

// Releases nodes iteratively: dropping the head of a 100k-node chain would otherwise recurse once per
// node (through next_edges and through the Python closures that hold earlier tensors) and overflow.
void delete_node(Node* node);

template <class T, class... Args>
std::shared_ptr<T> make_node(Args&&... args) {
  return std::shared_ptr<T>(new T(std::forward<Args>(args)...), [](T* p) { delete_node(p); });
}

// Thread-local creation counter: later nodes run first, so gradients reach leaves as early as possible.
uint64_t next_sequence_nr();

struct Node {
  Node(uint64_t sequence_nr, std::vector<Edge> next_edges, uint32_t num_inputs)
      : sequence_nr(sequence_nr), next_edges(std::move(next_edges)), num_inputs(num_inputs) {}
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  virtual ~Node() = default;

  virtual std::string name() const = 0;
  // Called with the GIL held. `grads` has num_inputs entries (None = no gradient flowed there);
  // returns one gradient (or None) per next edge.
  virtual std::vector<py::object> apply(std::vector<py::object>& grads) = 0;
  // Frees what backward needed once it ran without retain_graph.
  virtual void release_variables() {}
  // The hooks that see the gradient of forward output `index` before this node runs (a dict or null).
  virtual py::object tensor_pre_hooks(uint32_t index);

  const uint64_t sequence_nr;
  std::vector<Edge> next_edges;
  const uint32_t num_inputs;
  int device = -1;  // -1: CPU (runs on the calling thread); k: cuda:k (runs on that device's thread)

  // Hook tables are Python dicts {handle id: callable}, created on first registration.
  py::object pre_hooks;           // hook(grad_outputs) -> new grad_outputs or None
  py::object post_hooks;          // hook(grad_inputs, grad_outputs) -> None
  py::object tensor_hooks;        // {output index: {id: hook(grad) -> grad or None}}
  py::object retains_grad_hooks;  // {output index: callable}, always after tensor hooks
  py::object metadata;            // dict; anomaly mode keeps the forward traceback here
};

// The backward of a built-in op or a custom autograd.Function: a Python callable.
struct PyNode final : Node {
  PyNode(py::str name, py::object fn, std::vector<Edge> edges, uint32_t num_inputs, py::object saved,
         bool call_with_no_grads)
      : Node(next_sequence_nr(), std::move(edges), num_inputs),
        name_(std::move(name)),
        fn_(std::move(fn)),
        saved_(std::move(saved)),
        call_with_no_grads_(call_with_no_grads) {}

  std::string name() const override { return name_.cast<std::string>(); }
  std::vector<py::object> apply(std::vector<py::object>& grads) override;
  void release_variables() override;

  void set_saved_versions(std::vector<int64_t> v) { saved_versions_ = std::move(v); }
  // For each saved tensor: the index of this node's output it aliases, or -1 (for error messages).
  void set_saved_output_nrs(std::vector<int64_t> v) { saved_output_nrs_ = std::move(v); }
  const py::object& saved() const { return saved_; }

 private:
  void check_saved_versions() const;

  py::str name_;
  py::object fn_;
  py::object saved_;  // tuple of tensors whose in-place modification would make fn_ wrong, or None
  std::vector<int64_t> saved_versions_;
  std::vector<int64_t> saved_output_nrs_;
  bool released_ = false;
  bool call_with_no_grads_;  // custom Functions materialize zeros; built-in formulas skip instead
};

// Sink for a leaf that requires grad: adds the incoming gradient into the leaf's .grad.
struct AccumulateGrad final : Node {
  // Holds the leaf weakly (the leaf holds this node): the pair must not form a cycle through C++.
  explicit AccumulateGrad(py::object variable_weakref)
      : Node(std::numeric_limits<uint64_t>::max(), {}, 1), variable_ref(std::move(variable_weakref)) {}

  std::string name() const override { return "torch::autograd::AccumulateGrad"; }
  std::vector<py::object> apply(std::vector<py::object>& grads) override;
  py::object tensor_pre_hooks(uint32_t index) override;
  py::object variable() const;

  py::object variable_ref;
};

// Feeds the seed gradients when backward starts from several roots at once.
struct GraphRoot final : Node {
  GraphRoot(std::vector<Edge> roots, std::vector<py::object> grads)
      : Node(next_sequence_nr(), std::move(roots), 0), grads_(std::move(grads)) {}
  std::string name() const override { return "GraphRoot"; }
  std::vector<py::object> apply(std::vector<py::object>&) override { return grads_; }

 private:
  std::vector<py::object> grads_;
};

}  // namespace tinytorch::autograd
