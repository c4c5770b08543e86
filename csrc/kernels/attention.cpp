// scaled_dot_product_attention on the CPU, fused: softmax(q k^T * scale + mask) v for every (batch, head) in
// one pass, forward and backward, in the spirit of PyTorch's flash-attention CPU kernel. A block of query rows
// at a time: its scores (rows x keys) live in a per-thread buffer, never as a (B, H, L, S) array; the forward
// keeps only the rows' log-sum-exp, and the backward recomputes the probabilities from it. Heads are independent,
// so the threads split the (batch, head) pairs and each owns its heads' dk and dv. q, k, v, the mask and the
// outputs are read and written through their strides (any layout with a unit-stride last dimension), so the
// head views that split and transpose make are not copied, and the output can be laid out (B, L, H, E) as
// PyTorch does (its transpose back to (B, L, H*E) is then free).
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "kernels/cpu_kernels.h"
#include "kernels/small_gemm.h"

namespace tinytorch::cpu {

namespace {

// Query rows per block: a whole head of nanoGPT's (T 64) in one pass. Under the causal mask the products skip
// what the mask hides tile by tile (small_gemm's Triangle), so a larger block wastes nothing on masked keys.
constexpr int64_t kBlock = 64;

// Heads a thread claims at a time (parallel_claim): few enough that a thread on a slower core takes fewer of
// nanoGPT's 48, enough that each claim still prefetches the next head of its group while it runs this one.
constexpr int64_t kHeadGroup = 4;

// A 4-D array's data and element strides: (batch, head, row, column), the column stride 1.
template <class T>
struct View {
  T* data;
  int64_t s[4];
  int64_t dim[4];
  T* at(int64_t b, int64_t h, int64_t r) const { return data + b * s[0] + h * s[1] + r * s[2]; }
};

// (A mask may be a broadcast view: any stride, 0 included, in every dimension.)
template <class T>
View<T> view_of(const py::array& a, const char* what, const char* name, bool writes, bool unit_last = true) {
  if (a.ndim() != 4) throw py::value_error(std::string(what) + ": expected " + name + " to be 4-D");
  if (unit_last && a.shape(3) > 1 && a.strides(3) != py::ssize_t(sizeof(T))) {
    throw py::value_error(std::string(what) + ": " + name + "'s last dimension must be contiguous");
  }
  if (writes && !a.writeable()) throw py::value_error(std::string(what) + ": " + name + " is read-only");
  View<T> v{static_cast<T*>(const_cast<void*>(a.data())), {}, {}};
  for (int d = 0; d < 4; ++d) {
    if (a.strides(d) % py::ssize_t(sizeof(T))) throw py::value_error(std::string(what) + ": unaligned " + name);
    v.s[d] = a.strides(d) / py::ssize_t(sizeof(T));
    v.dim[d] = a.shape(d);
  }
  return v;
}

// The geometry every call shares: B batches, H heads, L queries, S keys, E (q, k) and Ev (v) features.
struct Shape {
  int64_t B, H, L, S, E, Ev;
};

template <class T>
Shape check_shapes(const char* what, const View<T>& q, const View<T>& k, const View<T>& v,
                   const std::optional<View<T>>& mask) {
  const Shape sh{q.dim[0], q.dim[1], q.dim[2], k.dim[2], q.dim[3], v.dim[3]};
  if (k.dim[0] != sh.B || v.dim[0] != sh.B || k.dim[1] != sh.H || v.dim[1] != sh.H || k.dim[3] != sh.E ||
      v.dim[2] != sh.S) {
    throw py::value_error(std::string(what) + ": expected q (B, H, L, E), k (B, H, S, E), v (B, H, S, Ev)");
  }
  if (mask && (mask->dim[0] != sh.B || mask->dim[1] != sh.H || mask->dim[2] != sh.L || mask->dim[3] != sh.S)) {
    throw py::value_error(std::string(what) + ": expected the mask broadcast to (B, H, L, S)");
  }
  return sh;
}

// How many of a block's nk keys its row i sees: under the causal mask (top-left aligned, as PyTorch's is_causal)
// keys up to its own position r0 + i, otherwise all of them.
inline int64_t row_keys(bool causal, int64_t r0, int64_t i, int64_t nk) {
  return causal ? std::min(nk, r0 + i + 1) : nk;
}

// What a causal block starting at query row r0 lets each product skip (small_gemm.h's Triangle).
inline Triangle lower_c(bool causal, int64_t r0) { return causal ? Triangle{Triangle::kLowerC, r0} : Triangle{}; }
inline Triangle lower_a(bool causal, int64_t r0) { return causal ? Triangle{Triangle::kLowerA, r0} : Triangle{}; }
inline Triangle upper_a(bool causal, int64_t r0) { return causal ? Triangle{Triangle::kUpperA, r0} : Triangle{}; }

// Asks for the cache lines of rows [0, rows) of a head (row stride rs, cols elements each) ahead of their use: the
// next head's operands (and its output rows, for writing) while this one computes. Split-head views put a
// head's rows a whole (B, T, 3C) row apart, a stride the hardware prefetchers follow poorly, and a call often finds
// them out of the cache (the backward always does: the rest of the model ran since the forward). Into L2 (locality
// 1): asked into L1, the bursts ran out of L1's miss buffers and helped nothing measurable. With PyTorch's call
// between ours (benchmarks/attention.py) nanoGPT's forward + backward took 6-8% less (the outputs' part, once the
// gradients became pieces of split's (B, T, 3C) one, 1.5-2%).
template <bool kWrite = false, class T>
void prefetch_rows(const T* p, int64_t rows, int64_t rs, int64_t cols) {
  constexpr int64_t kLine = 64 / int64_t(sizeof(T));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t c = 0; c < cols; c += kLine) __builtin_prefetch(p + i * rs + c, kWrite, 1);
  }
}

