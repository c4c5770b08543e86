#include "tcp_store.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

namespace tinytorch::dist {
namespace {

constexpr uint32_t kMagic = 0x7754C0DE;
// Bounds that keep one malformed or hostile client from exhausting the server's memory.
constexpr uint64_t kMaxKey = 64 * 1024;
constexpr uint64_t kMaxValue = 256ull * 1024 * 1024;
constexpr uint64_t kMaxKeysPerOp = 1 << 17;

enum class Op : uint8_t { VALIDATE = 0, SET, COMPARE_SET, GET, ADD, CHECK, WAIT, NUM_KEYS, DELETE_KEY };

// Incremental parser over the bytes a client has sent so far; any read may find too few bytes.
struct Reader {
  const std::string& buf;
  size_t pos;
  bool ok = true;
  bool bad = false;
  template <typename T>
  T pod() {
    T v{};
    if (!ok || pos + sizeof(T) > buf.size()) {
      ok = false;
      return v;
    }
    std::memcpy(&v, buf.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string str(uint64_t limit) {
    uint64_t n = pod<uint64_t>();
    if (!ok) return {};
    if (n > limit) {
      bad = ok = false;
      return {};
    }
    if (pos + n > buf.size()) {
      ok = false;
      return {};
    }
    std::string s = buf.substr(pos, n);
    pos += n;
    return s;
  }
};

struct Writer {
  std::string out;
  template <typename T>
  Writer& pod(T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  Writer& str(const std::string& s) {
    pod<uint64_t>(s.size());
    out.append(s);
    return *this;
  }
};

struct Client {
  Socket sock;
  std::string in, out;
  bool validated = false;
  // Keys a parked WAIT still misses; the reply goes out when it reaches zero.
  size_t missing = 0;
};

}  // namespace

TCPStoreServer::TCPStoreServer(int port, int listen_fd) {
  if (listen_fd >= 0) {
    int fd = ::fcntl(listen_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throw DistNetworkError(std::string("TCPStore: cannot adopt master_listen_fd: ") + std::strerror(errno));
    listener_ = Socket(fd);
  } else {
    listener_ = Socket::listen_on(port, SOMAXCONN);
  }
  port_ = listener_.local_port();
  if (port_ < 0) throw DistNetworkError("TCPStore: master_listen_fd is not a bound TCP socket");
  listener_.set_nonblocking(true);
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) throw DistError("TCPStore: pipe2 failed");
  wake_read_ = Socket(p[0]);
  wake_write_ = Socket(p[1]);
  thread_ = std::thread([this] { loop(); });
}

TCPStoreServer::~TCPStoreServer() {
  char c = 1;
  ssize_t rc = ::write(wake_write_.fd(), &c, 1);
  (void)rc;
  if (thread_.joinable()) thread_.join();
}

void TCPStoreServer::loop() {
  std::unordered_map<std::string, Bytes> data;
  std::map<int, Client> clients;  // keyed by fd
  std::unordered_map<std::string, std::set<int>> waiters;

  auto wake_waiters = [&](const std::string& key) {
    auto it = waiters.find(key);
    if (it == waiters.end()) return;
    for (int fd : it->second) {
      auto c = clients.find(fd);
      if (c != clients.end() && c->second.missing > 0 && --c->second.missing == 0) c->second.out.push_back('\0');
    }
    waiters.erase(it);
  };
  auto drop = [&](int fd) {
    for (auto& [k, s] : waiters) s.erase(fd);
    clients.erase(fd);
  };

  // Returns false if the client sent something malformed and must be dropped.
  auto handle = [&](int fd, Client& c) -> bool {
    while (true) {
      if (c.missing > 0) return true;  // parked in WAIT: no further requests until answered
      Reader r{c.in, 0};
      auto op = static_cast<Op>(r.pod<uint8_t>());
      if (!r.ok) return true;
      Writer w;
      if (!c.validated && op != Op::VALIDATE) return false;
      switch (op) {
        case Op::VALIDATE: {
          uint32_t magic = r.pod<uint32_t>();
          if (!r.ok) return true;
          if (magic != kMagic) return false;
          c.validated = true;
          w.pod<uint8_t>(0);
          break;
        }
        case Op::SET: {
          std::string k = r.str(kMaxKey), v = r.str(kMaxValue);
          if (!r.ok) return !r.bad;
          data[k] = std::move(v);
          wake_waiters(k);
          w.pod<uint8_t>(0);
          break;
        }
        case Op::COMPARE_SET: {
          std::string k = r.str(kMaxKey), e = r.str(kMaxValue), d = r.str(kMaxValue);
          if (!r.ok) return !r.bad;
          auto it = data.find(k);
          if (it == data.end()) {
            if (e.empty()) {
              data[k] = d;
              wake_waiters(k);
              w.str(d);
            } else {
              w.str(e);
            }
          } else {
            if (it->second == e) it->second = d;
            w.str(it->second);
          }
          break;
        }
        case Op::GET: {
          std::string k = r.str(kMaxKey);
          if (!r.ok) return !r.bad;
          auto it = data.find(k);
          if (it == data.end()) {
            w.pod<uint8_t>(0);
          } else {
            w.pod<uint8_t>(1).str(it->second);
          }
          break;
        }
        case Op::ADD: {
          std::string k = r.str(kMaxKey);
          int64_t delta = r.pod<int64_t>();
          if (!r.ok) return !r.bad;
          auto it = data.find(k);
          int64_t v = 0;
          if (it != data.end()) {
            try {
              v = std::stoll(it->second);
            } catch (const std::exception&) {
              return false;
            }
          }
          v += delta;
          data[k] = std::to_string(v);
          wake_waiters(k);
          w.pod<int64_t>(v);
          break;
        }
        case Op::CHECK:
        case Op::WAIT: {
          uint64_t n = r.pod<uint64_t>();
          if (!r.ok) return true;
          if (n > kMaxKeysPerOp) return false;
          std::vector<std::string> keys;
          for (uint64_t i = 0; i < n && r.ok; ++i) keys.push_back(r.str(kMaxKey));
          if (!r.ok) return !r.bad;
          size_t missing = 0;
          for (auto& k : keys) missing += data.count(k) ? 0 : 1;
          if (op == Op::CHECK) {
            w.pod<uint8_t>(missing == 0 ? 1 : 0);
          } else if (missing == 0) {
            w.pod<uint8_t>(0);
          } else {
            c.missing = 0;
            for (auto& k : keys)
              if (!data.count(k) && waiters[k].insert(fd).second) ++c.missing;
          }
          break;
        }
        case Op::NUM_KEYS:
          w.pod<int64_t>(static_cast<int64_t>(data.size()));
          break;
        case Op::DELETE_KEY: {
          std::string k = r.str(kMaxKey);
          if (!r.ok) return !r.bad;
          w.pod<uint8_t>(data.erase(k) ? 1 : 0);
          break;
        }
        default:
          return false;
      }
      c.in.erase(0, r.pos);
      c.out += w.out;
    }
  };

  std::vector<pollfd> fds;
  while (true) {
    fds.clear();
    fds.push_back({wake_read_.fd(), POLLIN, 0});
    fds.push_back({listener_.fd(), POLLIN, 0});
    for (auto& [fd, c] : clients) fds.push_back({fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    int pr = ::poll(fds.data(), fds.size(), -1);
    if (pr < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents) return;
    if (fds[1].revents & POLLIN) {
      while (true) {
        int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        Client c;
        c.sock = Socket(fd);
        c.sock.set_nodelay();
        clients.emplace(fd, std::move(c));
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      int fd = fds[i].fd;
      auto it = clients.find(fd);
      if (it == clients.end()) continue;
      Client& c = it->second;
      bool dead = false;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[65536];
        while (true) {
          ssize_t k = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
          if (k > 0) {
            c.in.append(buf, static_cast<size_t>(k));
            continue;
          }
          if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) dead = true;
          break;
        }
        if (!dead && !handle(fd, c)) dead = true;
      }
      if (!dead && !c.out.empty()) {
        ssize_t k = ::send(fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) c.out.erase(0, static_cast<size_t>(k));
        else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) dead = true;
      }
      if (dead) drop(fd);
    }
    // A WAIT answered by another client's SET may have unparked this client's queued requests.
    for (auto& [fd, c] : clients)
      if (c.missing == 0 && !c.in.empty() && c.validated) handle(fd, c);
  }
}

// ---------------------------------------------------------------- client

TCPStore::TCPStore(std::string host, int port, int world_size, bool is_master, double timeout_s,
                   bool wait_for_workers, int master_listen_fd)
    : host_(std::move(host)), port_(port), timeout_s_(timeout_s) {
  if (is_master) {
    server_ = std::make_unique<TCPStoreServer>(port, master_listen_fd);
    port_ = server_->port();
  } else if (port <= 0) {
    throw DistStoreError("TCPStore: a client needs the server's port (got " + std::to_string(port) + ")");
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    connect_locked(deadline_after(timeout_s_), "TCPStore connect");
  }
  if (world_size > 0 && wait_for_workers) {
    int64_t joined = add("init/", 1);
    if (joined == world_size) set("init/done", "1");
    if (is_master) {
      try {
        wait({"init/done"}, timeout_s_);
      } catch (const DistTimeoutError&) {
        int64_t n = add("init/", 0);
        throw DistTimeoutError("TCPStore: timed out after " + format_seconds(timeout_s_) +
                               " waiting for clients. " + std::to_string(n) + "/" + std::to_string(world_size) +
                               " clients joined.");
      }
    }
  }
}

TCPStore::~TCPStore() {
  // Close our client before the server thread stops so the server never sees a half-dead peer.
  sock_.close();
  server_.reset();
}

std::string TCPStore::local_address() {
  std::lock_guard<std::mutex> g(mu_);
  if (!sock_.valid()) connect_locked(deadline_after(timeout_s_), describe("connect", ""));
  return sock_.local_ip();
}

std::string TCPStore::describe(const std::string& op, const std::string& key) const {
  return "TCPStore " + op + (key.empty() ? "" : "('" + key + "')") + " on " + host_ + ":" + std::to_string(port_);
}

void TCPStore::connect_locked(Deadline deadline, const std::string& what) {
  sock_ = Socket::connect_to(host_, port_, deadline, what);
  Writer w;
  w.pod<uint8_t>(static_cast<uint8_t>(Op::VALIDATE)).pod<uint32_t>(kMagic);
  sock_.send_all(w.out.data(), w.out.size(), deadline, what);
  uint8_t ok = 1;
  sock_.recv_all(&ok, 1, deadline, what);
  if (ok != 0) throw DistStoreError(what + ": server rejected the handshake");
}

template <typename Fn>
auto TCPStore::rpc(const std::string& what, Deadline deadline, Fn&& fn) -> decltype(fn()) {
  std::lock_guard<std::mutex> g(mu_);
  if (!sock_.valid()) connect_locked(deadline, what);
  try {
    return fn();
  } catch (const DistError&) {
    // The reply stream is now out of step (or the server is gone): start over on the next call.
    sock_.close();
    throw;
  }
}

void TCPStore::set(const std::string& key, const Bytes& value) {
  auto what = describe("set", key);
  auto d = deadline_after(timeout_s_);
  rpc(what, d, [&] {
    Writer w;
    w.pod<uint8_t>(static_cast<uint8_t>(Op::SET)).str(key).str(value);
    sock_.send_all(w.out.data(), w.out.size(), d, what);
    uint8_t ok;
    sock_.recv_all(&ok, 1, d, what);
    return 0;
  });
}

Bytes TCPStore::get(const std::string& key) {
  try {
    wait({key}, timeout_s_);
  } catch (const DistTimeoutError&) {
    throw DistTimeoutError(describe("get", key) + ": key was not set within the timeout of " + format_seconds(timeout_s_));
  }
  auto what = describe("get", key);
  auto d = deadline_after(timeout_s_);
  return rpc(what, d, [&] {
    Writer w;
    w.pod<uint8_t>(static_cast<uint8_t>(Op::GET)).str(key);
    sock_.send_all(w.out.data(), w.out.size(), d, what);
    uint8_t found = 0;
    sock_.recv_all(&found, 1, d, what);
    if (!found) throw DistStoreError(what + ": key was deleted while being read");
    uint64_t n = 0;
    sock_.recv_all(&n, sizeof(n), d, what);
    Bytes v(n, '\0');
    sock_.recv_all(v.data(), n, d, what);
    return v;
  });
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  auto what = describe("add", key);
  auto d = deadline_after(timeout_s_);
  return rpc(what, d, [&] {
    Writer w;
    w.pod<uint8_t>(static_cast<uint8_t>(Op::ADD)).str(key).pod<int64_t>(delta);
    sock_.send_all(w.out.data(), w.out.size(), d, what);
    int64_t v = 0;
    sock_.recv_all(&v, sizeof(v), d, what);
    return v;
  });
}

Bytes TCPStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  auto what = describe("compare_set", key);
  auto d = deadline_after(timeout_s_);
  return rpc(what, d, [&] {
    Writer w;
    w.pod<uint8_t>(static_cast<uint8_t>(Op::COMPARE_SET)).str(key).str(expected).str(desired);
    sock_.send_all(w.out.data(), w.out.size(), d, what);
    uint64_t n = 0;
    sock_.recv_all(&n, sizeof(n), d, what);
    Bytes v(n, '\0');
    sock_.recv_all(v.data(), n, d, what);
    return v;
  });
}

void TCPStore::wait(const std::vector<std::string>& keys, double timeout_s) {
  std::string joined;
  for (auto& k : keys) joined += (joined.empty() ? "" : "', '") + k;
  auto what = describe("wait", joined);
  auto d = deadline_after(timeout_s);
  rpc(what, d, [&] {
    Writer w;
    w.pod<uint8_t>(static_cast<uint8_t>(Op::WAIT)).pod<uint64_t>(keys.size());
    for (auto& k : keys) w.str(k);
    sock_.send_all(w.out.data(), w.out.size(), d, what);
    uint8_t ok;
    try {
      sock_.recv_all(&ok, 1, d, what);
    } catch (const DistTimeoutError&) {
      throw DistTimeoutError(what + ": keys still missing after the timeout of " + format_seconds(timeout_s));
    }
    return 0;
  });
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  auto what = describe("check", keys.empty() ? "" : keys.front());
  auto d = deadline_after(timeout_s_);
  return rpc(what, d, [&] {
    Writer w;
    w.pod<uint8_t>(static_cast<uint8_t>(Op::CHECK)).pod<uint64_t>(keys.size());
    for (auto& k : keys) w.str(k);
    sock_.send_all(w.out.data(), w.out.size(), d, what);
    uint8_t ok = 0;
    sock_.recv_all(&ok, 1, d, what);
    return ok == 1;
  });
}

bool TCPStore::delete_key(const std::string& key) {
  auto what = describe("delete_key", key);
  auto d = deadline_after(timeout_s_);
  return rpc(what, d, [&] {
    Writer w;
    w.pod<uint8_t>(static_cast<uint8_t>(Op::DELETE_KEY)).str(key);
    sock_.send_all(w.out.data(), w.out.size(), d, what);
    uint8_t ok = 0;
    sock_.recv_all(&ok, 1, d, what);
    return ok == 1;
  });
}

int64_t TCPStore::num_keys() {
  auto what = describe("num_keys", "");
  auto d = deadline_after(timeout_s_);
  return rpc(what, d, [&] {
    uint8_t op = static_cast<uint8_t>(Op::NUM_KEYS);
    sock_.send_all(&op, 1, d, what);
    int64_t v = 0;
    sock_.recv_all(&v, sizeof(v), d, what);
    return v;
  });
}

}  // namespace tinytorch::dist
