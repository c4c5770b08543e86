// The Adam/AdamW update in one pass over parameter, gradient and both moments (NumPy would take
// about ten passes and as many temporaries).
#include <cmath>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

// PyTorch's single-tensor AdamW: decay, moments, bias-corrected step. The options are template
// parameters so that the inner loop has no branches and vectorizes.
template <class T, bool kMaximize, bool kAmsgrad>
TT_SIMD_CLONES void adamw_loop(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v,
                               T* __restrict vmax, int64_t b, int64_t end, T decay, T one_minus_b1, T b2,
                               T one_minus_b2, T step_size, T inv_bc2_sqrt, T eps) {
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
void adamw(py::array& param, const py::array& grad, py::array& exp_avg, py::array& exp_avg_sq, py::array* vmax_arr,
           double lr, double beta1, double beta2, double eps, double weight_decay, double step, bool maximize,
           int threads) {
  T *p = data_of<T>(param), *m = data_of<T>(exp_avg), *v = data_of<T>(exp_avg_sq);
  T* vmax = vmax_arr ? data_of<T>(*vmax_arr) : nullptr;
  const T* g = data_of<T>(grad);
  const T decay = T(1.0 - lr * weight_decay);
  const T one_minus_b1 = T(1.0 - beta1), b2 = T(beta2), one_minus_b2 = T(1.0 - beta2);
  const T step_size = T(lr / (1.0 - std::pow(beta1, step)));
  const T inv_bc2_sqrt = T(1.0 / std::sqrt(1.0 - std::pow(beta2, step)));
  const T e = T(eps);
  auto loop = maximize ? (vmax ? adamw_loop<T, true, true> : adamw_loop<T, true, false>)
                       : (vmax ? adamw_loop<T, false, true> : adamw_loop<T, false, false>);
  py::gil_scoped_release nogil;
  parallel_for(param.size(), threads, kElementGrain, [=](int64_t b, int64_t end) {
    loop(p, g, m, v, vmax, b, end, decay, one_minus_b1, b2, one_minus_b2, step_size, inv_bc2_sqrt, e);
  });
}

}  // namespace

void init_adamw(py::module_& m) {
  m.def("adamw_step", [](py::array param, const py::array& grad, py::array exp_avg, py::array exp_avg_sq,
                         py::object max_exp_avg_sq, double lr, double beta1, double beta2, double eps,
                         double weight_decay, double step, bool maximize, int threads) {
    const Kind kind = kind_of(param, "adamw_step");
    std::vector<std::pair<const py::array*, bool>> arrays{
        {&param, true}, {&grad, false}, {&exp_avg, true}, {&exp_avg_sq, true}};
    const bool amsgrad = !max_exp_avg_sq.is_none();
    py::array vmax = amsgrad ? max_exp_avg_sq.cast<py::array>() : py::array();  // (py::array() is empty, not null)
    if (amsgrad) arrays.push_back({&vmax, true});
    check(arrays, kind, "adamw_step");
    py::array* vmax_arr = amsgrad ? &vmax : nullptr;
    if (kind == Kind::f32) {
      adamw<float>(param, grad, exp_avg, exp_avg_sq, vmax_arr, lr, beta1, beta2, eps, weight_decay, step, maximize,
                   threads);
    } else {
      adamw<double>(param, grad, exp_avg, exp_avg_sq, vmax_arr, lr, beta1, beta2, eps, weight_decay, step, maximize,
                    threads);
    }
  }, py::arg("param"), py::arg("grad"), py::arg("exp_avg"), py::arg("exp_avg_sq"), py::arg("max_exp_avg_sq"),
     py::arg("lr"), py::arg("beta1"), py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"), py::arg("step"),
     py::arg("maximize"), py::arg("threads") = 0,
     "One AdamW step in place (PyTorch's single-tensor rule; weight_decay=0 gives Adam without L2).");
}

}  // namespace tinytorch::cpu
