// The backward engine: GraphTask, ReadyQueue, InputBuffer and the threads that run them
// (PyTorch's torch/csrc/autograd/engine.{h,cpp} and graph_task.h, in small).
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/node.h"

namespace tinytorch::autograd {

namespace py = pybind11;

// The implicit sum in front of every node: gradients arriving for the same input are added here.
struct InputBuffer {
  explicit InputBuffer(size_t size) : buffer(size) {}
  void add(size_t pos, py::object grad);  // GIL held
  std::vector<py::object> buffer;
};

struct GraphTask;

struct NodeTask {
  std::weak_ptr<GraphTask> base;  // weak: tasks of a failed, finished call are popped and dropped
  NodePtr fn;                     // null: only wakes the owning thread
  InputBuffer inputs{0};
  int reentrant_depth = 0;
  bool is_shutdown = false;
};

class ReadyQueue {
 public:
  // Counts the task as outstanding on its GraphTask before anyone can pop it.
  void push(NodeTask task, bool increment_outstanding = true);
  void push_shutdown();
  NodeTask pop();  // blocks; called without the GIL

 private:
  std::mutex mutex_;
  std::condition_variable not_empty_;
  std::vector<NodeTask> heap_;
};

struct ExecInfo {
  bool needed = false;                              // runs: some requested input lies beyond it
  std::vector<std::pair<uint32_t, size_t>> captures;  // (input index of this node, result slot)
};

// The state of one backward() / grad() call.
struct GraphTask {
  GraphTask(bool keep_graph, bool grad_mode, int reentrant_depth, std::shared_ptr<ReadyQueue> cpu_queue)
      : keep_graph(keep_graph), grad_mode(grad_mode), reentrant_depth(reentrant_depth),
        cpu_ready_queue(std::move(cpu_queue)) {}

  static inline std::atomic<uint64_t> next_id{0};
  bool completed() const { return outstanding_tasks.load() == 0 || has_error.load(); }
  void set_error(py::error_already_set&& error, const std::string& node_name);  // GIL held
  void mark_completed();
  void wait_completed();  // without the GIL

  // Unique per backward call, never reused (an address would be: checkpointing keys recomputations by it).
  const uint64_t id = next_id.fetch_add(1) + 1;
  const bool keep_graph;
  const bool grad_mode;  // create_graph: formulas record a graph of their own
  // The caller's set_multithreading_enabled: false runs device nodes on the calling thread too.
  bool multithreading = true;
  int device_of(const Node& fn) const { return multithreading ? fn.device : -1; }
  const int reentrant_depth;
  std::shared_ptr<ReadyQueue> cpu_ready_queue;

  std::atomic<int> outstanding_tasks{0};
  std::atomic<bool> has_error{false};
  std::atomic<bool> future_completed{false};

  std::mutex mutex;  // guards dependencies, not_ready, captured_vars
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, InputBuffer> not_ready;
  std::unordered_map<Node*, ExecInfo> exec_info;  // empty: run everything (plain backward)
  std::vector<py::object> captured_vars;

  std::vector<py::object> final_callbacks;  // run in order once every node ran; may grow while running

  std::optional<py::error_already_set> error;
  std::string error_node;

  std::mutex completion_mutex;
  std::condition_variable completion_cv;
};

class Engine {
 public:
  static Engine& get();

  // GIL held on entry and on return. Returns the captured gradients for `outputs` (grad()).
  std::vector<py::object> execute(const std::vector<Edge>& roots, std::vector<py::object> grads,
                                  bool keep_graph, bool create_graph, bool accumulate_grad,
                                  const std::vector<Edge>& outputs);
  void queue_callback(py::object callback);  // GIL held; only during backward
  bool is_checkpoint_valid() const;           // false inside a grad() / backward(inputs=) call
  uint64_t current_graph_task_id() const;      // 0 outside backward; unique per backward call

  // Python helpers the engine calls: set once at import, cleared at interpreter exit.
  py::object accumulate_grad_fn;  // (variable, grad, may_steal) -> None
  py::object check_nan_fn;        // (node name, outputs) -> None, raises on NaN
  py::object device_init_fn;      // (device index) -> None, on each device thread at start
  py::object tensor_class;        // tinytorch.Tensor: what counts as a tensor in `inputs`
  // (fn, saved) -> fn: packs what a node saves while this thread has saved_tensors_hooks active.
  py::object saved_tensors_packer;
  // name -> the Python type of a recorded node of that name (python_engine.cpp's node_object); GIL held.
  py::object node_types;
  std::atomic<bool> anomaly_enabled{false};  // global, as PyTorch's anomaly mode
  std::atomic<bool> anomaly_check_nan{true};

  void shutdown();  // joins every engine thread; GIL held
  ~Engine();

  // pthread_atfork handlers.
  void before_fork();
  void after_fork_parent();
  void after_fork_child();

 private:
  Engine() = default;
  void thread_main(const std::shared_ptr<GraphTask>& graph_task);
  void evaluate_function(const std::shared_ptr<GraphTask>& graph_task, const NodePtr& fn, InputBuffer& inputs);
  std::vector<py::object> call_function(GraphTask& graph_task, Node* fn, std::vector<py::object>& inputs);
  std::shared_ptr<ReadyQueue> ready_queue_for(int device, const std::shared_ptr<ReadyQueue>& cpu_queue);
  void start_device_thread(int device);
  void run_on_pool_thread(const std::shared_ptr<GraphTask>& graph_task);
  void pool_thread_main();
  void run_final_callbacks(const std::shared_ptr<GraphTask>& graph_task);

  std::mutex threads_mutex_;
  std::vector<std::shared_ptr<ReadyQueue>> device_queues_;  // index: CUDA device
  std::vector<std::thread> device_threads_;
  // Reentrant backward past the depth limit continues on a pool thread with a fresh stack.
  std::vector<std::thread> pool_threads_;
  std::vector<std::shared_ptr<GraphTask>> pool_tasks_;  // guarded by threads_mutex_
  // Replaced in a forked child, where the old one may count waiters that no longer exist.
  std::unique_ptr<std::condition_variable> pool_cv_ = std::make_unique<std::condition_variable>();
  int idle_pool_threads_ = 0;
  bool stopped_ = false;
};

// Grad mode is per thread (PyTorch's GradMode); the engine sets it to create_graph for its work.
bool grad_mode_enabled();
void set_grad_mode(bool enabled);
// Per thread, like grad mode: whether this thread's backward calls use device threads.
bool multithreading_enabled();
void set_multithreading(bool enabled);
// Per thread, like grad mode: whether autograd.graph.saved_tensors_hooks are active.
bool saved_tensors_hooks_active();
void set_saved_tensors_hooks_active(bool active);

NodePtr current_node();  // the node whose formula runs on this thread, or null

}  // namespace tinytorch::autograd
