// Convolution as a sum over kernel taps, for float32 on CPUs with AVX-512: the forward (and, through it,
// the input gradient) and the weight gradient, with no column matrix.
//
// The input is addressed as src[n*sn + c*sc + toff[t] + p]: output position p = y*wrow + x (x < ow) of
// image n reads, for kernel tap t, the element toff[t] further on in channel c's flattened (padded) plane,
// or in one stride phase of it. So every (channel, tap) pair is one contiguous row, read in place with
// unaligned vector loads; the positions with x >= ow on the padded grid are computed and dropped. NumPy's
// route (im2col + OpenBLAS) writes the nine-times-larger column matrix and runs a GEMM with only 64 rows at
// ResNet's widths, about half of this core's FMA peak; here the tile of 8 output channels x 48 positions
// stays in registers for the whole contraction.
#include <optional>

#include "kernels/conv2d.h"

namespace tinytorch::cpu {

namespace {

// Register tile sizes (the argument checks use them on every platform; the kernels only on x86-64).
constexpr int kMR = 8;  // output channels per forward tile
constexpr int kNV = 3;  // 16-float vectors of positions per forward tile
constexpr int kNR = 16 * kNV;  // positions per forward tile
constexpr int kMO = 4;  // output channels per weight-gradient tile
constexpr int kMK = 6;  // (channel, tap) rows per weight-gradient tile

#if defined(__x86_64__) && defined(__GNUC__)

// One forward tile: out[o0 + m, positions p0 .. p0+kNR) for m < rows, contracting over every channel and
// tap. wp holds this tile's weights packed [c*T + t][kMR]; lm masks the loads past the end of the plane,
// sm the lanes to keep (x < ow), which are compress-stored at dst[v] (their place in the (oh, ow) plane).
// (Blocking the channels so that a block's rows stay in L1 across tiles measured slower: the partial sums'
// round trips cost more than the L2 reads they save.)
template <bool kMasked, int kT>
TT_AVX512 void forward_tile(const float* x, int64_t sc, int64_t C, const int64_t* toff, int T, const float* wp,
                            const float* bias, int rows, const __mmask16* lm, const __mmask16* sm,
                            const int64_t* dst, float* out, int64_t plane) {
  // With the tap count known at compile time (3x3 and 1x1 kernels) the offsets live in registers and the
  // tap loop unrolls: the contraction's integer work then no longer competes with the FMAs for ports.
  int64_t off[kT > 0 ? kT : 1];
  if constexpr (kT > 0) {
    T = kT;
    for (int t = 0; t < kT; ++t) off[t] = toff[t];
  }
  __m512 acc[kMR][kNV];
#pragma GCC unroll 8
  for (int m = 0; m < kMR; ++m) {
    const __m512 b = _mm512_set1_ps(bias != nullptr && m < rows ? bias[m] : 0.f);
#pragma GCC unroll 8
    for (int v = 0; v < kNV; ++v) acc[m][v] = b;
  }
  for (int64_t c = 0; c < C; ++c) {
    const float* xc = x + c * sc;
    const float* a = wp + c * T * kMR;
#pragma GCC unroll 9
    for (int t = 0; t < T; ++t, a += kMR) {
      const float* b = xc + (kT > 0 ? off[t] : toff[t]);
      __m512 bv[kNV];
      // Only the plane's last tile needs masked loads; elsewhere the mask registers stay out of the loop.
#pragma GCC unroll 8
      for (int v = 0; v < kNV; ++v)
        bv[v] = kMasked ? _mm512_maskz_loadu_ps(lm[v], b + 16 * v) : _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 8
      for (int m = 0; m < kMR; ++m) {
        const __m512 av = _mm512_set1_ps(a[m]);
#pragma GCC unroll 8
        for (int v = 0; v < kNV; ++v) acc[m][v] = _mm512_fmadd_ps(av, bv[v], acc[m][v]);
      }
    }
  }
  // Constant indices only (the loop runs to kMR and tests rows): an acc[m] with a run-time m would make GCC
  // keep the whole tile in memory and spill it on every step of the contraction.
#pragma GCC unroll 8
  for (int m = 0; m < kMR; ++m) {
    if (m < rows) {
#pragma GCC unroll 8
      for (int v = 0; v < kNV; ++v) _mm512_mask_compressstoreu_ps(out + m * plane + dst[v], sm[v], acc[m][v]);
    }
  }
}


constexpr int64_t kChunk = 2048;  // positions per pass: a tile's rows of g (32 KB) stay in L1 across tiles

// The 16 lane-sums of v[0..16) as one vector, in order: a transpose-and-add tree (unpack within 128-bit
// lanes, then across them), 15 shuffle pairs instead of 16 horizontal reductions.
TT_AVX512 __m512 sum16(const __m512* v) {
  __m512 s[8], t[4], u[2];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)  // lane-wise [a0+a2, b0+b2, a1+a3, b1+b3]
    s[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // lane-wise [v4i, v4i+1, v4i+2, v4i+3] partial sums
    const __m512d c = _mm512_castps_pd(s[2 * i]), d = _mm512_castps_pd(s[2 * i + 1]);
    t[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c, d)), _mm512_castpd_ps(_mm512_unpackhi_pd(c, d)));
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i)
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xDD));
}

