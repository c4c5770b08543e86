#include "engine/engine.h"

#include "engine/profiler.h"

#include <pthread.h>

#include <algorithm>
#include <unordered_set>

namespace tinytorch::autograd {

namespace {

constexpr int NO_DEVICE = -2;   // not an engine thread
constexpr int CPU_DEVICE = -1;  // a thread driving a backward call (or a pool thread)
// Reentrant backward recurses on the same thread up to this depth, then moves to a pool thread
// (PyTorch uses the same limit, below what thread sanitizers tolerate in held locks).
constexpr int MAX_DEPTH = 60;

thread_local int worker_device = NO_DEVICE;
thread_local int current_depth = 0;  // reentrant calls nested on this thread
thread_local int total_depth = 0;    // reentrant calls nested across threads
thread_local std::shared_ptr<ReadyQueue> local_ready_queue;
thread_local GraphTask* current_graph_task = nullptr;
thread_local const NodePtr* current_node_ = nullptr;
thread_local PyThreadState* thread_state = nullptr;  // this thread's Python state while the GIL is out
thread_local bool grad_mode = true;
thread_local bool multithreading = true;
thread_local bool saved_hooks_active = false;
thread_local uint64_t sequence_counter = 0;

// Take the GIL with the thread's own saved state: creating a state per acquisition costs ~9 us.
struct GilHold {
  GilHold() { PyEval_RestoreThread(thread_state); }
  ~GilHold() { thread_state = PyEval_SaveThread(); }
};

struct GilRelease {
  GilRelease() { thread_state = PyEval_SaveThread(); }
  ~GilRelease() { PyEval_RestoreThread(thread_state); }
};

template <class T>
struct ScopedValue {  // sets a thread-local for a scope and restores it
  ScopedValue(T& slot, T value) : slot_(slot), saved_(slot) { slot_ = value; }
  ~ScopedValue() { slot_ = saved_; }
  T& slot_;
  T saved_;
};

bool lower_priority(const NodeTask& a, const NodeTask& b) {
  if (a.is_shutdown != b.is_shutdown) return b.is_shutdown;
  if ((a.fn == nullptr) != (b.fn == nullptr)) return b.fn == nullptr;  // wake-ups first
  if (a.fn == nullptr) return false;
  if (a.reentrant_depth != b.reentrant_depth) return a.reentrant_depth < b.reentrant_depth;
  return a.fn->sequence_nr < b.fn->sequence_nr;
}

py::object as_object(const py::object& maybe_null) {
  return maybe_null ? maybe_null : py::none();
}

py::tuple as_tuple(const std::vector<py::object>& values) {
  py::tuple t(values.size());
  for (size_t i = 0; i < values.size(); ++i) t[i] = as_object(values[i]);
  return t;
}

// Appends a line to an exception's message: a note on 3.11+, the first argument before.
void add_note(const py::error_already_set& err, const std::string& note) {
  py::object exc = err.value();
  if (py::hasattr(exc, "add_note")) {
    exc.attr("add_note")(note);
    return;
  }
  py::tuple args = exc.attr("args");
  if (args.size() >= 1 && py::isinstance<py::str>(args[0])) {
    py::list new_args(args);
    new_args[0] = py::str(args[0]) + py::str("\n" + note);
    exc.attr("args") = py::tuple(new_args);
  }
}

// Names the failing node; in anomaly mode, adds the forward traceback that created it.
std::string describe_failure(Node& fn) {
  std::string text = fn.name() + ")";
  if (Engine::get().anomaly_enabled.load() && fn.metadata) {
    PyObject* trace = PyDict_GetItemString(fn.metadata.ptr(), "traceback_");  // borrowed
    if (trace) text += "\nTraceback of forward call that caused the error:\n" + py::str(trace).cast<std::string>();
  }
  return text;
}

void compute_dependencies(Node* root, GraphTask& task) {
  std::vector<Node*> stack{root};
  std::unordered_set<Node*> seen{root};
  while (!stack.empty()) {
    Node* fn = stack.back();
    stack.pop_back();
    for (const Edge& edge : fn->next_edges) {
      Node* next = edge.function.get();
      if (!next) continue;
      ++task.dependencies[next];
      if (seen.insert(next).second) stack.push_back(next);
    }
  }
}

// grad() and backward(inputs=...): mark what must run (a path leads to a requested input) and where
// the requested gradients are captured.
void init_to_execute(GraphTask& task, Node* root, const std::vector<Edge>& outputs, bool accumulate_grad) {
  task.captured_vars.resize(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Edge& out = outputs[i];
    if (!out.is_valid()) continue;
    ExecInfo& info = task.exec_info[out.function.get()];
    if (accumulate_grad && dynamic_cast<AccumulateGrad*>(out.function.get()) != nullptr) {
      info.needed = true;
    } else {
      info.captures.emplace_back(out.input_nr, i);
    }
  }
  auto is_target = [&](Node* fn) {
    auto it = task.exec_info.find(fn);
    return it != task.exec_info.end() && (it->second.needed || !it->second.captures.empty());
  };
  struct Frame {
    Node* fn;
    size_t next;
  };
  std::vector<Frame> stack{{root, 0}};
  std::unordered_set<Node*> visited{root};
  while (!stack.empty()) {
    Frame& frame = stack.back();
    if (frame.next < frame.fn->next_edges.size()) {
      Node* child = frame.fn->next_edges[frame.next++].function.get();
      if (!child) continue;
      if (visited.insert(child).second) {
        stack.push_back({child, 0});
      } else if (is_target(child)) {
        task.exec_info[frame.fn].needed = true;
      }
    } else {
      Node* fn = frame.fn;
      stack.pop_back();
      if (!stack.empty() && is_target(fn)) task.exec_info[stack.back().fn].needed = true;
    }
  }
}

}  // namespace

bool grad_mode_enabled() { return grad_mode; }
bool multithreading_enabled() { return multithreading; }
void set_multithreading(bool enabled) { multithreading = enabled; }
void set_grad_mode(bool enabled) { grad_mode = enabled; }
bool saved_tensors_hooks_active() { return saved_hooks_active; }
void set_saved_tensors_hooks_active(bool active) { saved_hooks_active = active; }
NodePtr current_node() { return current_node_ ? *current_node_ : NodePtr(); }
uint64_t next_sequence_nr() { return sequence_counter++; }

void delete_node(Node* node) {
  thread_local std::vector<std::unique_ptr<Node>> pending;
  thread_local bool deleting = false;
  pending.emplace_back(node);
  if (deleting) return;
  deleting = true;
  while (!pending.empty()) {
    std::unique_ptr<Node> next = std::move(pending.back());
    pending.pop_back();
    next.reset();  // may push more nodes onto `pending`
  }
  deleting = false;
}

// ---------------------------------------------------------------------------------------------
// InputBuffer, ReadyQueue, GraphTask

void InputBuffer::add(size_t pos, py::object grad) {
  if (!grad || grad.is_none()) return;
  py::object& slot = buffer[pos];
  if (!slot || slot.is_none()) {
    slot = std::move(grad);
    return;
  }
  // Out of place: the first gradient may be a tensor a formula still refers to (AddBackward passes
  // the same object to both inputs), and under create_graph the sum must be recorded.
  PyObject* sum = PyNumber_Add(slot.ptr(), grad.ptr());
  if (!sum) throw py::error_already_set();
  slot = py::reinterpret_steal<py::object>(sum);
}

void ReadyQueue::push(NodeTask task, bool increment_outstanding) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (increment_outstanding) {
      if (auto base = task.base.lock()) ++base->outstanding_tasks;
    }
    heap_.push_back(std::move(task));
    std::push_heap(heap_.begin(), heap_.end(), lower_priority);
  }
  not_empty_.notify_one();
}

