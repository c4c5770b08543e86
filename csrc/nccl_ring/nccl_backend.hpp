// ProcessGroupNCCL: collectives on CUDA buffers through libnccl (loaded at run time). Each call
// runs on the group's communication stream, ordered after the caller's stream by an event; its
// Work makes a stream wait on the end event. A watchdog thread completes Works, and aborts the
// communicator when one outlives the timeout or NCCL reports an asynchronous error.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "dtypes.hpp"
#include "nccl_api.hpp"
#include "tcp_store.hpp"
#include "work.hpp"

namespace tinytorch::dist {

class NcclWork {
 public:
  NcclWork(std::string description, int rank, double timeout_s, nccl::CUevent end, const nccl::Api* api)
      : cpu_(std::make_shared<Work>(std::move(description), rank, timeout_s)), end_(end), api_(api) {}
  ~NcclWork();
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  // Makes `stream` wait for the collective (no CPU blocking); throws if it failed or was aborted.
  void wait_stream(uintptr_t stream);
  // Blocks the CPU until the watchdog saw the collective finish (or fail), up to timeout_s.
  void synchronize(double timeout_s) { cpu_->wait(timeout_s); }
  Work& cpu() { return *cpu_; }
  nccl::CUevent end() const { return end_; }

 private:
  std::shared_ptr<Work> cpu_;  // completion state, callbacks and keep-alive objects
  nccl::CUevent end_;
  const nccl::Api* api_;
};

class ProcessGroupNCCL final : public Backend {
 public:
  ProcessGroupNCCL(const std::string& store_host, int store_port, const std::string& prefix, int rank, int size,
                   double timeout_s, std::vector<std::string> library_candidates);
  ~ProcessGroupNCCL() override;
  std::string name() const override { return "nccl"; }
  void shutdown() override;

  using Keep = std::shared_ptr<void>;
  enum class Kind { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, Send, Recv };
  // One entry point for every collective; unused arguments are ignored by the kind.
  std::shared_ptr<NcclWork> run(Kind kind, uintptr_t send, uintptr_t recv, size_t count, DType t, ReduceOp op,
                                int peer, uintptr_t user_stream, Keep keep);

 private:
  void watchdog();
  void abort_locked(const std::string& why);
  std::string check(nccl::ncclResult_t r, const char* what) const;
  std::string cu_error(nccl::CUresult r) const;

  const nccl::Api* api_ = nullptr;
  double timeout_s_;
  std::unique_ptr<TCPStore> store_;
  nccl::ncclComm_t comm_ = nullptr;
  nccl::CUcontext ctx_ = nullptr;
  nccl::CUstream stream_ = nullptr;
  uint64_t seq_ = 0;             // every op, for descriptions
  uint64_t collective_seq_ = 0;  // collectives only, for the flight recorder

  struct Pending {
    std::shared_ptr<NcclWork> work;
    Deadline deadline;
    std::string what;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  bool stop_ = false;
  bool aborted_ = false;
  bool failed_reported_ = false;  // the flight recorder heard of the abort
  std::string abort_reason_;
  std::thread watchdog_;
};

}  // namespace tinytorch::dist
