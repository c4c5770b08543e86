// Winograd F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015) for
// stride-1, undilated 3x3 float32 convolutions on CPUs with AVX-512 or AVX2 (the kernels, conv2d_winograd.inc,
// compiled once for each against simd16.h): each 2x2 output tile of each channel pair
// costs 16 multiplications instead of 36. The input is cut into overlapping 4x4 tiles, each transformed to
// V = B^T d B; the kernels are transformed once to U = G g G^T; for each of the 16 transform points xi,
// M_xi = U_xi (O x C) @ V_xi (C x tiles) is a plain matrix product; and Y = A^T M A gives the 2x2 outputs.
//
// Everything for one work item of 48 tiles (three rows of 16 tiles, one per vector lane) stays in the
// core's L2: the transformed inputs (16 x C x 48), the products (O x 16 x 48), so nothing of the 2.25x
// larger transformed batch ever goes to memory. The stride-1 input gradient runs here too (it is this
// correlation with the flipped kernel). Rounding: F(2x2, 3x3)'s transforms only add, subtract and halve,
// so results stay within a few float32 ulps of the direct sum.
#include <memory>
#include <optional>
#include <vector>

#include "kernels/conv2d.h"

namespace tinytorch::cpu {

namespace {

#if defined(__x86_64__) && defined(__GNUC__)

constexpr int kLanes = 16;                  // tiles per vector: 16 horizontally adjacent tiles of one row
constexpr int kSlots = 3;                   // vector groups per work item
constexpr int kItem = kLanes * kSlots;      // tiles per work item
constexpr int kOut = 8;                     // output channels per packed weight tile

// 64 bytes, 64-byte aligned: what the buffers are made of, so that every row of 16 floats is aligned.
struct alignas(64) Line {
  float f[16];
};

// The 2x2 output tiles of N planes of oh x ow, in groups of up to 16 adjacent tiles of one tile row (one
// vector lane each), and work items of kSlots groups.
struct TileGrid {
  int64_t th, tw, per_row, groups, items;
  TileGrid(int64_t N, int64_t oh, int64_t ow)
      : th((oh + 1) / 2), tw((ow + 1) / 2), per_row((tw + kLanes - 1) / kLanes), groups(N * th * per_row),
        items((groups + kSlots - 1) / kSlots) {}
  // Image, tile row and first tile column of each group of `item`; returns how many groups it has.
  int decode(int64_t item, int64_t* n, int64_t* ty, int64_t* tx) const {
    int slots = 0;
    for (int s = 0; s < kSlots && item * kSlots + s < groups; ++s, ++slots) {
      const int64_t gid = item * kSlots + s;
      n[s] = gid / (th * per_row);
      ty[s] = (gid / per_row) % th;
      tx[s] = (gid % per_row) * kLanes;
    }
    return slots;
  }
};

// U = G g G^T of one 3x3 kernel g (row-major), as the 16 values u[4*i + j].
void weight_transform(const float* g, float* u) {
  float t[4][3];  // G g
  for (int j = 0; j < 3; ++j) {
    const float g0 = g[j], g1 = g[3 + j], g2 = g[6 + j];
    t[0][j] = g0;
    t[1][j] = 0.5f * (g0 + g1 + g2);
    t[2][j] = 0.5f * (g0 - g1 + g2);
    t[3][j] = g2;
  }
  for (int i = 0; i < 4; ++i) {
    const float a = t[i][0], b = t[i][1], c = t[i][2];
    u[4 * i + 0] = a;
    u[4 * i + 1] = 0.5f * (a + b + c);
    u[4 * i + 2] = 0.5f * (a - b + c);
    u[4 * i + 3] = c;
  }
}

namespace avx512 {
#pragma GCC push_options
#pragma GCC target("avx512f,fma")
#define TT_SIMD16 512
#include "kernels/simd16.h"
constexpr int kPR = 8, kPF = 48, kSRows = 6, kSCols = 64;  // 24 accumulators of AVX-512's 32 registers
#include "kernels/conv2d_winograd.inc"
#undef TT_SIMD16
#pragma GCC pop_options
}  // namespace avx512

namespace avx2 {
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define TT_SIMD16 256
#include "kernels/simd16.h"
constexpr int kPR = 4, kPF = 24, kSRows = 3, kSCols = 32;  // 12 accumulators of AVX2's 16 registers
#include "kernels/conv2d_winograd.inc"
#undef TT_SIMD16
#pragma GCC pop_options
}  // namespace avx2

#endif

// out (N, O, Hp-2, Wp-2) = bias + the 3x3 correlation of the padded input x (N, C, Hp, Wp) with w (O, C, 3, 3).
void winograd(const py::array& x, const py::array& w, const std::optional<py::array>& bias, py::array& out,
              int threads) {
  constexpr const char* what = "conv2d_winograd";
  check_f32(x, what, "input", false);
  check_f32(w, what, "weight", false);
  check_f32(out, what, "out", true);
  if (x.ndim() != 4 || w.ndim() != 4 || out.ndim() != 4 || w.shape(2) != 3 || w.shape(3) != 3 ||
      w.shape(1) != x.shape(1) || out.shape(0) != x.shape(0) || out.shape(1) != w.shape(0) ||
      out.shape(2) != x.shape(2) - 2 || out.shape(3) != x.shape(3) - 2 || x.shape(2) < 3 || x.shape(3) < 3) {
    throw py::value_error("conv2d_winograd: expected input (N, C, Hp, Wp), weight (O, C, 3, 3) and out "
                          "(N, O, Hp-2, Wp-2)");
  }
  [[maybe_unused]] const int64_t N = x.shape(0), C = x.shape(1), Hp = x.shape(2), Wp = x.shape(3);
  const int64_t O = w.shape(0);
  [[maybe_unused]] const float* bp = nullptr;
  if (bias) {
    check_f32(*bias, what, "bias", false);
    if (bias->size() != O) throw py::value_error("conv2d_winograd: expected one bias per output channel");
    bp = data_of<float>(*bias);
  }
  const Isa isa = conv_isa();
  if (isa == Isa::none) throw std::runtime_error("conv2d_winograd: this CPU has neither AVX-512 nor AVX2 with FMA");
#if defined(__x86_64__) && defined(__GNUC__)
  const float* xd = data_of<float>(x);
  const float* wd = data_of<float>(w);
  float* y = data_of<float>(out);
  py::gil_scoped_release nogil;
  const int64_t otiles = (O + kOut - 1) / kOut, Opad = otiles * kOut;
  // U packed [xi][o tile][c][kOut], zero past O.
  std::vector<float> up(16 * Opad * C, 0.f);
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t c = 0; c < C; ++c) {
      float u[16];
      weight_transform(wd + (o * C + c) * 9, u);
      for (int xi = 0; xi < 16; ++xi) up[((xi * otiles + o / kOut) * C + c) * kOut + o % kOut] = u[xi];
    }
  }
  isa == Isa::avx512 ? avx512::forward_run(xd, up.data(), bp, y, N, C, Hp, Wp, O, threads)
                     : avx2::forward_run(xd, up.data(), bp, y, N, C, Hp, Wp, O, threads);
#endif
}


