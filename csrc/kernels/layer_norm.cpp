// LayerNorm over rows of n elements, forward and backward, one row at a time: the row stays in L1
// across the mean, variance and normalise passes (NumPy makes each a pass over the whole array).
// The forward saves mean and 1/std per row, as PyTorch's native_layer_norm does, for the backward.
#include <cmath>
#include <optional>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

template <class T>
TT_SIMD_CLONES void forward_rows(const T* __restrict x, const T* __restrict w, const T* __restrict b,
                                 T* __restrict y, T* __restrict mean, T* __restrict rstd, T eps, int64_t r0,
                                 int64_t r1, int64_t n) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += xr[i];
    const T mu = sum / T(n);
    T sq = 0;
    for (int64_t i = 0; i < n; ++i) sq += (xr[i] - mu) * (xr[i] - mu);
    const T rs = T(1) / std::sqrt(sq / T(n) + eps);
    mean[r] = mu;
    rstd[r] = rs;
    for (int64_t i = 0; i < n; ++i) {
      T v = (xr[i] - mu) * rs;
      if (w) v *= w[i];
      if (b) v += b[i];
      yr[i] = v;
    }
  }
}

// dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w * xhat)); dw += g * xhat and db += g into this
// chunk's own partial rows (summed by the caller), so threads never share an accumulator.
template <class T>
TT_SIMD_CLONES void backward_rows(const T* __restrict g, const T* __restrict x, const T* __restrict w,
                                  const T* __restrict mean, const T* __restrict rstd, T* __restrict dx,
                                  T* __restrict dw, T* __restrict db, int64_t r0, int64_t r1, int64_t n) {
  for (int64_t r = r0; r < r1; ++r) {
    const T *gr = g + r * n, *xr = x + r * n;
    const T mu = mean[r], rs = rstd[r];
    if (dw || db) {
      for (int64_t i = 0; i < n; ++i) {
        if (dw) dw[i] += gr[i] * (xr[i] - mu) * rs;
        if (db) db[i] += gr[i];
      }
    }
    if (!dx) continue;
    T sum_g = 0, sum_gx = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T gw = w ? gr[i] * w[i] : gr[i];
      sum_g += gw;
      sum_gx += gw * (xr[i] - mu) * rs;
    }
    const T a = sum_g / T(n), c = sum_gx / T(n);
    T* dr = dx + r * n;
    for (int64_t i = 0; i < n; ++i) {
      const T gw = w ? gr[i] * w[i] : gr[i];
      dr[i] = rs * (gw - a - (xr[i] - mu) * rs * c);
    }
  }
}

template <class T>
const T* optional_data(const std::optional<py::array>& a) {
  return a ? data_of<T>(*a) : nullptr;
}

template <class T>
T* optional_data(std::optional<py::array>& a) {
  return a ? data_of<T>(*a) : nullptr;
}

template <class T>
void forward(const py::array& x, int64_t n, const std::optional<py::array>& weight,
             const std::optional<py::array>& bias, double eps, py::array& out, py::array& mean, py::array& rstd,
             int threads) {
  const int64_t rows = x.size() / n;
  const T *in = data_of<T>(x), *w = optional_data<T>(weight), *b = optional_data<T>(bias);
  T *y = data_of<T>(out), *mu = data_of<T>(mean), *rs = data_of<T>(rstd);
  py::gil_scoped_release nogil;
  parallel_for(rows, threads, std::max<int64_t>(1, kElementGrain / n),
               [=](int64_t r0, int64_t r1) { forward_rows<T>(in, w, b, y, mu, rs, T(eps), r0, r1, n); });
}

