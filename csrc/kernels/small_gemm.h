// C = alpha * A B + beta * C for the small products inside a fused kernel (attention's per-head blocks) and the
// batched products of bmm.cpp, on one thread: the caller parallelises over independent products. A has any
// strides; B is read in place where its rows are contiguous (a full panel of columns straight from memory) and
// packed, zero-padded, otherwise; C is row-major with unit column stride. The register tile is compiled three
// times and picked once for this CPU: 8 rows x two 64-byte vectors (16 of AVX-512's 32 registers), 6 rows x two
// 32-byte vectors (12 of AVX2's 16), and a baseline x86-64 (SSE) or non-x86 build.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

// The part of a product that a causal (top-left aligned) block of attention probabilities lets it skip, for
// query rows r0.. of a head (off = r0):
//   kLowerC: only C[i, j] with j <= i + off is needed (the rest may be left unwritten): q k^T, dO v^T;
//   kLowerA: A[i, p] == 0 for p > i + off, so the sum stops there: p v, dS k;
//   kUpperA: A[i, p] == 0 for p < i - off (A a transposed probability block), so the sum starts there: p^T dO.
struct Triangle {
  enum Kind { kNone, kLowerC, kLowerA, kUpperA };
  Kind kind = kNone;
  int64_t off = 0;
};

// (In an unnamed namespace: each file that uses the transpose gets its own target_clones copy and resolver.)
namespace {

// The shuffles that interleave the first (lo) or second (hi) halves of two W-lane vectors.
template <int W>
struct ZipOf;
template <>
struct ZipOf<8> {
  typedef int32_t M __attribute__((vector_size(32)));
  static constexpr M lo{0, 8, 1, 9, 2, 10, 3, 11}, hi{4, 12, 5, 13, 6, 14, 7, 15};
};
template <>
struct ZipOf<4> {
  typedef int64_t M __attribute__((vector_size(32)));
  static constexpr M lo{0, 4, 1, 5}, hi{2, 6, 3, 7};
};

// x (rows x cols, row stride xs, unit column stride) transposed into t (cols x rows, row stride ts), so that a product
// reads it as a B operand in place: attention's k^T and v^T once per head, bmm's transposed B once per call. W x W
// blocks go through registers (log2 W rounds of interleaving rows i and i + W/2 transpose a block); the edges
// element by element.
template <class T>
TT_SIMD_CLONES void transpose(const T* x, int64_t xs, int64_t rows, int64_t cols, T* t, int64_t ts) {
  constexpr int W = 32 / int(sizeof(T));
  typedef T V __attribute__((vector_size(32)));
  using M = typename ZipOf<W>::M;
  constexpr M lo = ZipOf<W>::lo, hi = ZipOf<W>::hi;
  const int64_t rw = rows / W * W, cw = cols / W * W;
  for (int64_t i0 = 0; i0 < rw; i0 += W) {
    for (int64_t p0 = 0; p0 < cw; p0 += W) {
      V r[W], z[W];
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) __builtin_memcpy(&r[i], x + (i0 + i) * xs + p0, sizeof(V));
#pragma GCC unroll 3
      for (int round = 1; round < W; round *= 2) {
#pragma GCC unroll 4
        for (int i = 0; i < W / 2; ++i) {
          z[2 * i] = __builtin_shuffle(r[i], r[i + W / 2], lo);
          z[2 * i + 1] = __builtin_shuffle(r[i], r[i + W / 2], hi);
        }
#pragma GCC unroll 8
        for (int i = 0; i < W; ++i) r[i] = z[i];
      }
#pragma GCC unroll 8
      for (int p = 0; p < W; ++p) __builtin_memcpy(t + (p0 + p) * ts + i0, &r[p], sizeof(V));
    }
    for (int64_t p = cw; p < cols; ++p) {
      for (int64_t i = i0; i < i0 + W; ++i) t[p * ts + i] = x[i * xs + p];
    }
  }
  for (int64_t i = rw; i < rows; ++i) {
    for (int64_t p = 0; p < cols; ++p) t[p * ts + i] = x[i * xs + p];
  }
}

}  // namespace

