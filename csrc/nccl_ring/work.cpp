#include "work.hpp"

#include <ctime>

#include "flight_recorder.hpp"

namespace tinytorch::dist {

void throw_dist_error(ErrorKind kind, const std::string& message) {
  switch (kind) {
    case ErrorKind::Timeout: throw DistTimeoutError(message);
    case ErrorKind::Network: throw DistNetworkError(message);
    default: throw DistError(message);
  }
}

ErrorKind classify(const std::exception& e) {
  if (dynamic_cast<const DistTimeoutError*>(&e)) return ErrorKind::Timeout;
  if (dynamic_cast<const DistNetworkError*>(&e)) return ErrorKind::Network;
  return ErrorKind::Generic;
}

int64_t Work::monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

void Work::mark_started() {
  start_ns_.store(monotonic_ns());
  if (trace_id_ >= 0) fr::FlightRecorder::get().started(trace_id_);
}

bool Work::is_completed() {
  std::lock_guard<std::mutex> g(mu_);
  return done_;
}

bool Work::is_success() {
  std::lock_guard<std::mutex> g(mu_);
  return done_ && kind_ == ErrorKind::None;
}

ErrorKind Work::error_kind() {
  std::lock_guard<std::mutex> g(mu_);
  return kind_;
}

std::string Work::error_message() {
  std::lock_guard<std::mutex> g(mu_);
  return message_;
}

void Work::wait(double timeout_s) {
  // The progress thread bounds every step by the group timeout; the extra second lets its
  // precise error (which rank, which direction) arrive before this coarser one.
  double t = timeout_s >= 0 ? timeout_s : timeout_s_ + 1.0;
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_until(lk, deadline_after(t), [&] { return done_; })) {
    lk.unlock();
    if (timeout_s < 0 && global_rank_ >= 0) fr::on_collective_failure(global_rank_);
    throw DistTimeoutError("rank " + std::to_string(rank_) + ": " + description_ + " did not complete within " +
                           format_seconds(t));
  }
  if (kind_ != ErrorKind::None) throw_dist_error(kind_, message_);
}

void Work::add_callback(std::function<void()> cb) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!done_) {
      callbacks_.push_back(std::move(cb));
      return;
    }
  }
  cb();
}

void Work::finish(ErrorKind kind, const std::string& message) {
  std::vector<std::function<void()>> cbs;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (done_) return;
    done_ = true;
    end_ns_.store(monotonic_ns());
    kind_ = kind;
    message_ = message;
    cbs.swap(callbacks_);
  }
  if (trace_id_ >= 0) fr::FlightRecorder::get().finished(trace_id_, kind == ErrorKind::None);
  cv_.notify_all();
  keepalive_.clear();
  for (auto& cb : cbs) cb();
}

}  // namespace tinytorch::dist