// Scores of query rows [r0, r1) against keys [0, nk): sc[i, j] = scale * q_i . k_j + mask, with kt = k^T (E x S).
// The causal mask is not written here: the product leaves scores past a row's last visible key unwritten, and
// softmax_rows and probabilities stop each row there (row_keys).
template <class T>
void scores(const Shape& sh, const View<T>& q, const T* kt, const std::optional<View<T>>& mask, bool causal,
            T scale, int64_t b, int64_t h, int64_t r0, int64_t r1, int64_t nk, T* sc, std::vector<T>& panel) {
  const int64_t rows = r1 - r0;
  gemm<T>(rows, nk, sh.E, scale, q.at(b, h, r0), q.s[2], 1, kt, sh.S, 1, T(0), sc, nk, panel, lower_c(causal, r0));
  if (!mask) return;
  for (int64_t i = 0; i < rows; ++i) {
    T* row = sc + i * nk;
    const T* m = mask->at(b, h, r0 + i);
    const int64_t n = row_keys(causal, r0, i, nk);
    for (int64_t j = 0; j < n; ++j) row[j] += m[j * mask->s[3]];
  }
}

// A row's visible keys [0, n) widened to whole 32-byte vectors, so that the loops over it have no scalar tail
// (with glibc's 8-lane expf, a row's last few keys otherwise went through its scalar and 4-lane ones): keys
// [n, m) get -inf (exp gives them 0), keys [m, nk) get 0. Returns m.
template <class T>
int64_t pad_row(T* row, int64_t n, int64_t nk) {
  constexpr int64_t W = 32 / int64_t(sizeof(T));
  const int64_t m = std::min(nk, (n + W - 1) / W * W);
  std::fill(row + n, row + m, -std::numeric_limits<T>::infinity());
  std::fill(row + m, row + nk, T(0));
  return m;
}

// A row whose softmax is not computed: x for its visible keys [0, n), 0 for the padding [n, m).
template <class T>
void fill_row(T* row, int64_t n, int64_t m, T x) {
  std::fill(row, row + n, x);
  std::fill(row + n, row + m, T(0));
}

