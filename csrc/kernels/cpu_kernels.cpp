// Fused CPU kernels for the few places where NumPy would need many passes over a large array:
// exact GELU (NumPy has no erf) and the AdamW update. One pass over memory, split across threads,
// with the GIL released. Bound as tinytorch._C._cpu.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tinytorch {

namespace py = pybind11;

namespace {

// Runs fn(begin, end) over [0, n) on up to hardware_concurrency threads; small arrays stay on the
// caller (thread start-up costs ~20 us, worth it only for large arrays).
template <class F>
void parallel_for(int64_t n, F fn) {
  constexpr int64_t kMinPerThread = 1 << 15;
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t threads = std::min<int64_t>(hw, std::max<int64_t>(1, n / kMinPerThread));
  if (threads <= 1) {
    fn(0, n);
    return;
  }
  std::vector<std::thread> workers;
  const int64_t chunk = (n + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin < end) workers.emplace_back([=] { fn(begin, end); });
  }
  fn(0, std::min(n, chunk));
  for (auto& w : workers) w.join();
}

enum class Kind { f32, f64 };

Kind kind_of(const py::array& a, const char* what) {
  if (py::isinstance<py::array_t<float>>(a)) return Kind::f32;
  if (py::isinstance<py::array_t<double>>(a)) return Kind::f64;
  throw py::type_error(std::string(what) + ": expected a float32 or float64 array, got " +
                       py::str(a.dtype()).cast<std::string>());
}

// Every array a kernel touches: same dtype, same size, C-contiguous; outputs writeable.
void check(const std::vector<std::pair<const py::array*, bool>>& arrays, Kind kind, const char* what) {
  const py::ssize_t n = arrays.front().first->size();
  for (auto [a, writes] : arrays) {
    if (kind_of(*a, what) != kind) throw py::type_error(std::string(what) + ": all arrays must share one dtype");
    if (a->size() != n) throw py::value_error(std::string(what) + ": all arrays must have the same number of elements");
    if (!(a->flags() & py::array::c_style)) throw py::value_error(std::string(what) + ": arrays must be C-contiguous");
    if (writes && !a->writeable()) throw py::value_error(std::string(what) + ": output array is read-only");
  }
}

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kTanhCoef = 0.044715;

// The approximation is a template parameter: a branch-free loop vectorizes, calling glibc's SIMD erf/tanh.
template <class T, bool kTanh>
void gelu_forward_loop(const T* __restrict x, T* __restrict y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const T v = x[i];
    if (kTanh) {
      y[i] = T(0.5) * v * (T(1) + std::tanh(T(kSqrt2OverPi) * (v + T(kTanhCoef) * v * v * v)));
    } else {
      y[i] = T(0.5) * v * (T(1) + std::erf(v * T(kSqrtHalf)));
    }
  }
}

template <class T, bool kTanh>
void gelu_backward_loop(const T* __restrict g, const T* __restrict x, T* __restrict out, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const T v = x[i];
    T d;
    if (kTanh) {
      const T t = std::tanh(T(kSqrt2OverPi) * (v + T(kTanhCoef) * v * v * v));
      d = T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * T(kSqrt2OverPi) * (T(1) + T(3 * kTanhCoef) * v * v);
    } else {
      d = T(0.5) * (T(1) + std::erf(v * T(kSqrtHalf))) + v * T(kInvSqrt2Pi) * std::exp(T(-0.5) * v * v);
    }
    out[i] = g[i] * d;
  }
}

template <class T>
void gelu_forward_impl(const T* x, T* y, int64_t n, bool tanh_approx) {
  auto loop = tanh_approx ? gelu_forward_loop<T, true> : gelu_forward_loop<T, false>;
  parallel_for(n, [=](int64_t b, int64_t e) { loop(x, y, b, e); });
}

template <class T>
void gelu_backward_impl(const T* g, const T* x, T* out, int64_t n, bool tanh_approx) {
  auto loop = tanh_approx ? gelu_backward_loop<T, true> : gelu_backward_loop<T, false>;
  parallel_for(n, [=](int64_t b, int64_t e) { loop(g, x, out, b, e); });
}

template <class T>
void erf_loop(const T* __restrict x, T* __restrict y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) y[i] = std::erf(x[i]);
}

template <class T>
void erf_impl(const T* x, T* y, int64_t n) {
  parallel_for(n, [=](int64_t b, int64_t e) { erf_loop(x, y, b, e); });
}

// PyTorch's single-tensor AdamW, one pass: decay, moments, bias-corrected step. The options are
// template parameters so that the inner loop has no branches and vectorizes.
template <class T, bool kMaximize, bool kAmsgrad>
void adamw_loop(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict vmax,
                int64_t b, int64_t end, T decay, T one_minus_b1, T b2, T one_minus_b2, T step_size, T inv_bc2_sqrt,
                T eps) {
  for (int64_t i = b; i < end; ++i) {
    const T grad = kMaximize ? -g[i] : g[i];
    p[i] *= decay;
    m[i] += (grad - m[i]) * one_minus_b1;
    v[i] = v[i] * b2 + grad * grad * one_minus_b2;
    T second = v[i];
    if (kAmsgrad) {
      vmax[i] = vmax[i] > v[i] ? vmax[i] : v[i];
      second = vmax[i];
    }
    p[i] -= step_size * m[i] / (std::sqrt(second) * inv_bc2_sqrt + eps);
  }
}

