#include "socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

namespace tinytorch::dist {

std::string format_seconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3gs", s);
  return buf;
}

void Socket::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void Socket::shutdown_rw() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::set_nonblocking(bool on) {
  int flags = ::fcntl(fd_, F_GETFL, 0);
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  ::fcntl(fd_, F_SETFL, flags);
}

void Socket::set_nodelay() {
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void Socket::set_buffer_sizes(int bytes) {
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

Socket Socket::listen_on(int port, int backlog) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) throw DistNetworkError(std::string("socket(): ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(s.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(s.fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    throw DistNetworkError("cannot bind port " + std::to_string(port) + ": " + std::strerror(errno));
  if (::listen(s.fd_, backlog) != 0) throw DistNetworkError(std::string("listen(): ") + std::strerror(errno));
  return s;
}

int Socket::local_port() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return -1;
}

std::string Socket::local_ip() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  char buf[INET6_ADDRSTRLEN] = {0};
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "127.0.0.1";
  if (addr.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, buf, sizeof(buf));
  } else if (addr.ss_family == AF_INET6) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
    if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
      ::inet_ntop(AF_INET, reinterpret_cast<const char*>(&a6->sin6_addr) + 12, buf, sizeof(buf));
    } else {
      ::inet_ntop(AF_INET6, &a6->sin6_addr, buf, sizeof(buf));
    }
  }
  return buf[0] ? buf : "127.0.0.1";
}

Socket Socket::connect_to(const std::string& host, int port, Deadline deadline, const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string last_error = "no attempt made";
  std::mt19937 rng(std::random_device{}());
  auto backoff = std::chrono::milliseconds(10);
  while (true) {
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0) {
      last_error = std::string("getaddrinfo: ") + ::gai_strerror(rc);
    } else {
      for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
        if (!s.valid()) continue;
        // Non-blocking connect so that an unresponsive host cannot outlive the deadline.
        s.set_nonblocking(true);
        int c = ::connect(s.fd_, ai->ai_addr, ai->ai_addrlen);
        if (c != 0 && errno == EINPROGRESS) {
          pollfd p{s.fd_, POLLOUT, 0};
          int pr = ::poll(&p, 1, ms_left(deadline));
          int err = 0;
          socklen_t len = sizeof(err);
          if (pr == 1) ::getsockopt(s.fd_, SOL_SOCKET, SO_ERROR, &err, &len);
          c = (pr == 1 && err == 0) ? 0 : -1;
          errno = pr == 1 ? err : ETIMEDOUT;
        }
        if (c == 0) {
          ::freeaddrinfo(res);
          s.set_nonblocking(false);
          s.set_nodelay();
          return s;
        }
        last_error = std::strerror(errno);
      }
      ::freeaddrinfo(res);
    }
    if (Clock::now() >= deadline)
      throw DistNetworkError(what + ": could not connect to " + host + ":" + std::to_string(port) +
                             " before the timeout (" + last_error + ")");
    // Jitter keeps many ranks from retrying in lockstep against one server.
    auto sleep = backoff + std::chrono::milliseconds(rng() % 10);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    std::this_thread::sleep_for(std::min(sleep, std::max(left, std::chrono::milliseconds(1))));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

Socket Socket::accept_one(Deadline deadline, const std::string& what) {
  while (true) {
    pollfd p{fd_, POLLIN, 0};
    int pr = ::poll(&p, 1, ms_left(deadline));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) throw DistTimeoutError(what + ": timed out waiting for an incoming connection");
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      throw DistNetworkError(what + ": accept(): " + std::strerror(errno));
    }
    Socket s(fd);
    s.set_nodelay();
    return s;
  }
}

void Socket::send_all(const void* data, size_t n, Deadline deadline, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      pollfd pf{fd_, POLLOUT, 0};
      int pr = ::poll(&pf, 1, ms_left(deadline));
      if (pr == 0) throw DistTimeoutError(what + ": timed out sending");
      continue;
    }
    throw DistNetworkError(what + ": connection lost while sending (" + std::strerror(errno) + ")");
  }
}

void Socket::recv_all(void* data, size_t n, Deadline deadline, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd_, p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) throw DistNetworkError(what + ": connection closed by the other side");
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      pollfd pf{fd_, POLLIN, 0};
      int pr = ::poll(&pf, 1, ms_left(deadline));
      if (pr == 0) throw DistTimeoutError(what + ": timed out waiting for a reply");
      continue;
    }
    throw DistNetworkError(what + ": connection lost while receiving (" + std::strerror(errno) + ")");
  }
}

std::string local_hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

}  // namespace tinytorch::dist
