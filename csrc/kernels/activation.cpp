// Activations with parameters and the elementwise losses, forward and input gradient side by side (ATen's
// Activation.cpp and the pointwise parts of Loss.cpp), one pass each on the intra-op pool. In NumPy each was a
// chain of where/exp/log1p passes over temporaries (leaky_relu 12x, softplus 11x, logsigmoid 10x,
// binary_cross_entropy_with_logits 7x and smooth_l1_loss 10x PyTorch's time at a million elements); the
// formulas below are ATen's.
#include <string>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

// kHardtanh has a backward only: its forward is clamp (elementwise.cpp).
enum Activation : int { kLeakyRelu = 0, kElu = 1, kSoftplus = 2, kLogSigmoid = 3, kHardswish = 4, kHardsigmoid = 5,
                        kMish = 6, kHardtanh = 7 };
enum Loss : int { kBceWithLogits = 0, kSmoothL1 = 1, kHuber = 2 };

// log(1 + exp(v)) without overflow: v above 20 (float32) or 40 (float64) returns v, as exp(-v) is then below
// the type's resolution next to v.
template <class T>
inline T softplus1(T v) {
  return v > T(sizeof(T) == 4 ? 20 : 40) ? v : std::log1p(std::exp(v));
}

// leaky_relu(a = slope); elu(a = alpha, b = scale, c = input scale); softplus(a = beta, b = threshold);
// logsigmoid; hardswish; hardsigmoid; mish; (backward only) hardtanh(a = min, b = max).
template <int kOp, class T>
TT_SIMD_CLONES void forward_loop(const T* __restrict x, T* __restrict y, T a, T b, T c, int64_t n0, int64_t n1) {
  for (int64_t i = n0; i < n1; ++i) {
    const T v = x[i];
    if constexpr (kOp == kLeakyRelu) y[i] = v > T(0) ? v : v * a;
    if constexpr (kOp == kElu) y[i] = v > T(0) ? v * b : std::expm1(v * c) * a * b;
    if constexpr (kOp == kSoftplus) y[i] = v * a > b ? v : std::log1p(std::exp(v * a)) / a;
    if constexpr (kOp == kLogSigmoid) y[i] = std::min(v, T(0)) - std::log1p(std::exp(-std::abs(v)));
    if constexpr (kOp == kHardswish) y[i] = v * std::min(std::max(v + T(3), T(0)), T(6)) / T(6);
    if constexpr (kOp == kHardsigmoid) y[i] = std::min(std::max(v + T(3), T(0)), T(6)) / T(6);
    if constexpr (kOp == kMish) y[i] = v * std::tanh(softplus1(v));
  }
}

template <int kOp, class T>
TT_SIMD_CLONES void backward_loop(const T* __restrict g, const T* __restrict x, T* __restrict out, T a, T b, T c,
                                  int64_t n0, int64_t n1) {
  for (int64_t i = n0; i < n1; ++i) {
    const T v = x[i], gi = g[i];
    if constexpr (kOp == kLeakyRelu) out[i] = v > T(0) ? gi : gi * a;
    if constexpr (kOp == kElu) out[i] = v > T(0) ? gi * b : gi * a * b * c * std::exp(v * c);
    if constexpr (kOp == kSoftplus) {
      const T z = std::exp(v * a);
      out[i] = v * a > b ? gi : gi * z / (z + T(1));
    }
    if constexpr (kOp == kLogSigmoid) {  // g * sigmoid(-v), from whichever side keeps exp in range
      const T e = std::exp(-std::abs(v));
      out[i] = gi * (v < T(0) ? T(1) / (T(1) + e) : e / (T(1) + e));
    }
    if constexpr (kOp == kHardswish) {
      out[i] = v <= T(-3) ? T(0) : v < T(3) ? gi * (v / T(3) + T(0.5)) : gi;  // PyTorch 2.x's ends
    }
    if constexpr (kOp == kHardsigmoid) out[i] = v > T(-3) && v < T(3) ? gi / T(6) : T(0);
    if constexpr (kOp == kMish) {
      const T t = std::tanh(softplus1(v)), s = T(1) / (T(1) + std::exp(-v));
      out[i] = gi * (t + v * s * (T(1) - t * t));
    }
    if constexpr (kOp == kHardtanh) out[i] = v > a && v < b ? gi : T(0);  // none at the bounds, as ATen's
  }
}