// One weight-gradient tile: gw[o, k] += sum_p g[o, p] * s_k[p] for kMO rows of g and kMK source rows,
// over lv positions (a multiple of 16; the source rows are read only below l, the rest is masked).
TT_AVX512 void weight_grad_tile(const float* const* g, const float* const* s, int64_t l, int64_t lv,
                                float* out, int64_t ldo, int orows, int krows) {
  __m512 acc[kMO][kMK];
#pragma GCC unroll 8
  for (int i = 0; i < kMO; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < kMK; ++j) acc[i][j] = _mm512_setzero_ps();
  const int64_t full = l / 16 * 16;
  for (int64_t p = 0; p < lv; p += 16) {
    const __mmask16 mask = p < full ? __mmask16(0xffff) : __mmask16((1u << (l - p)) - 1u);
    __m512 sv[kMK];
#pragma GCC unroll 8
    for (int j = 0; j < kMK; ++j) sv[j] = _mm512_maskz_loadu_ps(mask, s[j] + p);
#pragma GCC unroll 8
    for (int i = 0; i < kMO; ++i) {
      const __m512 gv = _mm512_load_ps(g[i] + p);
#pragma GCC unroll 8
      for (int j = 0; j < kMK; ++j) acc[i][j] = _mm512_fmadd_ps(gv, sv[j], acc[i][j]);
    }
  }
  static_assert(kMO * kMK <= 32, "sum16 takes the tile in two groups of 16");
  __m512 flat[32];
#pragma GCC unroll 32
  for (int f = 0; f < 32; ++f) flat[f] = f < kMO * kMK ? acc[f / kMK][f % kMK] : _mm512_setzero_ps();
  alignas(64) float lanes[32];
  _mm512_store_ps(lanes, sum16(flat));
  _mm512_store_ps(lanes + 16, sum16(flat + 16));
  for (int i = 0; i < orows; ++i)
    for (int j = 0; j < krows; ++j) out[i * ldo + j] += lanes[i * kMK + j];
}

#endif

// C is the input channels a weight row sees (C/groups of the source's); output channel o reads the source's
// channels (o / (O/groups)) * C onwards.
struct Geometry {
  int64_t N, C, O, T, oh, ow, wrow, sn, sc, groups = 1;
  int64_t flat() const { return (oh - 1) * wrow + ow; }  // positions on the padded grid, x >= ow included
  int64_t group_offset(int64_t o) const { return (o / (O / groups)) * C * sc; }
};

// Groups must split the output channels into whole register tiles (rows), so that no tile spans two groups
// (one group may end in a partial tile).
void check_groups(const Geometry& g, int64_t rows, const char* what) {
  if (g.groups <= 0 || g.O % g.groups || (g.groups > 1 && (g.O / g.groups) % rows)) {
    throw py::value_error(std::string(what) + ": groups must divide the output channels into multiples of " +
                          std::to_string(rows));
  }
}

