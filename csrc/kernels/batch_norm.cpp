// BatchNorm over (N, C, L) arrays, per channel: the statistics, the normalisation and the backward. NumPy's
// reductions over axes (0, 2) of such an array take a strided path several times slower than a contiguous
// sum, and its formulas keep x - mean and xhat as two more full arrays; here a channel's N rows of L are
// summed row by row (double accumulators; mean and variance in one pass) and xhat is recomputed from x, mean
// and rstd where it is needed.
#include <cmath>
#include <optional>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

constexpr int64_t kChannelGrain = 1;

// Sum and sum of squares of x - k over a row, in double: one pass for the mean and the variance, the shift k
// (the channel's first element) keeping the subtraction E[(x-k)^2] - E[x-k]^2 well conditioned.
template <class T>
TT_SIMD_CLONES void row_moments(const T* __restrict x, double k, int64_t n, double* s1, double* s2) {
  double a = 0, b = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = double(x[i]) - k;
    a += d;
    b += d * d;
  }
  *s1 += a;
  *s2 += b;
}

// y = x * scale + shift (scale = rstd * w, shift = b - mean * scale).
template <class T>
TT_SIMD_CLONES void row_affine(const T* __restrict x, T* __restrict y, T scale, T shift, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale + shift;
}

// sum of g and of g * (x - mu).
template <class T>
TT_SIMD_CLONES void row_grad_sums(const T* __restrict g, const T* __restrict x, T mu, int64_t n, double* sg,
                                  double* sgx) {
  double a = 0, b = 0;
  for (int64_t i = 0; i < n; ++i) {
    a += double(g[i]);
    b += double(g[i]) * double(x[i] - mu);
  }
  *sg += a;
  *sgx += b;
}

// dx = (g - mg - (x - mu) * k) * scale.
template <class T>
TT_SIMD_CLONES void row_input_grad(const T* __restrict g, const T* __restrict x, T* __restrict dx, T mu, T mg, T k,
                                   T scale, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = (g[i] - mg - (x[i] - mu) * k) * scale;
}

struct Dims {
  int64_t N, C, L;
};

Dims dims_of(const py::array& x, const char* what) {
  if (x.ndim() != 3) throw py::value_error(std::string(what) + ": expected an (N, C, L) array");
  return {x.shape(0), x.shape(1), x.shape(2)};
}

template <class T>
const T* opt_data(const std::optional<py::array>& a) {
  return a ? data_of<T>(*a) : nullptr;
}

template <class T>
T* opt_mut(std::optional<py::array>& a) {
  return a ? data_of<T>(*a) : nullptr;
}

// The per-channel arrays that were passed: C elements each, the kernel's dtype.
void check_channels(const std::vector<const py::array*>& arrays, Kind kind, int64_t C, const char* what, bool writes) {
  for (const py::array* a : arrays) {
    if (a != nullptr) check({{a, writes}}, kind, what, C);
  }
}

// mean and biased variance per channel.
template <class T>
void stats(const py::array& x, py::array& mean, py::array& var, int threads) {
  const Dims d = dims_of(x, "batch_norm_stats");
  const T* xd = data_of<T>(x);
  T *m = data_of<T>(mean), *v = data_of<T>(var);
  py::gil_scoped_release nogil;
  parallel_for(d.C, threads, kChannelGrain, [=](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const double M = double(d.N * d.L), k = M > 0 ? double(xd[c * d.L]) : 0.0;
      double s1 = 0, s2 = 0;
      for (int64_t n = 0; n < d.N; ++n) row_moments(xd + (n * d.C + c) * d.L, k, d.L, &s1, &s2);
      const double mean_dev = s1 / M;
      m[c] = T(k + mean_dev);
      v[c] = T(std::max(0.0, s2 / M - mean_dev * mean_dev));
    }
  });
}

template <class T>
void apply(const py::array& x, const py::array& mean, const py::array& rstd, const std::optional<py::array>& w,
           const std::optional<py::array>& b, py::array& y, int threads) {
  const Dims d = dims_of(x, "batch_norm_apply");
  const T *xd = data_of<T>(x), *m = data_of<T>(mean), *r = data_of<T>(rstd), *wd = opt_data<T>(w),
          *bd = opt_data<T>(b);
  T* yd = data_of<T>(y);
  py::gil_scoped_release nogil;
  parallel_for(d.C, threads, kChannelGrain, [=](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const T scale = r[c] * (wd ? wd[c] : T(1));
      const T shift = (bd ? bd[c] : T(0)) - m[c] * scale;
      for (int64_t n = 0; n < d.N; ++n) row_affine(xd + (n * d.C + c) * d.L, yd + (n * d.C + c) * d.L, scale, shift, d.L);
    }
  });
}