namespace small_gemm {

// One MR x (NV * W) tile over p in [kb, ke): acc = sum_p A[r, p] * B[p, :] in registers, then
// C = alpha * acc + beta * C for the valid rows and columns (C is not read when beta is 0). ar[r] is row r of A
// (rows past the valid ones repeat the last), B[p, :] is at b + p * bs.
template <class T, int W, int MR, int NV, bool kUnitA>
[[gnu::always_inline]] inline void tile(int64_t kb, int64_t ke, const T* const* ar, int64_t acs, const T* b,
                                        int64_t bs, T alpha, T beta, T* c, int64_t ldc, int rows, int cols) {
  typedef T V __attribute__((vector_size(W * sizeof(T))));
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  }
  for (int64_t p = kb; p < ke; ++p) {
    V bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) __builtin_memcpy(&bv[v], b + p * bs + v * W, sizeof(V));
    const int64_t pa = kUnitA ? p : p * acs;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const V av = V{} + ar[r][pa];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] += av * bv[v];
    }
  }
  if (rows == MR && cols == NV * W) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        T* cp = c + r * ldc + v * W;
        V y = acc[r][v] * alpha;
        if (beta != T(0)) {
          V old;
          __builtin_memcpy(&old, cp, sizeof(V));
          y += beta * old;
        }
        __builtin_memcpy(cp, &y, sizeof(V));
      }
    }
    return;
  }
  alignas(64) T out[MR][NV * W];
  __builtin_memcpy(out, acc, sizeof(out));
  for (int r = 0; r < rows; ++r) {
    T* cr = c + r * ldc;
    if (beta == T(0)) {
      for (int j = 0; j < cols; ++j) cr[j] = alpha * out[r][j];
    } else {
      for (int j = 0; j < cols; ++j) cr[j] = alpha * out[r][j] + beta * cr[j];
    }
  }
}

// Columns [j0, j0 + cols) of B (k x n) as a k x NR panel, zero-padded.
template <class T, int NR>
[[gnu::always_inline]] inline void pack(int64_t k, const T* b, int64_t brs, int64_t bcs, int64_t j0, int cols,
                                        T* panel) {
  if (brs == 1 && bcs != 1) {
    // B is a transposed row-major matrix: each column is contiguous, so read it whole; gathering a row at a time
    // would touch a cache line per element.
    for (int j = 0; j < cols; ++j) {
      const T* src = b + (j0 + j) * bcs;
      for (int64_t p = 0; p < k; ++p) panel[p * NR + j] = src[p];
    }
    for (int j = cols; j < NR; ++j) {
      for (int64_t p = 0; p < k; ++p) panel[p * NR + j] = T(0);
    }
    return;
  }
  for (int64_t p = 0; p < k; ++p) {
    T* dst = panel + p * NR;
    const T* src = b + p * brs + j0 * bcs;
    for (int j = 0; j < cols; ++j) dst[j] = src[j * bcs];
    for (int j = cols; j < NR; ++j) dst[j] = T(0);
  }
}

template <class T, int W, int MR, int NV>
[[gnu::always_inline]] inline void gemm_tiles(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t ars,
                                              int64_t acs, const T* b, int64_t brs, int64_t bcs, T beta, T* c,
                                              int64_t ldc, std::vector<T>& panel, Triangle tri) {
  constexpr int NR = NV * W;
  for (int64_t j0 = 0; j0 < n; j0 += NR) {
    const int cols = int(std::min<int64_t>(NR, n - j0));
    const T* bp = b + j0;
    int64_t bs = brs;
    if (bcs != 1 || cols < NR) {
      panel.resize(std::max<int64_t>(1, k) * NR);
      pack<T, NR>(k, b, brs, bcs, j0, cols, panel.data());
      bp = panel.data();
      bs = NR;
    }
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      const int rows = int(std::min<int64_t>(MR, m - i0));
      // Columns [j0, j0 + need) are needed by some row of this tile: none, or only the first vector's.
      const int64_t need = tri.kind == Triangle::kLowerC ? i0 + rows + tri.off - j0 : NR;
      if (need <= 0) continue;
      int64_t kb = 0, ke = k;
      if (tri.kind == Triangle::kLowerA) ke = std::clamp<int64_t>(i0 + rows + tri.off, 0, k);
      if (tri.kind == Triangle::kUpperA) kb = std::clamp<int64_t>(i0 - tri.off, 0, k);
      const T* ar[MR];
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) ar[r] = a + (i0 + std::min(r, rows - 1)) * ars;
      T* ct = c + i0 * ldc + j0;
      if (NV > 1 && need <= W) {
        if (acs == 1) {
          tile<T, W, MR, 1, true>(kb, ke, ar, 1, bp, bs, alpha, beta, ct, ldc, rows, std::min(cols, W));
        } else {
          tile<T, W, MR, 1, false>(kb, ke, ar, acs, bp, bs, alpha, beta, ct, ldc, rows, std::min(cols, W));
        }
      } else if (acs == 1) {
        tile<T, W, MR, NV, true>(kb, ke, ar, 1, bp, bs, alpha, beta, ct, ldc, rows, cols);
      } else {
        tile<T, W, MR, NV, false>(kb, ke, ar, acs, bp, bs, alpha, beta, ct, ldc, rows, cols);
      }
    }
  }
}

