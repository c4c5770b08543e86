// Grouped convolutions with few input channels per group (depthwise above all: one), over kernel taps like
// conv2d.cpp but for any CPU: a row of outputs at a time, one vectorised multiply-add pass per (input channel,
// tap), the row staying in L1. conv2d.cpp's register tiles (8 output channels, hundreds of (channel, tap)
// rows) would sit almost empty here, and the GEMM route runs one tiny product per group.
//
// src[n*sn + c*sc + toff[t] + y*wrow + x] as in conv2d.cpp; output channel o belongs to group o / Og and reads
// that group's Cg input channels.
#include <optional>

#include "kernels/conv2d.h"

namespace tinytorch::cpu {

namespace {

template <class T>
TT_SIMD_CLONES void axpy_row(T* __restrict out, const T* __restrict s, T w, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] += w * s[i];
}

template <class T>
TT_SIMD_CLONES T sum_row(const T* __restrict a, int64_t n) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i];
  return s;
}

template <class T>
TT_SIMD_CLONES T dot_row(const T* __restrict a, const T* __restrict b, int64_t n) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

struct Grouped {
  int64_t N, O, Cg, T, oh, ow, wrow, sn, sc, Og;
};

Grouped geometry(const py::array& src, int64_t sn, int64_t sc, const py::array& w, const std::vector<int64_t>& offs,
                 const py::array& out, int64_t wrow, int64_t groups, const char* what) {
  if (w.ndim() != 3 || out.ndim() != 4 || out.shape(1) != w.shape(0) || groups <= 0 || w.shape(0) % groups) {
    throw py::value_error(std::string(what) + ": expected weight (O, C/groups, T) and out (N, O, oh, ow), O divisible "
                          "by groups");
  }
  Grouped g{out.shape(0), w.shape(0), w.shape(1), w.shape(2), out.shape(2), out.shape(3), wrow, sn, sc,
            w.shape(0) / groups};
  int64_t hi = 0;
  for (int64_t t : offs) {
    if (t < 0) throw py::value_error(std::string(what) + ": negative tap offset");
    hi = std::max(hi, t);
  }
  const int64_t C = groups * g.Cg;
  const int64_t last = (g.N - 1) * sn + (C - 1) * sc + hi + (g.oh - 1) * wrow + g.ow - 1;
  if (g.N > 0 && (sn < 0 || sc < 0 || g.ow > wrow || last >= src.size())) {
    throw py::value_error(std::string(what) + ": the taps read outside the source array");
  }
  return g;
}

// Each output plane is computed on the padded grid (row pitch wrow, so every (channel, tap) pass is one long
// contiguous multiply-add over the whole plane) in a per-thread buffer, then its rows are copied out.
template <class T>
void forward(const T* x, const T* w, const T* bias, T* y, const Grouped& g, const std::vector<int64_t>& offs,
             int threads) {
  const int64_t plane = g.oh * g.ow, flat = (g.oh - 1) * g.wrow + g.ow;
  parallel_for(g.N * g.O, threads, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> acc(flat);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / g.O, o = item % g.O;
      const T* xs = x + n * g.sn + (o / g.Og) * g.Cg * g.sc;
      const T* wo = w + o * g.Cg * g.T;
      std::fill(acc.begin(), acc.end(), bias ? bias[o] : T(0));
      for (int64_t c = 0; c < g.Cg; ++c)
        for (int64_t t = 0; t < g.T; ++t) axpy_row(acc.data(), xs + c * g.sc + offs[t], wo[c * g.T + t], flat);
      T* out = y + item * plane;
      for (int64_t yy = 0; yy < g.oh; ++yy)
        std::copy(acc.data() + yy * g.wrow, acc.data() + yy * g.wrow + g.ow, out + yy * g.ow);
    }
  });
}

