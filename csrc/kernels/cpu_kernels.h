// Shared pieces of the fused CPU kernels (tinytorch._C._cpu): parallel_for (parallel.h), SIMD clones, and
// the argument checks every kernel makes before it releases the GIL. One op per file beside this one
// (gelu.cpp, softmax.cpp, layer_norm.cpp, index_add.cpp, adamw.cpp), forward and backward together.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "kernels/parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

namespace tinytorch::cpu {

namespace py = pybind11;

// A kernel loop marked TT_SIMD_CLONES is compiled three times, for AVX-512, for AVX2+FMA and for baseline
// x86-64, and the loader picks the one this CPU runs (an ifunc): the AVX2 clone calls glibc's 8-lane
// exp/erf/tanh, 2-3x faster than the 4-lane SSE ones a portable build would be limited to, and the AVX-512
// one is faster again even on a core that splits 512-bit operations in two (Zen 4: GELU's forward 0.41 ->
// 0.34 ns an element).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define TT_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TT_SIMD_CLONES
#endif

// -ffast-math lets the compiler assume there is no NaN or infinity, so x != x and std::isinf may be
// folded to false; these tests look at the bits, which it may not assume anything about.
inline bool is_finite_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return (b & 0x7fffffffu) < 0x7f800000u;
}

inline bool is_finite_bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return (b & 0x7fffffffffffffffull) < 0x7ff0000000000000ull;
}

inline bool is_nan_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return (b & 0x7fffffffu) > 0x7f800000u;
}

inline bool is_nan_bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return (b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}

// Whether any of x[0..n) is NaN.
template <class T>
bool any_nan(const T* x, int64_t n) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  constexpr Bits kAbs = sizeof(T) == 4 ? Bits(0x7fffffffu) : Bits(0x7fffffffffffffffull);
  constexpr Bits kInf = sizeof(T) == 4 ? Bits(0x7f800000u) : Bits(0x7ff0000000000000ull);
  Bits nan = 0;
  for (int64_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, x + i, sizeof b);
    nan |= Bits((b & kAbs) > kInf);
  }
  return nan != 0;
}

// Sum of x[0..n) (of squares with kSquare) in double, over many accumulators: with one, each vector add waits
// for the previous one's result. float32 adds 4 values a lane in float32 before it adds the lane to its double:
// converting every element to double took a port the adds need, and held the sum to half the rate the caches
// feed (PyTorch's float32 sum accumulates in float32 throughout; 4 keeps the error a quarter of 16's, as fast).
template <bool kSquare, class T>
TT_SIMD_CLONES double sum_in_double(const T* __restrict x, int64_t n) {
  constexpr int kLanes = 64;
  constexpr int64_t kBlock = std::is_same_v<T, float> ? 4 * kLanes : kLanes;
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    T part[kLanes] = {};
    for (int64_t b = 0; b < kBlock; b += kLanes) {
      for (int j = 0; j < kLanes; ++j) {
        const T v = x[i + b + j];
        part[j] += kSquare ? v * v : v;
      }
    }
    for (int j = 0; j < kLanes; ++j) acc[j] += double(part[j]);
  }
  double s = 0;
  for (; i < n; ++i) {
    const double v = double(x[i]);
    s += kSquare ? v * v : v;
  }
  for (int j = 0; j < kLanes; ++j) s += acc[j];
  return s;
}

// exp of anything below this is a denormal (or zero): glibc's SIMD exp leaves its vector path for
// such inputs, and masked attention scores (-inf) would send every vector there. Clamping and then
// zeroing keeps the vector path; outputs that would have been denormal become 0.
template <class T>
constexpr T kExpLowest = sizeof(T) == 4 ? T(-87) : T(-708);

template <class T>
inline T exp_or_zero(T z) {
  const T e = std::exp(z < kExpLowest<T> ? kExpLowest<T> : z);
  return z < kExpLowest<T> ? T(0) : e;
}

enum class Kind { f32, f64 };

inline Kind kind_of(const py::array& a, const char* what) {
  if (py::isinstance<py::array_t<float>>(a)) return Kind::f32;
  if (py::isinstance<py::array_t<double>>(a)) return Kind::f64;
  throw py::type_error(std::string(what) + ": expected a float32 or float64 array, got " +
                       py::str(a.dtype()).cast<std::string>());
}

