// The few NCCL and CUDA driver entry points the NCCL backend uses, resolved at run time with
// dlopen so that building needs neither CUDA nor NCCL headers and CPU-only installs still import.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tinytorch::dist::nccl {

using ncclComm_t = struct ncclComm*;
using ncclResult_t = int;
struct ncclUniqueId {
  char internal[128];
};
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUcontext = struct CUctx_st*;
using CUresult = int;

constexpr int kCudaSuccess = 0;
constexpr int kCudaNotReady = 600;
constexpr unsigned kStreamNonBlocking = 0x1;
constexpr unsigned kEventDisableTiming = 0x2;
constexpr int kNcclInProgress = 7;

struct Api {
  // NCCL
  ncclResult_t (*GetVersion)(int*);
  ncclResult_t (*GetUniqueId)(ncclUniqueId*);
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*);
  const char* (*GetErrorString)(ncclResult_t);
  ncclResult_t (*AllReduce)(const void*, void*, size_t, int, int, ncclComm_t, CUstream);
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, int, int, ncclComm_t, CUstream);
  ncclResult_t (*AllGather)(const void*, void*, size_t, int, ncclComm_t, CUstream);
  ncclResult_t (*Broadcast)(const void*, void*, size_t, int, int, ncclComm_t, CUstream);
  ncclResult_t (*Reduce)(const void*, void*, size_t, int, int, int, ncclComm_t, CUstream);
  ncclResult_t (*Send)(const void*, size_t, int, int, ncclComm_t, CUstream);
  ncclResult_t (*Recv)(void*, size_t, int, int, ncclComm_t, CUstream);
  ncclResult_t (*GroupStart)();
  ncclResult_t (*GroupEnd)();
  // CUDA driver
  CUresult (*cuInit)(unsigned);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  std::string nccl_path;
};

// Loads libnccl.so.2 from the first candidate that opens (then the system search path) and the
// CUDA driver; throws DistError with install instructions when NCCL is missing.
Api& load(const std::vector<std::string>& candidates);
// Resolves the CUDA driver entry points (libcuda.so.1) into `api`; throws without a driver.
void load_driver(Api& api);
// Null if load() has not succeeded yet.
const Api* loaded();

}  // namespace tinytorch::dist::nccl
