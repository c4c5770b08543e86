// GELU, exact (erf) or tanh-approximated, and its derivative; erf on its own. NumPy has no erf, and
// GELU's formula would take a dozen NumPy passes: here it is one pass, with erf inline in float32 (below)
// and glibc's SIMD erf/exp/tanh otherwise.
#include <cmath>
#include <optional>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kTanhCoef = 0.044715;

// erf in float32 as x P(x^2) / Q(x^2) on [-4, 4] (the rational approximation of Eigen's generic_fast_erf_float,
// within a few ulp; erf rounds to +-1 beyond 4): multiply-adds and one division, so the loop vectorizes without
// a library call, 3-4x faster than glibc's SIMD erff. NaN is tested on the bits (the clamp would swallow it).
inline float erf_of(float x) {
  const float c = x < -4.f ? -4.f : (x > 4.f ? 4.f : x);
  const float z = c * c;
  float p = -2.72614225801306e-10f;
  p = p * z + 2.77068142495902e-08f;
  p = p * z - 2.10102402082508e-06f;
  p = p * z - 5.69250639462346e-05f;
  p = p * z - 7.34990630326855e-04f;
  p = p * z - 2.95459980854025e-03f;
  p = p * z - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * z - 2.13374055278905e-04f;
  q = q * z - 1.68282697438203e-03f;
  q = q * z - 7.37332916720468e-03f;
  q = q * z - 1.42647390514189e-02f;
  return is_nan_bits(x) ? x : c * p / q;
}

inline double erf_of(double x) { return std::erf(x); }

// exp(x) for x <= 0 in float32 as Cephes' expf: x = n ln2 + r with |r| <= ln2/2, a degree-6 polynomial in r, 2^n
// written into the exponent bits; within 2 ulp down to -87, 0 below -88 (2^n's bits are then zero). Inline
// multiply-adds vectorize: with glibc's exp call GELU's float32 backward ran ~1.3x slower (2.75 against 2.11 ms
// CPU time for 2M elements on one thread). Its one caller passes -v*v/2: a NaN there has already made the erf
// term NaN, so NaN needs no test here (the clamp may turn it into a number).
inline float exp_of(float x) {
  const float c = x < -88.f ? -88.f : x;
  const float n = std::floor(c * 1.44269504088896341f + 0.5f);
  const float r = (c - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline double exp_of(double x) { return std::exp(x); }

// GELU'(x) from s, the erf (or tanh) term that GELU(x) itself needs: the forward can write both for one
// evaluation of erf, and the backward is then one multiply.
template <class T, bool kTanh>
inline T slope_of(T v, T s) {
  if (kTanh) {
    return T(0.5) * (T(1) + s) + T(0.5) * v * (T(1) - s * s) * T(kSqrt2OverPi) * (T(1) + T(3 * kTanhCoef) * v * v);
  }
  return T(0.5) * (T(1) + s) + v * T(kInvSqrt2Pi) * exp_of(T(-0.5) * v * v);
}

template <class T, bool kTanh>
inline T term_of(T v) {
  return kTanh ? std::tanh(T(kSqrt2OverPi) * (v + T(kTanhCoef) * v * v * v)) : erf_of(v * T(kSqrtHalf));
}

// The approximation (and whether to write the slope) are template parameters: a branch-free loop vectorizes.
template <class T, bool kTanh, bool kSlope>
TT_SIMD_CLONES void gelu_forward_loop(const T* __restrict x, T* __restrict y, T* __restrict slope, int64_t b,
                                      int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const T v = x[i], s = term_of<T, kTanh>(v);
    y[i] = T(0.5) * v * (T(1) + s);
    if (kSlope) slope[i] = slope_of<T, kTanh>(v, s);
  }
}

template <class T, bool kTanh>
TT_SIMD_CLONES void gelu_backward_loop(const T* __restrict g, const T* __restrict x, T* __restrict out, int64_t b,
                                       int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const T v = x[i];
    out[i] = g[i] * slope_of<T, kTanh>(v, term_of<T, kTanh>(v));
  }
}

template <class T>
TT_SIMD_CLONES void erf_loop(const T* __restrict x, T* __restrict y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) y[i] = erf_of(x[i]);
}

template <class T>
void gelu_forward(const py::array& x, py::array& out, std::optional<py::array>& slope, bool tanh_approx,
                  int threads) {
  const T* in = data_of<T>(x);
  T *y = data_of<T>(out), *d = slope ? data_of<T>(*slope) : nullptr;
  auto loop = tanh_approx ? (d ? gelu_forward_loop<T, true, true> : gelu_forward_loop<T, true, false>)
                          : (d ? gelu_forward_loop<T, false, true> : gelu_forward_loop<T, false, false>);
  py::gil_scoped_release nogil;
  parallel_for(x.size(), threads, kElementGrain, [=](int64_t b, int64_t e) { loop(in, y, d, b, e); });
}

template <class T>
void gelu_backward(const py::array& grad, const py::array& x, py::array& out, bool tanh_approx, int threads) {
  const T *g = data_of<T>(grad), *in = data_of<T>(x);
  T* dx = data_of<T>(out);
  auto loop = tanh_approx ? gelu_backward_loop<T, true> : gelu_backward_loop<T, false>;
  py::gil_scoped_release nogil;
  parallel_for(x.size(), threads, kElementGrain, [=](int64_t b, int64_t e) { loop(g, in, dx, b, e); });
}

template <class T>
void erf(const py::array& x, py::array& out, int threads) {
  const T* in = data_of<T>(x);
  T* y = data_of<T>(out);
  py::gil_scoped_release nogil;
  parallel_for(x.size(), threads, kElementGrain, [=](int64_t b, int64_t e) { erf_loop(in, y, b, e); });
}

}  // namespace

void init_gelu(py::module_& m) {
  m.def("gelu", [](const py::array& x, py::array out, bool tanh_approx, int threads,
                   std::optional<py::array> slope) {
    const Kind kind = kind_of(x, "gelu");
    check({{&x, false}, {&out, true}}, kind, "gelu");
    if (slope) check({{&x, false}, {&*slope, true}}, kind, "gelu");
    kind == Kind::f32 ? gelu_forward<float>(x, out, slope, tanh_approx, threads)
                      : gelu_forward<double>(x, out, slope, tanh_approx, threads);
  }, py::arg("x"), py::arg("out"), py::arg("tanh_approx"), py::arg("threads") = 0, py::arg("slope") = py::none(),
     "out = GELU(x), exact (erf) or tanh-approximated; slope (optional) = GELU'(x), for a backward that is then "
     "one multiply.");
  m.def("gelu_backward", [](const py::array& grad, const py::array& x, py::array out, bool tanh_approx, int threads) {
    const Kind kind = kind_of(x, "gelu_backward");
    check({{&grad, false}, {&x, false}, {&out, true}}, kind, "gelu_backward");
    kind == Kind::f32 ? gelu_backward<float>(grad, x, out, tanh_approx, threads)
                      : gelu_backward<double>(grad, x, out, tanh_approx, threads);
  }, py::arg("grad"), py::arg("x"), py::arg("out"), py::arg("tanh_approx"), py::arg("threads") = 0,
     "out = grad * GELU'(x).");
  m.def("erf", [](const py::array& x, py::array out, int threads) {
    const Kind kind = kind_of(x, "erf");
    check({{&x, false}, {&out, true}}, kind, "erf");
    kind == Kind::f32 ? erf<float>(x, out, threads) : erf<double>(x, out, threads);
  }, py::arg("x"), py::arg("out"), py::arg("threads") = 0, "out = erf(x).");
}

}  // namespace tinytorch::cpu
