#include "engine/profiler.h"

#include <pthread.h>
#include <time.h>

namespace tinytorch::autograd {

NodeProfiler& NodeProfiler::get() {
  static NodeProfiler profiler;
  return profiler;
}

int64_t NodeProfiler::now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

void NodeProfiler::add(NodeSpan span) {
  span.thread_id = static_cast<uint64_t>(pthread_self());
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.push_back(std::move(span));
}

std::vector<NodeSpan> NodeProfiler::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<NodeSpan> out;
  out.swap(spans_);
  return out;
}

}  // namespace tinytorch::autograd