// Every read src[n*sn + c*sc + toff[t] + p] (p < flat) must fall inside src.
void check_bounds(const Geometry& g, const std::vector<int64_t>& toff, int64_t src_size, const char* what) {
  int64_t lo = 0, hi = 0;
  for (int64_t t : toff) {
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  }
  const int64_t last = (g.N - 1) * g.sn + (g.groups * g.C - 1) * g.sc + hi + g.flat() - 1;
  if (lo < 0 || g.sn < 0 || g.sc < 0 || last >= src_size || g.ow > g.wrow || g.oh <= 0 || g.ow <= 0) {
    throw py::value_error(std::string(what) + ": the taps read outside the source array (" + std::to_string(src_size) +
                          " elements, last read at " + std::to_string(last) + ")");
  }
}

// One correlation the forward computes: its weights (O, C, T), tap offsets and output (N, O, oh, ow).
struct Job {
  const float* w;
  std::vector<int64_t> offs;
  float* out;
  int64_t T;
  std::vector<float> packed;  // [o tile][c*T + t][kMR]
};

// For each job: out (N, O, oh, ow) = bias + sum over c, t of w[o, c, t] * src rows. Several jobs over the same
// source (the stride phases of a strided conv's input gradient) share each block of positions while its rows
// are in cache.
void forward_jobs(const py::array& src, int64_t sn, int64_t sc, const std::vector<py::array>& ws,
                  const std::vector<py::array>& toffs, const std::optional<py::array>& bias,
                  std::vector<py::array>& outs, int64_t wrow, int64_t groups, int threads) {
  constexpr const char* what = "conv2d_taps";
  check_f32(src, what, "src", false);
  if (ws.empty() || ws.size() != toffs.size() || ws.size() != outs.size()) {
    throw py::value_error("conv2d_taps: expected as many weights, offset arrays and outputs, at least one");
  }
  Geometry g{};
  std::vector<Job> jobs;
  for (size_t j = 0; j < ws.size(); ++j) {
    const py::array &w = ws[j], &out = outs[j];
    check_f32(w, what, "weight", false);
    check_f32(out, what, "out", true);
    if (w.ndim() != 3 || out.ndim() != 4 || out.shape(1) != w.shape(0)) {
      throw py::value_error("conv2d_taps: expected weight (O, C, T) and out (N, O, oh, ow) with the same O");
    }
    const Geometry gj{out.shape(0), w.shape(1), w.shape(0), w.shape(2), out.shape(2), out.shape(3), wrow, sn, sc,
                      groups};
    check_groups(gj, kMR, what);
    if (j > 0 && (gj.N != g.N || gj.C != g.C || gj.O != g.O || gj.oh != g.oh || gj.ow != g.ow)) {
      throw py::value_error("conv2d_taps: every output must have the same shape and every weight the same C");
    }
    g = gj;
    std::vector<int64_t> offs = offsets_of(toffs[j], gj.T, what);
    check_bounds(gj, offs, src.size(), what);
    jobs.push_back(Job{data_of<float>(w), std::move(offs), data_of<float>(outs[j]), gj.T, {}});
  }
  [[maybe_unused]] const float* bp = nullptr;
  if (bias) {
    check_f32(*bias, what, "bias", false);
    if (bias->size() != g.O) throw py::value_error("conv2d_taps: expected one bias per output channel");
    bp = data_of<float>(*bias);
  }
  if (!avx512_supported()) throw std::runtime_error("conv2d_taps: this CPU has no AVX-512");
#if defined(__x86_64__) && defined(__GNUC__)
  const float* x = data_of<float>(src);
  py::gil_scoped_release nogil;
  const int64_t tiles = (g.O + kMR - 1) / kMR;
  for (Job& job : jobs) {
    const int64_t CT = g.C * job.T;
    job.packed.assign(tiles * CT * kMR, 0.f);
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t k = 0; k < CT; ++k) job.packed[((o / kMR) * CT + k) * kMR + o % kMR] = job.w[o * CT + k];
  }
  const int64_t flat = g.flat(), blocks = (flat + kNR - 1) / kNR, plane = g.oh * g.ow;
  parallel_for(g.N * blocks, threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t n = item / blocks, p0 = (item % blocks) * kNR;
      __mmask16 lm[kNV], sm[kNV];
      int64_t dst[kNV];
#pragma GCC unroll 8
      for (int v = 0; v < kNV; ++v) {
        const int64_t p = p0 + 16 * v;
        dst[v] = (p / g.wrow) * g.ow + std::min(p % g.wrow, g.ow);
        unsigned l = 0, s = 0;
        for (int i = 0; i < 16; ++i) {
          if (p + i < flat) {
            l |= 1u << i;
            if ((p + i) % g.wrow < g.ow) s |= 1u << i;
          }
        }
        lm[v] = __mmask16(l);
        sm[v] = __mmask16(s);
      }
      const float* xn = x + n * g.sn + p0;
      const bool masked = p0 + kNR > flat;
      for (const Job& job : jobs) {
        auto tile = job.T == 9 ? (masked ? forward_tile<true, 9> : forward_tile<false, 9>)
                  : job.T == 1 ? (masked ? forward_tile<true, 1> : forward_tile<false, 1>)
                               : (masked ? forward_tile<true, 0> : forward_tile<false, 0>);
        const int64_t CT = g.C * job.T;
        for (int64_t t = 0; t < tiles; ++t) {
          const int rows = int(std::min<int64_t>(kMR, g.O - t * kMR));
          tile(xn + g.group_offset(t * kMR), g.sc, g.C, job.offs.data(), int(job.T), job.packed.data() + t * CT * kMR,
               bp ? bp + t * kMR : nullptr, rows, lm, sm, dst, job.out + (n * g.O + t * kMR) * plane, plane);
        }
      }
    }
  });
