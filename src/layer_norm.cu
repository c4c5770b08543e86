// LayerNorm over rows of n (float32): forward, backward for the input, backward for weight and bias.

__device__ __forceinline__ float tt_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
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

// One block per row. Two passes over the row (mean, then centred variance) for accuracy.
extern "C" __global__ void layer_norm_forward(const float* __restrict__ x, const float* __restrict__ w,
                                              const float* __restrict__ b, float* __restrict__ y,
                                              float* __restrict__ mean, float* __restrict__ rstd, long long rows,
                                              int n, float eps, int has_w, int has_b) {
    __shared__ float smem[32];
    const long long row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + row * n;
    float* yr = y + row * n;
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += xr[i];
    const float mu = tt_block_sum(s, smem) / n;
    float v = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float d = xr[i] - mu;
        v += d * d;
    }
    const float r = rsqrtf(tt_block_sum(v, smem) / n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float o = (xr[i] - mu) * r;
        if (has_w) o *= w[i];
        if (has_b) o += b[i];
        yr[i] = o;
    }
    if (threadIdx.x == 0) {
        mean[row] = mu;
        rstd[row] = r;
    }
}

// dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * w, one block per row.
extern "C" __global__ void layer_norm_backward_input(const float* __restrict__ x, const float* __restrict__ g,
                                                     const float* __restrict__ w, const float* __restrict__ mean,
                                                     const float* __restrict__ rstd, float* __restrict__ dx,
                                                     long long rows, int n, int has_w) {
    __shared__ float smem[32];
    const long long row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + row * n;
    const float* gr = g + row * n;
    float* dr = dx + row * n;
    const float mu = mean[row], r = rstd[row];
    float s1 = 0.0f, s2 = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float gw = has_w ? gr[i] * w[i] : gr[i];
        s1 += gw;
        s2 += gw * (xr[i] - mu) * r;
    }
    s1 = tt_block_sum(s1, smem) / n;
    s2 = tt_block_sum(s2, smem) / n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float gw = has_w ? gr[i] * w[i] : gr[i];
        const float xhat = (xr[i] - mu) * r;
        dr[i] = r * (gw - s1 - xhat * s2);
    }
}

// dw[j] = sum_rows g * xhat, db[j] = sum_rows g: one thread per column (reads are coalesced across a warp).
extern "C" __global__ void layer_norm_backward_params(const float* __restrict__ x, const float* __restrict__ g,
                                                      const float* __restrict__ mean, const float* __restrict__ rstd,
                                                      float* __restrict__ dw, float* __restrict__ db, long long rows,
                                                      int n) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    float sw = 0.0f, sb = 0.0f;
    for (long long row = 0; row < rows; ++row) {
        const long long k = row * n + j;
        const float gv = g[k];
        sw += gv * (x[k] - mean[row]) * rstd[row];
        sb += gv;
    }
    dw[j] = sw;
    db[j] = sb;
}
