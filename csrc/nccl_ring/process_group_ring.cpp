#include "process_group_ring.hpp"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

namespace tinytorch::dist {
namespace {

constexpr uint32_t kHelloMagic = 0x48454c4f;

struct Hello {
  uint32_t magic;
  int32_t rank;
};

// Two ranks share memory only if they share a kernel: hostname plus boot id.
std::string host_identity() {
  std::string id = local_hostname();
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string boot;
  if (f >> boot) id += "/" + boot;
  return id;
}

}  // namespace

ProcessGroupRing::ProcessGroupRing(const std::string& store_host, int store_port, const std::string& prefix, int rank,
                                   int size, RingOptions opts)
    : Backend(rank, size), prefix_(prefix), opts_(std::move(opts)) {
  if (size < 1 || rank < 0 || rank >= size)
    throw DistError("ProcessGroupRing: rank " + std::to_string(rank) + " is outside world size " + std::to_string(size));
  if (opts_.transport != "auto" && opts_.transport != "tcp" && opts_.transport != "shm")
    throw DistError("ProcessGroupRing: transport must be auto, tcp or shm, got '" + opts_.transport + "'");
  if (opts_.segment_bytes < 64) throw DistError("ProcessGroupRing: segment_bytes must be at least 64");
  if (opts_.shm_capacity < 4096 || opts_.shm_capacity % 64 != 0)
    throw DistError("ProcessGroupRing: shm_capacity must be a multiple of 64 and at least 4096 bytes");
  const std::string what = "rank " + std::to_string(rank) + ": ring process group setup";
  Deadline deadline = deadline_after(opts_.timeout_s);
  store_ = std::make_unique<TCPStore>(store_host, store_port, -1, false, opts_.timeout_s, false, -1);
  if (size > 1) {
    listener_ = Socket::listen_on(0, 128);
    store_->set(key("addr/" + std::to_string(rank)), store_->local_address() + ":" + std::to_string(listener_.local_port()));
    store_->set(key("host/" + std::to_string(rank)), host_identity());
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    peer(left, deadline, what);
    peer(right, deadline, what);
    bool same_host = true;
    std::string mine = host_identity();
    for (int r = 0; r < size && same_host; ++r) same_host = store_->get(key("host/" + std::to_string(r))) == mine;
    if (opts_.transport == "shm" && !same_host)
      throw DistError(what + ": transport 'shm' needs every rank on one host");
    if (same_host && opts_.transport != "tcp") {
      setup_shm(deadline);
    } else {
      links_ = make_tcp_links(rank, left, right, &peers_.at(left), &peers_.at(right));
      transport_ = "tcp";
    }
  }
  thread_ = std::thread([this] { progress_loop(); });
}

ProcessGroupRing::~ProcessGroupRing() { shutdown(); }

void ProcessGroupRing::setup_shm(Deadline deadline) {
  const std::string what = "rank " + std::to_string(rank_) + ": shared-memory setup";
  int left = (rank_ + size_ - 1) % size_, right = (rank_ + 1) % size_;
  std::mt19937_64 rng(std::random_device{}());
  char name[96];
  std::snprintf(name, sizeof(name), "/tinytorch_ring_%d_%016llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(rng()));
  auto mine = create_shm_segment(name, opts_.shm_capacity);
  try {
    store_->set(key("shm/" + std::to_string(rank_)), name);
    auto open_of = [&](int r) {
      return open_shm_segment(store_->get(key("shm/" + std::to_string(r))), opts_.shm_capacity, what);
    };
    auto lseg = open_of(left);
    auto rseg = left == right ? lseg : open_of(right);
    // Once every rank has mapped its neighbours the names can go: nothing is left behind if we crash.
    if (store_->add(key("shm_mapped"), 1) == size_) store_->set(key("shm_ready"), "1");
    store_->wait({key("shm_ready")}, std::chrono::duration<double>(deadline - Clock::now()).count());
    unlink_shm_segment(name);
    links_ = make_shm_links(rank_, left, right, mine, lseg, rseg, &peers_.at(left), &peers_.at(right));
    transport_ = "shm";
  } catch (...) {
    unlink_shm_segment(name);
    throw;
  }
}

Socket& ProcessGroupRing::peer(int p, Deadline deadline, const std::string& what) {
  auto it = peers_.find(p);
  if (it != peers_.end()) return it->second;
  if (p < rank_) {
    // The higher rank dials, so each pair makes exactly one connection.
    std::string addr = store_->get(key("addr/" + std::to_string(p)));
    auto colon = addr.rfind(':');
    Socket s = Socket::connect_to(addr.substr(0, colon), std::stoi(addr.substr(colon + 1)), deadline,
                                  what + " (connecting to rank " + std::to_string(p) + ")");
    Hello h{kHelloMagic, rank_};
    s.send_all(&h, sizeof(h), deadline, what);
    return peers_.emplace(p, std::move(s)).first->second;
  }
  while (peers_.find(p) == peers_.end()) {
    Socket s = listener_.accept_one(deadline, what + " (waiting for rank " + std::to_string(p) + " to connect)");
    Hello h{};
    s.recv_all(&h, sizeof(h), deadline, what);
    if (h.magic != kHelloMagic || h.rank <= rank_ || h.rank >= size_)
      throw DistError(what + ": unexpected connection (bad hello) while waiting for rank " + std::to_string(p));
    peers_.emplace(h.rank, std::move(s));
  }
  return peers_.at(p);
}

void ProcessGroupRing::shutdown() {
  bool running;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_) return;
    stop_ = true;
    running = busy_;
  }
  // A collective still in flight at destroy time may wait on a peer that is gone: fail it now
  // (closing our sockets wakes it) instead of holding exit hostage for the whole timeout.
  if (running) {
    if (links_) links_->abort();
    for (auto& [r, s] : peers_) s.shutdown_rw();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string ProcessGroupRing::describe(Opcode opc, uint64_t seq, size_t count, DType t, const std::string& extra) const {
  return std::string(opcode_name(opc)) + " #" + std::to_string(seq) + " (" + std::to_string(count) + " x " +
         dtype_name(t) + extra + ")";
}

CollectiveCtx ProcessGroupRing::ctx(Opcode opc, uint64_t seq, size_t count, DType t, ReduceOp op, int root,
                                    const std::string& what, Deadline d) const {
  return CollectiveCtx{opc, seq, count, t, op, root, what, d, opts_.segment_bytes};
}

std::shared_ptr<Work> ProcessGroupRing::submit(bool async_op, uint64_t seq, const std::string& description, Keep keep,
                                               const OpTrace& trace,
                                               std::function<void(const std::string&, Deadline)> run) {
  auto work = std::make_shared<Work>(description, rank_, opts_.timeout_s);
  if (keep) work->keep_alive(std::move(keep));
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_)
      throw DistError("rank " + std::to_string(rank_) + ": " + description +
                      ": the process group has been destroyed");
    // Under mu_, so the recorder's order is the queue's order.
    work->set_trace_id(trace_.record("ring", trace.op, seq, trace.peer, trace.t, trace.in_count, trace.out_count,
                                     opts_.timeout_s),
                       trace_.global_rank(rank_));
    queue_.push_back(Job{work, "rank " + std::to_string(rank_) + ": " + description, seq, std::move(run)});
  }
  if (async_op) {
    cv_.notify_all();
  } else {
    // If something is ahead of us the progress thread is already on it and will reach our job.
    run_inline_if_next(work);
  }
  return work;
}