// Row softmax in place, keeping each row's log-sum-exp: p = exp(s - lse); keys past a row's last visible one get
// 0. A row holding NaN comes out NaN; a fully masked row (every score -inf) comes out 0 with lse -inf (PyTorch's
// safe softmax for attention). Tested on the bits: -ffast-math may assume there is no NaN or infinity.
template <class T>
TT_SIMD_CLONES void softmax_rows(T* sc, int64_t rows, int64_t nk, T* lse, bool causal, int64_t r0) {
  constexpr T kNaN = std::numeric_limits<T>::quiet_NaN();
  for (int64_t i = 0; i < rows; ++i) {
    T* row = sc + i * nk;
    const int64_t n = row_keys(causal, r0, i, nk), m = pad_row(row, n, nk);
    T mx = row[0];
    for (int64_t j = 1; j < m; ++j) mx = row[j] > mx ? row[j] : mx;
    if (any_nan(row, m)) {
      fill_row(row, n, m, kNaN);
      lse[i] = kNaN;
      continue;
    }
    if (!is_finite_bits(mx)) {  // every key masked (or a score of +inf: NaN, as softmax gives)
      const bool masked = mx < T(0);
      fill_row(row, n, m, masked ? T(0) : kNaN);
      lse[i] = masked ? -std::numeric_limits<T>::infinity() : kNaN;
      continue;
    }
    T sum = 0;
    for (int64_t j = 0; j < m; ++j) {
      row[j] = exp_or_zero(row[j] - mx);
      sum += row[j];
    }
    const T inv = T(1) / sum;
    for (int64_t j = 0; j < m; ++j) row[j] *= inv;
    lse[i] = mx + std::log(sum);
  }
}

// p = exp(s - lse) for rows whose forward was finite (0 past a row's last visible key); rows that were fully
// masked (lse -inf) give 0.
template <class T>
TT_SIMD_CLONES void probabilities(T* sc, int64_t rows, int64_t nk, const T* lse, bool causal, int64_t r0) {
  for (int64_t i = 0; i < rows; ++i) {
    T* row = sc + i * nk;
    const int64_t n = row_keys(causal, r0, i, nk), m = pad_row(row, n, nk);
    const T l = lse[i];
    if (!is_finite_bits(l)) {
      fill_row(row, n, m, is_nan_bits(l) ? std::numeric_limits<T>::quiet_NaN() : T(0));
      continue;
    }
    for (int64_t j = 0; j < m; ++j) row[j] = exp_or_zero(row[j] - l);
  }
}

// delta_i = dO_i . O_i (= sum_j p_ij dP_ij), for the backward's dS.
template <class T>
TT_SIMD_CLONES void row_dots(const T* g, int64_t gs, const T* o, int64_t os, int64_t rows, int64_t n, T* delta) {
  for (int64_t i = 0; i < rows; ++i) {
    const T *gi = g + i * gs, *oi = o + i * os;
    T s = 0;
    for (int64_t e = 0; e < n; ++e) s += gi[e] * oi[e];
    delta[i] = s;
  }
}

// dS = p (dP - delta), in place over p; dP past a row's last visible key was not computed (p is 0 there).
template <class T>
TT_SIMD_CLONES void softmax_grad_rows(T* p, const T* dp, const T* delta, int64_t rows, int64_t nk, bool causal,
                                      int64_t r0) {
  for (int64_t i = 0; i < rows; ++i) {
    T* pr = p + i * nk;
    const T* dr = dp + i * nk;
    const T d = delta[i];
    const int64_t n = row_keys(causal, r0, i, nk);
    for (int64_t j = 0; j < n; ++j) pr[j] *= dr[j] - d;
  }
}

// The keys query rows [r0, r1) can see: all of them, or under the causal mask (top-left aligned, as
// PyTorch's is_causal) those up to the block's last row.
inline int64_t visible_keys(const Shape& sh, bool causal, int64_t r1) {
  return causal ? std::min(sh.S, r1) : sh.S;
}