// gw (O, C, 3, 3) = the weight gradient of the 3x3 stride-1 correlation of the padded input x (N, C, Hp, Wp)
// given grad (N, O, Hp-2, Wp-2), as G^T S G with S_xi = sum over tiles of V_xi (x) Z_xi, Z = A dY A^T;
// gb (O,) = the sum of grad over n, y, x.
void winograd_weight_grad(const py::array& x, const py::array& grad, py::array& gw, std::optional<py::array> gb,
                          int threads) {
  constexpr const char* what = "conv2d_winograd_weight_grad";
  check_f32(x, what, "input", false);
  check_f32(grad, what, "grad", false);
  check_f32(gw, what, "grad_weight", true);
  if (x.ndim() != 4 || grad.ndim() != 4 || gw.ndim() != 4 || gw.shape(2) != 3 || gw.shape(3) != 3 ||
      gw.shape(1) != x.shape(1) || grad.shape(0) != x.shape(0) || grad.shape(1) != gw.shape(0) ||
      grad.shape(2) != x.shape(2) - 2 || grad.shape(3) != x.shape(3) - 2 || x.shape(2) < 3 || x.shape(3) < 3) {
    throw py::value_error("conv2d_winograd_weight_grad: expected input (N, C, Hp, Wp), grad (N, O, Hp-2, Wp-2) "
                          "and grad_weight (O, C, 3, 3)");
  }
  [[maybe_unused]] const int64_t N = x.shape(0), C = x.shape(1), Hp = x.shape(2), Wp = x.shape(3);
  const int64_t O = gw.shape(0);
  [[maybe_unused]] float* bout = nullptr;
  if (gb) {
    check_f32(*gb, what, "grad_bias", true);
    if (gb->size() != O) throw py::value_error("conv2d_winograd_weight_grad: expected one grad_bias per output channel");
    bout = data_of<float>(*gb);
  }
  const Isa isa = conv_isa();
  if (isa == Isa::none) {
    throw std::runtime_error("conv2d_winograd_weight_grad: this CPU has neither AVX-512 nor AVX2 with FMA");
  }
#if defined(__x86_64__) && defined(__GNUC__)
  const float* xd = data_of<float>(x);
  const float* gd = data_of<float>(grad);
  float* out = data_of<float>(gw);
  py::gil_scoped_release nogil;
  // S tiles: kSRows channels x kSCols output channels, 6 x 64 with AVX-512 and 3 x 32 with AVX2.
  const int64_t srows = isa == Isa::avx512 ? avx512::kSRows : avx2::kSRows;
  const int64_t scols = isa == Isa::avx512 ? avx512::kSCols : avx2::kSCols;
  const int64_t Cpad = (C + srows - 1) / srows * srows, Opad = (O + scols - 1) / scols * scols;
  std::vector<std::vector<Line>> sums;  // per thread: S [xi][Cpad][Opad], then the bias sums
  isa == Isa::avx512 ? avx512::weight_grad_run(xd, gd, N, C, Hp, Wp, O, Cpad, Opad, sums, threads)
                     : avx2::weight_grad_run(xd, gd, N, C, Hp, Wp, O, Cpad, Opad, sums, threads);
  // Sum the threads' S, then gw[o, c] = G^T S[:, c, o] G.
  std::vector<float> total(16 * Cpad * Opad + Opad, 0.f);
  for (auto& part : sums) {
    if (part.empty()) continue;  // a thread that got no work
    const float* p = part.data()->f;
    for (size_t i = 0; i < total.size(); ++i) total[i] += p[i];
  }
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t c = 0; c < C; ++c) {
      float sv[4][4], t[3][4];
      for (int xi = 0; xi < 16; ++xi) sv[xi / 4][xi % 4] = total[(xi * Cpad + c) * Opad + o];
      for (int j = 0; j < 4; ++j) {  // G^T S: G^T rows [1, .5, .5, 0], [0, .5, -.5, 0], [0, .5, .5, 1]
        t[0][j] = sv[0][j] + 0.5f * (sv[1][j] + sv[2][j]);
        t[1][j] = 0.5f * (sv[1][j] - sv[2][j]);
        t[2][j] = 0.5f * (sv[1][j] + sv[2][j]) + sv[3][j];
      }
      float* g = out + (o * C + c) * 9;
      for (int i = 0; i < 3; ++i) {
        g[3 * i + 0] = t[i][0] + 0.5f * (t[i][1] + t[i][2]);
        g[3 * i + 1] = 0.5f * (t[i][1] - t[i][2]);
        g[3 * i + 2] = 0.5f * (t[i][1] + t[i][2]) + t[i][3];
      }
    }
  }
  if (bout != nullptr)
    for (int64_t o = 0; o < O; ++o) bout[o] = total[16 * Cpad * Opad + o];
#endif
}

}  // namespace

void init_conv2d_winograd(py::module_& m) {
  m.def("conv2d_winograd", &winograd, py::arg("input"), py::arg("weight"), py::arg("bias"), py::arg("out"),
        py::arg("threads") = 0,
        "out = bias + the 3x3 stride-1 correlation of the padded input with weight, by Winograd F(2x2, 3x3).");
  m.def("conv2d_winograd_weight_grad", &winograd_weight_grad, py::arg("input"), py::arg("grad"),
        py::arg("grad_weight"), py::arg("grad_bias"), py::arg("threads") = 0,
        "The weight (and bias) gradient of conv2d_winograd's correlation, by Winograd F(2x2, 3x3).");
}

}  // namespace tinytorch::cpu
