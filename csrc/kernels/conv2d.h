// What the convolution kernel files share (conv2d.cpp: direct, over kernel taps; conv2d_winograd.cpp:
// F(2x2, 3x3); conv2d_grouped.cpp: few channels a group): the instruction set chosen at run time, argument checks.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdint>
#include <cstring>

// GCC 12's AVX-512 headers build some shuffle results from a deliberately uninitialized vector and then
// warn about it where those intrinsics inline (a false positive; -Werror in CI would fail on it).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <string>
#include <vector>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

// The instruction set the convolution kernels run with (conv2d.cpp): the best this CPU has, unless
// TINYTORCH_CPU_CAPABILITY or _cpu.set_cpu_capability asks for less. none: the kernels do not run (GEMM route).
enum class Isa { none = 0, avx2 = 1, avx512 = 2 };
Isa conv_isa();

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