template <class T>
void forward(const py::array& qa, const py::array& ka, const py::array& va, const std::optional<py::array>& ma,
             bool causal, double scale, py::array& outa, py::array& lsea) {
  constexpr const char* what = "sdpa";
  const View<T> q = view_of<T>(qa, what, "q", false), k = view_of<T>(ka, what, "k", false),
                v = view_of<T>(va, what, "v", false), out = view_of<T>(outa, what, "out", true);
  std::optional<View<T>> mask;
  if (ma) mask = view_of<T>(*ma, what, "mask", false, false);
  const Shape sh = check_shapes(what, q, k, v, mask);
  if (out.dim[0] != sh.B || out.dim[1] != sh.H || out.dim[2] != sh.L || out.dim[3] != sh.Ev) {
    throw py::value_error("sdpa: expected out (B, H, L, Ev)");
  }
  check({{&lsea, true}}, kind_of(qa, what), what, sh.B * sh.H * sh.L);
  T* lse = data_of<T>(lsea);
  py::gil_scoped_release nogil;
  parallel_claim(sh.B * sh.H, kHeadGroup,
               [&](int64_t begin, int64_t end) {
    std::vector<T> kt(sh.E * sh.S), sc(std::min(kBlock, sh.L) * sh.S), panel;
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / sh.H, h = bh % sh.H;
      if (bh + 1 < end) {
        const int64_t nb = (bh + 1) / sh.H, nh = (bh + 1) % sh.H;
        prefetch_rows(q.at(nb, nh, 0), sh.L, q.s[2], sh.E);
        prefetch_rows(k.at(nb, nh, 0), sh.S, k.s[2], sh.E);
        prefetch_rows(v.at(nb, nh, 0), sh.S, v.s[2], sh.Ev);
        prefetch_rows<true>(out.at(nb, nh, 0), sh.L, out.s[2], sh.Ev);
      }
      transpose(k.at(b, h, 0), k.s[2], sh.S, sh.E, kt.data(), sh.S);
      for (int64_t r0 = 0; r0 < sh.L; r0 += kBlock) {
        const int64_t r1 = std::min(sh.L, r0 + kBlock), rows = r1 - r0, nk = visible_keys(sh, causal, r1);
        T* l = lse + bh * sh.L + r0;
        if (nk == 0) {  // no key at all: zero output, as softmax over nothing is taken to be
          for (int64_t i = 0; i < rows; ++i) std::fill(out.at(b, h, r0 + i), out.at(b, h, r0 + i) + sh.Ev, T(0));
          std::fill(l, l + rows, -std::numeric_limits<T>::infinity());
          continue;
        }
        scores(sh, q, kt.data(), mask, causal, T(scale), b, h, r0, r1, nk, sc.data(), panel);
        softmax_rows(sc.data(), rows, nk, l, causal, r0);
        // out rows = p v; v's rows are contiguous, out's rows at stride out.s[2].
        gemm<T>(rows, sh.Ev, nk, T(1), sc.data(), nk, 1, v.at(b, h, 0), v.s[2], 1, T(0), out.at(b, h, r0),
                out.s[2], panel, lower_a(causal, r0));
      }
    }
  });
}

