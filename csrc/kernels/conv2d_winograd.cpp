// Winograd F(2x2, 3x3) (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015) for
// stride-1, undilated 3x3 float32 convolutions on AVX-512 CPUs: each 2x2 output tile of each channel pair
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
constexpr int kSlots = 3;                   // vector groups per work item (the product tile's width)
constexpr int kItem = kLanes * kSlots;      // tiles per work item
constexpr int kOut = 8;                     // output channels per product tile

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

// Lanes k with 0 <= col + k < limit.
inline __mmask16 cols_below(int64_t col, int64_t limit) {
  const int64_t n = std::max<int64_t>(0, std::min<int64_t>(16, limit - col));
  return __mmask16((1u << n) - 1u);
}

// V = B^T d B for 16 adjacent tiles of one channel: tile l reads padded rows y0 .. y0+3 and columns
// col0 + 2l .. col0 + 2l + 3 (zero outside the plane). Writes v[xi * stride] for the 16 points.
TT_AVX512 void input_transform(const float* plane, int64_t Hp, int64_t Wp, int64_t y0, int64_t col0, float* v,
                               int64_t stride) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __mmask16 m0 = cols_below(col0, Wp), m1 = cols_below(col0 + 16, Wp), m2 = cols_below(col0 + 2, Wp),
                  m3 = cols_below(col0 + 18, Wp);
  __m512 d[4][4];
  for (int i = 0; i < 4; ++i) {
    if (y0 + i >= Hp) {
      for (int j = 0; j < 4; ++j) d[i][j] = _mm512_setzero_ps();
      continue;
    }
    const float* row = plane + (y0 + i) * Wp + col0;
    const __m512 a = _mm512_maskz_loadu_ps(m0, row), b = _mm512_maskz_loadu_ps(m1, row + 16);
    const __m512 c = _mm512_maskz_loadu_ps(m2, row + 2), e = _mm512_maskz_loadu_ps(m3, row + 18);
    d[i][0] = _mm512_permutex2var_ps(a, even, b);
    d[i][1] = _mm512_permutex2var_ps(a, odd, b);
    d[i][2] = _mm512_permutex2var_ps(c, even, e);
    d[i][3] = _mm512_permutex2var_ps(c, odd, e);
  }
  __m512 t[4][4];  // B^T d
  for (int j = 0; j < 4; ++j) {
    t[0][j] = _mm512_sub_ps(d[0][j], d[2][j]);
    t[1][j] = _mm512_add_ps(d[1][j], d[2][j]);
    t[2][j] = _mm512_sub_ps(d[2][j], d[1][j]);
    t[3][j] = _mm512_sub_ps(d[1][j], d[3][j]);
  }
  for (int i = 0; i < 4; ++i) {
    _mm512_store_ps(v + (4 * i + 0) * stride, _mm512_sub_ps(t[i][0], t[i][2]));
    _mm512_store_ps(v + (4 * i + 1) * stride, _mm512_add_ps(t[i][1], t[i][2]));
    _mm512_store_ps(v + (4 * i + 2) * stride, _mm512_sub_ps(t[i][2], t[i][1]));
    _mm512_store_ps(v + (4 * i + 3) * stride, _mm512_sub_ps(t[i][1], t[i][3]));
  }
}

