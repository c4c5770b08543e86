// One fused AdamW step over a flat float32 parameter, in place (PyTorch's AdamW, amsgrad=False):
//   p *= 1 - lr * weight_decay
//   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g^2
//   p -= (lr / bias_correction1) * m / (sqrt(v) / sqrt(bias_correction2) + eps)
// The bias corrections depend only on the step count, so the caller computes them in double precision.

extern "C" __global__ void adamw_step(float* __restrict__ param, const float* __restrict__ grad,
                                      float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq, long long n,
                                      float lr, float beta1, float beta2, float eps, float weight_decay,
                                      float bias_correction1, float bias_correction2_sqrt) {
    const float step_size = lr / bias_correction1;
    const float decay = 1.0f - lr * weight_decay;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const float g = grad[i];
        const float m = beta1 * exp_avg[i] + (1.0f - beta1) * g;
        const float v = beta2 * exp_avg_sq[i] + (1.0f - beta2) * g * g;
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
        const float denom = sqrtf(v) / bias_correction2_sqrt + eps;
        param[i] = param[i] * decay - step_size * m / denom;
    }
}
