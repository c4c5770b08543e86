// softmax and log_softmax over the last dimension (or a middle one: softmax_inner), forward and backward, and
// logsumexp over the last dimension, one row at a time: a row of attention scores stays in L1 across the max,
// exp-sum and scale passes, where NumPy streams the whole array through memory once per pass and allocates a
// temporary for each.
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

// logsumexp of each row: max + log(sum(exp(x - max))) in two passes over a row that stays in L1. PyTorch's rules
// for rows that are not finite: NaN anywhere gives NaN, a +inf gives inf, a row of -inf gives -inf.
template <class T>
TT_SIMD_CLONES void logsumexp_rows(const T* __restrict x, T* __restrict out, int64_t r0, int64_t r1, int64_t n) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    T mx = xr[0];
    for (int64_t i = 1; i < n; ++i) mx = xr[i] > mx ? xr[i] : mx;
    if (any_nan(xr, n)) {
      out[r] = std::numeric_limits<T>::quiet_NaN();
    } else if (!is_finite_bits(mx)) {
      out[r] = mx;
    } else {
      T sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += exp_or_zero(xr[i] - mx);
      out[r] = mx + std::log(sum);
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

// The same along a middle dimension: x seen as (A, R, C), softmax over R for each of the C columns. A block of
// up to kCols columns is reduced together (vectorised across the columns, its running maxima and sums in L1),
// where moving the dimension last would cost two transposing copies.
constexpr int64_t kCols = 256;

template <class T, bool kLog>
TT_SIMD_CLONES void softmax_columns(const T* __restrict x, T* __restrict y, int64_t R, int64_t C, int64_t width) {
  T mx[kCols], sum[kCols];
  bool bad[kCols];
  for (int64_t c = 0; c < width; ++c) {
    mx[c] = x[c];
    bad[c] = false;
  }
  for (int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * C;
    for (int64_t c = 0; c < width; ++c) {
      mx[c] = xr[c] > mx[c] ? xr[c] : mx[c];
      bad[c] |= is_nan_bits(xr[c]);
    }
  }
  for (int64_t c = 0; c < width; ++c) {
    bad[c] |= !is_finite_bits(mx[c]);
    sum[c] = 0;
  }
  for (int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
    for (int64_t c = 0; c < width; ++c) {
      const T e = exp_or_zero(xr[c] - mx[c]);
      sum[c] += e;
      if (!kLog) yr[c] = e;
    }
  }
  for (int64_t c = 0; c < width; ++c) sum[c] = kLog ? std::log(sum[c]) : T(1) / sum[c];
  for (int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
    for (int64_t c = 0; c < width; ++c) {
      const T v = kLog ? (xr[c] - mx[c]) - sum[c] : yr[c] * sum[c];
      yr[c] = bad[c] ? std::numeric_limits<T>::quiet_NaN() : v;
    }
  }
}

template <class T, bool kLog>
TT_SIMD_CLONES void softmax_backward_columns(const T* __restrict y, const T* __restrict g, T* __restrict dx,
                                             int64_t R, int64_t C, int64_t width) {
  T dot[kCols];
  for (int64_t c = 0; c < width; ++c) dot[c] = 0;
  for (int64_t r = 0; r < R; ++r) {
    const T *yr = y + r * C, *gr = g + r * C;
    for (int64_t c = 0; c < width; ++c) dot[c] += kLog ? gr[c] : gr[c] * yr[c];
  }
  for (int64_t r = 0; r < R; ++r) {
    const T *yr = y + r * C, *gr = g + r * C;
    T* dr = dx + r * C;
    for (int64_t c = 0; c < width; ++c) {
      dr[c] = kLog ? gr[c] - std::exp(yr[c]) * dot[c] : yr[c] * (gr[c] - dot[c]);
    }
  }
}

// Runs fn(offset, width) over the (A, C-block) pieces of an (A, R, C) array on the pool.
template <class F>
void over_columns(int64_t A, int64_t R, int64_t C, F&& fn) {
  const int64_t blocks = (C + kCols - 1) / kCols;
  parallel_for(A * blocks, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, R * std::min(C, kCols))),
               [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t a = w / blocks, c0 = (w % blocks) * kCols;
      fn(a * R * C + c0, std::min(kCols, C - c0));
    }
  });
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

