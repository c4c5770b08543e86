// The byte pipes between a rank and its ring neighbours (send to the right, receive from the left).
// Every call is non-blocking and returns the bytes it moved; wait() blocks until progress may be
// possible, throwing on timeout or peer failure. Two implementations: TCP and shared memory.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dtypes.hpp"
#include "errors.hpp"
#include "socket.hpp"

namespace tinytorch::dist {

class RingLinks {
 public:
  RingLinks(int rank, int left, int right) : rank_(rank), left_(left), right_(right) {}
  virtual ~RingLinks() = default;
  RingLinks(const RingLinks&) = delete;
  RingLinks& operator=(const RingLinks&) = delete;

  virtual const char* name() const = 0;
  // Both sides call this at the start of every collective (used to realign stream positions).
  virtual void begin_collective() {}
  virtual size_t send_some(const char* src, size_t n, size_t elem, const std::string& what) = 0;
  virtual size_t recv_copy_some(char* dst, size_t n, size_t elem, const std::string& what) = 0;
  // dst = a (op) incoming; only whole elements are consumed.
  virtual size_t recv_reduce_some(char* dst, const char* a, size_t n, DType t, ReduceOp op, const std::string& what) = 0;
  virtual void wait(bool want_send, bool want_recv, Deadline deadline, const std::string& what) = 0;
  // Makes the neighbours' pending operations fail promptly (used when this group breaks).
  virtual void abort() = 0;

  int rank() const { return rank_; }
  int left() const { return left_; }
  int right() const { return right_; }
  // Payload bytes this rank has sent to its right neighbour (headers aside): what the traffic
  // model of DDP and ZeRO counts; read from Python while the progress thread adds to it.
  uint64_t payload_sent() const { return payload_sent_.load(std::memory_order_relaxed); }
  void count_sent(size_t n) { payload_sent_.fetch_add(n, std::memory_order_relaxed); }

 protected:
  int rank_, left_, right_;
  std::atomic<uint64_t> payload_sent_{0};
};

// left_sock and right_sock may be the same connection (world size 2).
std::unique_ptr<RingLinks> make_tcp_links(int rank, int left, int right, Socket* left_sock, Socket* right_sock);

// Shared-memory rings for ranks on one host. `my_name` is this rank's segment (created by
// create_shm_segment), the others are the neighbours'. TCP sockets stay as liveness probes.
struct ShmSegment;
std::shared_ptr<ShmSegment> create_shm_segment(const std::string& name, size_t capacity);
std::shared_ptr<ShmSegment> open_shm_segment(const std::string& name, size_t capacity, const std::string& what);
void unlink_shm_segment(const std::string& name);
std::unique_ptr<RingLinks> make_shm_links(int rank, int left, int right, std::shared_ptr<ShmSegment> mine,
                                          std::shared_ptr<ShmSegment> left_seg, std::shared_ptr<ShmSegment> right_seg,
                                          Socket* left_sock, Socket* right_sock);

}  // namespace tinytorch::dist