template <class T>
void backward(const py::array& ga, const py::array& qa, const py::array& ka, const py::array& va,
              const std::optional<py::array>& ma, bool causal, double scale, const py::array& outa,
              const py::array& lsea, py::array& dqa, py::array& dka, py::array& dva) {
  constexpr const char* what = "sdpa_backward";
  const View<T> q = view_of<T>(qa, what, "q", false), k = view_of<T>(ka, what, "k", false),
                v = view_of<T>(va, what, "v", false), out = view_of<T>(outa, what, "out", false),
                g = view_of<T>(ga, what, "grad", false), dq = view_of<T>(dqa, what, "dq", true),
                dk = view_of<T>(dka, what, "dk", true), dv = view_of<T>(dva, what, "dv", true);
  std::optional<View<T>> mask;
  if (ma) mask = view_of<T>(*ma, what, "mask", false, false);
  const Shape sh = check_shapes(what, q, k, v, mask);
  for (const View<T>* x : {&out, &g, &dq, &dk, &dv}) {
    if (x->dim[0] != sh.B || x->dim[1] != sh.H) throw py::value_error("sdpa_backward: mismatched batch or heads");
  }
  if (g.dim[2] != sh.L || g.dim[3] != sh.Ev || out.dim[2] != sh.L || out.dim[3] != sh.Ev || dq.dim[2] != sh.L ||
      dq.dim[3] != sh.E || dk.dim[2] != sh.S || dk.dim[3] != sh.E || dv.dim[2] != sh.S || dv.dim[3] != sh.Ev) {
    throw py::value_error("sdpa_backward: expected grad and out (B, H, L, Ev), dq (B, H, L, E), dk (B, H, S, E), "
                          "dv (B, H, S, Ev)");
  }
  // Each thread writes whole heads of dk and dv: heads that share memory (a broadcast k or v) would race.
  for (const View<T>* x : {&dk, &dv}) {
    if ((sh.B > 1 && x->s[0] == 0) || (sh.H > 1 && x->s[1] == 0)) {
      throw py::value_error("sdpa_backward: dk and dv must not be broadcast views");
    }
  }
  check({{&lsea, false}}, kind_of(qa, what), what, sh.B * sh.H * sh.L);
  const T* lse = data_of<T>(lsea);
  const T sc_ = T(scale);
  py::gil_scoped_release nogil;
  parallel_claim(sh.B * sh.H, kHeadGroup,
               [&](int64_t begin, int64_t end) {
    const int64_t block = std::min(kBlock, sh.L);
    std::vector<T> kt(sh.E * sh.S), vt(sh.Ev * sh.S), p(block * sh.S), dp(block * sh.S), delta(block), panel;
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / sh.H, h = bh % sh.H;
      if (bh + 1 < end) {
        const int64_t nb = (bh + 1) / sh.H, nh = (bh + 1) % sh.H;
        prefetch_rows(q.at(nb, nh, 0), sh.L, q.s[2], sh.E);
        prefetch_rows(k.at(nb, nh, 0), sh.S, k.s[2], sh.E);
        prefetch_rows(v.at(nb, nh, 0), sh.S, v.s[2], sh.Ev);
        prefetch_rows(g.at(nb, nh, 0), sh.L, g.s[2], sh.Ev);
        prefetch_rows(out.at(nb, nh, 0), sh.L, out.s[2], sh.Ev);
        prefetch_rows<true>(dq.at(nb, nh, 0), sh.L, dq.s[2], sh.E);
        prefetch_rows<true>(dk.at(nb, nh, 0), sh.S, dk.s[2], sh.E);
        prefetch_rows<true>(dv.at(nb, nh, 0), sh.S, dv.s[2], sh.Ev);
      }
      transpose(k.at(b, h, 0), k.s[2], sh.S, sh.E, kt.data(), sh.S);
      transpose(v.at(b, h, 0), v.s[2], sh.S, sh.Ev, vt.data(), sh.S);
      // Blocks last to first: the last sees the most keys (all of them without the causal mask), so it writes dk
      // and dv (beta 0) and the others add to them; keys no block sees are zeroed.
      const int64_t last = (sh.L - 1) / kBlock * kBlock, seen = sh.L > 0 ? visible_keys(sh, causal, sh.L) : 0;
      for (int64_t j = seen; j < sh.S; ++j) {
        std::fill(dk.at(b, h, j), dk.at(b, h, j) + sh.E, T(0));
        std::fill(dv.at(b, h, j), dv.at(b, h, j) + sh.Ev, T(0));
      }
      for (int64_t r0 = last; r0 >= 0; r0 -= kBlock) {
        const int64_t r1 = std::min(sh.L, r0 + kBlock), rows = r1 - r0, nk = visible_keys(sh, causal, r1);
        const T beta = r0 == last ? T(0) : T(1);
        if (nk == 0) {
          for (int64_t i = 0; i < rows; ++i) std::fill(dq.at(b, h, r0 + i), dq.at(b, h, r0 + i) + sh.E, T(0));
          continue;
        }
        scores(sh, q, kt.data(), mask, causal, sc_, b, h, r0, r1, nk, p.data(), panel);
        probabilities(p.data(), rows, nk, lse + bh * sh.L + r0, causal, r0);
        row_dots(g.at(b, h, r0), g.s[2], out.at(b, h, r0), out.s[2], rows, sh.Ev, delta.data());
        // dv[:nk] += p^T dO
        gemm<T>(nk, sh.Ev, rows, T(1), p.data(), 1, nk, g.at(b, h, r0), g.s[2], 1, beta, dv.at(b, h, 0),
                dv.s[2], panel, upper_a(causal, r0));
        // dP = dO v^T; dS = p (dP - delta)
        gemm<T>(rows, nk, sh.Ev, T(1), g.at(b, h, r0), g.s[2], 1, vt.data(), sh.S, 1, T(0), dp.data(), nk, panel,
                lower_c(causal, r0));
        softmax_grad_rows(p.data(), dp.data(), delta.data(), rows, nk, causal, r0);
        // dq = scale dS k; dk[:nk] += scale dS^T q
        gemm<T>(rows, sh.E, nk, sc_, p.data(), nk, 1, k.at(b, h, 0), k.s[2], 1, T(0), dq.at(b, h, r0), dq.s[2],
                panel, lower_a(causal, r0));
        gemm<T>(nk, sh.E, rows, sc_, p.data(), 1, nk, q.at(b, h, r0), q.s[2], 1, beta, dk.at(b, h, 0), dk.s[2],
                panel, upper_a(causal, r0));
      }
    }
  });
}

}  // namespace

