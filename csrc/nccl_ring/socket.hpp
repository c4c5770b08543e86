// Thin RAII TCP socket helpers shared by the store and the ring backend.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "errors.hpp"

namespace tinytorch::dist {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();
  // Wakes anyone blocked on this socket (including the peer) without releasing the descriptor.
  void shutdown_rw();

  void set_nonblocking(bool on);
  void set_nodelay();
  void set_buffer_sizes(int bytes);

  // Listening socket on all interfaces; port 0 lets the kernel choose.
  static Socket listen_on(int port, int backlog);
  // Connects with exponential backoff (refused/unreachable are retried) until the deadline.
  static Socket connect_to(const std::string& host, int port, Deadline deadline, const std::string& what);
  // Waits for one incoming connection until the deadline.
  Socket accept_one(Deadline deadline, const std::string& what);
  int local_port() const;
  // The local address of a connected socket: what peers that reach the same server can dial.
  std::string local_ip() const;

  // Blocking-with-deadline full transfers; `what` names the operation in errors.
  void send_all(const void* data, size_t n, Deadline deadline, const std::string& what);
  void recv_all(void* data, size_t n, Deadline deadline, const std::string& what);

 private:
  int fd_ = -1;
};

std::string local_hostname();

}  // namespace tinytorch::dist