#endif
}

void forward(const py::array& src, int64_t sn, int64_t sc, const py::array& w, const py::array& toff,
             const std::optional<py::array>& bias, py::array& out, int64_t wrow, int64_t groups, int threads) {
  std::vector<py::array> outs{out};
  forward_jobs(src, sn, sc, {w}, {toff}, bias, outs, wrow, groups, threads);
}

// gw (O, C, T) = sum over n, p of grad[n, o, p] * src rows; gb (O,) = sum of grad over n, y, x.
void weight_grad(const py::array& src, int64_t sn, int64_t sc, const py::array& grad, const py::array& toff,
                 int64_t wrow, py::array& gw, std::optional<py::array> gb, int64_t groups, int threads) {
  constexpr const char* what = "conv2d_taps_weight_grad";
  check_f32(src, what, "src", false);
  check_f32(grad, what, "grad", false);
  check_f32(gw, what, "grad_weight", true);
  if (gw.ndim() != 3 || grad.ndim() != 4 || grad.shape(1) != gw.shape(0)) {
    throw py::value_error("conv2d_taps_weight_grad: expected grad (N, O, oh, ow) and grad_weight (O, C, T)");
  }
  Geometry g{grad.shape(0), gw.shape(1), gw.shape(0), gw.shape(2), grad.shape(2), grad.shape(3), wrow, sn, sc, groups};
  check_groups(g, kMO, what);
  const std::vector<int64_t> offs = offsets_of(toff, g.T, what);
  check_bounds(g, offs, src.size(), what);
  [[maybe_unused]] float* bout = nullptr;
  if (gb) {
    check_f32(*gb, what, "grad_bias", true);
    if (gb->size() != g.O) throw py::value_error("conv2d_taps_weight_grad: expected one grad_bias per output channel");
    bout = data_of<float>(*gb);
  }
  if (!avx512_supported()) throw std::runtime_error("conv2d_taps_weight_grad: this CPU has no AVX-512");
#if defined(__x86_64__) && defined(__GNUC__)
  const float* x = data_of<float>(src);
  const float* gr = data_of<float>(grad);
  float* out = data_of<float>(gw);
  py::gil_scoped_release nogil;
  const int64_t CT = g.C * g.T, flat = g.flat(), lv = (flat + 15) / 16 * 16, plane = g.oh * g.ow;
  std::vector<int64_t> koff(CT);  // where row k = c*T + t starts within one image
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t t = 0; t < g.T; ++t) koff[c * g.T + t] = c * g.sc + offs[t];
  std::fill(out, out + g.O * CT, 0.f);
  const int64_t otiles = (g.O + kMO - 1) / kMO;
  // Threads split the output channels, so each owns its rows of gw and nothing is reduced across threads.
  parallel_for(otiles, threads, 1, [&](int64_t begin, int64_t end) {
    const int64_t o0 = begin * kMO, o1 = std::min(g.O, end * kMO);
    // This thread's rows of one image's gradient on the padded grid (zero at x >= ow), 64-byte aligned.
    std::vector<float> buf((o1 - o0) * lv + 16);
    float* gp = buf.data() + (16 - (reinterpret_cast<uintptr_t>(buf.data()) / 4) % 16) % 16;
    std::vector<double> bsum(o1 - o0, 0.0);
    for (int64_t n = 0; n < g.N; ++n) {
      for (int64_t o = o0; o < o1; ++o) {
        float* row = gp + (o - o0) * lv;
        std::fill(row, row + lv, 0.f);
        const float* in = gr + (n * g.O + o) * plane;
        double s = 0.0;
        for (int64_t yy = 0; yy < g.oh; ++yy) {
          for (int64_t xx = 0; xx < g.ow; ++xx) {
            row[yy * g.wrow + xx] = in[yy * g.ow + xx];
            s += in[yy * g.ow + xx];
          }
        }
        bsum[o - o0] += s;
      }
      // Positions in chunks, so that a tile's rows of g are read from L1 by every source tile; the full
      // plane per tile would stream them from L2 once per source tile, and L2 bandwidth would be the limit.
      for (int64_t p0 = 0; p0 < lv; p0 += kChunk) {
        const int64_t len = std::min(kChunk, lv - p0);
        const float* xn = x + n * g.sn + p0;
        for (int64_t ot = o0; ot < o1; ot += kMO) {
          const int orows = int(std::min<int64_t>(kMO, o1 - ot));
          const float* gptr[kMO];
#pragma GCC unroll 8
          for (int i = 0; i < kMO; ++i) gptr[i] = gp + (ot - o0 + std::min(i, orows - 1)) * lv + p0;
          for (int64_t k0 = 0; k0 < CT; k0 += kMK) {
            const int krows = int(std::min<int64_t>(kMK, CT - k0));
            const float* sptr[kMK];
#pragma GCC unroll 8
            for (int j = 0; j < kMK; ++j) sptr[j] = xn + g.group_offset(ot) + koff[k0 + std::min(j, krows - 1)];
            weight_grad_tile(gptr, sptr, flat - p0, len, out + ot * CT + k0, CT, orows, krows);
          }
        }
      }
    }
    if (bout != nullptr)
      for (int64_t o = o0; o < o1; ++o) bout[o] = float(bsum[o - o0]);
  });