// m[o][0..48) = sum_c u[c][o] * v[c][0..48) for kOut output channels: the 8 x 48 tile stays in registers.
TT_AVX512 void product_tile(const float* u, const float* v, int64_t C, float* m, int64_t ldm) {
  __m512 acc[kOut][kSlots];
#pragma GCC unroll 8
  for (int r = 0; r < kOut; ++r)
#pragma GCC unroll 8
    for (int s = 0; s < kSlots; ++s) acc[r][s] = _mm512_setzero_ps();
  for (int64_t c = 0; c < C; ++c, u += kOut, v += kItem) {
    __m512 bv[kSlots];
#pragma GCC unroll 8
    for (int s = 0; s < kSlots; ++s) bv[s] = _mm512_load_ps(v + kLanes * s);
#pragma GCC unroll 8
    for (int r = 0; r < kOut; ++r) {
      const __m512 a = _mm512_set1_ps(u[r]);
#pragma GCC unroll 8
      for (int s = 0; s < kSlots; ++s) acc[r][s] = _mm512_fmadd_ps(a, bv[s], acc[r][s]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kOut; ++r)
#pragma GCC unroll 8
    for (int s = 0; s < kSlots; ++s) _mm512_store_ps(m + r * ldm + kLanes * s, acc[r][s]);
}

// Y = A^T M A (+ bias) for 16 adjacent tiles of one output channel: m[xi * stride] holds the 16 points;
// writes output rows y0, y0+1 and columns col0 .. col0+31, within the (oh, ow) plane.
TT_AVX512 void output_transform(const float* m, int64_t stride, float bias, float* plane, int64_t oh, int64_t ow,
                                int64_t y0, int64_t col0) {
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  __m512 r[2][4];  // A^T M
  for (int j = 0; j < 4; ++j) {
    const __m512 m0 = _mm512_load_ps(m + j * stride), m1 = _mm512_load_ps(m + (4 + j) * stride);
    const __m512 m2 = _mm512_load_ps(m + (8 + j) * stride), m3 = _mm512_load_ps(m + (12 + j) * stride);
    r[0][j] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
    r[1][j] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
  }
  const __m512 b = _mm512_set1_ps(bias);
  const __mmask16 mlo = cols_below(col0, ow), mhi = cols_below(col0 + 16, ow);
  for (int i = 0; i < 2 && y0 + i < oh; ++i) {
    const __m512 y0v = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(r[i][0], r[i][1]), r[i][2]), b);
    const __m512 y1v = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(r[i][1], r[i][2]), r[i][3]), b);
    float* row = plane + (y0 + i) * ow + col0;
    _mm512_mask_storeu_ps(row, mlo, _mm512_permutex2var_ps(y0v, lo, y1v));
    _mm512_mask_storeu_ps(row + 16, mhi, _mm512_permutex2var_ps(y0v, hi, y1v));
  }
}

// In-place transpose of a 16x16 block held as 16 rows: r[i] lane j <- r[j] lane i.
TT_AVX512 void transpose16(__m512* r) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit blocks: rows i, 4+i, 8+i, 12+i
    t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
    t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xDD);
    t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
    t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xDD);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
    r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);
    r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xDD);
  }
}

// Z = A dY A^T for 16 adjacent tiles and 16 output channels o0 .. o0+15 (channels past O read as zero),
// written with the channels along the lanes: z[xi * ldxi + tile * ldt + 0..16). Also adds the gradient's
// sum per channel to bsum (the bias gradient).
TT_AVX512 void grad_transform(const float* grad, int64_t O, int64_t oh, int64_t ow, int64_t o0, int64_t y0,
                              int64_t col0, float* z, int64_t ldxi, int64_t ldt, __m512* bsum) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __mmask16 m0 = cols_below(col0, ow), m1 = cols_below(col0 + 16, ow);
  __m512 d[4][16];  // dY[a][b] of the 16 tiles, one row per channel, then transposed: one row per tile
  for (int k = 0; k < 16; ++k) {
    const int64_t o = o0 + k;
    for (int a = 0; a < 2; ++a) {
      if (o >= O || y0 + a >= oh) {
        d[2 * a][k] = d[2 * a + 1][k] = _mm512_setzero_ps();
        continue;
      }
      const float* row = grad + (o * oh + y0 + a) * ow + col0;
      const __m512 lo = _mm512_maskz_loadu_ps(m0, row), hi = _mm512_maskz_loadu_ps(m1, row + 16);
      d[2 * a][k] = _mm512_permutex2var_ps(lo, even, hi);
      d[2 * a + 1][k] = _mm512_permutex2var_ps(lo, odd, hi);
    }
  }
  for (int q = 0; q < 4; ++q) transpose16(d[q]);
  for (int t = 0; t < 16; ++t) {
    const __m512 y00 = d[0][t], y01 = d[1][t], y10 = d[2][t], y11 = d[3][t];
    *bsum = _mm512_add_ps(*bsum, _mm512_add_ps(_mm512_add_ps(y00, y01), _mm512_add_ps(y10, y11)));
    // R = A dY (4 x 2), then Z = R A^T (4 x 4).
    const __m512 r[4][2] = {{y00, y01},
                            {_mm512_add_ps(y00, y10), _mm512_add_ps(y01, y11)},
                            {_mm512_sub_ps(y00, y10), _mm512_sub_ps(y01, y11)},
                            {_mm512_sub_ps(_mm512_setzero_ps(), y10), _mm512_sub_ps(_mm512_setzero_ps(), y11)}};
    float* zt = z + t * ldt;
    for (int i = 0; i < 4; ++i) {
      _mm512_store_ps(zt + (4 * i + 0) * ldxi, r[i][0]);
      _mm512_store_ps(zt + (4 * i + 1) * ldxi, _mm512_add_ps(r[i][0], r[i][1]));
      _mm512_store_ps(zt + (4 * i + 2) * ldxi, _mm512_sub_ps(r[i][0], r[i][1]));
      _mm512_store_ps(zt + (4 * i + 3) * ldxi, _mm512_sub_ps(_mm512_setzero_ps(), r[i][1]));
    }
  }
}

