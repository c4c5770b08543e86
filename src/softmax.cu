// Row-wise softmax / log_softmax over the last dimension, forward and backward (float32).
// One block per row; blockDim.x is a multiple of 32 (at most 1024).

#define TT_NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float tt_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float tt_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Every thread gets the block-wide result. The leading barrier lets smem be reused by back-to-back calls.
__device__ float tt_block_sum(float v, float* smem) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = tt_warp_sum(v);
    __syncthreads();
    if (lane == 0) smem[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = lane < nw ? smem[lane] : 0.0f;
        v = tt_warp_sum(v);
        if (lane == 0) smem[0] = v;
    }
    __syncthreads();
    return smem[0];
}

__device__ float tt_block_max(float v, float* smem) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = tt_warp_max(v);
    __syncthreads();
    if (lane == 0) smem[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = lane < nw ? smem[lane] : TT_NEG_INF;
        v = tt_warp_max(v);
        if (lane == 0) smem[0] = v;
    }
    __syncthreads();
    return smem[0];
}

// y = softmax(x) (or log_softmax) per row of n. With safe != 0 a row of all -inf gives zeros, not nan.
extern "C" __global__ void softmax_forward(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                           int n, int log_softmax, int safe) {
    __shared__ float smem[32];
    const long long row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + row * n;
    float* yr = y + row * n;
    float m = TT_NEG_INF;
    for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, xr[i]);
    m = tt_block_max(m, smem);
    const float shift = (safe && m == TT_NEG_INF) ? 0.0f : m;
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += expf(xr[i] - shift);
    s = tt_block_sum(s, smem);
    if (log_softmax) {
        const float ls = logf(s);
        for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] - shift - ls;
    } else {
        const float inv = (safe && s == 0.0f) ? 0.0f : 1.0f / s;
        for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = expf(xr[i] - shift) * inv;
    }
}

// dx from the forward output y and the incoming gradient g:
//   softmax:     dx = y * (g - sum(g * y))
//   log_softmax: dx = g - exp(y) * sum(g)
extern "C" __global__ void softmax_backward(const float* __restrict__ y, const float* __restrict__ g,
                                            float* __restrict__ dx, long long rows, int n, int log_softmax) {
    __shared__ float smem[32];
    const long long row = blockIdx.x;
    if (row >= rows) return;
    const float* yr = y + row * n;
    const float* gr = g + row * n;
    float* dr = dx + row * n;
    float s = 0.0f;
    if (log_softmax) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) s += gr[i];
    } else {
        for (int i = threadIdx.x; i < n; i += blockDim.x) s += gr[i] * yr[i];
    }
    s = tt_block_sum(s, smem);
    if (log_softmax) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) dr[i] = gr[i] - expf(yr[i]) * s;
    } else {
        for (int i = threadIdx.x; i < n; i += blockDim.x) dr[i] = yr[i] * (gr[i] - s);
    }
}
