// Error types of the communication layer; the bindings map each to a Python exception class.
#pragma once
#include <chrono>
#include <stdexcept>
#include <string>

namespace tinytorch::dist {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

struct DistError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A blocking wait ran past its timeout.
struct DistTimeoutError : DistError {
  using DistError::DistError;
};
// The peer or server went away (connection refused, reset, closed).
struct DistNetworkError : DistError {
  using DistError::DistError;
};
// The store answered, but not the way the caller needed (bad reply, too many clients missing...).
struct DistStoreError : DistError {
  using DistError::DistError;
};

inline Deadline deadline_after(double seconds) {
  // Clamp so that "effectively forever" does not overflow the clock's representation.
  if (seconds > 1e7) seconds = 1e7;
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Milliseconds left until `d` for poll(); 0 once passed.
inline int ms_left(Deadline d) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1000000 ? 1000000 : static_cast<int>(left) + 1;
}

std::string format_seconds(double s);

}  // namespace tinytorch::dist
