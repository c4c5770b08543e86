// Running sums along one dimension, forward and reversed (the reversed one is cumsum's backward), on the intra-op
// pool. The tensor comes as (outer, length, inner): rows of independent scans, split over the threads. Sums are
// kept in double, as ATen's CPU cumsum does for float32 (NumPy's accumulate keeps float32, whose error grows with
// the length); NumPy's accumulate along the last axis also runs one element at a time through its generic loop.
#include <memory>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

constexpr int64_t kInnerBlock = 256;  // inner columns scanned together (their sums stay in L1)
constexpr int64_t kRowsTogether = 8;  // scans along the last dimension interleaved: 8 independent chains of adds

// Scans of rows [r0, r0 + n) of an (rows, length) array, n <= kRowsTogether, advanced together: one row's running
// sum is a chain of dependent adds, as slow as the add's latency; several rows fill the pipeline.
template <class T>
void scan_rows(const T* x, T* out, int64_t n, int64_t length, bool reverse) {
  double acc[kRowsTogether] = {};
  for (int64_t s = 0; s < length; ++s) {
    const int64_t l = reverse ? length - 1 - s : s;
    for (int64_t r = 0; r < n; ++r) {
      acc[r] += double(x[r * length + l]);
      out[r * length + l] = T(acc[r]);
    }
  }
}

template <class T>
void cumsum(const T* x, T* out, int64_t outer, int64_t length, int64_t inner, bool reverse) {
  if (inner == 1) {
    const int64_t groups = (outer + kRowsTogether - 1) / kRowsTogether;
    parallel_for(groups, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, kRowsTogether * length)),
                 [&](int64_t begin, int64_t end) {
      for (int64_t g = begin; g < end; ++g) {
        const int64_t r0 = g * kRowsTogether, n = std::min(kRowsTogether, outer - r0);
        scan_rows(x + r0 * length, out + r0 * length, n, length, reverse);
      }
    });
    return;
  }
  const int64_t blocks = (inner + kInnerBlock - 1) / kInnerBlock;
  const int64_t per_item = length * std::min(inner, kInnerBlock);
  parallel_for(outer * blocks, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, per_item)),
               [&](int64_t begin, int64_t end) {
    double acc[kInnerBlock];
    for (int64_t w = begin; w < end; ++w) {
      const int64_t a = w / blocks, c0 = (w % blocks) * kInnerBlock, width = std::min(kInnerBlock, inner - c0);
      const T* xa = x + a * length * inner + c0;
      T* oa = out + a * length * inner + c0;
      for (int64_t c = 0; c < width; ++c) acc[c] = 0.0;
      for (int64_t s = 0; s < length; ++s) {
        const int64_t l = reverse ? length - 1 - s : s;
        const T* xr = xa + l * inner;
        T* orow = oa + l * inner;
        for (int64_t c = 0; c < width; ++c) {
          acc[c] += double(xr[c]);
          orow[c] = T(acc[c]);
        }
      }
    }
  });
}

}  // namespace

void init_cumsum(py::module_& m) {
  m.def("cumsum", [](const py::array& x, py::array out, int64_t outer, int64_t length, int64_t inner, bool reverse) {
    const Kind kind = kind_of(x, "cumsum");
    if (outer < 0 || length < 0 || inner < 0 || outer * length * inner != int64_t(x.size())) {
      throw py::value_error("cumsum: (outer, length, inner) = (" + std::to_string(outer) + ", " +
                            std::to_string(length) + ", " + std::to_string(inner) + ") does not match " +
                            std::to_string(x.size()) + " elements");
    }
    check({{&x, false}, {&out, true}}, kind, "cumsum");
    if (kind == Kind::f32) {
      const float* xp = data_of<float>(x);
      float* op = data_of<float>(out);
      py::gil_scoped_release nogil;
      cumsum(xp, op, outer, length, inner, reverse);
    } else {
      const double* xp = data_of<double>(x);
      double* op = data_of<double>(out);
      py::gil_scoped_release nogil;
      cumsum(xp, op, outer, length, inner, reverse);
    }
  }, py::arg("x"), py::arg("out"), py::arg("outer"), py::arg("length"), py::arg("inner"), py::arg("reverse") = false,
     "out = running sums of x viewed as (outer, length, inner) along length (from its end when reverse); "
     "C-contiguous float32/float64 arrays, sums kept in double.");
}

}  // namespace tinytorch::cpu
