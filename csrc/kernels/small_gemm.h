// C = alpha * A B + beta * C for the small products inside a fused kernel (attention's per-head blocks) and the
// batched products of bmm.cpp, on one thread: the caller parallelises over independent products. A and B have
// any strides (A^T B or A B^T costs the same as A B); C is row-major with unit column stride. Register tiles of
// 6 rows x two 32-byte vectors of columns (12 accumulators, enough to keep AVX2's two FMA pipes busy), B packed
// per panel (zero-padded) so that the loop has no edge cases; built for AVX2 and baseline x86-64.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace small_gemm {

constexpr int kMR = 6;

// Two 32-byte vectors of columns (GCC vector extensions: AVX2 registers in the x86-64-v3 clone).
template <class T>
struct VecOf;
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(32)));
};
template <class T>
using Vec = typename VecOf<T>::type;
template <class T>
constexpr int kLanes = 32 / int(sizeof(T));
template <class T>
constexpr int kNR = 2 * kLanes<T>;

// One kMR x kNR tile: acc = sum_p A[r, p] * panel[p, :] in registers, then C = alpha * acc + beta * C for the
// valid rows and columns.
template <class T>
TT_SIMD_CLONES void tile(int64_t k, const T* const* a, int64_t acs, const T* __restrict panel, T alpha, T beta,
                         T* c, int64_t ldc, int rows, int cols) {
  using V = Vec<T>;
  constexpr int W = kLanes<T>;
  V acc[kMR][2];
#pragma GCC unroll 8
  for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = V{};
  for (int64_t p = 0; p < k; ++p) {
    V b0, b1;
    __builtin_memcpy(&b0, panel + p * 2 * W, sizeof(V));
    __builtin_memcpy(&b1, panel + p * 2 * W + W, sizeof(V));
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      const V av = V{} + a[r][p * acs];
      acc[r][0] += av * b0;
      acc[r][1] += av * b1;
    }
  }
  alignas(64) T out[kMR][2 * W];
#pragma GCC unroll 8
  for (int r = 0; r < kMR; ++r) {
    __builtin_memcpy(out[r], &acc[r][0], sizeof(V));
    __builtin_memcpy(out[r] + W, &acc[r][1], sizeof(V));
  }
  for (int r = 0; r < rows; ++r) {
    T* cr = c + r * ldc;
    if (beta == T(0)) {
      for (int j = 0; j < cols; ++j) cr[j] = alpha * out[r][j];
    } else {
      for (int j = 0; j < cols; ++j) cr[j] = alpha * out[r][j] + beta * cr[j];
    }
  }
}

}  // namespace small_gemm

// C (m x n) = alpha * A (m x k) B (k x n) + beta * C; A[i, p] at a[i * ars + p * acs], B[p, j] at
// b[p * brs + j * bcs]. `panel` is scratch the caller keeps between calls (resized here).
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs,
          int64_t bcs, T beta, T* c, int64_t ldc, std::vector<T>& panel) {
  using namespace small_gemm;
  constexpr int NR = kNR<T>;
  if (m <= 0 || n <= 0) return;
  panel.resize(std::max<int64_t>(1, k) * NR);
  for (int64_t j0 = 0; j0 < n; j0 += NR) {
    const int cols = int(std::min<int64_t>(NR, n - j0));
    if (brs == 1 && bcs != 1) {
      // B is a transposed row-major matrix (attention's k^T and v^T): each column is contiguous, so read it
      // whole; gathering a row at a time would touch a cache line per element.
      for (int j = 0; j < cols; ++j) {
        const T* src = b + (j0 + j) * bcs;
        for (int64_t p = 0; p < k; ++p) panel[p * NR + j] = src[p];
      }
      for (int j = cols; j < NR; ++j) {
        for (int64_t p = 0; p < k; ++p) panel[p * NR + j] = T(0);
      }
    } else {
      for (int64_t p = 0; p < k; ++p) {
        T* dst = panel.data() + p * NR;
        const T* src = b + p * brs + j0 * bcs;
        if (bcs == 1) {
          for (int j = 0; j < cols; ++j) dst[j] = src[j];
        } else {
          for (int j = 0; j < cols; ++j) dst[j] = src[j * bcs];
        }
        for (int j = cols; j < NR; ++j) dst[j] = T(0);
      }
    }
    for (int64_t i0 = 0; i0 < m; i0 += kMR) {
      const int rows = int(std::min<int64_t>(kMR, m - i0));
      const T* rowp[kMR];
      for (int r = 0; r < kMR; ++r) rowp[r] = a + (i0 + std::min(r, rows - 1)) * ars;
      tile<T>(k, rowp, acs, panel.data(), alpha, beta, c + i0 * ldc + j0, ldc, rows, cols);
    }
  }
}

}  // namespace tinytorch::cpu
