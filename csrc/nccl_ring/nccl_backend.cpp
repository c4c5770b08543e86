#include "nccl_backend.hpp"

#include <cstring>

namespace tinytorch::dist {
namespace {

int nccl_dtype(DType t) {
  switch (t) {
    case DType::Int32: return 2;
    case DType::Int64: return 4;
    case DType::Float16: return 6;
    case DType::Float32: return 7;
    case DType::Float64: return 8;
    case DType::BFloat16: return 9;
  }
  return -1;
}

int nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return 0;
    case ReduceOp::PRODUCT: return 1;
    case ReduceOp::MAX: return 2;
    case ReduceOp::MIN: return 3;
    case ReduceOp::AVG: return 4;
  }
  return -1;
}

const char* kind_name(ProcessGroupNCCL::Kind k) {
  using K = ProcessGroupNCCL::Kind;
  switch (k) {
    case K::AllReduce: return "all_reduce";
    case K::ReduceScatter: return "reduce_scatter";
    case K::AllGather: return "all_gather";
    case K::Broadcast: return "broadcast";
    case K::Reduce: return "reduce";
    case K::Send: return "send";
    case K::Recv: return "recv";
  }
  return "?";
}

}  // namespace

NcclWork::~NcclWork() {
  if (end_) api_->cuEventDestroy(end_);
}

void NcclWork::wait_stream(uintptr_t stream) {
  if (cpu_->is_completed() && !cpu_->is_success()) throw_dist_error(cpu_->error_kind(), cpu_->error_message());
  api_->cuStreamWaitEvent(reinterpret_cast<nccl::CUstream>(stream), end_, 0);
}

std::string ProcessGroupNCCL::check(nccl::ncclResult_t r, const char* what) const {
  if (r == 0) return "";
  return std::string(what) + " failed: " + api_->GetErrorString(r) + " (ncclResult " + std::to_string(r) + ")";
}

std::string ProcessGroupNCCL::cu_error(nccl::CUresult r) const {
  const char* s = nullptr;
  api_->cuGetErrorString(r, &s);
  return s ? s : ("CUresult " + std::to_string(r));
}

ProcessGroupNCCL::ProcessGroupNCCL(const std::string& store_host, int store_port, const std::string& prefix, int rank,
                                   int size, double timeout_s, std::vector<std::string> library_candidates)
    : Backend(rank, size), timeout_s_(timeout_s) {
  const std::string what = "rank " + std::to_string(rank) + ": NCCL process group setup";
  nccl::Api& api = nccl::load(library_candidates);
  nccl::load_driver(api);
  api_ = &api;
  if (api_->cuCtxGetCurrent(&ctx_) != nccl::kCudaSuccess || ctx_ == nullptr)
    throw DistError(what + ": no current CUDA context on this thread; select a device first (e.g. "
                           "cupy.cuda.Device(local_rank).use()) and touch it once");
  store_ = std::make_unique<TCPStore>(store_host, store_port, -1, false, timeout_s, false, -1);
  nccl::ncclUniqueId id{};
  const std::string key = prefix + "/nccl_unique_id";
  if (rank == 0) {
    auto err = check(api_->GetUniqueId(&id), "ncclGetUniqueId");
    if (!err.empty()) throw DistError(what + ": " + err);
    store_->set(key, std::string(id.internal, sizeof(id.internal)));
  } else {
    std::string v = store_->get(key);
    if (v.size() != sizeof(id.internal))
      throw DistError(what + ": the NCCL unique id in the store has " + std::to_string(v.size()) + " bytes, not 128");
    std::memcpy(id.internal, v.data(), sizeof(id.internal));
  }
  // ncclCommInitRank itself cannot time out: meet in the store first (bounded), so it only runs
  // once every rank is there and returns promptly.
  if (store_->add(prefix + "/nccl_joined", 1) == size) store_->set(prefix + "/nccl_all_joined", "1");
  store_->wait({prefix + "/nccl_all_joined"}, timeout_s);
  auto err = check(api_->CommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
  if (!err.empty()) throw DistError(what + ": " + err);
  nccl::CUresult cr = api_->cuStreamCreate(&stream_, nccl::kStreamNonBlocking);
  if (cr != nccl::kCudaSuccess) {
    api_->CommDestroy(comm_);
    throw DistError(what + ": cuStreamCreate failed: " + cu_error(cr));
  }
  watchdog_ = std::thread([this] { watchdog(); });
}

ProcessGroupNCCL::~ProcessGroupNCCL() { shutdown(); }

void ProcessGroupNCCL::shutdown() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();  // drains pending work (or aborts it at its deadline)
  if (comm_) {
    if (!aborted_) api_->CommDestroy(comm_);
    comm_ = nullptr;
  }
  if (stream_) {
    api_->cuStreamDestroy(stream_);
    stream_ = nullptr;
  }
}

