// The Adam/AdamW update in one pass over parameter, gradient and both moments (NumPy would take
// about ten passes and as many temporaries), over all of a group's parameters in one call (PyTorch's fused
// multi-tensor AdamW).
#include <cmath>

#include "kernels/cpu_kernels.h"
#include "kernels/multi_tensor.h"

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

// Every parameter of a group in one call: one parallel region over all their elements (multi_tensor.h), each
// tensor with its own step count (its bias corrections).
template <class T>
void adamw(const py::sequence& params, const py::sequence& grads, const py::sequence& exp_avgs,
           const py::sequence& exp_avg_sqs, const py::object& max_exp_avg_sqs, const std::vector<double>& steps,
           double lr, double beta1, double beta2, double eps, double weight_decay, bool maximize, int threads) {
  constexpr const char* what = "adamw_step";
  const Kind kind = sizeof(T) == 4 ? Kind::f32 : Kind::f64;
  const size_t n = params.size();
  const TensorList<T> p(params, kind, n, true, {}, what, "params");
  std::vector<int64_t> sizes;
  for (const py::array& a : p.arrays) sizes.push_back(a.size());
  const TensorList<T> g(grads, kind, n, false, sizes, what, "grads");
  const TensorList<T> m(exp_avgs, kind, n, true, sizes, what, "exp_avgs");
  const TensorList<T> v(exp_avg_sqs, kind, n, true, sizes, what, "exp_avg_sqs");
  const bool amsgrad = !max_exp_avg_sqs.is_none();
  const TensorList<T> vmax = amsgrad ? TensorList<T>(max_exp_avg_sqs.cast<py::sequence>(), kind, n, true, sizes, what,
                                                      "max_exp_avg_sqs")
                                     : TensorList<T>();
  if (steps.size() != n) throw py::value_error("adamw_step: expected one step count per parameter");
  std::vector<T> step_size(n), inv_bc2_sqrt(n);
  for (size_t i = 0; i < n; ++i) {
    step_size[i] = T(lr / (1.0 - std::pow(beta1, steps[i])));
    inv_bc2_sqrt[i] = T(1.0 / std::sqrt(1.0 - std::pow(beta2, steps[i])));
  }
  const T decay = T(1.0 - lr * weight_decay);
  const T one_minus_b1 = T(1.0 - beta1), b2 = T(beta2), one_minus_b2 = T(1.0 - beta2), e = T(eps);
  auto loop = maximize ? (amsgrad ? adamw_loop<T, true, true> : adamw_loop<T, true, false>)
                       : (amsgrad ? adamw_loop<T, false, true> : adamw_loop<T, false, false>);
  py::gil_scoped_release nogil;
  for_each_tensor_chunk(sizes, threads, kElementGrain, [&](int64_t, int64_t t, int64_t lo, int64_t hi) {
    loop(p.data[t], g.data[t], m.data[t], v.data[t], amsgrad ? vmax.data[t] : nullptr, lo, hi, decay, one_minus_b1,
         b2, one_minus_b2, step_size[t], inv_bc2_sqrt[t], e);
  });
}

}  // namespace

void init_adamw(py::module_& m) {
  m.def("adamw_step", [](const py::sequence& params, const py::sequence& grads, const py::sequence& exp_avgs,
                         const py::sequence& exp_avg_sqs, const py::object& max_exp_avg_sqs,
                         const std::vector<double>& steps, double lr, double beta1, double beta2, double eps,
                         double weight_decay, bool maximize, int threads) {
    if (params.size() == 0) return;
    const Kind kind = kind_of(params[0].cast<py::array>(), "adamw_step");
    (kind == Kind::f32 ? adamw<float> : adamw<double>)(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
                                                       lr, beta1, beta2, eps, weight_decay, maximize, threads);
  }, py::arg("params"), py::arg("grads"), py::arg("exp_avgs"), py::arg("exp_avg_sqs"), py::arg("max_exp_avg_sqs"),
     py::arg("steps"), py::arg("lr"), py::arg("beta1"), py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"),
     py::arg("maximize"), py::arg("threads") = 0,
     "One AdamW step in place over lists of parameters, gradients and moments of one dtype (PyTorch's rule; "
     "weight_decay=0 gives Adam without L2); steps: each parameter's step count after this step.");
}

}  // namespace tinytorch::cpu