void ReadyQueue::push_shutdown() {
  NodeTask task;
  task.is_shutdown = true;
  push(std::move(task), false);
}

NodeTask ReadyQueue::pop() {
  std::unique_lock<std::mutex> lock(mutex_);
  not_empty_.wait(lock, [this] { return !heap_.empty(); });
  std::pop_heap(heap_.begin(), heap_.end(), lower_priority);
  NodeTask task = std::move(heap_.back());
  heap_.pop_back();
  return task;
}

void GraphTask::set_error(py::error_already_set&& err, const std::string& node_name) {
  if (has_error.exchange(true)) return;  // the first error wins
  error.emplace(std::move(err));
  error_node = node_name;
}

void GraphTask::mark_completed() {
  {
    std::lock_guard<std::mutex> lock(completion_mutex);
    future_completed = true;
  }
  completion_cv.notify_all();
}

void GraphTask::wait_completed() {
  std::unique_lock<std::mutex> lock(completion_mutex);
  completion_cv.wait(lock, [this] { return future_completed.load(); });
}

// ---------------------------------------------------------------------------------------------
// Engine

Engine& Engine::get() {
  static Engine engine;
  // fork() copies only the calling thread: the handlers keep the child's engine consistent.
  static const bool fork_handlers = [] {
    pthread_atfork([] { Engine::get().before_fork(); }, [] { Engine::get().after_fork_parent(); },
                   [] { Engine::get().after_fork_child(); });
    return true;
  }();
  (void)fork_handlers;
  return engine;
}

