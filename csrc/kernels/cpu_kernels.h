// Shared pieces of the fused CPU kernels (tinytorch._C._cpu): a fork-join loop over a range, and
// the argument checks every kernel makes before it releases the GIL. One op per file beside this one
// (gelu.cpp, softmax.cpp, layer_norm.cpp, index_add.cpp, adamw.cpp), forward and backward together.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tinytorch::cpu {

namespace py = pybind11;

// How many threads parallel_for uses for n items: up to `threads` (0: one per core), each taking at
// least `grain` items, since a thread's start-up (~20 us) pays off only on large arrays.
inline int64_t chunk_count(int64_t n, int threads, int64_t grain) {
  const int64_t cores = threads > 0 ? threads : std::max<int64_t>(1, std::thread::hardware_concurrency());
  return std::min<int64_t>(cores, std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
}

// Runs fn(chunk, begin, end) over [0, n) split into chunk_count(...) chunks, one thread each; the
// caller's thread takes chunk 0 and joins the others before returning.
template <class F>
void parallel_chunks(int64_t n, int threads, int64_t grain, F fn) {
  const int64_t count = chunk_count(n, threads, grain);
  if (count <= 1) {
    fn(int64_t{0}, int64_t{0}, n);
    return;
  }
  std::vector<std::thread> workers;
  const int64_t size = (n + count - 1) / count;
  for (int64_t c = 1; c < count; ++c) {
    const int64_t begin = c * size, end = std::min(n, begin + size);
    if (begin < end) workers.emplace_back([=] { fn(c, begin, end); });
  }
  fn(int64_t{0}, int64_t{0}, std::min(n, size));
  for (auto& w : workers) w.join();
}

// Runs fn(begin, end) over [0, n) on parallel_chunks' threads.
template <class F>
void parallel_for(int64_t n, int threads, int64_t grain, F fn) {
  parallel_chunks(n, threads, grain, [&fn](int64_t, int64_t begin, int64_t end) { fn(begin, end); });
}

// A kernel loop marked TT_SIMD_CLONES is compiled twice, for AVX2+FMA and for baseline x86-64, and the
// loader picks the one this CPU runs (an ifunc): the AVX2 clone calls glibc's 8-lane exp/erf/tanh,
// 2-3x faster than the 4-lane SSE ones a portable build would be limited to.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define TT_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
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

// Elementwise kernels split at this many elements per thread.
constexpr int64_t kElementGrain = 1 << 15;

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
void init_softmax(py::module_& m);
void init_layer_norm(py::module_& m);
void init_index_add(py::module_& m);
void init_conv2d(py::module_& m);
void init_conv2d_winograd(py::module_& m);
void init_batch_norm(py::module_& m);
void init_max_pool(py::module_& m);
void init_lstm_cell(py::module_& m);
void init_conv2d_grouped(py::module_& m);
void init_crc32c(py::module_& m);

}  // namespace tinytorch::cpu