void init_attention(py::module_& m) {
  m.def("sdpa", [](const py::array& q, const py::array& k, const py::array& v, std::optional<py::array> mask,
                   bool causal, double scale, py::array out, py::array lse) {
    const Kind kind = kind_of(q, "sdpa");
    for (const py::array* a : std::initializer_list<const py::array*>{&k, &v, &out}) {
      if (kind_of(*a, "sdpa") != kind) throw py::type_error("sdpa: all arrays must share one dtype");
    }
    if (mask && kind_of(*mask, "sdpa") != kind) throw py::type_error("sdpa: all arrays must share one dtype");
    kind == Kind::f32 ? forward<float>(q, k, v, mask, causal, scale, out, lse)
                      : forward<double>(q, k, v, mask, causal, scale, out, lse);
  }, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask"), py::arg("causal"), py::arg("scale"), py::arg("out"),
     py::arg("lse"),
     "out = softmax(q k^T * scale + mask) v over (B, H, L, E) views; lse (B*H*L,) keeps each row's log-sum-exp.");
  m.def("sdpa_backward", [](const py::array& grad, const py::array& q, const py::array& k, const py::array& v,
                            std::optional<py::array> mask, bool causal, double scale, const py::array& out,
                            const py::array& lse, py::array dq, py::array dk, py::array dv) {
    const Kind kind = kind_of(q, "sdpa_backward");
    for (const py::array* a : std::initializer_list<const py::array*>{&grad, &k, &v, &out, &dq, &dk, &dv}) {
      if (kind_of(*a, "sdpa_backward") != kind) throw py::type_error("sdpa_backward: all arrays must share one dtype");
    }
    if (mask && kind_of(*mask, "sdpa_backward") != kind) {
      throw py::type_error("sdpa_backward: all arrays must share one dtype");
    }
    kind == Kind::f32 ? backward<float>(grad, q, k, v, mask, causal, scale, out, lse, dq, dk, dv)
                      : backward<double>(grad, q, k, v, mask, causal, scale, out, lse, dq, dk, dv);
  }, py::arg("grad"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask"), py::arg("causal"), py::arg("scale"),
     py::arg("out"), py::arg("lse"), py::arg("dq"), py::arg("dk"), py::arg("dv"),
     "dq, dk, dv of sdpa from the output's gradient, recomputing the probabilities from lse.");
}

}  // namespace tinytorch::cpu