void ProcessGroupRing::progress_loop() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return (stop_ && !busy_) || (!queue_.empty() && !busy_); });
      if (queue_.empty()) break;
      job = std::move(queue_.front());
      queue_.pop_front();
      if (stop_) {
        lk.unlock();
        job.work->finish(ErrorKind::Generic, job.what + ": the process group was destroyed before it ran");
        continue;
      }
      busy_ = true;
    }
    execute(job);
  }
}

void ProcessGroupRing::run_inline_if_next(const std::shared_ptr<Work>& work) {
  Job job;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (busy_ || stop_ || queue_.empty() || queue_.front().work != work) return;
    job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
  }
  execute(job);
}

void ProcessGroupRing::execute(Job& job) {
  if (broken_) {
    job.work->finish(ErrorKind::Generic, job.what + ": not run, this process group is unusable after an earlier "
                                                    "failure: " + broken_reason_);
  } else {
    try {
      job.work->mark_started();
      job.run(job.what, deadline_after(opts_.timeout_s));
      job.work->finish();
    } catch (const std::exception& e) {
      ErrorKind kind = classify(e);
      std::string msg = root_cause(e.what());
      if (kind == ErrorKind::Timeout && job.seq != 0) msg += diagnose_timeout(job.seq);
      fail(msg);
      bool destroying;
      {
        std::lock_guard<std::mutex> g(mu_);
        destroying = stop_;
      }
      // A failure that destroy_process_group caused itself is no hang to explain.
      if (!destroying) fr::on_collective_failure(trace_.global_rank(rank_));
      job.work->finish(kind == ErrorKind::None ? ErrorKind::Generic : kind, msg);
    }
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    busy_ = false;
  }
  // Wakes the progress thread for jobs queued meanwhile (a synchronous caller does not notify).
  cv_.notify_all();
}