// The elementwise loss of input x against target t: binary cross entropy of logits, smooth L1 (a = beta),
// Huber (a = delta).
template <int kOp, class T>
TT_SIMD_CLONES void loss_loop(const T* __restrict x, const T* __restrict t, T* __restrict y, T a, int64_t n0,
                              int64_t n1) {
  for (int64_t i = n0; i < n1; ++i) {
    const T v = x[i], u = t[i];
    if constexpr (kOp == kBceWithLogits) y[i] = (T(1) - u) * v + std::max(-v, T(0)) + std::log1p(std::exp(-std::abs(v)));
    if constexpr (kOp == kSmoothL1) {
      const T d = std::abs(v - u);
      y[i] = d < a ? T(0.5) * d * d / a : d - T(0.5) * a;
    }
    if constexpr (kOp == kHuber) {
      const T d = std::abs(v - u);
      y[i] = d < a ? T(0.5) * d * d : a * (d - T(0.5) * a);
    }
  }
}

// Its gradient with respect to x, times scale (the incoming gradient over the count for a mean).
template <int kOp, class T>
TT_SIMD_CLONES void loss_backward_loop(const T* __restrict x, const T* __restrict t, T* __restrict out, T a, T scale,
                                       int64_t n0, int64_t n1) {
  for (int64_t i = n0; i < n1; ++i) {
    const T v = x[i], u = t[i];
    if constexpr (kOp == kBceWithLogits) out[i] = (T(1) / (T(1) + std::exp(-v)) - u) * scale;
    if constexpr (kOp == kSmoothL1) {
      const T d = v - u;
      out[i] = (d <= -a ? T(-1) : d >= a ? T(1) : d / a) * scale;
    }
    if constexpr (kOp == kHuber) out[i] = std::min(std::max(v - u, -a), a) * scale;
  }
}

template <class T>
using ForwardFn = void (*)(const T*, T*, T, T, T, int64_t, int64_t);
template <class T>
using BackwardFn = void (*)(const T*, const T*, T*, T, T, T, int64_t, int64_t);
template <class T>
using LossFn = void (*)(const T*, const T*, T*, T, int64_t, int64_t);

template <class T>
ForwardFn<T> forward_fn(int op) {
  static constexpr ForwardFn<T> fns[] = {forward_loop<kLeakyRelu, T>, forward_loop<kElu, T>, forward_loop<kSoftplus, T>,
                                         forward_loop<kLogSigmoid, T>, forward_loop<kHardswish, T>,
                                         forward_loop<kHardsigmoid, T>, forward_loop<kMish, T>};
  return fns[op];
}

template <class T>
BackwardFn<T> backward_fn(int op) {
  static constexpr BackwardFn<T> fns[] = {backward_loop<kLeakyRelu, T>, backward_loop<kElu, T>,
                                          backward_loop<kSoftplus, T>, backward_loop<kLogSigmoid, T>,
                                          backward_loop<kHardswish, T>, backward_loop<kHardsigmoid, T>,
                                          backward_loop<kMish, T>, backward_loop<kHardtanh, T>};
  return fns[op];
}

template <class T>
using LossBackwardFn = void (*)(const T*, const T*, T*, T, T, int64_t, int64_t);

template <class T>
LossFn<T> loss_fn(int op) {
  static constexpr LossFn<T> fns[] = {loss_loop<kBceWithLogits, T>, loss_loop<kSmoothL1, T>, loss_loop<kHuber, T>};
  return fns[op];
}

template <class T>
LossBackwardFn<T> loss_backward_fn(int op) {
  static constexpr LossBackwardFn<T> fns[] = {loss_backward_loop<kBceWithLogits, T>, loss_backward_loop<kSmoothL1, T>,
                                              loss_backward_loop<kHuber, T>};
  return fns[op];
}