template <class T>
using GemmFn = void (*)(int64_t, int64_t, int64_t, T, const T*, int64_t, int64_t, const T*, int64_t, int64_t, T, T*,
                        int64_t, std::vector<T>&, Triangle);

#define TT_SMALL_GEMM_ARGS                                                                                          \
  int64_t m, int64_t n, int64_t k, T alpha, const T *a, int64_t ars, int64_t acs, const T *b, int64_t brs,        \
      int64_t bcs, T beta, T *c, int64_t ldc, std::vector<T>&panel, Triangle tri
#define TT_SMALL_GEMM_PASS m, n, k, alpha, a, ars, acs, b, brs, bcs, beta, c, ldc, panel, tri

template <class T>
void gemm_baseline(TT_SMALL_GEMM_ARGS) {
  gemm_tiles<T, 16 / int(sizeof(T)), 4, 2>(TT_SMALL_GEMM_PASS);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
template <class T>
__attribute__((target("arch=x86-64-v3"))) void gemm_avx2(TT_SMALL_GEMM_ARGS) {
  gemm_tiles<T, 32 / int(sizeof(T)), 6, 2>(TT_SMALL_GEMM_PASS);
}

template <class T>
__attribute__((target("arch=x86-64-v4"))) void gemm_avx512(TT_SMALL_GEMM_ARGS) {
  gemm_tiles<T, 64 / int(sizeof(T)), 8, 2>(TT_SMALL_GEMM_PASS);
}

// The widest tile this CPU runs, capped as the convolutions are by TINYTORCH_CPU_CAPABILITY (PyTorch's
// ATEN_CPU_CAPABILITY): 'avx2' or 'default' (which tests use to run the narrower tiles on a wider CPU).
template <class T>
GemmFn<T> pick() {
  __builtin_cpu_init();
  const char* env = std::getenv("TINYTORCH_CPU_CAPABILITY");
  const std::string cap = env ? env : "";
  if (cap != "avx2" && cap != "default" && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
    return gemm_avx512<T>;
  }
  if (cap != "default" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("bmi2")) {
    return gemm_avx2<T>;
  }
  return gemm_baseline<T>;
}
#else
template <class T>
GemmFn<T> pick() {
  return gemm_baseline<T>;
}
#endif

#undef TT_SMALL_GEMM_ARGS
#undef TT_SMALL_GEMM_PASS

}  // namespace small_gemm

// C (m x n) = alpha * A (m x k) B (k x n) + beta * C; A[i, p] at a[i * ars + p * acs], B[p, j] at
// b[p * brs + j * bcs]. `panel` is scratch the caller keeps between calls (resized here). tri says what a causal
// operand lets the product skip.
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t ars, int64_t acs, const T* b, int64_t brs,
          int64_t bcs, T beta, T* c, int64_t ldc, std::vector<T>& panel, Triangle tri = {}) {
  static const small_gemm::GemmFn<T> fn = small_gemm::pick<T>();
  if (m <= 0 || n <= 0) return;
  fn(m, n, k, alpha, a, ars, acs, b, brs, bcs, beta, c, ldc, panel, tri);
}

}  // namespace tinytorch::cpu