std::string ProcessGroupRing::root_cause(const std::string& own) {
  // A rank that only saw its neighbour hang up learns from the store who failed first.
  try {
    store_->set_timeout(2.0);
    std::string k = key("error");
    if (store_->check({k})) {
      std::string first = store_->get(k);
      if (!first.empty() && first != own) return own + "\n  first failure in this group: " + first;
    }
  } catch (const std::exception&) {
  }
  return own;
}

std::string ProcessGroupRing::diagnose_timeout(uint64_t seq) {
  // A neighbour that times out only knows whom it waited on. Every rank that timed out in this
  // collective says so in the store; after a short grace, the ranks that never did are the ones
  // that did not reach it at all: the real stragglers.
  try {
    store_->set_timeout(2.0);
    const std::string base = key("timeout/" + std::to_string(seq) + "/");
    store_->set(base + std::to_string(rank_), "1");
    std::vector<std::string> keys;
    for (int r = 0; r < size_; ++r) keys.push_back(base + std::to_string(r));
    double grace = std::min(2.0, std::max(0.2, opts_.timeout_s * 0.2));
    try {
      store_->wait(keys, grace);
      return "";
    } catch (const DistTimeoutError&) {
    }
    std::string missing;
    int n = 0;
    for (int r = 0; r < size_; ++r)
      if (!store_->check({keys[r]})) missing += (n++ ? ", " : "") + std::to_string(r);
    if (n == 0) return "";
    return std::string("\n  ") + (n == 1 ? "rank " : "ranks ") + missing +
           " never reached this collective (stalled, dead, or issued a different one); the other ranks timed out "
           "waiting for it";
  } catch (const std::exception&) {
    return "";
  }
}

void ProcessGroupRing::fail(const std::string& message) {
  broken_ = true;
  broken_reason_ = message;
  try {
    store_->set_timeout(2.0);
    store_->compare_set(key("error"), "", message);
  } catch (const std::exception&) {
    // The store may have died with the rank that failed; the neighbours still see our sockets close.
  }
  if (links_) links_->abort();
  for (auto& [r, s] : peers_) s.shutdown_rw();
}

void ProcessGroupRing::check_rank(int r, const char* what) const {
  if (r < 0 || r >= size_)
    throw DistError(std::string(what) + ": rank " + std::to_string(r) + " is outside this group of size " +
                    std::to_string(size_));
}

std::shared_ptr<Work> ProcessGroupRing::allreduce(void* buf, size_t count, DType t, ReduceOp op,
                                                  Keep keep, bool async_op) {
  uint64_t seq = ++seq_;
  auto desc = describe(Opcode::AllReduce, seq, count, t, std::string(", ") + reduce_op_name(op));
  return submit(async_op, seq, desc, std::move(keep), {"all_reduce", t, count, count},
                [=](const std::string& what, Deadline d) {
    ring_allreduce(links_.get(), ctx(Opcode::AllReduce, seq, count, t, op, 0, what, d), rank_, size_,
                   static_cast<char*>(buf), count, opts_.small_bytes, scratch_);
  });
}