// The gradient plane is laid out on the padded grid with zeros in the gap columns, so every (channel, tap)
// product is one dot product over the whole plane.
template <class T>
void weight_grad(const T* x, const T* gr, T* gw, T* gb, const Grouped& g, const std::vector<int64_t>& offs,
                 int threads) {
  const int64_t plane = g.oh * g.ow, flat = (g.oh - 1) * g.wrow + g.ow;
  parallel_for(g.O, threads, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> gp(flat, T(0));
    for (int64_t o = begin; o < end; ++o) {
      T* wo = gw + o * g.Cg * g.T;
      std::fill(wo, wo + g.Cg * g.T, T(0));
      T bsum = 0;
      for (int64_t n = 0; n < g.N; ++n) {
        const T* go = gr + (n * g.O + o) * plane;
        for (int64_t yy = 0; yy < g.oh; ++yy) std::copy(go + yy * g.ow, go + (yy + 1) * g.ow, gp.data() + yy * g.wrow);
        if (gb) bsum += sum_row(go, plane);
        const T* xs = x + n * g.sn + (o / g.Og) * g.Cg * g.sc;
        for (int64_t c = 0; c < g.Cg; ++c)
          for (int64_t t = 0; t < g.T; ++t) wo[c * g.T + t] += dot_row(gp.data(), xs + c * g.sc + offs[t], flat);
      }
      if (gb) gb[o] = bsum;
    }
  });
}

}  // namespace

void init_conv2d_grouped(py::module_& m) {
  m.def("conv2d_grouped", [](const py::array& src, int64_t sn, int64_t sc, const py::array& w, const py::array& toff,
                             const std::optional<py::array>& bias, py::array out, int64_t wrow, int64_t groups,
                             int threads) {
    constexpr const char* what = "conv2d_grouped";
    const Kind kind = kind_of(src, what);
    check({{&src, false}}, kind, what);
    check({{&w, false}}, kind, what);
    check({{&out, true}}, kind, what);
    const std::vector<int64_t> offs = offsets_of(toff, w.ndim() == 3 ? w.shape(2) : -1, what);
    const Grouped g = geometry(src, sn, sc, w, offs, out, wrow, groups, what);
    if (bias) check({{&*bias, false}}, kind, what, g.O);
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T *x = data_of<T>(src), *wd = data_of<T>(w), *b = bias ? data_of<T>(*bias) : nullptr;
      T* y = data_of<T>(out);
      py::gil_scoped_release nogil;
      forward(x, wd, b, y, g, offs, threads);
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("src"), py::arg("sn"), py::arg("sc"), py::arg("weight"), py::arg("toff"), py::arg("bias"),
     py::arg("out"), py::arg("wrow"), py::arg("groups"), py::arg("threads") = 0,
     "out[n, o] = bias[o] + sum over the group's channels c and taps t of weight[o, c, t] * src rows.");
  m.def("conv2d_grouped_weight_grad", [](const py::array& src, int64_t sn, int64_t sc, const py::array& grad,
                                         const py::array& toff, int64_t wrow, int64_t groups, py::array gw,
                                         std::optional<py::array> gb, int threads) {
    constexpr const char* what = "conv2d_grouped_weight_grad";
    const Kind kind = kind_of(src, what);
    check({{&src, false}}, kind, what);
    check({{&grad, false}}, kind, what);
    check({{&gw, true}}, kind, what);
    const std::vector<int64_t> offs = offsets_of(toff, gw.ndim() == 3 ? gw.shape(2) : -1, what);
    const Grouped g = geometry(src, sn, sc, gw, offs, grad, wrow, groups, what);
    if (gb) check({{&*gb, true}}, kind, what, g.O);
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T *x = data_of<T>(src), *gr = data_of<T>(grad);
      T *w = data_of<T>(gw), *b = gb ? data_of<T>(*gb) : nullptr;
      py::gil_scoped_release nogil;
      weight_grad(x, gr, w, b, g, offs, threads);
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("src"), py::arg("sn"), py::arg("sc"), py::arg("grad"), py::arg("toff"), py::arg("wrow"),
     py::arg("groups"), py::arg("grad_weight"), py::arg("grad_bias"), py::arg("threads") = 0,
     "grad_weight[o, c, t] = sum over n, y, x of grad[n, o, y, x] * src rows of o's group; grad_bias = sum of grad.");
}

}  // namespace tinytorch::cpu