#endif
}

// The stride phases of a zero-padded image and back. Split: P[a, b, n, c, u, v] = x[n, c, a + s0*u - top,
// b + s1*v - left], zero outside x. Merge: x[n, c, y, v] = P[a, b, n, c, u, v] for the padded position
// (y + top, v + left) = (a + s0*u, b + s1*v). One pass over the image either way; NumPy's strided copies
// for the same move one element per iteration of a generic loop, several times slower.
template <class T>
void phases(const T* x, T* xout, const T* P, T* Pout, int64_t N, int64_t C, int64_t H, int64_t W, int64_t s0,
            int64_t s1, int64_t Hq, int64_t Wq, int64_t top, int64_t left, bool merge, int threads) {
  const int64_t planes = N * C, phase = planes * Hq * Wq;
  parallel_for(planes, threads, 16, [=](int64_t begin, int64_t end) {
    for (int64_t pl = begin; pl < end; ++pl) {
      const int64_t xo = pl * H * W, po = pl * Hq * Wq;
      for (int64_t a = 0; a < s0; ++a) {
        for (int64_t u = 0; u < Hq; ++u) {
          const int64_t y = a + s0 * u - top;
          const bool row_in = y >= 0 && y < H;
          for (int64_t b = 0; b < s1; ++b) {
            const int64_t at = (a * s1 + b) * phase + po + u * Wq;
            const int64_t x0 = b - left;  // input column of v = 0
            if (merge) {
              if (!row_in) continue;
              const T* prow = P + at;
              T* xrow = xout + xo + y * W;
              for (int64_t v = 0; v < Wq; ++v) {
                const int64_t xx = x0 + s1 * v;
                if (xx >= 0 && xx < W) xrow[xx] = prow[v];
              }
            } else if (!row_in) {
              std::fill(Pout + at, Pout + at + Wq, T(0));
            } else {
              T* prow = Pout + at;
              const T* xrow = x + xo + y * W;
              if (s1 == 1) {  // plain padding: zeros, a copy of the row, zeros
                const int64_t lo = std::min(Wq, std::max<int64_t>(0, -x0)), hi = std::max(lo, std::min(Wq, W - x0));
                std::fill(prow, prow + lo, T(0));
                std::copy(xrow + x0 + lo, xrow + x0 + hi, prow + lo);
                std::fill(prow + hi, prow + Wq, T(0));
                continue;
              }
              for (int64_t v = 0; v < Wq; ++v) {
                const int64_t xx = x0 + s1 * v;
                prow[v] = xx >= 0 && xx < W ? xrow[xx] : T(0);
              }
            }
          }
        }
      }
    }
  });
}

