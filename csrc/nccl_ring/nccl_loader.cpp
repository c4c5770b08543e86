#include <dlfcn.h>

#include <memory>
#include <mutex>

#include "errors.hpp"
#include "nccl_api.hpp"

namespace tinytorch::dist::nccl {
namespace {

struct Library {
  void* handle = nullptr;
  ~Library() = default;  // never dlclose: NCCL keeps threads that would outlive the code
};

std::mutex g_mu;
std::unique_ptr<Api> g_api;  // the process-wide loaded library (part of the backend registry state)

template <typename F>
void resolve(void* h, const char* name, F*& out, const std::string& lib) {
  out = reinterpret_cast<F*>(::dlsym(h, name));
  if (!out) throw DistError("NCCL backend: symbol " + std::string(name) + " missing from " + lib);
}

}  // namespace

const Api* loaded() {
  // g_api is never reset once set, so the pointer stays valid after the lock is released.
  std::lock_guard<std::mutex> g(g_mu);
  return g_api.get();
}

Api& load(const std::vector<std::string>& candidates) {
  std::lock_guard<std::mutex> g(g_mu);
  if (g_api) return *g_api;
  void* h = nullptr;
  std::string tried, path;
  std::vector<std::string> all(candidates);
  all.push_back("libnccl.so.2");
  for (const auto& c : all) {
    h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (h) {
      path = c;
      break;
    }
    const char* err = ::dlerror();
    tried += "\n  " + c + ": " + (err ? err : "not found");
  }
  if (!h)
    throw DistError("NCCL backend: could not load libnccl.so.2. Install NCCL with `pip install nvidia-nccl-cu12` "
                    "(CUDA 12) or `pip install nvidia-nccl-cu13` (CUDA 13), or point TINYTORCH_NCCL_LIBRARY at it. "
                    "Tried:" + tried);
  auto api = std::make_unique<Api>();
  api->nccl_path = path;
  resolve(h, "ncclGetVersion", api->GetVersion, path);
  resolve(h, "ncclGetUniqueId", api->GetUniqueId, path);
  resolve(h, "ncclCommInitRank", api->CommInitRank, path);
  resolve(h, "ncclCommDestroy", api->CommDestroy, path);
  resolve(h, "ncclCommAbort", api->CommAbort, path);
  resolve(h, "ncclCommGetAsyncError", api->CommGetAsyncError, path);
  resolve(h, "ncclGetErrorString", api->GetErrorString, path);
  resolve(h, "ncclAllReduce", api->AllReduce, path);
  resolve(h, "ncclReduceScatter", api->ReduceScatter, path);
  resolve(h, "ncclAllGather", api->AllGather, path);
  resolve(h, "ncclBroadcast", api->Broadcast, path);
  resolve(h, "ncclReduce", api->Reduce, path);
  resolve(h, "ncclSend", api->Send, path);
  resolve(h, "ncclRecv", api->Recv, path);
  resolve(h, "ncclGroupStart", api->GroupStart, path);
  resolve(h, "ncclGroupEnd", api->GroupEnd, path);
  g_api = std::move(api);
  return *g_api;
}

void load_driver(Api& a) {
  std::lock_guard<std::mutex> g(g_mu);
  if (a.cuInit) return;
  Api* api = &a;
  const std::string path = a.nccl_path;
  void* cu = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!cu)
    throw DistError("NCCL backend: libnccl loaded from " + path +
                    " but the CUDA driver (libcuda.so.1) is missing: this machine has no usable NVIDIA driver");
  const std::string drv = "libcuda.so.1";
  // cuInit is stored last: a non-null cuInit means every driver entry point resolved.
  decltype(api->cuInit) init = nullptr;
  resolve(cu, "cuInit", init, drv);
  resolve(cu, "cuCtxGetCurrent", api->cuCtxGetCurrent, drv);
  resolve(cu, "cuCtxSetCurrent", api->cuCtxSetCurrent, drv);
  resolve(cu, "cuStreamCreate", api->cuStreamCreate, drv);
  resolve(cu, "cuStreamDestroy_v2", api->cuStreamDestroy, drv);
  resolve(cu, "cuStreamSynchronize", api->cuStreamSynchronize, drv);
  resolve(cu, "cuStreamWaitEvent", api->cuStreamWaitEvent, drv);
  resolve(cu, "cuEventCreate", api->cuEventCreate, drv);
  resolve(cu, "cuEventDestroy_v2", api->cuEventDestroy, drv);
  resolve(cu, "cuEventRecord", api->cuEventRecord, drv);
  resolve(cu, "cuEventQuery", api->cuEventQuery, drv);
  resolve(cu, "cuGetErrorString", api->cuGetErrorString, drv);
  if (init(0) != kCudaSuccess) throw DistError("NCCL backend: cuInit failed (no usable GPU?)");
  api->cuInit = init;
}

}  // namespace tinytorch::dist::nccl
