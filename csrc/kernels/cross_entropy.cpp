// Cross entropy over class indices on rows of logits, forward and backward, one row at a time (the CPU twin of
// src/cross_entropy.cu): the row's max, exp-sum, target pick and label-smoothing dot in one pass over a row that
// stays in L1, where NumPy's log_softmax + gather took six passes and as many temporaries (nanoGPT's loss, forward
// and backward: 0.32 ms that way, 0.13 ms here, PyTorch 0.19). Rows split over the pool kElementGrain elements a
// thread at least.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

// Per row r: lse = logsumexp(x_r), nll = lse - x_r[t_r], smooth = sum_c u_c (lse - x_rc) (when u is given). A
// row holding NaN, or whose maximum is not finite, gives NaN throughout, as PyTorch's log_softmax does; NaN is
// tested on the bits, as fast-math's exp clamp would swallow it.
template <class T>
TT_SIMD_CLONES void forward_rows(const T* __restrict x, const int64_t* __restrict t, const T* __restrict u,
                                 T* __restrict lse, T* __restrict nll, T* __restrict smooth, int64_t r0, int64_t r1,
                                 int64_t n) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    T mx = xr[0];
    for (int64_t i = 1; i < n; ++i) mx = xr[i] > mx ? xr[i] : mx;
    if (!is_finite_bits(mx) || any_nan(xr, n)) {
      lse[r] = nll[r] = std::numeric_limits<T>::quiet_NaN();
      if (u) smooth[r] = lse[r];
      continue;
    }
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += exp_or_zero(xr[i] - mx);
    const T l = mx + std::log(sum);
    lse[r] = l;
    nll[r] = l - xr[t[r]];
    if (u) {
      T us = 0, ux = 0;
      for (int64_t i = 0; i < n; ++i) {
        us += u[i];
        ux += u[i] * xr[i];
      }
      smooth[r] = l * us - ux;
    }
  }
}

// dx_r = softmax(x_r) * cs_r - onehot(t_r) * cb_r - cr_r * u; a row whose lse is NaN gives NaN.
template <class T>
TT_SIMD_CLONES void backward_rows(const T* __restrict x, const T* __restrict lse, const int64_t* __restrict t,
                                  const T* __restrict cs, const T* __restrict cb, const T* __restrict cr,
                                  const T* __restrict u, T* __restrict dx, int64_t r0, int64_t r1, int64_t n) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    T* dr = dx + r * n;
    const T l = lse[r];
    if (is_nan_bits(l)) {
      std::fill(dr, dr + n, std::numeric_limits<T>::quiet_NaN());
      continue;
    }
    const T s = cs[r];
    for (int64_t i = 0; i < n; ++i) dr[i] = exp_or_zero(xr[i] - l) * s;
    if (u) {
      const T c = cr[r];
      for (int64_t i = 0; i < n; ++i) dr[i] -= c * u[i];
    }
    dr[t[r]] -= cb[r];
  }
}

template <class T>
const T* optional_data(const std::optional<py::array>& a) {
  return a ? data_of<T>(*a) : nullptr;
}

template <class T>
void forward(const py::array& x, const py::array& target, const std::optional<py::array>& u, py::array& lse,
             py::array& nll, std::optional<py::array>& smooth, int threads) {
  const int64_t rows = x.shape(0), n = x.shape(1);
  const T *xd = data_of<T>(x), *ud = optional_data<T>(u);
  const int64_t* td = static_cast<const int64_t*>(target.data());
  T *ld = data_of<T>(lse), *nd = data_of<T>(nll), *sd = smooth ? data_of<T>(*smooth) : nullptr;
  py::gil_scoped_release nogil;
  parallel_for(rows, threads, std::max<int64_t>(1, kElementGrain / n),
               [=](int64_t r0, int64_t r1) { forward_rows(xd, td, ud, ld, nd, sd, r0, r1, n); });
}