constexpr int kSRows = 6;  // input channels per S tile
constexpr int kSVecs = 4;  // 16-channel vectors of output channels per S tile

// s[c][o] += sum over tiles t of v[c][t] * z[t][o] for kSRows channels c and kSVecs*16 output channels o.
TT_AVX512 void s_tile(const float* v, int64_t ldv, const float* z, int64_t ldz, int tiles, float* s, int64_t lds) {
  __m512 acc[kSRows][kSVecs];
#pragma GCC unroll 8
  for (int r = 0; r < kSRows; ++r)
#pragma GCC unroll 8
    for (int k = 0; k < kSVecs; ++k) acc[r][k] = _mm512_load_ps(s + r * lds + 16 * k);
  for (int t = 0; t < tiles; ++t, z += ldz) {
    __m512 zv[kSVecs];
#pragma GCC unroll 8
    for (int k = 0; k < kSVecs; ++k) zv[k] = _mm512_load_ps(z + 16 * k);
#pragma GCC unroll 8
    for (int r = 0; r < kSRows; ++r) {
      const __m512 a = _mm512_set1_ps(v[r * ldv + t]);
#pragma GCC unroll 8
      for (int k = 0; k < kSVecs; ++k) acc[r][k] = _mm512_fmadd_ps(a, zv[k], acc[r][k]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kSRows; ++r)
#pragma GCC unroll 8
    for (int k = 0; k < kSVecs; ++k) _mm512_store_ps(s + r * lds + 16 * k, acc[r][k]);
}

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
  if (!avx512_supported()) throw std::runtime_error("conv2d_winograd: this CPU has no AVX-512");
#if defined(__x86_64__) && defined(__GNUC__)
  const float* xd = data_of<float>(x);
  const float* wd = data_of<float>(w);
  float* y = data_of<float>(out);
  py::gil_scoped_release nogil;
  const int64_t oh = Hp - 2, ow = Wp - 2;
  const TileGrid grid(N, oh, ow);
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
  parallel_for(grid.items, threads, 1, [&](int64_t begin, int64_t end) {
    std::vector<Line> vbuf(16 * C * kSlots), mbuf(Opad * 16 * kSlots);
    float* v = vbuf.data()->f;  // [xi][c][kItem]
    float* m = mbuf.data()->f;  // [o][xi][kItem]
    for (int64_t item = begin; item < end; ++item) {
      int64_t gn[kSlots], gy[kSlots], gx[kSlots];
      const int slots = grid.decode(item, gn, gy, gx);
      for (int64_t c = 0; c < C; ++c) {
        for (int s = 0; s < kSlots; ++s) {
          float* dst = v + c * kItem + s * kLanes;
          if (s >= slots) {  // past the last tile: zeros, so the products stay finite
            for (int xi = 0; xi < 16; ++xi) std::fill(dst + xi * C * kItem, dst + xi * C * kItem + kLanes, 0.f);
            continue;
          }
          input_transform(xd + (gn[s] * C + c) * Hp * Wp, Hp, Wp, 2 * gy[s], 2 * gx[s], dst, C * kItem);
        }
      }
      for (int xi = 0; xi < 16; ++xi)
        for (int64_t t = 0; t < otiles; ++t)
          product_tile(up.data() + (xi * otiles + t) * C * kOut, v + xi * C * kItem, C, m + (t * kOut * 16 + xi) * kItem,
                       16 * kItem);
      for (int64_t o = 0; o < O; ++o)
        for (int s = 0; s < slots; ++s)
          output_transform(m + o * 16 * kItem + s * kLanes, kItem, bp ? bp[o] : 0.f, y + (gn[s] * O + o) * oh * ow,
                           oh, ow, 2 * gy[s], 2 * gx[s]);
    }
  });
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
  if (!avx512_supported()) throw std::runtime_error("conv2d_winograd_weight_grad: this CPU has no AVX-512");
#if defined(__x86_64__) && defined(__GNUC__)
  const float* xd = data_of<float>(x);
  const float* gd = data_of<float>(grad);
  float* out = data_of<float>(gw);
  py::gil_scoped_release nogil;
  const int64_t oh = Hp - 2, ow = Wp - 2;
  const TileGrid grid(N, oh, ow);
  const int64_t Cpad = (C + kSRows - 1) / kSRows * kSRows, Opad = (O + 16 * kSVecs - 1) / (16 * kSVecs) * (16 * kSVecs);
  const int64_t nthreads = chunk_count(grid.items, threads, 1);
  std::vector<std::vector<Line>> sums(nthreads);  // per thread: S [xi][Cpad][Opad], then the bias sums
  parallel_chunks(grid.items, threads, 1, [&](int64_t chunk, int64_t begin, int64_t end) {
    std::vector<Line>& S = sums[chunk];
    S.assign(16 * Cpad * Opad / 16 + Opad / 16, Line{});
    float* s = S.data()->f;
    __m512* bsum = reinterpret_cast<__m512*>(S.data() + 16 * Cpad * Opad / 16);
    std::vector<Line> vbuf(16 * Cpad * kSlots, Line{}), zbuf(16 * kItem * Opad / 16);
    float* v = vbuf.data()->f;  // [xi][c][kItem], rows past C stay zero
    float* z = zbuf.data()->f;  // [xi][tile][Opad]
    for (int64_t item = begin; item < end; ++item) {
      int64_t gn[kSlots], gy[kSlots], gx[kSlots];
      const int slots = grid.decode(item, gn, gy, gx);
      for (int sl = 0; sl < slots; ++sl) {
        for (int64_t c = 0; c < C; ++c)
          input_transform(xd + (gn[sl] * C + c) * Hp * Wp, Hp, Wp, 2 * gy[sl], 2 * gx[sl], v + c * kItem + sl * kLanes,
                          Cpad * kItem);
        for (int64_t o0 = 0; o0 < Opad; o0 += 16)
          grad_transform(gd + gn[sl] * O * oh * ow, O, oh, ow, o0, 2 * gy[sl], 2 * gx[sl], z + sl * kLanes * Opad + o0,
                         kItem * Opad, Opad, bsum + o0 / 16);
      }
      const int tiles = slots * kLanes;
      for (int xi = 0; xi < 16; ++xi)
        for (int64_t c0 = 0; c0 < Cpad; c0 += kSRows)
          for (int64_t o0 = 0; o0 < Opad; o0 += 16 * kSVecs)
            s_tile(v + (xi * Cpad + c0) * kItem, kItem, z + xi * kItem * Opad + o0, Opad, tiles,
                   s + (xi * Cpad + c0) * Opad + o0, Opad);
    }
  });
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
