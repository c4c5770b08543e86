// Backend: what a process group runs its collectives on (c10d's name). Ring (CPU) and NCCL (CUDA).
#pragma once
#include <string>

namespace tinytorch::dist {

class Backend {
 public:
  Backend(int rank, int size) : rank_(rank), size_(size) {}
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string name() const = 0;
  // Joins every thread the backend started; later calls fail with a clear error.
  virtual void shutdown() = 0;

 protected:
  int rank_, size_;
};

}  // namespace tinytorch::dist