std::shared_ptr<Work> ProcessGroupRing::reduce_scatter(void* out, const void* in, size_t count, DType t, ReduceOp op,
                                                       Keep keep, bool async_op, bool overwrite_input) {
  uint64_t seq = ++seq_;
  auto desc = describe(Opcode::ReduceScatter, seq, count, t, std::string(", ") + reduce_op_name(op));
  return submit(async_op, seq, desc, std::move(keep), {"reduce_scatter", t, count * size_, count},
                [=](const std::string& what, Deadline d) {
    ring_reduce_scatter(links_.get(), ctx(Opcode::ReduceScatter, seq, count, t, op, 0, what, d), rank_, size_,
                        static_cast<char*>(out), static_cast<const char*>(in), count, scratch_, overwrite_input);
  });
}

std::shared_ptr<Work> ProcessGroupRing::allgather(void* out, const void* in, size_t count, DType t,
                                                  Keep keep, bool async_op) {
  uint64_t seq = ++seq_;
  auto desc = describe(Opcode::AllGather, seq, count, t, "");
  return submit(async_op, seq, desc, std::move(keep), {"all_gather", t, count, count * size_},
                [=](const std::string& what, Deadline d) {
    ring_allgather(links_.get(), ctx(Opcode::AllGather, seq, count, t, ReduceOp::SUM, 0, what, d), rank_, size_,
                   static_cast<char*>(out), static_cast<const char*>(in), count);
  });
}

std::shared_ptr<Work> ProcessGroupRing::broadcast(void* buf, size_t count, DType t, int root,
                                                  Keep keep, bool async_op) {
  check_rank(root, "broadcast");
  uint64_t seq = ++seq_;
  auto desc = describe(Opcode::Broadcast, seq, count, t, ", root " + std::to_string(root));
  return submit(async_op, seq, desc, std::move(keep), {"broadcast", t, count, count},
                [=](const std::string& what, Deadline d) {
    ring_broadcast(links_.get(), ctx(Opcode::Broadcast, seq, count, t, ReduceOp::SUM, root, what, d), rank_, size_,
                   static_cast<char*>(buf), count, root);
  });
}

std::shared_ptr<Work> ProcessGroupRing::reduce(void* buf, size_t count, DType t, ReduceOp op, int root,
                                               Keep keep, bool async_op) {
  check_rank(root, "reduce");
  uint64_t seq = ++seq_;
  auto desc = describe(Opcode::Reduce, seq, count, t, std::string(", ") + reduce_op_name(op) + ", root " +
                                                          std::to_string(root));
  return submit(async_op, seq, desc, std::move(keep), {"reduce", t, count, count},
                [=](const std::string& what, Deadline d) {
    // An all-reduce of a copy: only the root's buffer changes, as the API promises.
    const size_t bytes = count * dtype_size(t);
    std::vector<char> tmp(static_cast<char*>(buf), static_cast<char*>(buf) + bytes);
    ring_allreduce(links_.get(), ctx(Opcode::Reduce, seq, count, t, op, root, what, d), rank_, size_, tmp.data(),
                   count, opts_.small_bytes, scratch_);
    if (rank_ == root && bytes) std::memcpy(buf, tmp.data(), bytes);
  });
}

std::shared_ptr<Work> ProcessGroupRing::barrier(bool async_op) {
  uint64_t seq = ++seq_;
  auto desc = std::string("barrier #") + std::to_string(seq);
  return submit(async_op, seq, desc, nullptr, {"barrier", DType::Int32, 1, 1}, [=](const std::string& what, Deadline d) {
    int32_t token = 0;
    ring_allreduce(links_.get(), ctx(Opcode::Barrier, seq, 1, DType::Int32, ReduceOp::SUM, 0, what, d), rank_, size_,
                   reinterpret_cast<char*>(&token), 1, opts_.small_bytes, scratch_);
  });
}

}  // namespace tinytorch::dist
