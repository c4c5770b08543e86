// The pointwise half of one LSTM step, forward and backward, for a batch of rows (the matrix products stay
// in BLAS). NumPy spends about a dozen calls per step on the gates, each a pass over a (B, H..4H) array
// with its own dispatch cost; at ResNet-free, RNN-sized shapes (B = 32, H = 256) those calls cost as much
// as the step's product. Gates are laid out [i | f | g | o], PyTorch's order.
#include <cmath>
#include <optional>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

// a (B, 4H): pre-activations in, activations out (sigmoid for i, f, o; tanh for g). c (B, H) the previous
// cell; writes cn = f*c + i*g, tc = tanh(cn), hn = o*tc.
template <class T>
TT_SIMD_CLONES void forward_rows(T* __restrict a, const T* __restrict c, T* __restrict cn, T* __restrict tc,
                                 T* __restrict hn, int64_t r0, int64_t r1, int64_t H) {
  for (int64_t r = r0; r < r1; ++r) {
    T* ar = a + r * 4 * H;
    for (int64_t k = 0; k < 4 * H; ++k) {
      const bool cell = k >= 2 * H && k < 3 * H;
      // sigmoid(v) = 0.5 * tanh(0.5 v) + 0.5: one vectorised tanh for all four gates
      const T v = std::tanh(cell ? ar[k] : T(0.5) * ar[k]);
      ar[k] = cell ? v : T(0.5) * v + T(0.5);
    }
    const T *i = ar, *f = ar + H, *g = ar + 2 * H, *o = ar + 3 * H, *cr = c + r * H;
    T *cnr = cn + r * H, *tcr = tc + r * H, *hnr = hn + r * H;
    for (int64_t k = 0; k < H; ++k) {
      const T cv = f[k] * cr[k] + i[k] * g[k];
      cnr[k] = cv;
      tcr[k] = std::tanh(cv);
      hnr[k] = o[k] * tcr[k];
    }
  }
}

// From dh (+ gy) and dc of this step: the gate gradients d (B, 4H) and the previous cell's gradient dc
// (in place). a holds the activations, cp the previous cell, tc tanh of this cell.
template <class T>
TT_SIMD_CLONES void backward_rows(const T* __restrict a, const T* __restrict cp, const T* __restrict tc,
                                  const T* __restrict dh, const T* __restrict gy, T* __restrict dc, T* __restrict d,
                                  int64_t r0, int64_t r1, int64_t H) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* ar = a + r * 4 * H;
    const T *i = ar, *f = ar + H, *g = ar + 2 * H, *o = ar + 3 * H;
    const T *cpr = cp + r * H, *tcr = tc + r * H, *dhr = dh + r * H, *gyr = gy ? gy + r * H : nullptr;
    T *dcr = dc + r * H, *dr = d + r * 4 * H;
    for (int64_t k = 0; k < H; ++k) {
      const T dht = gyr ? dhr[k] + gyr[k] : dhr[k];
      const T t = tcr[k];
      const T dct = dht * o[k] * (T(1) - t * t) + dcr[k];
      dr[k] = dct * g[k] * i[k] * (T(1) - i[k]);
      dr[H + k] = dct * cpr[k] * f[k] * (T(1) - f[k]);
      dr[2 * H + k] = dct * i[k] * (T(1) - g[k] * g[k]);
      dr[3 * H + k] = dht * t * o[k] * (T(1) - o[k]);
      dcr[k] = dct * f[k];
    }
  }
}

int64_t hidden_of(const py::array& a, const py::array& c, const char* what) {
  if (a.ndim() != 2 || c.ndim() != 2 || a.shape(0) != c.shape(0) || a.shape(1) != 4 * c.shape(1)) {
    throw py::value_error(std::string(what) + ": expected gates (B, 4H) and cell (B, H)");
  }
  return c.shape(1);
}

}  // namespace

void init_lstm_cell(py::module_& m) {
  m.def("lstm_cell", [](py::array a, const py::array& c, py::array cn, py::array tc, py::array hn, int threads) {
    const Kind kind = kind_of(a, "lstm_cell");
    check({{&a, true}}, kind, "lstm_cell");
    check({{&c, false}, {&cn, true}, {&tc, true}, {&hn, true}}, kind, "lstm_cell");
    const int64_t H = hidden_of(a, c, "lstm_cell"), B = a.shape(0);
    auto run = [&](auto zero) {
      using T = decltype(zero);
      T *ad = data_of<T>(a), *cnd = data_of<T>(cn), *tcd = data_of<T>(tc), *hnd = data_of<T>(hn);
      const T* cd = data_of<T>(c);
      py::gil_scoped_release nogil;
      parallel_for(B, threads, std::max<int64_t>(1, kElementGrain / (4 * H)), [=](int64_t r0, int64_t r1) {
        forward_rows(ad, cd, cnd, tcd, hnd, r0, r1, H);
      });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("gates"), py::arg("c"), py::arg("c_next"), py::arg("tanh_c_next"), py::arg("h_next"),
     py::arg("threads") = 0, "One LSTM step's pointwise math: gates activated in place, the next cell and h.");
  m.def("lstm_cell_backward", [](const py::array& a, const py::array& cp, const py::array& tc, const py::array& dh,
                                 const std::optional<py::array>& gy, py::array dc, py::array d, int threads) {
    const Kind kind = kind_of(a, "lstm_cell_backward");
    check({{&a, false}, {&d, true}}, kind, "lstm_cell_backward");
    check({{&cp, false}, {&tc, false}, {&dh, false}, {&dc, true}}, kind, "lstm_cell_backward");
    if (gy) check({{&*gy, false}}, kind, "lstm_cell_backward", dh.size());
    const int64_t H = hidden_of(a, cp, "lstm_cell_backward"), B = a.shape(0);
    if (dh.size() != B * H) throw py::value_error("lstm_cell_backward: expected dh and dc of (B, H)");
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T *ad = data_of<T>(a), *cpd = data_of<T>(cp), *tcd = data_of<T>(tc), *dhd = data_of<T>(dh),
              *gyd = gy ? data_of<T>(*gy) : nullptr;
      T *dcd = data_of<T>(dc), *dd = data_of<T>(d);
      py::gil_scoped_release nogil;
      parallel_for(B, threads, std::max<int64_t>(1, kElementGrain / (4 * H)), [=](int64_t r0, int64_t r1) {
        backward_rows(ad, cpd, tcd, dhd, gyd, dcd, dd, r0, r1, H);
      });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("gates"), py::arg("c_prev"), py::arg("tanh_c"), py::arg("dh"), py::arg("gy"), py::arg("dc"),
     py::arg("d_gates"), py::arg("threads") = 0,
     "One LSTM step's pointwise backward: the gate gradients, and dc replaced by the previous cell's gradient.");
}

}  // namespace tinytorch::cpu
