// Work: the handle every collective returns; completed by the backend's progress thread.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "errors.hpp"

namespace tinytorch::dist {

enum class ErrorKind : int { None = 0, Generic = 1, Timeout = 2, Network = 3 };

class Work {
 public:
  Work(std::string description, int rank, double timeout_s)
      : description_(std::move(description)), rank_(rank), timeout_s_(timeout_s) {}

  const std::string& description() const { return description_; }
  bool is_completed();
  bool is_success();
  // Blocks until done; throws the collective's error, or DistTimeoutError after timeout_s (<0: the group's).
  void wait(double timeout_s);
  ErrorKind error_kind();
  std::string error_message();
  // Runs `cb` once the work completes: immediately in this thread if it already has.
  void add_callback(std::function<void()> cb);
  // Objects (e.g. Python arrays) that must outlive the data movement; dropped at completion.
  void keep_alive(std::shared_ptr<void> obj) { keepalive_.push_back(std::move(obj)); }

  void finish(ErrorKind kind = ErrorKind::None, const std::string& message = "");

  // When the backend began moving this work's data and when it completed, in CLOCK_MONOTONIC ns (the
  // clock of Python's time.monotonic_ns()); 0 until then. DDP measures its overlap with backward from them.
  void mark_started();
  int64_t start_ns() const { return start_ns_.load(); }
  int64_t end_ns() const { return end_ns_.load(); }
  static int64_t monotonic_ns();
  // The flight recorder's id for this work (-1: not recorded); started and finished are reported to it.
  // With the global rank, a wait that times out at the group's timeout also asks every rank to dump (the
  // ring's progress thread may report the same hang later, or not at all under load).
  void set_trace_id(int64_t id, int global_rank = -1) {
    trace_id_ = id;
    global_rank_ = global_rank;
  }

 private:
  std::string description_;
  int rank_;
  double timeout_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  ErrorKind kind_ = ErrorKind::None;
  std::string message_;
  std::vector<std::function<void()>> callbacks_;
  std::vector<std::shared_ptr<void>> keepalive_;
  std::atomic<int64_t> start_ns_{0};
  std::atomic<int64_t> end_ns_{0};
  int64_t trace_id_ = -1;
  int global_rank_ = -1;
};

// Rethrows a DistError subclass matching `kind`.
[[noreturn]] void throw_dist_error(ErrorKind kind, const std::string& message);
ErrorKind classify(const std::exception& e);

}  // namespace tinytorch::dist
