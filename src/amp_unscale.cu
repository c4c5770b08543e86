// GradScaler.unscale_ on CUDA in one launch per gradient dtype (PyTorch's
// _amp_foreach_non_finite_check_and_unscale_): every element of every gradient is multiplied by inv_scale in
// place, and *found_inf becomes 1 if any element was inf or NaN. The host passes a chunk table, so block b
// works on chunk b of one tensor: no launch per parameter and no host synchronisation (found_inf stays on
// the device until GradScaler.update reads it once). Halves go through PTX conversions, so NVRTC needs no
// CUDA headers.

#define CHUNK 65536

// Scale one element in place; returns whether it was inf or NaN (checked in its own precision).
__device__ __forceinline__ int unscale(float* p, float s) {
    const float v = *p;
    *p = v * s;
    return !isfinite(v);
}
__device__ __forceinline__ int unscale(double* p, float s) {
    const double v = *p;
    *p = v * (double)s;
    return !isfinite(v);
}
__device__ __forceinline__ int unscale(unsigned short* p, float s) {  // float16, computed in float32
    float v;
    asm("cvt.f32.f16 %0, %1;" : "=f"(v) : "h"(*p));
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v * s));
    *p = h;
    return !isfinite(v);
}

template <typename T>
__device__ void unscale_chunks(const unsigned long long* ptrs, const long long* sizes, const int* chunk_tensor,
                               const long long* chunk_start, float inv_scale, float* found_inf) {
    const int t = chunk_tensor[blockIdx.x];
    T* p = reinterpret_cast<T*>(ptrs[t]);
    const long long begin = chunk_start[blockIdx.x];
    const long long end = begin + CHUNK < sizes[t] ? begin + CHUNK : sizes[t];
    int bad = 0;
    for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) bad |= unscale(p + i, inv_scale);
    if (__syncthreads_or(bad) && threadIdx.x == 0) *found_inf = 1.0f;  // every writer writes the same 1
}

extern "C" __global__ void amp_unscale_f32(const unsigned long long* ptrs, const long long* sizes,
                                           const int* chunk_tensor, const long long* chunk_start, float inv_scale,
                                           float* found_inf) {
    unscale_chunks<float>(ptrs, sizes, chunk_tensor, chunk_start, inv_scale, found_inf);
}

extern "C" __global__ void amp_unscale_f64(const unsigned long long* ptrs, const long long* sizes,
                                           const int* chunk_tensor, const long long* chunk_start, float inv_scale,
                                           float* found_inf) {
    unscale_chunks<double>(ptrs, sizes, chunk_tensor, chunk_start, inv_scale, found_inf);
}

extern "C" __global__ void amp_unscale_f16(const unsigned long long* ptrs, const long long* sizes,
                                           const int* chunk_tensor, const long long* chunk_start, float inv_scale,
                                           float* found_inf) {
    unscale_chunks<unsigned short>(ptrs, sizes, chunk_tensor, chunk_start, inv_scale, found_inf);
}
