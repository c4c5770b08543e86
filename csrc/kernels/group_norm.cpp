// GroupNorm over (N, C, *) arrays, forward and backward, one (sample, group) at a time: its Cg x S block stays in
// cache across the moments and the normalise pass (the composite made a dozen passes over the whole array, 5-8x
// PyTorch's time on a UNet's activations). ATen's formulation: the forward saves mean and 1/std per (n, g); the
// backward reduces sum(g x) and sum(g) per (n, c), from which dx is one pass and dweight, dbias small sums.
#include <cmath>
#include <optional>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

template <class T>
TT_SIMD_CLONES void scale_shift(const T* __restrict x, T* __restrict y, int64_t n, T scale, T shift) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale + shift;
}

template <class T>
TT_SIMD_CLONES double dot_in_double(const T* __restrict a, const T* __restrict b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

template <class T>
TT_SIMD_CLONES void backward_row(const T* __restrict g, const T* __restrict x, T* __restrict dx, int64_t n, T a,
                                 T b, T c) {
  for (int64_t i = 0; i < n; ++i) dx[i] = g[i] * a + x[i] * b + c;
}

template <class T>
void forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t N, int64_t C, int64_t G, int64_t S,
             double eps) {
  const int64_t Cg = C / G, D = Cg * S;
  parallel_for(N * G, std::max<int64_t>(1, kElementGrain / D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * D;
      const double mu = sum_in_double<false>(xr, D) / double(D);
      // Variance from the centred values (no cancellation for a large mean), still in double.
      double sq = 0;
      for (int64_t i = 0; i < D; ++i) sq += (double(xr[i]) - mu) * (double(xr[i]) - mu);
      const double rs = 1.0 / std::sqrt(sq / double(D) + eps);
      mean[r] = T(mu);
      rstd[r] = T(rs);
      const int64_t g = r % G;
      for (int64_t c = 0; c < Cg; ++c) {
        const int64_t ch = g * Cg + c;
        const double scale = rs * (w ? double(w[ch]) : 1.0);
        const double shift = (b ? double(b[ch]) : 0.0) - mu * scale;
        scale_shift(xr + c * S, y + r * D + c * S, S, T(scale), T(shift));
      }
    }
  });
}

// ds[n, c] = sum_s g x and db[n, c] = sum_s g; dx (optional) = g (rstd w) + x c2 + c3 with
// c2 = (B mean - A) rstd^3 / D, c3 = -c2 mean - B rstd / D, A = sum_c w ds and B = sum_c w db over the group.
template <class T>
void backward(const T* g, const T* x, const T* w, const T* mean, const T* rstd, T* dx, T* ds, T* db, int64_t N,
              int64_t C, int64_t G, int64_t S) {
  const int64_t Cg = C / G, D = Cg * S;
  parallel_for(N * G, std::max<int64_t>(1, kElementGrain / D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / G, grp = r % G;
      double A = 0, B = 0;
      for (int64_t c = 0; c < Cg; ++c) {
        const int64_t ch = grp * Cg + c, off = r * D + c * S;
        const double s = dot_in_double(g + off, x + off, S), t = sum_in_double<false>(g + off, S);
        ds[n * C + ch] = T(s);
        db[n * C + ch] = T(t);
        const double wc = w ? double(w[ch]) : 1.0;
        A += wc * s;
        B += wc * t;
      }
      if (!dx) continue;
      const double mu = double(mean[r]), rs = double(rstd[r]);
      const double c2 = (B * mu - A) * rs * rs * rs / double(D), c3 = -c2 * mu - B * rs / double(D);
      for (int64_t c = 0; c < Cg; ++c) {
        const int64_t ch = grp * Cg + c, off = r * D + c * S;
        backward_row(g + off, x + off, dx + off, S, T(rs * (w ? double(w[ch]) : 1.0)), T(c2), T(c3));
      }
    }
  });
}

template <class T>
const T* optional_data(const std::optional<py::array>& a) {
  return a ? data_of<T>(*a) : nullptr;
}

void check_shapes(const py::array& x, int64_t N, int64_t C, int64_t G, const char* what) {
  if (N <= 0 || C <= 0 || G <= 0 || C % G || x.size() % (N * C)) {
    throw py::value_error(std::string(what) + ": expected x of N * C * S elements with C a multiple of G, got " +
                          std::to_string(x.size()) + " elements for N=" + std::to_string(N) + ", C=" +
                          std::to_string(C) + ", G=" + std::to_string(G));
  }
}

}  // namespace

void init_group_norm(py::module_& m) {
  m.def("group_norm", [](const py::array& x, int64_t N, int64_t C, int64_t G, std::optional<py::array> weight,
                         std::optional<py::array> bias, double eps, py::array out, py::array mean, py::array rstd) {
    const Kind kind = kind_of(x, "group_norm");
    check_shapes(x, N, C, G, "group_norm");
    check({{&x, false}, {&out, true}}, kind, "group_norm");
    check({{&mean, true}, {&rstd, true}}, kind, "group_norm", N * G);
    for (const auto* a : {&weight, &bias}) {
      if (*a) check({{&**a, false}}, kind, "group_norm", C);
    }
    const int64_t S = x.size() / (N * C);
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T *xp = data_of<T>(x), *w = optional_data<T>(weight), *b = optional_data<T>(bias);
      T *y = data_of<T>(out), *mu = data_of<T>(mean), *rs = data_of<T>(rstd);
      py::gil_scoped_release nogil;
      forward<T>(xp, w, b, y, mu, rs, N, C, G, S, eps);
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("x"), py::arg("N"), py::arg("C"), py::arg("G"), py::arg("weight"), py::arg("bias"), py::arg("eps"),
     py::arg("out"), py::arg("mean"), py::arg("rstd"),
     "out = GroupNorm of x (N, C, S) over G groups of channels; writes each (n, g)'s mean and 1/std.");
  m.def("group_norm_backward", [](const py::array& grad, const py::array& x, int64_t N, int64_t C, int64_t G,
                                  std::optional<py::array> weight, const py::array& mean, const py::array& rstd,
                                  std::optional<py::array> dx, py::array ds, py::array db) {
    const Kind kind = kind_of(x, "group_norm_backward");
    check_shapes(x, N, C, G, "group_norm_backward");
    check({{&grad, false}, {&x, false}}, kind, "group_norm_backward");
    if (dx) check({{&x, false}, {&*dx, true}}, kind, "group_norm_backward");
    check({{&mean, false}, {&rstd, false}}, kind, "group_norm_backward", N * G);
    check({{&ds, true}, {&db, true}}, kind, "group_norm_backward", N * C);
    if (weight) check({{&*weight, false}}, kind, "group_norm_backward", C);
    const int64_t S = x.size() / (N * C);
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T *g = data_of<T>(grad), *xp = data_of<T>(x), *w = optional_data<T>(weight);
      const T *mu = data_of<T>(mean), *rs = data_of<T>(rstd);
      T *d = dx ? data_of<T>(*dx) : nullptr, *s = data_of<T>(ds), *t = data_of<T>(db);
      py::gil_scoped_release nogil;
      backward<T>(g, xp, w, mu, rs, d, s, t, N, C, G, S);
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("grad"), py::arg("x"), py::arg("N"), py::arg("C"), py::arg("G"), py::arg("weight"), py::arg("mean"),
     py::arg("rstd"), py::arg("dx"), py::arg("ds"), py::arg("db"),
     "GroupNorm's backward: ds (N, C) = sum over S of grad * x, db (N, C) = sum of grad, and dx if given.");
}

}  // namespace tinytorch::cpu