template <class T>
void adamw_impl(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, double lr, double beta1, double beta2, double eps,
                double weight_decay, double step, bool maximize) {
  const T decay = T(1.0 - lr * weight_decay);
  const T one_minus_b1 = T(1.0 - beta1), b2 = T(beta2), one_minus_b2 = T(1.0 - beta2);
  const T step_size = T(lr / (1.0 - std::pow(beta1, step)));
  const T inv_bc2_sqrt = T(1.0 / std::sqrt(1.0 - std::pow(beta2, step)));
  const T e = T(eps);
  auto loop = maximize ? (vmax ? adamw_loop<T, true, true> : adamw_loop<T, true, false>)
                       : (vmax ? adamw_loop<T, false, true> : adamw_loop<T, false, false>);
  parallel_for(n, [=](int64_t b, int64_t end) {
    loop(p, g, m, v, vmax, b, end, decay, one_minus_b1, b2, one_minus_b2, step_size, inv_bc2_sqrt, e);
  });
}

}  // namespace

void init_cpu_kernels(py::module_& m) {
  py::module_ k = m.def_submodule("_cpu", "Fused CPU kernels (GELU, erf, AdamW)");
  k.def("gelu", [](const py::array& x, py::array out, bool tanh_approx) {
    Kind kind = kind_of(x, "gelu");
    check({{&x, false}, {&out, true}}, kind, "gelu");
    const void* in = x.data();
    void* dst = out.mutable_data();
    const int64_t n = x.size();
    py::gil_scoped_release nogil;
    if (kind == Kind::f32) gelu_forward_impl(static_cast<const float*>(in), static_cast<float*>(dst), n, tanh_approx);
    else gelu_forward_impl(static_cast<const double*>(in), static_cast<double*>(dst), n, tanh_approx);
  }, py::arg("x"), py::arg("out"), py::arg("tanh_approx"), "out = GELU(x), exact (erf) or tanh-approximated.");
  k.def("gelu_backward", [](const py::array& grad, const py::array& x, py::array out, bool tanh_approx) {
    Kind kind = kind_of(x, "gelu_backward");
    check({{&grad, false}, {&x, false}, {&out, true}}, kind, "gelu_backward");
    const void *g = grad.data(), *in = x.data();
    void* dst = out.mutable_data();
    const int64_t n = x.size();
    py::gil_scoped_release nogil;
    if (kind == Kind::f32) {
      gelu_backward_impl(static_cast<const float*>(g), static_cast<const float*>(in), static_cast<float*>(dst), n,
                         tanh_approx);
    } else {
      gelu_backward_impl(static_cast<const double*>(g), static_cast<const double*>(in), static_cast<double*>(dst), n,
                         tanh_approx);
    }
  }, py::arg("grad"), py::arg("x"), py::arg("out"), py::arg("tanh_approx"), "out = grad * GELU'(x).");
  k.def("erf", [](const py::array& x, py::array out) {
    Kind kind = kind_of(x, "erf");
    check({{&x, false}, {&out, true}}, kind, "erf");
    const void* in = x.data();
    void* dst = out.mutable_data();
    const int64_t n = x.size();
    py::gil_scoped_release nogil;
    if (kind == Kind::f32) erf_impl(static_cast<const float*>(in), static_cast<float*>(dst), n);
    else erf_impl(static_cast<const double*>(in), static_cast<double*>(dst), n);
  }, py::arg("x"), py::arg("out"), "out = erf(x).");
  k.def("adamw_step", [](py::array param, const py::array& grad, py::array exp_avg, py::array exp_avg_sq,
                         py::object max_exp_avg_sq, double lr, double beta1, double beta2, double eps,
                         double weight_decay, double step, bool maximize) {
    Kind kind = kind_of(param, "adamw_step");
    std::vector<std::pair<const py::array*, bool>> arrays{{&param, true}, {&grad, false}, {&exp_avg, true}, {&exp_avg_sq, true}};
    const bool amsgrad = !max_exp_avg_sq.is_none();
    py::array vmax = amsgrad ? max_exp_avg_sq.cast<py::array>() : py::array();  // (py::array() is empty, not null)
    if (amsgrad) arrays.push_back({&vmax, true});
    check(arrays, kind, "adamw_step");
    const int64_t n = param.size();
    void *p = param.mutable_data(), *m1 = exp_avg.mutable_data(), *m2 = exp_avg_sq.mutable_data();
    const void* g = grad.data();
    void* mx = amsgrad ? vmax.mutable_data() : nullptr;
    py::gil_scoped_release nogil;
    if (kind == Kind::f32) {
      adamw_impl(static_cast<float*>(p), static_cast<const float*>(g), static_cast<float*>(m1), static_cast<float*>(m2),
                 static_cast<float*>(mx), n, lr, beta1, beta2, eps, weight_decay, step, maximize);
    } else {
      adamw_impl(static_cast<double*>(p), static_cast<const double*>(g), static_cast<double*>(m1),
                 static_cast<double*>(m2), static_cast<double*>(mx), n, lr, beta1, beta2, eps, weight_decay, step,
                 maximize);
    }
  }, py::arg("param"), py::arg("grad"), py::arg("exp_avg"), py::arg("exp_avg_sq"), py::arg("max_exp_avg_sq"),
     py::arg("lr"), py::arg("beta1"), py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"), py::arg("step"),
     py::arg("maximize"),
     "One AdamW step in place (PyTorch's single-tensor rule; weight_decay=0 gives Adam without L2).");
}

}  // namespace tinytorch
