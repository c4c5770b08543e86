// Max pooling over (N*C, H, W) planes, forward with the winning flat index per output (PyTorch's indices)
// and backward scattering through those indices; one plane per loop iteration, planes split over threads.
// NumPy's route made kh*kw passes over strided views and a masked add per kernel position in backward.
// Windows run past the borders (padding, ceil_mode): positions outside the plane are skipped. A NaN wins
// (PyTorch's rule: val > max || isnan(val)); ties keep the first position.
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

struct Pool {
  int64_t H, W, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
};

template <class T>
void forward_plane(const T* x, T* y, int32_t* idx, const Pool& p) {
  for (int64_t oy = 0; oy < p.oh; ++oy) {
    const int64_t y0 = oy * p.sh - p.ph;
    for (int64_t ox = 0; ox < p.ow; ++ox) {
      const int64_t x0 = ox * p.sw - p.pw;
      T best = -std::numeric_limits<T>::infinity();
      int64_t at = -1;
      for (int64_t i = 0; i < p.kh; ++i) {
        const int64_t yy = y0 + i * p.dh;
        if (yy < 0 || yy >= p.H) continue;
        for (int64_t j = 0; j < p.kw; ++j) {
          const int64_t xx = x0 + j * p.dw;
          if (xx < 0 || xx >= p.W) continue;
          const T v = x[yy * p.W + xx];
          if (at < 0 || v > best || is_nan_bits(v)) {
            best = v;
            at = yy * p.W + xx;
          }
        }
      }
      y[oy * p.ow + ox] = best;
      idx[oy * p.ow + ox] = int32_t(at);
    }
  }
}

// Returns false (and stops) at an index outside the plane.
template <class T>
bool backward_plane(const T* g, const int32_t* idx, T* dx, const Pool& p) {
  std::memset(dx, 0, sizeof(T) * p.H * p.W);
  const int64_t in = p.H * p.W;
  for (int64_t o = 0; o < p.oh * p.ow; ++o) {
    if (idx[o] < 0 || idx[o] >= in) return false;
    dx[idx[o]] += g[o];
  }
  return true;
}

Pool pool_of(const py::array& x, const py::array& y, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
             const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, const char* what) {
  if (x.ndim() != 3 || y.ndim() != 3 || x.shape(0) != y.shape(0) || kernel.size() != 2 || stride.size() != 2 ||
      padding.size() != 2 || dilation.size() != 2) {
    throw py::value_error(std::string(what) + ": expected x (P, H, W), out (P, oh, ow) and 2-element window arguments");
  }
  Pool p{x.shape(1), x.shape(2), y.shape(1), y.shape(2), kernel[0], kernel[1], stride[0], stride[1],
         padding[0], padding[1], dilation[0], dilation[1]};
  if (p.H * p.W > std::numeric_limits<int32_t>::max()) throw py::value_error(std::string(what) + ": plane too large");
  // Every window must hold at least one position of the plane (PyTorch's output-size rules guarantee it).
  if ((p.oh - 1) * p.sh - p.ph > p.H - 1 || (p.ow - 1) * p.sw - p.pw > p.W - 1 || p.ph >= (p.kh - 1) * p.dh + 1 ||
      p.pw >= (p.kw - 1) * p.dw + 1) {
    throw py::value_error(std::string(what) + ": a window lies wholly outside the input");
  }
  return p;
}

void check_index(const py::array& idx, int64_t size, bool writes, const char* what) {
  if (!py::isinstance<py::array_t<int32_t>>(idx) || idx.size() != size || !(idx.flags() & py::array::c_style) ||
      (writes && !idx.writeable())) {
    throw py::value_error(std::string(what) + ": expected a writeable C-contiguous int32 index array the size of out");
  }
}

}  // namespace

void init_max_pool(py::module_& m) {
  m.def("max_pool2d", [](const py::array& x, py::array y, py::array idx, const std::vector<int64_t>& kernel,
                         const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                         const std::vector<int64_t>& dilation, int threads) {
    constexpr const char* what = "max_pool2d";
    const Kind kind = kind_of(x, what);
    check({{&x, false}}, kind, what);
    check({{&y, true}}, kind, what);
    const Pool p = pool_of(x, y, kernel, stride, padding, dilation, what);
    check_index(idx, y.size(), true, what);
    const int64_t planes = x.shape(0), in = p.H * p.W, out = p.oh * p.ow;
    int32_t* id = data_of<int32_t>(idx);
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T* xd = data_of<T>(x);
      T* yd = data_of<T>(y);
      py::gil_scoped_release nogil;
      parallel_for(planes, threads, 1, [=](int64_t b, int64_t e) {
        for (int64_t q = b; q < e; ++q) forward_plane(xd + q * in, yd + q * out, id + q * out, p);
      });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("x"), py::arg("out"), py::arg("indices"), py::arg("kernel"), py::arg("stride"), py::arg("padding"),
     py::arg("dilation"), py::arg("threads") = 0,
     "out = the max over each window of each (H, W) plane of x; indices = its flat position in the plane.");
  m.def("max_pool2d_backward", [](const py::array& g, const py::array& idx, py::array dx, int threads) {
    constexpr const char* what = "max_pool2d_backward";
    const Kind kind = kind_of(g, what);
    check({{&g, false}}, kind, what);
    check({{&dx, true}}, kind, what);
    if (g.ndim() != 3 || dx.ndim() != 3 || g.shape(0) != dx.shape(0)) {
      throw py::value_error("max_pool2d_backward: expected grad (P, oh, ow) and grad_input (P, H, W)");
    }
    check_index(idx, g.size(), false, what);
    const int64_t planes = g.shape(0), in = dx.shape(1) * dx.shape(2), out = g.shape(1) * g.shape(2);
    const int32_t* id = data_of<int32_t>(idx);
    Pool p{dx.shape(1), dx.shape(2), g.shape(1), g.shape(2), 0, 0, 0, 0, 0, 0, 0, 0};
    std::atomic<bool> ok{true};
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T* gd = data_of<T>(g);
      T* d = data_of<T>(dx);
      py::gil_scoped_release nogil;
      parallel_for(planes, threads, 1, [=, &ok](int64_t b, int64_t e) {
        for (int64_t q = b; q < e && ok.load(std::memory_order_relaxed); ++q)
          if (!backward_plane(gd + q * out, id + q * out, d + q * in, p)) ok = false;
      });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
    if (!ok) throw py::value_error("max_pool2d_backward: an index lies outside the plane");
  }, py::arg("grad"), py::arg("indices"), py::arg("grad_input"), py::arg("threads") = 0,
     "grad_input = grad summed into the positions indices names, plane by plane.");
}

}  // namespace tinytorch::cpu