template <class T>
void backward(const py::array& g, const py::array& x, const py::array& mean, const py::array& rstd,
              const std::optional<py::array>& w, bool training, std::optional<py::array>& dx,
              std::optional<py::array>& dw, std::optional<py::array>& db, int threads) {
  const Dims d = dims_of(x, "batch_norm_backward");
  const T *gd = data_of<T>(g), *xd = data_of<T>(x), *m = data_of<T>(mean), *r = data_of<T>(rstd),
          *wd = opt_data<T>(w);
  T *dxd = opt_mut<T>(dx), *dwd = opt_mut<T>(dw), *dbd = opt_mut<T>(db);
  py::gil_scoped_release nogil;
  parallel_for(d.C, threads, kChannelGrain, [=](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const T mu = m[c], rs = r[c];
      double sg = 0, sgx = 0;
      if (training || dwd || dbd)
        for (int64_t n = 0; n < d.N; ++n)
          row_grad_sums(gd + (n * d.C + c) * d.L, xd + (n * d.C + c) * d.L, mu, d.L, &sg, &sgx);
      if (dwd) dwd[c] = T(sgx * double(rs));  // sum of g * xhat
      if (dbd) dbd[c] = T(sg);
      if (!dxd) continue;
      const T scale = rs * (wd ? wd[c] : T(1));
      const double M = double(d.N * d.L);
      // training: dx = (g - mean(g) - xhat * mean(g * xhat)) * rstd * w, with xhat = (x - mu) * rstd.
      const T mg = training ? T(sg / M) : T(0);
      const T k = training ? T(sgx / M * double(rs) * double(rs)) : T(0);
      for (int64_t n = 0; n < d.N; ++n)
        row_input_grad(gd + (n * d.C + c) * d.L, xd + (n * d.C + c) * d.L, dxd + (n * d.C + c) * d.L, mu, mg, k,
                       scale, d.L);
    }
  });
}

}  // namespace

void init_batch_norm(py::module_& m) {
  m.def("batch_norm_stats", [](const py::array& x, py::array mean, py::array var, int threads) {
    const Kind kind = kind_of(x, "batch_norm_stats");
    check({{&x, false}}, kind, "batch_norm_stats");
    const int64_t C = dims_of(x, "batch_norm_stats").C;
    check({{&mean, true}, {&var, true}}, kind, "batch_norm_stats", C);
    kind == Kind::f32 ? stats<float>(x, mean, var, threads) : stats<double>(x, mean, var, threads);
  }, py::arg("x"), py::arg("mean"), py::arg("var"), py::arg("threads") = 0,
     "Per-channel mean and biased variance of an (N, C, L) array.");
  m.def("batch_norm_apply", [](const py::array& x, const py::array& mean, const py::array& rstd,
                               const std::optional<py::array>& w, const std::optional<py::array>& b, py::array y,
                               int threads) {
    const Kind kind = kind_of(x, "batch_norm_apply");
    check({{&x, false}, {&y, true}}, kind, "batch_norm_apply");
    const int64_t C = dims_of(x, "batch_norm_apply").C;
    check({{&mean, false}, {&rstd, false}}, kind, "batch_norm_apply", C);
    check_channels({w ? &*w : nullptr, b ? &*b : nullptr}, kind, C, "batch_norm_apply", false);
    kind == Kind::f32 ? apply<float>(x, mean, rstd, w, b, y, threads) : apply<double>(x, mean, rstd, w, b, y, threads);
  }, py::arg("x"), py::arg("mean"), py::arg("rstd"), py::arg("weight"), py::arg("bias"), py::arg("y"),
     py::arg("threads") = 0, "y = (x - mean) * rstd * weight + bias, per channel.");
  m.def("batch_norm_backward", [](const py::array& g, const py::array& x, const py::array& mean,
                                  const py::array& rstd, const std::optional<py::array>& w, bool training,
                                  std::optional<py::array> dx, std::optional<py::array> dw,
                                  std::optional<py::array> db, int threads) {
    const Kind kind = kind_of(x, "batch_norm_backward");
    check({{&g, false}, {&x, false}}, kind, "batch_norm_backward");
    if (dx) check({{&*dx, true}}, kind, "batch_norm_backward", x.size());
    const int64_t C = dims_of(x, "batch_norm_backward").C;
    check({{&mean, false}, {&rstd, false}}, kind, "batch_norm_backward", C);
    check_channels({w ? &*w : nullptr}, kind, C, "batch_norm_backward", false);
    check_channels({dw ? &*dw : nullptr, db ? &*db : nullptr}, kind, C, "batch_norm_backward", true);
    kind == Kind::f32 ? backward<float>(g, x, mean, rstd, w, training, dx, dw, db, threads)
                      : backward<double>(g, x, mean, rstd, w, training, dx, dw, db, threads);
  }, py::arg("grad"), py::arg("x"), py::arg("mean"), py::arg("rstd"), py::arg("weight"), py::arg("training"),
     py::arg("grad_input"), py::arg("grad_weight"), py::arg("grad_bias"), py::arg("threads") = 0,
     "BatchNorm's gradients for x (training: through the batch statistics), weight and bias.");
}

}  // namespace tinytorch::cpu