// Holding threads_mutex_ across fork() guarantees the child does not inherit it locked by a thread
// that no longer exists there.
void Engine::before_fork() { threads_mutex_.lock(); }

void Engine::after_fork_parent() { threads_mutex_.unlock(); }

void Engine::after_fork_child() {
  // The engine's threads do not exist in the child. Their std::thread handles must never be joined
  // or destroyed (a joinable handle's destructor terminates), and their queues' mutexes may have
  // been held by them at the fork: park all of it, unreachable, in storage that is never freed, and
  // let the child start fresh threads on demand. (A DataLoader worker forked after a CUDA backward
  // can then still use autograd.)
  struct Orphans {
    std::vector<std::thread> threads;
    std::vector<std::shared_ptr<ReadyQueue>> queues;
    std::vector<std::shared_ptr<GraphTask>> tasks;
    std::vector<std::unique_ptr<std::condition_variable>> cvs;  // may count waiters that are gone
  };
  static Orphans& orphans = *new Orphans();  // immortal by design: see above
  for (auto& t : device_threads_) orphans.threads.push_back(std::move(t));
  for (auto& t : pool_threads_) orphans.threads.push_back(std::move(t));
  for (auto& q : device_queues_) orphans.queues.push_back(std::move(q));
  for (auto& task : pool_tasks_) orphans.tasks.push_back(std::move(task));
  device_threads_.clear();
  pool_threads_.clear();
  device_queues_.clear();
  pool_tasks_.clear();
  orphans.cvs.push_back(std::move(pool_cv_));
  pool_cv_ = std::make_unique<std::condition_variable>();
  idle_pool_threads_ = 0;
  threads_mutex_.unlock();
}

Engine::~Engine() {
  // Normally shutdown() ran at interpreter exit. If it did not, Python is gone by now: leak the
  // Python references rather than touch a finalized interpreter.
  accumulate_grad_fn.release();
  check_nan_fn.release();
  device_init_fn.release();
  tensor_class.release();
  saved_tensors_packer.release();
  node_types.release();
  for (auto& t : device_threads_) if (t.joinable()) t.detach();
  for (auto& t : pool_threads_) if (t.joinable()) t.detach();
}

void Engine::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(threads_mutex_);
    if (stopped_) return;
    stopped_ = true;
    for (auto& q : device_queues_) if (q) q->push_shutdown();
    threads = std::move(device_threads_);
    for (auto& t : pool_threads_) threads.push_back(std::move(t));
    pool_threads_.clear();
  }
  pool_cv_->notify_all();
  {
    py::gil_scoped_release release;  // the threads need the GIL to finish their current node
    for (auto& t : threads) if (t.joinable()) t.join();
  }
  device_queues_.clear();
  accumulate_grad_fn = py::object();
  check_nan_fn = py::object();
  device_init_fn = py::object();
  tensor_class = py::object();
  saved_tensors_packer = py::object();
  node_types = py::object();
}

