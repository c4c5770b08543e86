// Backend: what a process group runs its collectives on (c10d's name). Ring (CPU) and NCCL (CUDA).
#pragma once
#include <string>
#include <vector>

#include "flight_recorder.hpp"

namespace tinytorch::dist {

class Backend {
 public:
  Backend(int rank, int size) : rank_(rank), size_(size), trace_(rank, size) {}
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string name() const = 0;
  // Joins every thread the backend started; later calls fail with a clear error.
  virtual void shutdown() = 0;
  // The group's name, description and global ranks, as the flight recorder's dumps show them.
  void set_trace_group(std::string name, std::string desc, std::vector<int> ranks) {
    trace_.set_group(std::move(name), std::move(desc), std::move(ranks));
  }

 protected:
  int rank_, size_;
  fr::GroupTrace trace_;
};

}  // namespace tinytorch::dist
