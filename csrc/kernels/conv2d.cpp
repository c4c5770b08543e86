// Convolution as a sum over kernel taps, for float32 on CPUs with AVX-512 or AVX2: the forward (and, through it,
// the input gradient) and the weight gradient, with no column matrix.
//
// The input is addressed as src[n*sn + c*sc + toff[t] + p]: output position p = y*wrow + x (x < ow) of
// image n reads, for kernel tap t, the element toff[t] further on in channel c's flattened (padded) plane,
// or in one stride phase of it. So every (channel, tap) pair is one contiguous row, read in place with
// unaligned vector loads; the positions with x >= ow on the padded grid are computed and dropped. NumPy's
// route (im2col + OpenBLAS) writes the nine-times-larger column matrix and runs a GEMM with only 64 rows at
// ResNet's widths, about half of this core's FMA peak; here a tile of output channels x positions (8 x 48 with
// AVX-512's 32 registers, 4 x 16 with AVX2's 16) stays in registers for the whole contraction.
//
// The kernels (conv2d_taps.inc) are compiled once per instruction set, against simd16.h's 16-float vector, and
// conv_isa() picks one at run time.
#include <atomic>
#include <cstdlib>
#include <optional>

#include "kernels/conv2d.h"

namespace tinytorch::cpu {

namespace {

constexpr int kMR = 8;  // output channels per packed weight tile (and per group's register tiles)
constexpr int kMO = 4;  // output channels a weight-gradient tile's rows divide into (groups come in whole ones)
constexpr int64_t kChunk = 2048;  // positions per pass: a tile's rows of g (32 KB) stay in L1 across tiles

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

#if defined(__x86_64__) && defined(__GNUC__)
namespace avx512 {
#pragma GCC push_options
#pragma GCC target("avx512f,fma")
#define TT_SIMD16 512
#include "kernels/simd16.h"
constexpr int kRows = 8, kNV = 3, kGO = 4, kGK = 6;  // 24 accumulators of AVX-512's 32 registers
#include "kernels/conv2d_taps.inc"
#undef TT_SIMD16
#pragma GCC pop_options
}  // namespace avx512

namespace avx2 {
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define TT_SIMD16 256
#include "kernels/simd16.h"
constexpr int kRows = 4, kNV = 1, kGO = 2, kGK = 2;  // 8 accumulators (two registers each) of AVX2's 16
#include "kernels/conv2d_taps.inc"
#undef TT_SIMD16
#pragma GCC pop_options
}  // namespace avx2
#endif

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
  const Isa isa = conv_isa();
  if (isa == Isa::none) throw std::runtime_error("conv2d_taps: this CPU has neither AVX-512 nor AVX2 with FMA");
#if defined(__x86_64__) && defined(__GNUC__)
  const float* x = data_of<float>(src);
  py::gil_scoped_release nogil;
  isa == Isa::avx512 ? avx512::forward_run(g, x, jobs, bp, threads) : avx2::forward_run(g, x, jobs, bp, threads);
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
  const Isa isa = conv_isa();
  if (isa == Isa::none) {
    throw std::runtime_error("conv2d_taps_weight_grad: this CPU has neither AVX-512 nor AVX2 with FMA");
  }
#if defined(__x86_64__) && defined(__GNUC__)
  const float* x = data_of<float>(src);
  const float* gr = data_of<float>(grad);
  float* out = data_of<float>(gw);
  py::gil_scoped_release nogil;
  std::vector<int64_t> koff(g.C * g.T);  // where row k = c*T + t starts within one image
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t t = 0; t < g.T; ++t) koff[c * g.T + t] = c * g.sc + offs[t];
  isa == Isa::avx512 ? avx512::weight_grad_run(g, x, gr, koff, out, bout, threads)
                     : avx2::weight_grad_run(g, x, gr, koff, out, bout, threads);
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

// The best instruction set this CPU runs the kernels with.
Isa best_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return Isa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
#endif
  return Isa::none;
}

const char* isa_name(Isa isa) { return isa == Isa::avx512 ? "avx512" : isa == Isa::avx2 ? "avx2" : "default"; }

Isa parse_isa(const std::string& name) {
  for (Isa isa : {Isa::none, Isa::avx2, Isa::avx512}) {
    if (name == isa_name(isa)) return isa;
  }
  throw py::value_error("cpu capability must be one of 'default', 'avx2', 'avx512', got '" + name + "'");
}

// TINYTORCH_CPU_CAPABILITY (PyTorch's ATEN_CPU_CAPABILITY) caps the instruction set; above what the CPU has it
// is ignored, as in PyTorch.
std::atomic<int>& current_isa() {
  static std::atomic<int> isa = [] {
    Isa best = best_isa();
    if (const char* env = std::getenv("TINYTORCH_CPU_CAPABILITY")) {
      for (Isa isa : {Isa::none, Isa::avx2, Isa::avx512}) {
        if (std::string(env) == isa_name(isa) && int(isa) < int(best)) best = isa;
      }
    }
    return int(best);
  }();
  return isa;
}

}  // namespace

Isa conv_isa() { return Isa(current_isa().load(std::memory_order_relaxed)); }

void init_conv2d(py::module_& m) {
  m.def("cpu_capabilities", [] {
    std::vector<std::string> names;
    for (Isa isa : {Isa::avx512, Isa::avx2}) {
      if (int(isa) <= int(best_isa())) names.push_back(isa_name(isa));
    }
    return names;
  }, "The instruction sets this CPU runs the convolution kernels with, best first ('avx512', 'avx2').");
  m.def("get_cpu_capability", [] { return std::string(isa_name(conv_isa())); },
        "The instruction set the convolution kernels run with: 'avx512', 'avx2' or 'default' (GEMM route).");
  m.def("set_cpu_capability", [](const std::string& name) {
    const Isa isa = parse_isa(name);
    if (int(isa) > int(best_isa())) {
      throw py::value_error(std::string("this CPU does not run '") + name + "' (best: '" + isa_name(best_isa()) +
                            "')");
    }
    current_isa().store(int(isa));
  }, py::arg("name"), "Run the convolution kernels with this instruction set (at most what the CPU has).");
  m.def("conv2d_phases", &stride_phases, py::arg("x"), py::arg("phases"), py::arg("top"), py::arg("left"),
        py::arg("merge"), py::arg("threads") = 0,
        "Split x, zero-padded at the top and left, into its stride phases (merge=False), or write the phases "
        "back into x (merge=True).");
  m.def("conv2d_supported", [] { return conv_isa() != Isa::none; },
        "Whether conv2d_taps and conv2d_winograd run here (x86-64 with AVX-512, or AVX2 with FMA).");
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