std::shared_ptr<ReadyQueue> Engine::ready_queue_for(int device, const std::shared_ptr<ReadyQueue>& cpu_queue) {
  if (device < 0) return cpu_queue;
  std::lock_guard<std::mutex> lock(threads_mutex_);
  if (static_cast<size_t>(device) >= device_queues_.size() || !device_queues_[device]) start_device_thread(device);
  return device_queues_[device];
}

// One long-lived thread per CUDA device, started the first time a node of that device is ready.
void Engine::start_device_thread(int device) {
  if (stopped_) throw std::runtime_error("autograd engine: used after interpreter shutdown began");
  if (static_cast<size_t>(device) >= device_queues_.size()) device_queues_.resize(device + 1);
  auto queue = std::make_shared<ReadyQueue>();
  device_queues_[device] = queue;
  device_threads_.emplace_back([this, device, queue] {
    worker_device = device;
    local_ready_queue = queue;
    PyGILState_STATE gil = PyGILState_Ensure();  // creates this thread's Python state, once
    if (device_init_fn) {
      try {
        device_init_fn(device);
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("tinytorch autograd device thread init");
      }
    }
    thread_state = PyEval_SaveThread();
    thread_main(nullptr);
    PyEval_RestoreThread(thread_state);
    local_ready_queue.reset();
    PyGILState_Release(gil);
  });
}

void Engine::pool_thread_main() {
  PyGILState_STATE gil = PyGILState_Ensure();
  thread_state = PyEval_SaveThread();
  worker_device = CPU_DEVICE;
  while (true) {
    std::shared_ptr<GraphTask> task;
    {
      std::unique_lock<std::mutex> lock(threads_mutex_);
      ++idle_pool_threads_;
      pool_cv_->wait(lock, [this] { return stopped_ || !pool_tasks_.empty(); });
      --idle_pool_threads_;
      if (pool_tasks_.empty()) break;  // stopped
      task = std::move(pool_tasks_.back());
      pool_tasks_.pop_back();
    }
    local_ready_queue = task->cpu_ready_queue;  // adopt the blocked owner's queue
    current_depth = 0;
    total_depth = task->reentrant_depth;
    thread_main(task);
    GilHold gil_for_release;
    local_ready_queue.reset();
    task.reset();
  }
  PyEval_RestoreThread(thread_state);
  PyGILState_Release(gil);
}

void Engine::run_on_pool_thread(const std::shared_ptr<GraphTask>& graph_task) {
  {
    std::lock_guard<std::mutex> lock(threads_mutex_);
    if (stopped_) throw std::runtime_error("autograd engine: used after interpreter shutdown began");
    pool_tasks_.push_back(graph_task);
    if (idle_pool_threads_ == 0) pool_threads_.emplace_back([this] { pool_thread_main(); });
  }
  pool_cv_->notify_one();
}

