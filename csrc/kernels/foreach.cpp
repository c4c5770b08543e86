// torch._foreach_norm and torch._foreach_mul_ over lists of arrays (clip_grad_norm_'s two passes over every
// gradient): one call and one parallel region for the whole list instead of one NumPy call per tensor.
#include <cmath>

#include "kernels/cpu_kernels.h"
#include "kernels/multi_tensor.h"

namespace tinytorch::cpu {

namespace {

template <class T>
TT_SIMD_CLONES void scale(T* x, int64_t lo, int64_t hi, T c) {
  for (int64_t i = lo; i < hi; ++i) x[i] *= c;
}

template <class T>
void norms(const py::sequence& arrays, py::array& out) {
  const Kind kind = sizeof(T) == 4 ? Kind::f32 : Kind::f64;
  const size_t n = arrays.size();
  check({{&out, true}}, kind, "foreach_norm", py::ssize_t(n));
  const TensorList<T> x(arrays, kind, n, false, {}, "foreach_norm", "tensors");
  std::vector<int64_t> sizes;
  for (const py::array& a : x.arrays) sizes.push_back(a.size());
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  // One partial sum per (chunk, tensor): a tensor split between two chunks is summed by both.
  std::vector<double> partial(chunk_count(total, 0, kElementGrain) * n, 0.0);
  T* o = data_of<T>(out);
  {
    py::gil_scoped_release nogil;
    for_each_tensor_chunk(sizes, 0, kElementGrain, [&](int64_t chunk, int64_t t, int64_t lo, int64_t hi) {
      // in double: a float32 gradient of a million elements keeps its digits
      partial[chunk * n + t] = sum_in_double<true>(x.data[t] + lo, hi - lo);
    });
  }
  for (size_t t = 0; t < n; ++t) {
    double s = 0;
    for (size_t c = 0; c < partial.size() / std::max<size_t>(n, 1); ++c) s += partial[c * n + t];
    o[t] = T(std::sqrt(s));
  }
}

template <class T>
void mul_(const py::sequence& arrays, double value) {
  const Kind kind = sizeof(T) == 4 ? Kind::f32 : Kind::f64;
  const TensorList<T> x(arrays, kind, arrays.size(), true, {}, "foreach_mul_", "tensors");
  std::vector<int64_t> sizes;
  for (const py::array& a : x.arrays) sizes.push_back(a.size());
  const T c = T(value);
  py::gil_scoped_release nogil;
  for_each_tensor_chunk(sizes, 0, kElementGrain, [&](int64_t, int64_t t, int64_t lo, int64_t hi) {
    scale(x.data[t], lo, hi, c);
  });
}

}  // namespace

void init_foreach(py::module_& m) {
  m.def("foreach_norm", [](const py::sequence& arrays, py::array out) {
    (kind_of(out, "foreach_norm") == Kind::f32 ? norms<float> : norms<double>)(arrays, out);
  }, py::arg("tensors"), py::arg("out"),
     "out[i] = the 2-norm of tensors[i] (arrays of out's dtype, summed in float64), over the pool.");
  m.def("foreach_mul_", [](const py::sequence& arrays, double value) {
    if (arrays.size() == 0) return;
    (kind_of(arrays[0].cast<py::array>(), "foreach_mul_") == Kind::f32 ? mul_<float> : mul_<double>)(arrays, value);
  }, py::arg("tensors"), py::arg("value"),
     "tensors[i] *= value in place, value rounded to the arrays' dtype first (arrays of one dtype), over the pool.");
}

}  // namespace tinytorch::cpu
