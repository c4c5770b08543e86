// ProcessGroupRing: the CPU backend. Connections to the ring neighbours (TCP, or shared memory
// when every rank is on one host), one progress thread running queued collectives in issue order.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "ring_algorithms.hpp"
#include "tcp_store.hpp"
#include "work.hpp"

namespace tinytorch::dist {

struct RingOptions {
  double timeout_s = 1800.0;
  std::string transport = "auto";  // auto | tcp | shm
  size_t segment_bytes = 1 << 20;
  size_t small_bytes = 256 << 10;
  size_t shm_capacity = 8 << 20;
};

class ProcessGroupRing final : public Backend {
 public:
  using Keep = std::shared_ptr<void>;

  // Rendezvous through the store at host:port under `prefix`; blocks until the neighbours are connected.
  ProcessGroupRing(const std::string& store_host, int store_port, const std::string& prefix, int rank, int size,
                   RingOptions opts);
  ~ProcessGroupRing() override;

  std::string name() const override { return "ring"; }
  std::string transport() const { return transport_; }
  uint64_t bytes_sent() const { return links_ ? links_->payload_sent() : 0; }
  void shutdown() override;

  // A synchronous caller runs its job itself when nothing is ahead of it: that saves two thread
  // wake-ups (tens of microseconds each), which dominate small collectives. Order is unchanged:
  // jobs still leave the queue front-first and one at a time.
  void run_inline_if_next(const std::shared_ptr<Work>& work);

  std::shared_ptr<Work> allreduce(void* buf, size_t count, DType t, ReduceOp op, Keep keep, bool async_op = true);
  std::shared_ptr<Work> reduce_scatter(void* out, const void* in, size_t count, DType t, ReduceOp op, Keep keep,
                                       bool async_op = true, bool overwrite_input = false);
  std::shared_ptr<Work> allgather(void* out, const void* in, size_t count, DType t, Keep keep, bool async_op = true);
  std::shared_ptr<Work> broadcast(void* buf, size_t count, DType t, int root, Keep keep, bool async_op = true);
  std::shared_ptr<Work> reduce(void* buf, size_t count, DType t, ReduceOp op, int root, Keep keep, bool async_op = true);
  std::shared_ptr<Work> barrier(bool async_op = true);
  std::shared_ptr<Work> send(const void* buf, size_t count, DType t, int dst, int tag, Keep keep, bool async_op = true);
  std::shared_ptr<Work> recv(void* buf, size_t count, DType t, int src, int tag, Keep keep, bool async_op = true);

 private:
  struct Job {
    std::shared_ptr<Work> work;
    std::string what;
    uint64_t seq;  // 0 for point-to-point
    std::function<void(const std::string& what, Deadline)> run;
  };

  CollectiveCtx ctx(Opcode opc, uint64_t seq, size_t count, DType t, ReduceOp op, int root, const std::string& what,
                    Deadline d) const;
  // What the flight recorder notes about a job: the op's name, the peer of a send/recv, element counts.
  struct OpTrace {
    const char* op;
    DType t;
    size_t in_count, out_count;
    int peer = -1;
  };
  // Records the job in the flight recorder and queues it; a synchronous one (async_op false) is then run by
  // the caller if it is next.
  std::shared_ptr<Work> submit(bool async_op, uint64_t seq, const std::string& description, Keep keep,
                               const OpTrace& trace, std::function<void(const std::string& what, Deadline)> run);
  void execute(Job& job);
  std::string describe(Opcode opc, uint64_t seq, size_t count, DType t, const std::string& extra) const;
  void progress_loop();
  void fail(const std::string& message);
  std::string root_cause(const std::string& own);
  std::string diagnose_timeout(uint64_t seq);
  Socket& peer(int p, Deadline deadline, const std::string& what);
  std::string key(const std::string& k) const { return prefix_ + "/" + k; }
  void setup_shm(Deadline deadline);
  void check_rank(int r, const char* what) const;

  std::string prefix_;
  RingOptions opts_;
  std::unique_ptr<TCPStore> store_;  // our own client: the progress thread must not queue behind Python's
  Socket listener_;
  std::map<int, Socket> peers_;
  std::unique_ptr<RingLinks> links_;
  std::string transport_ = "none";
  std::vector<char> scratch_;
  std::map<int, uint64_t> p2p_sent_, p2p_recvd_;

  std::atomic<uint64_t> seq_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  bool busy_ = false;  // a thread (progress or an inline caller) is running a job
  bool broken_ = false;  // only touched by the thread running a job (busy_ hands it over)
  std::string broken_reason_;
  std::thread thread_;
};

}  // namespace tinytorch::dist