// Runs tasks from this thread's queue until `graph_task` completes (forever for device threads).
// Called without the GIL; takes it only to run a node.
void Engine::thread_main(const std::shared_ptr<GraphTask>& graph_task) {
  std::shared_ptr<ReadyQueue> queue = local_ready_queue;
  while (!graph_task || !graph_task->future_completed.load()) {
    NodeTask task = queue->pop();
    if (task.is_shutdown) break;
    // Everything below may drop the last reference to Python objects (the task's gradients, or the
    // GraphTask with its callbacks and queue when the caller has already returned): hold the GIL.
    GilHold gil;
    std::shared_ptr<GraphTask> base = task.base.lock();
    if (base && task.fn) {  // fn == null: a wake-up, only makes the loop re-check its condition
      if (!base->has_error.load()) {
        ScopedValue<bool> mode(grad_mode, base->grad_mode);
        try {
          NodeProfiler& profiler = NodeProfiler::get();
          if (profiler.enabled()) {
            const int64_t start = NodeProfiler::now_ns();
            evaluate_function(base, task.fn, task.inputs);
            profiler.add({task.fn->name(), start, NodeProfiler::now_ns(), 0});
          } else {
            evaluate_function(base, task.fn, task.inputs);
          }
        } catch (py::error_already_set& e) {
          base->set_error(std::move(e), describe_failure(*task.fn));
        } catch (std::exception& e) {
          PyErr_SetString(PyExc_RuntimeError, e.what());
          base->set_error(py::error_already_set(), describe_failure(*task.fn));
        }
      }
      task = NodeTask();
      --base->outstanding_tasks;
      if (base->completed() && !base->future_completed.load()) {
        base->mark_completed();
        // Wake the owner if it sleeps on a different queue (this is a device or pool thread).
        if (base->cpu_ready_queue != queue) {
          NodeTask wake;
          wake.base = base;
          base->cpu_ready_queue->push(std::move(wake), false);
        }
      }
    }
    task = NodeTask();
    base.reset();
  }
}

std::vector<py::object> Engine::execute(const std::vector<Edge>& roots, std::vector<py::object> grads,
                                        bool keep_graph, bool create_graph, bool accumulate_grad,
                                        const std::vector<Edge>& outputs) {
  if (roots.empty()) throw std::runtime_error("backward: no roots given");
  if (roots.size() != grads.size()) throw std::runtime_error("backward: one gradient per root is required");
  const bool reentrant = worker_device != NO_DEVICE;
  std::shared_ptr<ReadyQueue> queue = reentrant ? local_ready_queue : std::make_shared<ReadyQueue>();
  const int depth = reentrant ? total_depth + 1 : 0;
  auto graph_task = std::make_shared<GraphTask>(keep_graph, create_graph, depth, queue);
  // A reentrant call inherits the setting of the backward it runs in (it may be on a pool thread).
  graph_task->multithreading = multithreading && (current_graph_task == nullptr || current_graph_task->multithreading);

  // One root: its input buffer is pre-filled with the seed; several: a GraphRoot feeds them all.
  NodePtr root;
  InputBuffer root_inputs(0);
  if (roots.size() == 1) {
    root = roots[0].function;
    root_inputs = InputBuffer(root->num_inputs);
    root_inputs.add(roots[0].input_nr, std::move(grads[0]));
  } else {
    root = make_node<GraphRoot>(roots, std::move(grads));
  }
  compute_dependencies(root.get(), *graph_task);
  if (!outputs.empty()) init_to_execute(*graph_task, root.get(), outputs, accumulate_grad);

  NodeTask root_task;
  root_task.base = graph_task;
  root_task.fn = root;
  root_task.inputs = std::move(root_inputs);
  root_task.reentrant_depth = depth;
  ready_queue_for(graph_task->device_of(*root), queue)->push(std::move(root_task));

  if (!reentrant) {
    ScopedValue<int> device(worker_device, CPU_DEVICE);
    ScopedValue<std::shared_ptr<ReadyQueue>> local(local_ready_queue, queue);
    GilRelease release;
    thread_main(graph_task);
  } else if (current_depth >= MAX_DEPTH) {
    GilRelease release;
    run_on_pool_thread(graph_task);
    graph_task->wait_completed();
  } else {
    ScopedValue<int> depth_here(current_depth, current_depth + 1);
    ScopedValue<int> depth_all(total_depth, depth);
    GilRelease release;
    thread_main(graph_task);
  }

  // GIL held again.
  if (graph_task->error) {
    std::lock_guard<std::mutex> lock(graph_task->mutex);
    graph_task->not_ready.clear();
    py::error_already_set err = std::move(*graph_task->error);
    graph_task->error.reset();
    add_note(err, "(raised in the backward of node " + graph_task->error_node);
    err.restore();
    throw py::error_already_set();
  }
  run_final_callbacks(graph_task);
  // Inputs no path reached were never captured: they come back as None (grad()'s allow_unused).
  std::vector<py::object> captured = std::move(graph_task->captured_vars);
  for (py::object& value : captured) value = as_object(value);
  return captured;
}

