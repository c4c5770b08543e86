// Cross entropy from logits over rows of C classes (float32), with optional label-smoothing weights u.
// Forward gives per row: lse = logsumexp(x), nll = lse - x[target], smooth = sum_c u_c * (lse - x_c).
// Backward: dx[i, c] = softmax(x)[i, c] * cs[i] - (c == target[i]) * cb[i] - cr[i] * u[c].

#define TT_NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float tt_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float tt_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

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

// One block per row. target holds valid class indices (ignored rows were mapped to 0 by the caller,
// which also zeroes their coefficients).
extern "C" __global__ void cross_entropy_forward(const float* __restrict__ x, const long long* __restrict__ target,
                                                 const float* __restrict__ u, int has_u, float* __restrict__ lse,
                                                 float* __restrict__ nll, float* __restrict__ smooth, long long rows,
                                                 int C) {
    __shared__ float smem[32];
    const long long row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + row * C;
    float m = TT_NEG_INF;
    for (int c = threadIdx.x; c < C; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = tt_block_max(m, smem);
    const float shift = m == TT_NEG_INF ? 0.0f : m;
    float s = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) s += expf(xr[c] - shift);
    const float l = logf(tt_block_sum(s, smem)) + shift;
    float su = 0.0f, sux = 0.0f;
    if (has_u) {
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            su += u[c];
            sux += u[c] * xr[c];
        }
        su = tt_block_sum(su, smem);
        sux = tt_block_sum(sux, smem);
    }
    if (threadIdx.x == 0) {
        lse[row] = l;
        nll[row] = l - xr[target[row]];
        smooth[row] = has_u ? l * su - sux : 0.0f;
    }
}

// Elementwise over rows * C.
extern "C" __global__ void cross_entropy_backward(const float* __restrict__ x, const float* __restrict__ lse,
                                                  const long long* __restrict__ target,
                                                  const float* __restrict__ cs, const float* __restrict__ cb,
                                                  const float* __restrict__ cr, const float* __restrict__ u, int has_u,
                                                  float* __restrict__ dx, long long rows, int C) {
    const long long total = rows * (long long)C;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < total;
         k += (long long)gridDim.x * blockDim.x) {
        const long long i = k / C;
        const int c = (int)(k - i * C);
        float v = expf(x[k] - lse[i]) * cs[i];
        if (c == target[i]) v -= cb[i];
        if (has_u) v -= cr[i] * u[c];
        dx[k] = v;
    }
}
