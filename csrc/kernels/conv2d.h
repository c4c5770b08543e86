// What the convolution kernel files share (conv2d.cpp: direct, over kernel taps; conv2d_winograd.cpp:
// F(2x2, 3x3); conv2d_grouped.cpp: few channels a group): the AVX-512 target attribute, the run-time CPU check,
// argument checks.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// GCC 12's AVX-512 headers build some shuffle results from a deliberately uninitialized vector and then
// warn about it where those intrinsics inline (a false positive; -Werror in CI would fail on it).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <string>
#include <vector>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

#if defined(__x86_64__) && defined(__GNUC__)
#define TT_AVX512 __attribute__((target("avx512f")))
constexpr bool kConvBuilt = true;
#else
#define TT_AVX512
constexpr bool kConvBuilt = false;
#endif

// Whether this CPU runs the AVX-512 convolution kernels (checked at run time: the build is portable).
inline bool avx512_supported() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

inline void check_f32(const py::array& a, const char* what, const char* name, bool writes) {
  if (!py::isinstance<py::array_t<float>>(a)) {
    throw py::type_error(std::string(what) + ": expected " + name + " to be a float32 array, got " +
                         py::str(a.dtype()).cast<std::string>());
  }
  if (!(a.flags() & py::array::c_style)) throw py::value_error(std::string(what) + ": " + name + " must be C-contiguous");
  if (writes && !a.writeable()) throw py::value_error(std::string(what) + ": " + name + " is read-only");
}

// The tap offsets as int64, one per tap (T of them).
inline std::vector<int64_t> offsets_of(const py::array& toff, int64_t T, const char* what) {
  if (toff.ndim() != 1 || toff.shape(0) != T) {
    throw py::value_error(std::string(what) + ": expected one offset per tap (" + std::to_string(T) + ")");
  }
  py::array_t<int64_t, py::array::c_style | py::array::forcecast> t(toff);
  return std::vector<int64_t>(t.data(), t.data() + T);
}

}  // namespace tinytorch::cpu