void Engine::run_final_callbacks(const std::shared_ptr<GraphTask>& graph_task) {
  ScopedValue<GraphTask*> current(current_graph_task, graph_task.get());
  // Index loop: a callback may queue more callbacks.
  for (size_t i = 0; i < graph_task->final_callbacks.size(); ++i) {
    py::object callback = graph_task->final_callbacks[i];
    callback();
  }
}

uint64_t Engine::current_graph_task_id() const { return current_graph_task ? current_graph_task->id : 0; }

bool Engine::is_checkpoint_valid() const {
  // A reentrant checkpoint replays its segment with a full backward(): only right when the
  // surrounding backward runs every node (no grad() / inputs= pruning).
  return current_graph_task == nullptr || current_graph_task->exec_info.empty();
}

void Engine::queue_callback(py::object callback) {
  if (!current_graph_task) throw std::runtime_error("Final callbacks can only be installed during backward pass.");
  current_graph_task->final_callbacks.push_back(std::move(callback));
}

namespace {

// A snapshot of a hook dict's values: a hook may remove itself (handle.remove()) while it runs,
// and a dict must not change size while it is being iterated.
py::list hook_list(const py::object& hooks) {
  PyObject* values = PyDict_Values(hooks.ptr());
  if (!values) throw py::error_already_set();
  return py::reinterpret_steal<py::list>(values);
}

std::string hook_name(const py::handle& hook) {
  return py::hasattr(hook, "__name__") ? py::str(hook.attr("__name__")).cast<std::string>()
                                       : py::repr(hook).cast<std::string>();
}

void check_same_size(const py::handle& hook, const py::object& before, const py::object& after) {
  if (!before || before.is_none() || after.is_none()) return;
  if (!before.attr("shape").equal(after.attr("shape")))
    throw std::runtime_error("hook '" + hook_name(hook) + "' has changed the size of value");
}

// What a node pre-/post-hook returned: None (keep), or one value per gradient (replace).
void replace_from_hook(const py::handle& hook, const py::object& result, std::vector<py::object>& values,
                       bool check_sizes) {
  if (result.is_none()) return;
  py::tuple replaced(result);  // accepts a tuple or a list
  if (replaced.size() != values.size()) {
    throw std::runtime_error("hook '" + hook_name(hook) + "' has returned an incorrect number of values (got " +
                             std::to_string(replaced.size()) + ", but expected " + std::to_string(values.size()) +
                             ")");
  }
  for (size_t i = 0; i < values.size(); ++i) {
    py::object value = replaced[i];
    if (check_sizes) check_same_size(hook, values[i], value);
    values[i] = std::move(value);
  }
}

// Tensor hooks (and retain_grad) see the gradient of each forward output before the node runs.
void call_tensor_pre_hooks(Node* fn, std::vector<py::object>& inputs) {
  for (uint32_t i = 0; i < inputs.size(); ++i) {
    py::object hooks = fn->tensor_pre_hooks(i);
    if (hooks && !hooks.is_none() && inputs[i] && !inputs[i].is_none()) {
      for (auto hook : hook_list(hooks)) {
        py::object result = hook(inputs[i]);
        if (result.is_none()) continue;
        check_same_size(hook, inputs[i], result);
        inputs[i] = std::move(result);
      }
    }
  }
  if (fn->retains_grad_hooks) {
    py::dict by_index = py::reinterpret_borrow<py::dict>(fn->retains_grad_hooks);
    for (auto item : py::dict(by_index)) {  // a copy, for the same reason as hook_list
      uint32_t index = item.first.cast<uint32_t>();
      if (index < inputs.size() && inputs[index] && !inputs[index].is_none())
        py::reinterpret_borrow<py::object>(item.second)(inputs[index]);
    }
  }
}

}  // namespace