void check_blocks3(const py::array& x, int64_t A, int64_t R, int64_t C, const char* what) {
  if (A < 0 || R <= 0 || C <= 0 || A * R * C != int64_t(x.size())) {
    throw py::value_error(std::string(what) + ": (A, R, C) = (" + std::to_string(A) + ", " + std::to_string(R) +
                          ", " + std::to_string(C) + ") does not match " + std::to_string(x.size()) +
                          " elements (R and C must be positive)");
  }
}

}  // namespace

void init_softmax(py::module_& m) {
  m.def("softmax_inner", [](const py::array& x, py::array out, int64_t A, int64_t R, int64_t C, bool log) {
    const Kind kind = kind_of(x, "softmax_inner");
    check({{&x, false}, {&out, true}}, kind, "softmax_inner");
    check_blocks3(x, A, R, C, "softmax_inner");
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T* in = data_of<T>(x);
      T* y = data_of<T>(out);
      auto fn = log ? softmax_columns<T, true> : softmax_columns<T, false>;
      py::gil_scoped_release nogil;
      over_columns(A, R, C, [&](int64_t off, int64_t width) { fn(in + off, y + off, R, C, width); });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("x"), py::arg("out"), py::arg("A"), py::arg("R"), py::arg("C"), py::arg("log"),
     "out = softmax (or log_softmax) of x seen as (A, R, C) over R.");
  m.def("softmax_inner_backward", [](const py::array& y, const py::array& grad, py::array out, int64_t A, int64_t R,
                                     int64_t C, bool log) {
    const Kind kind = kind_of(y, "softmax_inner_backward");
    check({{&y, false}, {&grad, false}, {&out, true}}, kind, "softmax_inner_backward");
    check_blocks3(y, A, R, C, "softmax_inner_backward");
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T *yd = data_of<T>(y), *g = data_of<T>(grad);
      T* dx = data_of<T>(out);
      auto fn = log ? softmax_backward_columns<T, true> : softmax_backward_columns<T, false>;
      py::gil_scoped_release nogil;
      over_columns(A, R, C, [&](int64_t off, int64_t width) { fn(yd + off, g + off, dx + off, R, C, width); });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("y"), py::arg("grad"), py::arg("out"), py::arg("A"), py::arg("R"), py::arg("C"), py::arg("log"),
     "out = the gradient of softmax_inner (or its log) from its output y.");
  m.def("softmax", [](const py::array& x, py::array out, bool log, int threads) {
    const Kind kind = kind_of(x, "softmax");
    check({{&x, false}, {&out, true}}, kind, "softmax");
    kind == Kind::f32 ? forward<float>(x, out, log, threads) : forward<double>(x, out, log, threads);
  }, py::arg("x"), py::arg("out"), py::arg("log"), py::arg("threads") = 0,
     "out = softmax(x) (or log_softmax) over the last dimension.");
  m.def("logsumexp", [](const py::array& x, py::array out) {
    const Kind kind = kind_of(x, "logsumexp");
    const int64_t n = row_length(x, "logsumexp"), rows = int64_t(x.size()) / n;
    check({{&x, false}}, kind, "logsumexp");
    check({{&out, true}}, kind, "logsumexp (out: one element per row)", rows);
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T* in = data_of<T>(x);
      T* y = data_of<T>(out);
      py::gil_scoped_release nogil;
      parallel_for(rows, std::max<int64_t>(1, kElementGrain / n),
                   [=](int64_t r0, int64_t r1) { logsumexp_rows<T>(in, y, r0, r1, n); });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("x"), py::arg("out"), "out = logsumexp of x over its last dimension (out: one element per row).");
  m.def("softmax_backward", [](const py::array& y, const py::array& grad, py::array out, bool log, int threads) {
    const Kind kind = kind_of(y, "softmax_backward");
    check({{&y, false}, {&grad, false}, {&out, true}}, kind, "softmax_backward");
    kind == Kind::f32 ? backward<float>(y, grad, out, log, threads) : backward<double>(y, grad, out, log, threads);
  }, py::arg("y"), py::arg("grad"), py::arg("out"), py::arg("log"), py::arg("threads") = 0,
     "out = the gradient of softmax (or log_softmax) over the last dimension, from its output y.");
}

}  // namespace tinytorch::cpu
