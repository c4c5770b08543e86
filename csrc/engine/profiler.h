// Backward-node spans for tinytorch.profiler: while enabled, the engine records when each node ran
// and on which thread, so a trace can put backward beside forward ops and all-reduces.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace tinytorch::autograd {

struct NodeSpan {
  std::string name;
  int64_t start_ns;  // CLOCK_MONOTONIC, the clock of Python's time.monotonic_ns()
  int64_t end_ns;
  uint64_t thread_id;
};

class NodeProfiler {
 public:
  static NodeProfiler& get();
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  void set_enabled(bool on) { enabled_.store(on); }
  void add(NodeSpan span);
  std::vector<NodeSpan> take();  // the spans so far; clears them
  static int64_t now_ns();

 private:
  std::atomic<bool> enabled_{false};
  std::mutex mutex_;
  std::vector<NodeSpan> spans_;
};

}  // namespace tinytorch::autograd