std::vector<py::object> Engine::call_function(GraphTask& graph_task, Node* fn, std::vector<py::object>& inputs) {
  if (fn->pre_hooks) {
    for (auto hook : hook_list(fn->pre_hooks)) replace_from_hook(hook, hook(as_tuple(inputs)), inputs, true);
  }
  std::vector<py::object> outputs = fn->apply(inputs);
  if (anomaly_enabled.load() && anomaly_check_nan.load() && check_nan_fn) check_nan_fn(fn->name(), as_tuple(outputs));
  if (fn->post_hooks) {
    for (auto hook : hook_list(fn->post_hooks)) {
      replace_from_hook(hook, hook(as_tuple(outputs), as_tuple(inputs)), outputs, false);
    }
  }
  return outputs;
}

void Engine::evaluate_function(const std::shared_ptr<GraphTask>& graph_task, const NodePtr& fn_ptr,
                               InputBuffer& inputs) {
  Node* fn = fn_ptr.get();
  ScopedValue<GraphTask*> current_task(current_graph_task, graph_task.get());
  ScopedValue<const NodePtr*> current(current_node_, &fn_ptr);
  auto& exec_info = graph_task->exec_info;
  bool hooks_done = false;
  if (!exec_info.empty()) {
    auto it = exec_info.find(fn);
    if (it == exec_info.end()) return;
    if (!it->second.captures.empty()) {
      call_tensor_pre_hooks(fn, inputs.buffer);
      hooks_done = true;
      std::lock_guard<std::mutex> lock(graph_task->mutex);
      for (auto [input_idx, slot] : it->second.captures) graph_task->captured_vars[slot] = as_object(inputs.buffer[input_idx]);
    }
    if (!it->second.needed) return;
  }
  if (!hooks_done) call_tensor_pre_hooks(fn, inputs.buffer);
  std::vector<py::object> outputs = call_function(*graph_task, fn, inputs.buffer);
  if (!graph_task->keep_graph) fn->release_variables();
  inputs.buffer.clear();

  std::lock_guard<std::mutex> lock(graph_task->mutex);
  for (size_t i = 0; i < fn->next_edges.size(); ++i) {
    const Edge& edge = fn->next_edges[i];
    if (!edge.is_valid()) continue;
    Node* next = edge.function.get();
    auto dep = graph_task->dependencies.find(next);
    if (dep == graph_task->dependencies.end())
      throw std::runtime_error("autograd engine: dependency not found for " + next->name());
    const bool ready = --dep->second == 0;
    if (ready) graph_task->dependencies.erase(dep);
    if (!exec_info.empty()) {
      auto info = exec_info.find(next);
      if (info == exec_info.end() || (!info->second.needed && info->second.captures.empty())) continue;
    }
    auto buffer = graph_task->not_ready.find(next);
    if (buffer == graph_task->not_ready.end()) {
      InputBuffer fresh(next->num_inputs);
      fresh.add(edge.input_nr, std::move(outputs[i]));
      if (ready) {
        NodeTask task;
        task.base = graph_task;
        task.fn = edge.function;
        task.inputs = std::move(fresh);
        task.reentrant_depth = graph_task->reentrant_depth;
        ready_queue_for(graph_task->device_of(*next), graph_task->cpu_ready_queue)->push(std::move(task));
      } else {
        graph_task->not_ready.emplace(next, std::move(fresh));
      }
    } else {
      buffer->second.add(edge.input_nr, std::move(outputs[i]));
      if (ready) {
        NodeTask task;
        task.base = graph_task;
        task.fn = edge.function;
        task.inputs = std::move(buffer->second);
        task.reentrant_depth = graph_task->reentrant_depth;
        graph_task->not_ready.erase(buffer);
        ready_queue_for(graph_task->device_of(*next), graph_task->cpu_ready_queue)->push(std::move(task));
      }
    }
  }
}

}  // namespace tinytorch::autograd
