// GELU, exact (erf) or tanh approximation, forward and backward (float32), grid-stride loops.

#define TT_SQRT1_2 0.70710678118654752440f
#define TT_INV_SQRT_2PI 0.39894228040143267794f
#define TT_SQRT_2_OVER_PI 0.79788456080286535588f
#define TT_GELU_C 0.044715f

extern "C" __global__ void gelu_forward(const float* __restrict__ x, float* __restrict__ y, long long n,
                                        int tanh_approx) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = x[i];
        if (tanh_approx) {
            y[i] = 0.5f * v * (1.0f + tanhf(TT_SQRT_2_OVER_PI * (v + TT_GELU_C * v * v * v)));
        } else {
            y[i] = 0.5f * v * (1.0f + erff(v * TT_SQRT1_2));
        }
    }
}

extern "C" __global__ void gelu_backward(const float* __restrict__ x, const float* __restrict__ g,
                                         float* __restrict__ dx, long long n, int tanh_approx) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = x[i];
        float d;
        if (tanh_approx) {
            const float t = tanhf(TT_SQRT_2_OVER_PI * (v + TT_GELU_C * v * v * v));
            d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * TT_SQRT_2_OVER_PI * (1.0f + 3.0f * TT_GELU_C * v * v);
        } else {
            d = 0.5f * (1.0f + erff(v * TT_SQRT1_2)) + v * expf(-0.5f * v * v) * TT_INV_SQRT_2PI;
        }
        dx[i] = g[i] * d;
    }
}
