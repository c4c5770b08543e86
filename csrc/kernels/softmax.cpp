// softmax and log_softmax over the last dimension, forward and backward, one row at a time: a row of
// attention scores stays in L1 across the max, exp-sum and scale passes, where NumPy streams the whole
// array through memory once per pass and allocates a temporary for each.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

// A row holding NaN, or whose maximum is not finite (all -inf: fully masked; or +inf), comes out NaN,
// as in PyTorch. NaN is tested on the bits: under -ffast-math the exp clamp would swallow it.
template <class T, bool kLog>
TT_SIMD_CLONES void softmax_rows(const T* __restrict x, T* __restrict y, int64_t r0, int64_t r1,
                                 int64_t n) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    T mx = xr[0];
    for (int64_t i = 1; i < n; ++i) mx = xr[i] > mx ? xr[i] : mx;
    if (!is_finite_bits(mx) || any_nan(xr, n)) {
      std::fill(yr, yr + n, std::numeric_limits<T>::quiet_NaN());
      continue;
    }
    T sum = 0;
    if (kLog) {
      // (x - max) - log(sum), in two loops: fast-math would otherwise fold it into x - (max + log(sum)),
      // which loses the low bits at a large max.
      for (int64_t i = 0; i < n; ++i) {
        yr[i] = xr[i] - mx;
        sum += exp_or_zero(yr[i]);
      }
      const T log_sum = std::log(sum);
      for (int64_t i = 0; i < n; ++i) yr[i] -= log_sum;
    } else {
      for (int64_t i = 0; i < n; ++i) {
        yr[i] = exp_or_zero(xr[i] - mx);
        sum += yr[i];
      }
      const T inv = T(1) / sum;
      for (int64_t i = 0; i < n; ++i) yr[i] *= inv;
    }
  }
}

// softmax: dx = y * (g - sum(g * y)); log_softmax: dx = g - exp(y) * sum(g).
template <class T, bool kLog>
TT_SIMD_CLONES void softmax_backward_rows(const T* __restrict y, const T* __restrict g, T* __restrict dx,
                                          int64_t r0, int64_t r1, int64_t n) {
  for (int64_t r = r0; r < r1; ++r) {
    const T *yr = y + r * n, *gr = g + r * n;
    T* dr = dx + r * n;
    T dot = 0;
    if (kLog) {
      if (any_nan(yr, n)) {
        std::fill(dr, dr + n, std::numeric_limits<T>::quiet_NaN());
        continue;
      }
      for (int64_t i = 0; i < n; ++i) dot += gr[i];
      for (int64_t i = 0; i < n; ++i) dr[i] = gr[i] - exp_or_zero(yr[i]) * dot;
    } else {
      for (int64_t i = 0; i < n; ++i) dot += gr[i] * yr[i];
      for (int64_t i = 0; i < n; ++i) dr[i] = yr[i] * (gr[i] - dot);
    }
  }
}

int64_t row_length(const py::array& x, const char* what) {
  if (x.ndim() == 0 || x.shape(x.ndim() - 1) == 0) {
    throw py::value_error(std::string(what) + ": expected an array with a non-empty last dimension");
  }
  return x.shape(x.ndim() - 1);
}

template <class T>
void forward(const py::array& x, py::array& out, bool log, int threads) {
  const int64_t n = row_length(x, "softmax"), rows = x.size() / n;
  const T* in = data_of<T>(x);
  T* y = data_of<T>(out);
  auto rows_fn = log ? softmax_rows<T, true> : softmax_rows<T, false>;
  py::gil_scoped_release nogil;
  parallel_for(rows, threads, std::max<int64_t>(1, kElementGrain / n),
               [=](int64_t r0, int64_t r1) { rows_fn(in, y, r0, r1, n); });
}

template <class T>
void backward(const py::array& y, const py::array& grad, py::array& out, bool log, int threads) {
  const int64_t n = row_length(y, "softmax_backward"), rows = y.size() / n;
  const T *yd = data_of<T>(y), *g = data_of<T>(grad);
  T* dx = data_of<T>(out);
  auto rows_fn = log ? softmax_backward_rows<T, true> : softmax_backward_rows<T, false>;
  py::gil_scoped_release nogil;
  parallel_for(rows, threads, std::max<int64_t>(1, kElementGrain / n),
               [=](int64_t r0, int64_t r1) { rows_fn(yd, g, dx, r0, r1, n); });
}

}  // namespace

void init_softmax(py::module_& m) {
  m.def("softmax", [](const py::array& x, py::array out, bool log, int threads) {
    const Kind kind = kind_of(x, "softmax");
    check({{&x, false}, {&out, true}}, kind, "softmax");
    kind == Kind::f32 ? forward<float>(x, out, log, threads) : forward<double>(x, out, log, threads);
  }, py::arg("x"), py::arg("out"), py::arg("log"), py::arg("threads") = 0,
     "out = softmax(x) (or log_softmax) over the last dimension.");
  m.def("softmax_backward", [](const py::array& y, const py::array& grad, py::array out, bool log, int threads) {
    const Kind kind = kind_of(y, "softmax_backward");
    check({{&y, false}, {&grad, false}, {&out, true}}, kind, "softmax_backward");
    kind == Kind::f32 ? backward<float>(y, grad, out, log, threads) : backward<double>(y, grad, out, log, threads);
  }, py::arg("y"), py::arg("grad"), py::arg("out"), py::arg("log"), py::arg("threads") = 0,
     "out = the gradient of softmax (or log_softmax) over the last dimension, from its output y.");
}

}  // namespace tinytorch::cpu