template <class T>
void backward(const py::array& x, const py::array& lse, const py::array& target, const py::array& cs,
              const py::array& cb, const std::optional<py::array>& cr, const std::optional<py::array>& u,
              py::array& dx, int threads) {
  const int64_t rows = x.shape(0), n = x.shape(1);
  const T *xd = data_of<T>(x), *ld = data_of<T>(lse), *csd = data_of<T>(cs), *cbd = data_of<T>(cb);
  const T *crd = optional_data<T>(cr), *ud = optional_data<T>(u);
  const int64_t* td = static_cast<const int64_t*>(target.data());
  T* out = data_of<T>(dx);
  py::gil_scoped_release nogil;
  parallel_for(rows, threads, std::max<int64_t>(1, kElementGrain / n),
               [=](int64_t r0, int64_t r1) { backward_rows(xd, ld, td, csd, cbd, crd, ud, out, r0, r1, n); });
}

// x is (rows, classes) with classes > 0; the per-row arrays hold `rows` elements, u `classes`; targets are int64
// in [0, classes) (the caller has checked them: an out-of-range one here is a bug, not bad input).
Kind check_rows(const py::array& x, const py::array& target,
                const std::vector<std::pair<const py::array*, bool>>& per_row, const std::optional<py::array>& u,
                const char* what) {
  const Kind kind = kind_of(x, what);
  if (x.ndim() != 2 || x.shape(1) == 0) {
    throw py::value_error(std::string(what) + ": expected logits of shape (rows, classes > 0)");
  }
  const int64_t rows = x.shape(0), n = x.shape(1);
  check({{&x, false}}, kind, what, rows * n);
  check(per_row, kind, what, rows);
  if (u) check({{&*u, false}}, kind, what, n);
  if (!py::isinstance<py::array_t<int64_t>>(target) || target.size() != rows ||
      !(target.flags() & py::array::c_style)) {
    throw py::type_error(std::string(what) + ": expected " + std::to_string(rows) + " contiguous int64 targets");
  }
  const int64_t* td = static_cast<const int64_t*>(target.data());
  for (int64_t r = 0; r < rows; ++r) {
    if (td[r] < 0 || td[r] >= n) throw py::index_error(std::string(what) + ": target out of range");
  }
  return kind;
}

}  // namespace

void init_cross_entropy(py::module_& m) {
  m.def("cross_entropy_forward", [](const py::array& x, const py::array& target, std::optional<py::array> u,
                                    py::array lse, py::array nll, std::optional<py::array> smooth, int threads) {
    std::vector<std::pair<const py::array*, bool>> outs = {{&lse, true}, {&nll, true}};
    if (smooth) outs.push_back({&*smooth, true});
    if (bool(u) != bool(smooth)) throw py::value_error("cross_entropy_forward: smooth goes with u");
    const Kind kind = check_rows(x, target, outs, u, "cross_entropy_forward");
    kind == Kind::f32 ? forward<float>(x, target, u, lse, nll, smooth, threads)
                      : forward<double>(x, target, u, lse, nll, smooth, threads);
  }, py::arg("x"), py::arg("target"), py::arg("u"), py::arg("lse"), py::arg("nll"), py::arg("smooth"),
     py::arg("threads") = 0,
     "Per row of logits x: lse = logsumexp, nll = lse - x[target], smooth = sum_c u_c (lse - x_c) (with u).");
  m.def("cross_entropy_backward", [](const py::array& x, const py::array& lse, const py::array& target,
                                     const py::array& cs, const py::array& cb, std::optional<py::array> cr,
                                     std::optional<py::array> u, py::array dx, int threads) {
    std::vector<std::pair<const py::array*, bool>> per_row = {{&lse, false}, {&cs, false}, {&cb, false}};
    if (cr) per_row.push_back({&*cr, false});
    if (bool(u) != bool(cr)) throw py::value_error("cross_entropy_backward: cr goes with u");
    const Kind kind = check_rows(x, target, per_row, u, "cross_entropy_backward");
    check({{&x, false}, {&dx, true}}, kind, "cross_entropy_backward");
    kind == Kind::f32 ? backward<float>(x, lse, target, cs, cb, cr, u, dx, threads)
                      : backward<double>(x, lse, target, cs, cb, cr, u, dx, threads);
  }, py::arg("x"), py::arg("lse"), py::arg("target"), py::arg("cs"), py::arg("cb"), py::arg("cr"), py::arg("u"),
     py::arg("dx"), py::arg("threads") = 0,
     "dx = softmax(x) * cs - onehot(target) * cb - cr * u, with per-row coefficients cs, cb, cr.");
}

}  // namespace tinytorch::cpu