template <class T>
void backward(const py::array& grad, const py::array& x, int64_t n, const std::optional<py::array>& weight,
              const py::array& mean, const py::array& rstd, std::optional<py::array>& dx_arr,
              std::optional<py::array>& dw_arr, std::optional<py::array>& db_arr, int threads) {
  const int64_t rows = x.size() / n;
  const T *g = data_of<T>(grad), *in = data_of<T>(x), *w = optional_data<T>(weight);
  const T *mu = data_of<T>(mean), *rs = data_of<T>(rstd);
  T *dx = optional_data<T>(dx_arr), *dw = optional_data<T>(dw_arr), *db = optional_data<T>(db_arr);
  py::gil_scoped_release nogil;
  const int64_t grain = std::max<int64_t>(1, kElementGrain / n);
  const int64_t chunks = chunk_count(rows, threads, grain);
  // Chunk c accumulates into partial[c]: dw in its first n elements, db in the next n.
  std::vector<std::vector<T>> partial(chunks, std::vector<T>(2 * n, T(0)));
  parallel_chunks(rows, threads, grain, [&](int64_t c, int64_t r0, int64_t r1) {
    T* acc = partial[c].data();
    backward_rows<T>(g, in, w, mu, rs, dx, dw ? acc : nullptr, db ? acc + n : nullptr, r0, r1, n);
  });
  for (int64_t i = 0; i < n; ++i) {
    T sw = 0, sb = 0;
    for (const auto& p : partial) {
      sw += p[i];
      sb += p[n + i];
    }
    if (dw) dw[i] = sw;
    if (db) db[i] = sb;
  }
}

void check_all(const py::array& x, int64_t n, const std::optional<py::array>& weight,
               const std::vector<std::pair<const py::array*, bool>>& full,
               const std::vector<std::pair<const py::array*, bool>>& per_row,
               const std::vector<std::pair<const py::array*, bool>>& per_column, Kind kind, const char* what) {
  if (n <= 0 || x.size() % n != 0) {
    throw py::value_error(std::string(what) + ": " + std::to_string(x.size()) + " elements are not rows of " +
                          std::to_string(n));
  }
  check(full, kind, what, x.size());
  check(per_row, kind, what, x.size() / n);
  auto columns = per_column;
  if (weight) columns.push_back({&*weight, false});
  if (!columns.empty()) check(columns, kind, what, n);
}

}  // namespace

void init_layer_norm(py::module_& m) {
  m.def("layer_norm", [](const py::array& x, int64_t n, std::optional<py::array> weight,
                         std::optional<py::array> bias, double eps, py::array out, py::array mean, py::array rstd,
                         int threads) {
    const Kind kind = kind_of(x, "layer_norm");
    std::vector<std::pair<const py::array*, bool>> columns;
    if (bias) columns.push_back({&*bias, false});
    check_all(x, n, weight, {{&x, false}, {&out, true}}, {{&mean, true}, {&rstd, true}}, columns, kind, "layer_norm");
    kind == Kind::f32 ? forward<float>(x, n, weight, bias, eps, out, mean, rstd, threads)
                      : forward<double>(x, n, weight, bias, eps, out, mean, rstd, threads);
  }, py::arg("x"), py::arg("n"), py::arg("weight"), py::arg("bias"), py::arg("eps"), py::arg("out"), py::arg("mean"),
     py::arg("rstd"), py::arg("threads") = 0,
     "out = LayerNorm of each row of n elements of x; writes each row's mean and 1/std.");
  m.def("layer_norm_backward", [](const py::array& grad, const py::array& x, int64_t n,
                                  std::optional<py::array> weight, const py::array& mean, const py::array& rstd,
                                  std::optional<py::array> dx, std::optional<py::array> dweight,
                                  std::optional<py::array> dbias, int threads) {
    const Kind kind = kind_of(x, "layer_norm_backward");
    std::vector<std::pair<const py::array*, bool>> full{{&grad, false}, {&x, false}}, columns;
    if (dx) full.push_back({&*dx, true});
    if (dweight) columns.push_back({&*dweight, true});
    if (dbias) columns.push_back({&*dbias, true});
    check_all(x, n, weight, full, {{&mean, false}, {&rstd, false}}, columns, kind, "layer_norm_backward");
    kind == Kind::f32 ? backward<float>(grad, x, n, weight, mean, rstd, dx, dweight, dbias, threads)
                      : backward<double>(grad, x, n, weight, mean, rstd, dx, dweight, dbias, threads);
  }, py::arg("grad"), py::arg("x"), py::arg("n"), py::arg("weight"), py::arg("mean"), py::arg("rstd"), py::arg("dx"),
     py::arg("dweight"), py::arg("dbias"), py::arg("threads") = 0,
     "LayerNorm's gradients from the saved mean and 1/std: fills whichever of dx, dweight, dbias is given.");
}

}  // namespace tinytorch::cpu