std::shared_ptr<NcclWork> ProcessGroupNCCL::run(Kind kind, uintptr_t send, uintptr_t recv, size_t count, DType t,
                                                ReduceOp op, int peer, uintptr_t user_stream, Keep keep) {
  std::lock_guard<std::mutex> g(mu_);
  const std::string what = "rank " + std::to_string(rank_) + ": NCCL " + kind_name(kind) + " #" +
                           std::to_string(++seq_) + " (" + std::to_string(count) + " x " + dtype_name(t) + ")";
  if (stop_) throw DistError(what + ": the process group has been destroyed");
  if (aborted_) throw DistError(what + ": the NCCL communicator was aborted after an earlier failure: " + abort_reason_);
  auto user = reinterpret_cast<nccl::CUstream>(user_stream);
  nccl::CUevent start = nullptr, end = nullptr;
  if (api_->cuEventCreate(&start, nccl::kEventDisableTiming) != 0) throw DistError(what + ": cuEventCreate failed");
  if (api_->cuEventCreate(&end, nccl::kEventDisableTiming) != 0) {
    api_->cuEventDestroy(start);
    throw DistError(what + ": cuEventCreate failed");
  }
  // The communication stream starts only after everything already queued on the caller's stream.
  api_->cuEventRecord(start, user);
  api_->cuStreamWaitEvent(stream_, start, 0);
  api_->cuEventDestroy(start);
  const void* sp = reinterpret_cast<const void*>(send);
  void* rp = reinterpret_cast<void*>(recv);
  int dt = nccl_dtype(t), ro = nccl_op(op);
  nccl::ncclResult_t r = 0;
  switch (kind) {
    case Kind::AllReduce: r = api_->AllReduce(sp, rp, count, dt, ro, comm_, stream_); break;
    case Kind::ReduceScatter: r = api_->ReduceScatter(sp, rp, count, dt, ro, comm_, stream_); break;
    case Kind::AllGather: r = api_->AllGather(sp, rp, count, dt, comm_, stream_); break;
    case Kind::Broadcast: r = api_->Broadcast(sp, rp, count, dt, peer, comm_, stream_); break;
    case Kind::Reduce: r = api_->Reduce(sp, rp, count, dt, ro, peer, comm_, stream_); break;
    case Kind::Send: r = api_->Send(sp, count, dt, peer, comm_, stream_); break;
    case Kind::Recv: r = api_->Recv(rp, count, dt, peer, comm_, stream_); break;
  }
  if (r != 0) {
    api_->cuEventDestroy(end);
    throw DistError(what + ": " + check(r, kind_name(kind)));
  }
  api_->cuEventRecord(end, stream_);
  auto work = std::make_shared<NcclWork>(what, rank_, timeout_s_, end, api_);
  const bool p2p = kind == Kind::Send || kind == Kind::Recv;
  const size_t in_count = kind == Kind::ReduceScatter ? count * size_ : count;
  const size_t out_count = kind == Kind::AllGather ? count * size_ : count;
  work->cpu().set_trace_id(
      trace_.record("nccl", kind_name(kind), p2p ? 0 : ++collective_seq_, peer, t, in_count, out_count, timeout_s_));
  work->cpu().mark_started();  // enqueued on the stream: the GPU starts it once the stream reaches it
  if (keep) work->cpu().keep_alive(std::move(keep));
  pending_.push_back(Pending{work, deadline_after(timeout_s_), what});
  cv_.notify_all();
  return work;
}

void ProcessGroupNCCL::abort_locked(const std::string& why) {
  aborted_ = true;
  abort_reason_ = why;
  api_->CommAbort(comm_);
}

void ProcessGroupNCCL::watchdog() {
  api_->cuCtxSetCurrent(ctx_);
  while (true) {
    std::vector<std::pair<std::shared_ptr<NcclWork>, std::string>> done, failed;
    ErrorKind fail_kind = ErrorKind::Generic;
    bool newly_aborted = false;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, std::chrono::milliseconds(2), [&] { return stop_ || !pending_.empty(); });
      if (stop_ && pending_.empty()) break;
      for (auto it = pending_.begin(); it != pending_.end();) {
        nccl::CUresult q = api_->cuEventQuery(it->work->end());
        if (q == nccl::kCudaSuccess) {
          done.emplace_back(it->work, "");
          it = pending_.erase(it);
          continue;
        }
        if (!aborted_ && q != nccl::kCudaNotReady) {
          abort_locked(it->what + ": CUDA error while waiting for it: " + cu_error(q));
        } else if (!aborted_ && Clock::now() > it->deadline) {
          fail_kind = ErrorKind::Timeout;
          abort_locked(it->what + ": watchdog caught a collective timeout after " + format_seconds(timeout_s_) +
                           "; the NCCL communicator was aborted (a rank is stalled, dead, or issued a different "
                           "collective)");
        }
        ++it;
      }
      if (!aborted_) {
        nccl::ncclResult_t async = 0;
        api_->CommGetAsyncError(comm_, &async);
        if (async != 0 && async != nccl::kNcclInProgress)
          abort_locked("rank " + std::to_string(rank_) + ": " + check(async, "NCCL asynchronous error check"));
      }
      if (aborted_) {
        newly_aborted = !failed_reported_;
        failed_reported_ = true;
        for (auto& p : pending_) failed.emplace_back(p.work, abort_reason_);
        pending_.clear();
      }
    }
    // Every rank dumps its flight recorder before this one's failure surfaces (and may end the process).
    if (newly_aborted) fr::on_collective_failure(trace_.global_rank(rank_));
    // Completion callbacks may issue new collectives, so they run without mu_ held.
    for (auto& [w, _] : done) w->cpu().finish();
    for (auto& [w, msg] : failed) w->cpu().finish(fail_kind, msg);
  }
}

}  // namespace tinytorch::dist