void stride_phases(py::array x, py::array P, int64_t top, int64_t left, bool merge, int threads) {
  constexpr const char* what = "conv2d_phases";
  const Kind kind = kind_of(x, what);
  check({{&x, merge}, {&P, !merge}}, kind, what, -1);
  if (x.ndim() != 4 || P.ndim() != 6 || P.shape(2) != x.shape(0) || P.shape(3) != x.shape(1)) {
    throw py::value_error("conv2d_phases: expected x (N, C, H, W) and phases (s0, s1, N, C, Hq, Wq)");
  }
  const int64_t N = x.shape(0), C = x.shape(1), H = x.shape(2), W = x.shape(3), s0 = P.shape(0), s1 = P.shape(1),
                Hq = P.shape(4), Wq = P.shape(5);
  if (top < 0 || left < 0 || s0 * Hq < H + top || s1 * Wq < W + left) {
    throw py::value_error("conv2d_phases: the phases do not cover the padded image");
  }
  // Only the written array is asked for a mutable pointer (a read-only input may be split).
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const py::array &xin = x, &pin = P;
    T* xout = merge ? data_of<T>(x) : nullptr;
    T* pout = merge ? nullptr : data_of<T>(P);
    const T *xr = data_of<T>(xin), *pr = data_of<T>(pin);
    py::gil_scoped_release nogil;
    phases(xr, xout, pr, pout, N, C, H, W, s0, s1, Hq, Wq, top, left, merge, threads);
  };
  kind == Kind::f32 ? run(0.f) : run(0.0);
}

}  // namespace

void init_conv2d(py::module_& m) {
  m.def("conv2d_phases", &stride_phases, py::arg("x"), py::arg("phases"), py::arg("top"), py::arg("left"),
        py::arg("merge"), py::arg("threads") = 0,
        "Split x, zero-padded at the top and left, into its stride phases (merge=False), or write the phases "
        "back into x (merge=True).");
  m.def("conv2d_supported", [] { return kConvBuilt && avx512_supported(); },
        "Whether conv2d_taps runs here (x86-64 with AVX-512).");
  m.def("conv2d_taps", &forward, py::arg("src"), py::arg("sn"), py::arg("sc"), py::arg("weight"), py::arg("toff"),
        py::arg("bias"), py::arg("out"), py::arg("wrow"), py::arg("groups") = 1, py::arg("threads") = 0,
        "out[n, o, y, x] = bias[o] + sum_{c,t} weight[o, c, t] * src[n*sn + c*sc + toff[t] + y*wrow + x].");
  m.def("conv2d_taps_many", [](const py::array& src, int64_t sn, int64_t sc, const std::vector<py::array>& weights,
                               const std::vector<py::array>& toffs, std::vector<py::array> outs, int64_t wrow,
                               int64_t groups, int threads) {
    forward_jobs(src, sn, sc, weights, toffs, std::nullopt, outs, wrow, groups, threads);
  }, py::arg("src"), py::arg("sn"), py::arg("sc"), py::arg("weights"), py::arg("toffs"), py::arg("outs"),
     py::arg("wrow"), py::arg("groups") = 1, py::arg("threads") = 0,
     "conv2d_taps for several weights over one source, sharing each block of positions (no bias).");
  m.def("conv2d_taps_weight_grad", &weight_grad, py::arg("src"), py::arg("sn"), py::arg("sc"), py::arg("grad"),
        py::arg("toff"), py::arg("wrow"), py::arg("grad_weight"), py::arg("grad_bias"), py::arg("groups") = 1,
        py::arg("threads") = 0,
        "grad_weight[o, c, t] = sum_{n,y,x} grad[n, o, y, x] * src[n*sn + c*sc + toff[t] + y*wrow + x].");
}

}  // namespace tinytorch::cpu