// Arrays a kernel reads or writes: one dtype, C-contiguous, outputs writeable, and `size` elements
// each (a size of -1 skips that check).
inline void check(const std::vector<std::pair<const py::array*, bool>>& arrays, Kind kind, const char* what,
                  py::ssize_t size) {
  for (auto [a, writes] : arrays) {
    if (kind_of(*a, what) != kind) throw py::type_error(std::string(what) + ": all arrays must share one dtype");
    if (size >= 0 && a->size() != size) {
      throw py::value_error(std::string(what) + ": expected " + std::to_string(size) + " elements, got " +
                            std::to_string(a->size()));
    }
    if (!(a->flags() & py::array::c_style)) throw py::value_error(std::string(what) + ": arrays must be C-contiguous");
    if (writes && !a->writeable()) throw py::value_error(std::string(what) + ": output array is read-only");
  }
}

// Elementwise kernels: every array the size of the first.
inline void check(const std::vector<std::pair<const py::array*, bool>>& arrays, Kind kind, const char* what) {
  check(arrays, kind, what, arrays.front().first->size());
}

// The checks of a batched product out = a @ b (bmm.cpp, gemm.cpp): one float dtype, at least min_nd dimensions
// alike, equal batch dimensions (broadcast by the caller), (..., M, K) @ (..., K, N) -> (..., M, N) with K > 0.
inline Kind check_product(const py::array& a, const py::array& b, const py::array& out, int min_nd,
                          const char* what) {
  const std::string w(what);
  const Kind kind = kind_of(a, what);
  if (kind_of(b, what) != kind) throw py::type_error(w + ": all arrays must share one dtype");
  check({{&out, true}}, kind, what, -1);
  const py::ssize_t nd = a.ndim();
  if (nd < min_nd || b.ndim() != nd || out.ndim() != nd) {
    throw py::value_error(w + ": expected " + std::to_string(min_nd) + "-D arrays or more, all alike");
  }
  for (py::ssize_t d = 0; d < nd - 2; ++d) {
    if (b.shape(d) != a.shape(d) || out.shape(d) != a.shape(d)) {
      throw py::value_error(w + ": the batch dimensions must match (broadcast them first)");
    }
  }
  if (b.shape(nd - 2) != a.shape(nd - 1) || out.shape(nd - 2) != a.shape(nd - 2) ||
      out.shape(nd - 1) != b.shape(nd - 1) || a.shape(nd - 1) == 0) {
    throw py::value_error(w + ": expected a (..., M, K), b (..., K, N) and out (..., M, N) with K > 0");
  }
  return kind;
}

// Element offsets of every batch entry of an (batch..., rows, cols) array, in row-major batch order.
inline std::vector<int64_t> batch_offsets(const py::array& x) {
  const int nb = int(x.ndim()) - 2;
  int64_t count = 1;
  for (int d = 0; d < nb; ++d) count *= x.shape(d);
  std::vector<int64_t> offs(count, 0), idx(std::max(nb, 0), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t o = 0;
    for (int d = 0; d < nb; ++d) o += idx[d] * (x.strides(d) / x.itemsize());
    offs[i] = o;
    for (int d = nb - 1; d >= 0; --d) {
      if (++idx[d] < x.shape(d)) break;
      idx[d] = 0;
    }
  }
  return offs;
}

template <class T>
T* data_of(py::array& a) {
  return static_cast<T*>(a.mutable_data());
}

template <class T>
const T* data_of(const py::array& a) {
  return static_cast<const T*>(a.data());
}

void init_gelu(py::module_& m);
void init_adamw(py::module_& m);
void init_foreach(py::module_& m);
void init_softmax(py::module_& m);
void init_cross_entropy(py::module_& m);
void init_layer_norm(py::module_& m);
void init_group_norm(py::module_& m);
void init_index_add(py::module_& m);
void init_conv2d(py::module_& m);
void init_conv2d_winograd(py::module_& m);
void init_batch_norm(py::module_& m);
void init_max_pool(py::module_& m);
void init_lstm_cell(py::module_& m);
void init_conv2d_grouped(py::module_& m);
void init_attention(py::module_& m);
void init_elementwise(py::module_& m);
void init_bmm(py::module_& m);
void init_gemm(py::module_& m);
void init_crc32c(py::module_& m);
void init_cumsum(py::module_& m);
void init_gather(py::module_& m);
void init_cat(py::module_& m);
void init_activation(py::module_& m);

}  // namespace tinytorch::cpu
