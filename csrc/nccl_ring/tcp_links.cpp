#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "ring_links.hpp"

namespace tinytorch::dist {
namespace {

constexpr size_t kStaging = 1 << 20;

class TcpLinks final : public RingLinks {
 public:
  TcpLinks(int rank, int left, int right, Socket* l, Socket* r)
      : RingLinks(rank, left, right), left_sock_(l), right_sock_(r), staging_(kStaging) {}

  const char* name() const override { return "tcp"; }

  size_t send_some(const char* src, size_t n, size_t, const std::string& what) override {
    if (n == 0) return 0;
    ssize_t k = ::send(right_sock_->fd(), src, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k >= 0) return static_cast<size_t>(k);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    throw DistNetworkError(what + ": lost the connection to rank " + std::to_string(right_) + " while sending (" +
                           std::strerror(errno) + "); did rank " + std::to_string(right_) + " exit or crash?");
  }

  size_t recv_copy_some(char* dst, size_t n, size_t, const std::string& what) override {
    if (n == 0) return 0;
    return recv_raw(dst, n, what);
  }

  size_t recv_reduce_some(char* dst, const char* a, size_t n, DType t, ReduceOp op, const std::string& what) override {
    // Bytes of a partial element from the previous call wait at the front of staging_.
    size_t es = dtype_size(t);
    size_t want = std::min(n, staging_.size()) - staged_;
    size_t k = want ? recv_raw(staging_.data() + staged_, want, what) : 0;
    staged_ += k;
    size_t whole = staged_ / es * es;
    if (whole == 0) return 0;
    reduce_into(dst, a, staging_.data(), whole / es, t, op);
    std::memmove(staging_.data(), staging_.data() + whole, staged_ - whole);
    staged_ -= whole;
    return whole;
  }

  void wait(bool want_send, bool want_recv, Deadline deadline, const std::string& what) override {
    pollfd fds[2];
    int nfds = 0;
    if (want_recv) fds[nfds++] = {left_sock_->fd(), POLLIN, 0};
    if (want_send) {
      if (nfds == 1 && fds[0].fd == right_sock_->fd()) {
        fds[0].events |= POLLOUT;
      } else {
        fds[nfds++] = {right_sock_->fd(), POLLOUT, 0};
      }
    }
    int pr = ::poll(fds, nfds, ms_left(deadline));
    if (pr < 0 && errno == EINTR) return;
    if (pr == 0) {
      std::string dir = want_recv ? "to receive from rank " + std::to_string(left_) : "";
      if (want_send) dir += std::string(dir.empty() ? "" : " and ") + "to send to rank " + std::to_string(right_);
      throw DistTimeoutError(what + ": timed out waiting " + dir + "; that rank is stalled, dead, or running a "
                             "different collective");
    }
  }

  void abort() override {
    left_sock_->shutdown_rw();
    right_sock_->shutdown_rw();
  }

 private:
  size_t recv_raw(char* dst, size_t n, const std::string& what) {
    ssize_t k = ::recv(left_sock_->fd(), dst, n, MSG_DONTWAIT);
    if (k > 0) return static_cast<size_t>(k);
    if (k == 0)
      throw DistNetworkError(what + ": rank " + std::to_string(left_) +
                             " closed its connection (it exited, crashed, or its process group failed)");
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    throw DistNetworkError(what + ": lost the connection to rank " + std::to_string(left_) + " while receiving (" +
                           std::strerror(errno) + ")");
  }

  Socket* left_sock_;
  Socket* right_sock_;
  std::vector<char> staging_;
  size_t staged_ = 0;
};

}  // namespace

std::unique_ptr<RingLinks> make_tcp_links(int rank, int left, int right, Socket* l, Socket* r) {
  return std::make_unique<TcpLinks>(rank, left, right, l, r);
}

}  // namespace tinytorch::dist
