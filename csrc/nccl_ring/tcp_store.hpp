// TCPStore: a key-value store served by one process (one poll() event-loop thread) and used by
// every rank to rendezvous: exchange addresses, unique ids, counters and debug fingerprints.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "socket.hpp"

namespace tinytorch::dist {

using Bytes = std::string;

class TCPStoreServer {
 public:
  // listen_fd >= 0 adopts an already-listening socket (a duplicate is taken; the caller keeps its own).
  TCPStoreServer(int port, int listen_fd);
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;
  int port() const { return port_; }

 private:
  void loop();
  Socket listener_;
  Socket wake_read_, wake_write_;  // self-pipe: the destructor's way into poll()
  int port_ = -1;
  std::thread thread_;
};

class TCPStore {
 public:
  TCPStore(std::string host, int port, int world_size, bool is_master, double timeout_s, bool wait_for_workers,
           int master_listen_fd);
  ~TCPStore();
  TCPStore(const TCPStore&) = delete;
  TCPStore& operator=(const TCPStore&) = delete;

  void set(const std::string& key, const Bytes& value);
  Bytes get(const std::string& key);
  int64_t add(const std::string& key, int64_t delta);
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired);
  void wait(const std::vector<std::string>& keys, double timeout_s);
  bool check(const std::vector<std::string>& keys);
  bool delete_key(const std::string& key);
  int64_t num_keys();

  int port() const { return port_; }
  // The address this client reaches the server from (peers on other hosts can dial it).
  std::string local_address();
  const std::string& host() const { return host_; }
  double timeout() const { return timeout_s_; }
  void set_timeout(double t) { timeout_s_ = t; }

 private:
  // One request/response on the client socket, reconnecting first if a previous call gave up on it.
  template <typename Fn>
  auto rpc(const std::string& what, Deadline deadline, Fn&& fn) -> decltype(fn());
  void connect_locked(Deadline deadline, const std::string& what);
  std::string describe(const std::string& op, const std::string& key) const;

  std::string host_;
  int port_;
  double timeout_s_;
  std::unique_ptr<TCPStoreServer> server_;
  std::mutex mu_;  // one request in flight per client: several threads share a store
  Socket sock_;
};

}  // namespace tinytorch::dist