void check_op(int op, int last, const char* what) {
  if (op < 0 || op > last) throw py::value_error(std::string(what) + ": unknown op " + std::to_string(op));
}

}  // namespace

void init_activation(py::module_& m) {
  m.def("activation", [](int op, const py::array& x, py::array out, double a, double b, double c) {
    check_op(op, kMish, "activation");
    const Kind kind = kind_of(x, "activation");
    check({{&x, false}, {&out, true}}, kind, "activation");
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const ForwardFn<T> fn = forward_fn<T>(op);
      const T* xp = data_of<T>(x);
      T* o = data_of<T>(out);
      py::gil_scoped_release nogil;
      parallel_for(x.size(), kElementGrain, [&](int64_t n0, int64_t n1) { fn(xp, o, T(a), T(b), T(c), n0, n1); });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("op"), py::arg("x"), py::arg("out"), py::arg("a") = 0.0, py::arg("b") = 0.0, py::arg("c") = 0.0,
     "out = f(x): 0 leaky_relu(a slope), 1 elu(a alpha, b scale, c input scale), 2 softplus(a beta, b threshold), "
     "3 logsigmoid, 4 hardswish, 5 hardsigmoid, 6 mish.");
  m.def("activation_backward", [](int op, const py::array& grad, const py::array& x, py::array out, double a,
                                  double b, double c) {
    check_op(op, kHardtanh, "activation_backward");
    const Kind kind = kind_of(x, "activation_backward");
    check({{&grad, false}, {&x, false}, {&out, true}}, kind, "activation_backward");
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const BackwardFn<T> fn = backward_fn<T>(op);
      const T *g = data_of<T>(grad), *xp = data_of<T>(x);
      T* o = data_of<T>(out);
      py::gil_scoped_release nogil;
      parallel_for(x.size(), kElementGrain, [&](int64_t n0, int64_t n1) { fn(g, xp, o, T(a), T(b), T(c), n0, n1); });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("op"), py::arg("grad"), py::arg("x"), py::arg("out"), py::arg("a") = 0.0, py::arg("b") = 0.0,
     py::arg("c") = 0.0, "out = the input gradient of activation op at x (its parameters as for activation; 7 "
     "hardtanh(a min, b max), whose forward is clamp).");
  m.def("pointwise_loss", [](int op, const py::array& x, const py::array& t, py::array out, double a) {
    check_op(op, kHuber, "pointwise_loss");
    const Kind kind = kind_of(x, "pointwise_loss");
    check({{&x, false}, {&t, false}, {&out, true}}, kind, "pointwise_loss");
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const LossFn<T> fn = loss_fn<T>(op);
      const T *xp = data_of<T>(x), *tp = data_of<T>(t);
      T* o = data_of<T>(out);
      py::gil_scoped_release nogil;
      parallel_for(x.size(), kElementGrain, [&](int64_t n0, int64_t n1) { fn(xp, tp, o, T(a), n0, n1); });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("op"), py::arg("x"), py::arg("t"), py::arg("out"), py::arg("a") = 0.0,
     "out = the elementwise loss of x against t: 0 binary cross entropy of logits, 1 smooth L1 (a beta), "
     "2 Huber (a delta).");
  m.def("pointwise_loss_backward", [](int op, const py::array& x, const py::array& t, py::array out, double a,
                                      double scale) {
    check_op(op, kHuber, "pointwise_loss_backward");
    const Kind kind = kind_of(x, "pointwise_loss_backward");
    check({{&x, false}, {&t, false}, {&out, true}}, kind, "pointwise_loss_backward");
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const LossBackwardFn<T> fn = loss_backward_fn<T>(op);
      const T *xp = data_of<T>(x), *tp = data_of<T>(t);
      T* o = data_of<T>(out);
      py::gil_scoped_release nogil;
      parallel_for(x.size(), kElementGrain, [&](int64_t n0, int64_t n1) { fn(xp, tp, o, T(a), T(scale), n0, n1); });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("op"), py::arg("x"), py::arg("t"), py::arg("out"), py::arg("a"), py::arg("scale"),
     "out = scale times the gradient of pointwise_loss op with respect to x.");
}

}  // namespace tinytorch::cpu
