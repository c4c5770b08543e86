// The elementwise ops and sums of large CPU tensors, split over the intra-op pool (parallel.h) as ATen splits
// its TensorIterator loops: arithmetic with a same-shape, scalar or trailing-broadcast operand, unary math,
// ReLU's backward, where, casts between float32 and float64, strided copies to a contiguous array, fills and
// sums over one block of axes. NumPy runs each of these on one core; the Python side (_ops/_cpu.py) sends an
// op here only when the arrays are large enough for a second thread to pay and of a layout handled here.
//
// Built with -ffast-math like the other kernels, so every choice that must see NaN (ReLU, its backward) tests
// the bits; arithmetic and the math functions propagate NaN on their own.
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TT_F16C 1
#endif
#if defined(__FLT16_MAX__)  // the compiler has _Float16 (GCC 12+ on x86-64, GCC 11 does not)
#define TT_FLOAT16 1
#endif

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

enum Binary : int { kAdd = 0, kSub = 1, kMul = 2, kDiv = 3 };
enum Ternary : int { kLerp = 0, kAddcmul = 1, kAddcdiv = 2 };
enum Unary : int { kNeg = 0, kExp = 1, kLog = 2, kTanh = 3, kSigmoid = 4, kRelu = 5, kSqrt = 6, kRsqrt = 7,
                   kAbs = 8, kReciprocal = 9, kSquare = 10, kSilu = 11, kCube = 12 };
enum UnaryBackward : int { kSigmoidBackward = 0, kTanhBackward = 1, kSiluBackward = 2 };

template <class T>
using Bits = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;

// Whether v is NaN, and whether it is <= 0 and not NaN, from its bits (vectorizable integer compares).
template <class T>
inline bool nan_of(T v) {
  Bits<T> b;
  std::memcpy(&b, &v, sizeof b);
  constexpr Bits<T> kAbs = std::numeric_limits<Bits<T>>::max();
  constexpr Bits<T> kInf = sizeof(T) == 4 ? Bits<T>(0x7f800000) : Bits<T>(0x7ff0000000000000ll);
  return (b & kAbs) > kInf;
}

template <class T>
inline bool not_positive(T v) {
  Bits<T> b;
  std::memcpy(&b, &v, sizeof b);
  return b <= 0 && !nan_of(v);  // sign bit set or +0, and not a (negative) NaN
}

template <int kOp, class T>
inline T apply(T a, T b) {
  if constexpr (kOp == kAdd) return a + b;
  if constexpr (kOp == kSub) return a - b;
  if constexpr (kOp == kMul) return a * b;
  return a / b;
}

// out[r, j] = x[r * xr + j * xc] op y[r * yr + j * yc] over rows [r0, r1) of `cols`: a column stride of 0 is a
// scalar along the row (the four stride pairs are separate instantiations, so each inner loop vectorizes).
template <int kOp, class T, int kXc, int kYc>
TT_SIMD_CLONES void binary_rows(const T* __restrict x, int64_t xr, const T* __restrict y, int64_t yr,
                                T* __restrict out, int64_t r0, int64_t r1, int64_t cols) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xp = x + r * xr;
    const T* yp = y + r * yr;
    T* o = out + r * cols;
    for (int64_t j = 0; j < cols; ++j) o[j] = apply<kOp>(xp[j * kXc], yp[j * kYc]);
  }
}

template <int kOp, class T>
void binary_op(const T* x, int64_t nx, const T* y, int64_t ny, T* out, int64_t n) {
  // A period p < n repeats along the rows of a (n / p, p) grid; a size of 1 is a scalar; n is the grid itself.
  const int64_t cols = (nx > 1 && nx < n) ? nx : (ny > 1 && ny < n) ? ny : n;
  const int64_t rows = n / cols;
  const int64_t xr = nx == n ? cols : 0, yr = ny == n ? cols : 0;
  auto loop = nx == 1 ? binary_rows<kOp, T, 0, 1> : ny == 1 ? binary_rows<kOp, T, 1, 0> : binary_rows<kOp, T, 1, 1>;
  if (rows == 1) {  // same-size operands or a scalar: one long row, split along it
    parallel_for(n, kElementGrain, [&](int64_t b, int64_t e) {
      loop(nx == 1 ? x : x + b, 0, ny == 1 ? y : y + b, 0, out + b, 0, 1, e - b);
    });
    return;
  }
  parallel_for(rows, std::max<int64_t>(1, kElementGrain / cols),
               [&](int64_t r0, int64_t r1) { loop(x, xr, y, yr, out, r0, r1, cols); });
}

template <int kOp, class T>
TT_SIMD_CLONES void unary_loop(const T* __restrict x, T* __restrict y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const T v = x[i];
    if constexpr (kOp == kNeg) y[i] = -v;
    if constexpr (kOp == kExp) y[i] = std::exp(v);
    if constexpr (kOp == kLog) y[i] = std::log(v);
    if constexpr (kOp == kTanh) y[i] = std::tanh(v);
    if constexpr (kOp == kSigmoid) y[i] = T(1) / (T(1) + std::exp(-v));
    if constexpr (kOp == kRelu) y[i] = not_positive(v) ? T(0) : v;
    if constexpr (kOp == kSqrt) y[i] = std::sqrt(v);
    if constexpr (kOp == kRsqrt) y[i] = std::sqrt(T(1) / v);  // not 1 / sqrt: GCC would use an estimate
    if constexpr (kOp == kAbs) y[i] = std::abs(v);
    if constexpr (kOp == kReciprocal) y[i] = T(1) / v;
    if constexpr (kOp == kSquare) y[i] = v * v;
    if constexpr (kOp == kSilu) y[i] = v / (T(1) + std::exp(-v));
    if constexpr (kOp == kCube) y[i] = v * v * v;  // ATen's pow(x, 3)
  }
}

// The backward of sigmoid and tanh from their output y, and of SiLU from its input x, in one pass each (as
// tensor ops they took three to six passes and as many temporaries); the formulas are ATen's.
template <int kOp, class T>
TT_SIMD_CLONES void unary_backward_loop(const T* __restrict g, const T* __restrict v, T* __restrict out, int64_t b,
                                        int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const T u = v[i];
    if constexpr (kOp == kSigmoidBackward) out[i] = g[i] * u * (T(1) - u);
    if constexpr (kOp == kTanhBackward) out[i] = g[i] * (T(1) - u * u);
    if constexpr (kOp == kSiluBackward) {
      const T s = T(1) / (T(1) + std::exp(-u));
      out[i] = g[i] * s * (T(1) + u * (T(1) - s));
    }
  }
}

template <class T>
void unary_op(int op, const T* x, T* y, int64_t n) {
  using Loop = void (*)(const T*, T*, int64_t, int64_t);
  static constexpr Loop loops[] = {unary_loop<kNeg, T>, unary_loop<kExp, T>, unary_loop<kLog, T>,
                                   unary_loop<kTanh, T>, unary_loop<kSigmoid, T>, unary_loop<kRelu, T>,
                                   unary_loop<kSqrt, T>, unary_loop<kRsqrt, T>, unary_loop<kAbs, T>,
                                   unary_loop<kReciprocal, T>, unary_loop<kSquare, T>, unary_loop<kSilu, T>,
                                   unary_loop<kCube, T>};
  const Loop loop = loops[op];
  parallel_for(n, kElementGrain, [&](int64_t b, int64_t e) { loop(x, y, b, e); });
}

// lerp(a, b, w), addcmul(a, b, c, w) and addcdiv(a, b, c, w) with a scalar w, in one pass: composed of binary
// ops they made three passes and two temporaries (and the in-place forms an optimizer or an EMA calls a copy
// back). lerp is ATen's, exact at both ends: a + w (b - a) below w = 0.5, b - (1 - w) (b - a) from there.
template <int kOp, bool kLow, class T>
TT_SIMD_CLONES void ternary_loop(const T* __restrict a, const T* __restrict b, const T* __restrict c, T w,
                                 T* __restrict out, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; ++i) {
    if constexpr (kOp == kLerp) out[i] = kLow ? a[i] + w * (b[i] - a[i]) : b[i] - (T(1) - w) * (b[i] - a[i]);
    if constexpr (kOp == kAddcmul) out[i] = a[i] + w * b[i] * c[i];
    if constexpr (kOp == kAddcdiv) out[i] = a[i] + w * b[i] / c[i];
  }
}

template <class T>
void ternary_op(int op, const T* a, const T* b, const T* c, T w, T* out, int64_t n) {
  using Loop = void (*)(const T*, const T*, const T*, T, T*, int64_t, int64_t);
  const Loop loop = op == kLerp ? (std::abs(w) < T(0.5) ? ternary_loop<kLerp, true, T> : ternary_loop<kLerp, false, T>)
                    : op == kAddcmul ? ternary_loop<kAddcmul, true, T> : ternary_loop<kAddcdiv, true, T>;
  parallel_for(n, kElementGrain, [&](int64_t lo, int64_t hi) { loop(a, b, c, w, out, lo, hi); });
}

// ReLU's backward (PyTorch's threshold_backward at 0): g where y > 0 or y is NaN, else 0.
template <class T>
TT_SIMD_CLONES void relu_backward_loop(const T* __restrict g, const T* __restrict y, T* __restrict out, int64_t b,
                                       int64_t e) {
  for (int64_t i = b; i < e; ++i) out[i] = not_positive(y[i]) ? T(0) : g[i];
}

// a and b are full-size (stride 1) or scalars (stride 0). With the strides known at compile time and the
// condition read as bytes compared with 0, GCC emits vector blends; with run-time strides or a bool test it
// emitted a branchy scalar loop that took 4.5x a copy's time on attention's scores.
template <int SA, int SB, class T>
TT_SIMD_CLONES void where_loop(const bool* __restrict cond, const T* __restrict a, const T* __restrict b,
                               T* __restrict out, int64_t lo, int64_t hi) {
  const unsigned char* c = reinterpret_cast<const unsigned char*>(cond);
  const T av = a[0], bv = b[0];
  for (int64_t i = lo; i < hi; ++i) {
    const T x = SA ? a[i] : av, y = SB ? b[i] : bv;
    out[i] = c[i - lo] != 0 ? x : y;
  }
}

// where over [lo, hi) with a condition of period p (a trailing broadcast: attention's (T, T) causal mask over
// (B, H, T, T) scores), one stretch of the period at a time.
template <int SA, int SB, class T>
void where_range(const bool* c, int64_t p, const T* a, const T* b, T* out, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi;) {
    const int64_t j = i % p, len = std::min(p - j, hi - i);
    where_loop<SA, SB>(c + j, a, b, out, i, i + len);
    i += len;
  }
}

template <class From, class To>
TT_SIMD_CLONES void cast_loop(const From* __restrict x, To* __restrict y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) y[i] = To(x[i]);
}

template <class T>
TT_SIMD_CLONES void fill_loop(T* __restrict y, T v, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) y[i] = v;
}

// A strided array copied into another of the same shape: the innermost dimension is a loop (a memcpy when both
// are contiguous along it), the others an odometer that starts at element `begin` (in row-major order). The
// pointers step along the second-innermost dimension and are recomputed only when it wraps: attention's heads
// merged back copy runs of 16-64 elements, and recomputing every run's offset from all the indices took a
// third of the copy's time.
void copy_strided(const char* src, const std::vector<int64_t>& shape, const std::vector<int64_t>& sstr,
                  char* dst, const std::vector<int64_t>& dstr, int64_t item, int64_t begin, int64_t end) {
  const int nd = int(shape.size());
  const int64_t inner = shape[nd - 1], is = sstr[nd - 1], id = dstr[nd - 1];
  std::vector<int64_t> idx(nd, 0);
  int64_t rest = begin / inner;
  for (int d = nd - 2; d >= 0; --d) {
    idx[d] = rest % shape[d];
    rest /= shape[d];
  }
  auto row = [&](const char*& s, char*& o) {
    s = src;
    o = dst;
    for (int d = 0; d < nd - 1; ++d) {
      s += idx[d] * sstr[d];
      o += idx[d] * dstr[d];
    }
  };
  const char* s;
  char* o;
  row(s, o);
  int64_t j = begin % inner;
  for (int64_t pos = begin; pos < end;) {
    const int64_t len = std::min(inner - j, end - pos);
    const char* sj = s + j * is;
    char* oj = o + j * id;
    if (is == item && id == item) {
      std::memcpy(oj, sj, len * item);
    } else if (item == 4) {
      for (int64_t k = 0; k < len; ++k) std::memcpy(oj + k * id, sj + k * is, 4);
    } else if (item == 8) {
      for (int64_t k = 0; k < len; ++k) std::memcpy(oj + k * id, sj + k * is, 8);
    } else {
      for (int64_t k = 0; k < len; ++k) std::memcpy(oj + k * id, sj + k * is, item);
    }
    pos += len;
    j = 0;
    if (nd < 2) continue;
    if (++idx[nd - 2] < shape[nd - 2]) {
      s += sstr[nd - 2];
      o += dstr[nd - 2];
      continue;
    }
    idx[nd - 2] = 0;
    for (int d = nd - 3; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    row(s, o);
  }
}

// float32 to and from the 2-byte floats autocast and half-precision checkpoints use, the 2-byte side as its bits:
// NumPy converts float16 one element at a time and ml_dtypes bfloat16 much the same (10-19x and 6-9x PyTorch's
// time on a million elements). Both round to nearest even; a NaN stays a NaN.
inline uint16_t bf16_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  if ((b & 0x7fffffffu) > 0x7f800000u) return uint16_t((b >> 16) | 0x40u);  // quiet NaN, sign kept
  return uint16_t((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

template <bool kBf16>
TT_SIMD_CLONES void to_half_loop(const float* __restrict x, uint16_t* __restrict y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    if constexpr (kBf16) {
      y[i] = bf16_of(x[i]);
    } else {
#ifdef TT_FLOAT16
      const _Float16 h = _Float16(x[i]);
      std::memcpy(y + i, &h, sizeof h);
#endif
    }
  }
}

#ifdef TT_F16C
// float16 through F16C's 8-lane conversions (every x86-64-v3 CPU): GCC converts _Float16 one element at a time.
__attribute__((target("avx,f16c"))) void to_f16_f16c(const float* x, uint16_t* y, int64_t b, int64_t e) {
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < e; ++i) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

__attribute__((target("avx,f16c"))) void from_f16_f16c(const uint16_t* x, float* y, int64_t b, int64_t e) {
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  for (; i < e; ++i) y[i] = _cvtsh_ss(x[i]);
}

bool has_f16c() {
  static const bool yes = [] {
    __builtin_cpu_init();  // this may run before libgcc's own initialiser in a library loaded late
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  }();
  return yes;
}
#else
bool has_f16c() { return false; }
#endif

// Whether cast_half converts float16 here (F16C, or the compiler's _Float16); bfloat16 it always does.
bool float16_casts() {
#ifdef TT_FLOAT16
  return true;
#else
  return has_f16c();
#endif
}

template <bool kBf16>
TT_SIMD_CLONES void from_half_loop(const uint16_t* __restrict x, float* __restrict y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    if constexpr (kBf16) {
      const uint32_t bits = uint32_t(x[i]) << 16;
      std::memcpy(y + i, &bits, sizeof bits);
    } else {
#ifdef TT_FLOAT16
      _Float16 h;
      std::memcpy(&h, x + i, sizeof h);
      y[i] = float(h);
#endif
    }
  }
}

// Sums over the middle axis of a contiguous (A, R, C) array into out (A, C), or with kNorm its 2-norms (the
// square root of the sum of squares); float32 accumulates in float64.
template <bool kSquare, class T>
TT_SIMD_CLONES void sum_columns(const T* __restrict x, int64_t C, int64_t r0, int64_t r1, double* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* row = x + r * C;
    for (int64_t c = 0; c < C; ++c) {
      const double v = double(row[c]);
      acc[c] += kSquare ? v * v : v;
    }
  }
}

// kNorm sums squares; their square root is taken when root is set (a 2-norm), else they are scaled (mse_loss).
template <bool kNorm, class T>
void sum_op(const T* x, int64_t A, int64_t R, int64_t C, double scale, bool root, T* out) {
  auto finish = [scale, root](double s) { return T(kNorm && root ? std::sqrt(s) : s * scale); };
  if (C == 1 && A >= num_threads()) {  // many rows: one sum per row
    parallel_for(A, std::max<int64_t>(1, kElementGrain / R),
                 [&](int64_t a0, int64_t a1) {
                   for (int64_t a = a0; a < a1; ++a) out[a] = finish(sum_in_double<kNorm>(x + a * R, R));
                 });
    return;
  }
  // Few outputs: each chunk sums its share of R into its own partial row, then the partials are added.
  const int64_t chunks = chunk_count(R, 0, std::max<int64_t>(1, kElementGrain / C));
  std::vector<double> partial(chunks * A * C, 0.0);
  parallel_chunks(R, 0, std::max<int64_t>(1, kElementGrain / C), [&](int64_t chunk, int64_t r0, int64_t r1) {
    for (int64_t a = 0; a < A; ++a) {
      double* acc = partial.data() + (chunk * A + a) * C;
      if (C == 1) {
        acc[0] += sum_in_double<kNorm>(x + a * R + r0, r1 - r0);
      } else {
        sum_columns<kNorm>(x + a * R * C, C, r0, r1, acc);
      }
    }
  });
  for (int64_t i = 0; i < A * C; ++i) {
    double s = 0;
    for (int64_t c = 0; c < chunks; ++c) s += partial[c * A * C + i];
    out[i] = finish(s);
  }
}

// Maxima (kMax) or minima over the middle axis of a contiguous (A, R, C) array into out (A, C), NaN if the
// reduced values hold one (as PyTorch's amax/amin): the NaN test is a separate integer accumulator of the bits,
// so the compare-and-select loop vectorizes.
template <bool kMax, class T>
inline T pick(T a, T v) {
  return kMax ? (v > a ? v : a) : (v < a ? v : a);
}

template <bool kMax, class T>
TT_SIMD_CLONES T extremum_run(const T* __restrict x, int64_t n) {
  T m = x[0];
  Bits<T> nan = 0;
  for (int64_t i = 0; i < n; ++i) {
    m = pick<kMax>(m, x[i]);
    nan |= Bits<T>(nan_of(x[i]));
  }
  return nan ? std::numeric_limits<T>::quiet_NaN() : m;
}

template <bool kMax, class T>
TT_SIMD_CLONES void extremum_columns(const T* __restrict x, int64_t C, int64_t r0, int64_t r1, T* __restrict acc,
                                     Bits<T>* __restrict nan) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* row = x + r * C;
    for (int64_t c = 0; c < C; ++c) {
      acc[c] = pick<kMax>(acc[c], row[c]);
      nan[c] |= Bits<T>(nan_of(row[c]));
    }
  }
}

template <bool kMax, class T>
void extremum_op(const T* x, int64_t A, int64_t R, int64_t C, T* out) {
  if (C == 1 && A >= num_threads()) {  // many rows: one result per row
    parallel_for(A, std::max<int64_t>(1, kElementGrain / R), [&](int64_t a0, int64_t a1) {
      for (int64_t a = a0; a < a1; ++a) out[a] = extremum_run<kMax>(x + a * R, R);
    });
    return;
  }
  // Few outputs: each chunk reduces its share of R into its own partial row (seeded with the share's first row).
  const int64_t grain = std::max<int64_t>(1, kElementGrain / C);
  const int64_t chunks = chunk_count(R, 0, grain);
  std::vector<T> partial(chunks * A * C);
  std::vector<Bits<T>> nans(chunks * A * C, 0);
  parallel_chunks(R, 0, grain, [&](int64_t chunk, int64_t r0, int64_t r1) {
    for (int64_t a = 0; a < A; ++a) {
      T* acc = partial.data() + (chunk * A + a) * C;
      Bits<T>* nan = nans.data() + (chunk * A + a) * C;
      if (C == 1) {
        acc[0] = extremum_run<kMax>(x + a * R + r0, r1 - r0);
        continue;
      }
      std::memcpy(acc, x + (a * R + r0) * C, C * sizeof(T));
      extremum_columns<kMax>(x + a * R * C, C, r0, r1, acc, nan);
    }
  });
  for (int64_t i = 0; i < A * C; ++i) {
    T m = partial[i];
    bool nan = nans[i] != 0 || nan_of(m);
    for (int64_t c = 1; c < chunks; ++c) {
      m = pick<kMax>(m, partial[c * A * C + i]);
      nan = nan || nans[c * A * C + i] != 0 || nan_of(partial[c * A * C + i]);
    }
    out[i] = nan ? std::numeric_limits<T>::quiet_NaN() : m;
  }
}

// clamp(x, lo, hi) with scalar bounds (-inf / inf where absent): a NaN stays NaN, as in PyTorch.
template <class T>
TT_SIMD_CLONES void clamp_loop(const T* __restrict x, T lo, T hi, T* __restrict out, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const T v = x[i];
    const T m = v < lo ? lo : v;  // min(max(v, lo), hi): hi wins when lo > hi, as in PyTorch
    out[i] = nan_of(v) ? v : (m > hi ? hi : m);
  }
}

// The checks of a reduction of x seen as (A, R, C) over R into out (A, C).
Kind check_blocks(const py::array& x, int64_t A, int64_t R, int64_t C, const py::array& out, const char* what) {
  const Kind kind = kind_of(x, what);
  check({{&x, false}, {&out, true}}, kind, what, -1);
  if (A < 0 || R < 0 || C < 0 || A * R * C != x.size() || out.size() != A * C) {
    throw py::value_error(std::string(what) + ": expected x of A*R*C elements and out of A*C");
  }
  return kind;
}

// The element count an operand of a binary op has: the output's, 1 (a scalar), or a period dividing it.
int64_t operand_size(const py::array& a, int64_t n) {
  const int64_t s = a.size();
  if (s != n && s != 1 && (s == 0 || n % s)) {
    throw py::value_error("elementwise_binary: an operand must have the output's size, 1 element, or a size that "
                          "divides it (a trailing broadcast)");
  }
  return s;
}

}  // namespace

void init_elementwise(py::module_& m) {
  m.def("binary", [](int op, const py::array& x, const py::array& y, py::array out) {
    const Kind kind = kind_of(out, "binary");
    check({{&x, false}, {&y, false}, {&out, true}}, kind, "binary", -1);
    if (op < kAdd || op > kDiv) throw py::value_error("binary: unknown op " + std::to_string(op));
    const int64_t n = out.size(), nx = operand_size(x, n), ny = operand_size(y, n);
    if (nx != n && ny != n && n > 1) throw py::value_error("binary: one operand must have the output's size");
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T *xp = data_of<T>(x), *yp = data_of<T>(y);
      T* o = data_of<T>(out);
      py::gil_scoped_release nogil;
      switch (op) {
        case kAdd: binary_op<kAdd>(xp, nx, yp, ny, o, n); break;
        case kSub: binary_op<kSub>(xp, nx, yp, ny, o, n); break;
        case kMul: binary_op<kMul>(xp, nx, yp, ny, o, n); break;
        default: binary_op<kDiv>(xp, nx, yp, ny, o, n); break;
      }
    };
    if (n > 0) kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("op"), py::arg("x"), py::arg("y"), py::arg("out"),
     "out = x op y (0 add, 1 sub, 2 mul, 3 div); an operand of 1 element is a scalar, one whose size divides the "
     "output's repeats along its leading dimensions.");
  m.def("unary", [](int op, const py::array& x, py::array out) {
    const Kind kind = kind_of(x, "unary");
    check({{&x, false}, {&out, true}}, kind, "unary");
    if (op < kNeg || op > kCube) throw py::value_error("unary: unknown op " + std::to_string(op));
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T* xp = data_of<T>(x);
      T* o = data_of<T>(out);
      py::gil_scoped_release nogil;
      unary_op<T>(op, xp, o, x.size());
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("op"), py::arg("x"), py::arg("out"),
     "out = f(x): 0 neg, 1 exp, 2 log, 3 tanh, 4 sigmoid, 5 relu, 6 sqrt, 7 rsqrt, 8 abs, 9 reciprocal, 10 square, "
     "11 silu, 12 cube.");
  m.def("unary_backward", [](int op, const py::array& grad, const py::array& v, py::array out) {
    const Kind kind = kind_of(v, "unary_backward");
    check({{&grad, false}, {&v, false}, {&out, true}}, kind, "unary_backward");
    if (op < kSigmoidBackward || op > kSiluBackward) {
      throw py::value_error("unary_backward: unknown op " + std::to_string(op));
    }
    auto run = [&](auto zero) {
      using T = decltype(zero);
      using Loop = void (*)(const T*, const T*, T*, int64_t, int64_t);
      static constexpr Loop loops[] = {unary_backward_loop<kSigmoidBackward, T>, unary_backward_loop<kTanhBackward, T>,
                                       unary_backward_loop<kSiluBackward, T>};
      const Loop loop = loops[op];
      const T *g = data_of<T>(grad), *vp = data_of<T>(v);
      T* o = data_of<T>(out);
      py::gil_scoped_release nogil;
      parallel_for(v.size(), kElementGrain, [&](int64_t b, int64_t e) { loop(g, vp, o, b, e); });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("op"), py::arg("grad"), py::arg("v"), py::arg("out"),
     "out = the input gradient of 0 sigmoid (v its output), 1 tanh (v its output), 2 silu (v its input).");
  m.def("ternary", [](int op, const py::array& a, const py::array& b, const py::array& c, double w, py::array out) {
    const Kind kind = kind_of(out, "ternary");
    check({{&a, false}, {&b, false}, {&c, false}, {&out, true}}, kind, "ternary");
    if (op < kLerp || op > kAddcdiv) throw py::value_error("ternary: unknown op " + std::to_string(op));
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T *ap = data_of<T>(a), *bp = data_of<T>(b), *cp = data_of<T>(c);
      T* o = data_of<T>(out);
      py::gil_scoped_release nogil;
      ternary_op<T>(op, ap, bp, cp, T(w), o, out.size());
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("op"), py::arg("a"), py::arg("b"), py::arg("c"), py::arg("w"), py::arg("out"),
     "out = 0 lerp(a, b, w), 1 a + w * b * c (addcmul), 2 a + w * b / c (addcdiv); out may be a.");
  m.def("relu_backward", [](const py::array& grad, const py::array& y, py::array out) {
    const Kind kind = kind_of(y, "relu_backward");
    check({{&grad, false}, {&y, false}, {&out, true}}, kind, "relu_backward");
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T *g = data_of<T>(grad), *yp = data_of<T>(y);
      T* o = data_of<T>(out);
      py::gil_scoped_release nogil;
      parallel_for(y.size(), kElementGrain, [&](int64_t b, int64_t e) { relu_backward_loop(g, yp, o, b, e); });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("grad"), py::arg("y"), py::arg("out"), "out = grad where y > 0 (or NaN), else 0.");
  m.def("where", [](const py::array& cond, const py::array& a, const py::array& b, py::array out) {
    const Kind kind = kind_of(out, "where");
    check({{&a, false}, {&b, false}, {&out, true}}, kind, "where", -1);
    const int64_t n = out.size();
    const int64_t p = cond.size();
    if (!py::isinstance<py::array_t<bool>>(cond) || !(cond.flags() & py::array::c_style) || p == 0 || n % p) {
      throw py::value_error("where: expected a C-contiguous bool condition of the output's size or a size that "
                            "divides it (a trailing broadcast)");
    }
    for (const py::array* v : {&a, &b}) {
      if (v->size() != n && v->size() != 1) throw py::value_error("where: a and b must be scalars or full-size");
    }
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const bool* c = static_cast<const bool*>(cond.data());
      const T *ap = data_of<T>(a), *bp = data_of<T>(b);
      const int64_t sa = a.size() == n ? 1 : 0, sb = b.size() == n ? 1 : 0;
      T* o = data_of<T>(out);
      py::gil_scoped_release nogil;
      parallel_for(n, kElementGrain, [&](int64_t lo, int64_t hi) {
        if (sa && sb) where_range<1, 1>(c, p, ap, bp, o, lo, hi);
        else if (sa) where_range<1, 0>(c, p, ap, bp, o, lo, hi);
        else if (sb) where_range<0, 1>(c, p, ap, bp, o, lo, hi);
        else where_range<0, 0>(c, p, ap, bp, o, lo, hi);
      });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("cond"), py::arg("a"), py::arg("b"), py::arg("out"),
     "out = cond ? a : b (a, b full-size or scalars; cond full-size or repeating along the leading dimensions).");
  m.def("cast", [](const py::array& x, py::array out) {
    const Kind from = kind_of(x, "cast"), to = kind_of(out, "cast");
    if (x.size() != out.size()) throw py::value_error("cast: x and out must have the same size");
    for (const py::array* a : std::initializer_list<const py::array*>{&x, &out}) {
      if (!(a->flags() & py::array::c_style)) throw py::value_error("cast: arrays must be C-contiguous");
    }
    if (!out.writeable()) throw py::value_error("cast: output array is read-only");
    auto run = [&](auto f, auto t) {
      using From = decltype(f);
      using To = decltype(t);
      const From* xp = data_of<From>(x);
      To* o = data_of<To>(out);
      py::gil_scoped_release nogil;
      parallel_for(x.size(), kElementGrain, [&](int64_t b, int64_t e) { cast_loop(xp, o, b, e); });
    };
    if (from == Kind::f32 && to == Kind::f64) run(0.f, 0.0);
    else if (from == Kind::f64 && to == Kind::f32) run(0.0, 0.f);
    else throw py::type_error("cast: expected float32 -> float64 or float64 -> float32");
  }, py::arg("x"), py::arg("out"), "out = x converted (float32 <-> float64).");
  m.def("extremum", [](const py::array& x, int64_t A, int64_t R, int64_t C, py::array out, bool is_max) {
    const Kind kind = check_blocks(x, A, R, C, out, "extremum");
    if (R == 0) throw py::value_error("extremum: expected R > 0 (a maximum of nothing)");
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T* xp = data_of<T>(x);
      T* o = data_of<T>(out);
      py::gil_scoped_release nogil;
      is_max ? extremum_op<true>(xp, A, R, C, o) : extremum_op<false>(xp, A, R, C, o);
    };
    if (A * C > 0) kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("x"), py::arg("A"), py::arg("R"), py::arg("C"), py::arg("out"), py::arg("is_max"),
     "out (A, C) = the maxima (is_max) or minima of x (A, R, C) over R; NaN where a reduced value is NaN.");
  m.def("clamp", [](const py::array& x, double lo, double hi, py::array out) {
    const Kind kind = kind_of(x, "clamp");
    check({{&x, false}, {&out, true}}, kind, "clamp");
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T* xp = data_of<T>(x);
      T* o = data_of<T>(out);
      py::gil_scoped_release nogil;
      parallel_for(x.size(), kElementGrain, [&](int64_t b, int64_t e) { clamp_loop(xp, T(lo), T(hi), o, b, e); });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("x"), py::arg("lo"), py::arg("hi"), py::arg("out"),
     "out = x clamped to [lo, hi] (pass -inf / inf for a missing bound); NaN stays NaN.");
  m.def("cast_half", [](const py::array& x, py::array out, bool bf16) {
    const bool down = py::isinstance<py::array_t<float>>(x);
    const bool ok = down ? py::isinstance<py::array_t<uint16_t>>(out)
                         : py::isinstance<py::array_t<uint16_t>>(x) && py::isinstance<py::array_t<float>>(out);
    if (!ok) throw py::type_error("cast_half: expected float32 -> uint16 bits or uint16 bits -> float32");
    if (x.size() != out.size()) throw py::value_error("cast_half: x and out must have the same size");
    if (!bf16 && !float16_casts()) throw py::type_error("cast_half: float16 needs F16C or a compiler with _Float16");
    for (const py::array* a : std::initializer_list<const py::array*>{&x, &out}) {
      if (!(a->flags() & py::array::c_style)) throw py::value_error("cast_half: arrays must be C-contiguous");
    }
    if (!out.writeable()) throw py::value_error("cast_half: output array is read-only");
    const void* xp = x.data();
    void* o = out.mutable_data();
    py::gil_scoped_release nogil;
    parallel_for(x.size(), kElementGrain, [&](int64_t b, int64_t e) {
      const float* f = static_cast<const float*>(xp);
      const uint16_t* h = static_cast<const uint16_t*>(xp);
      uint16_t* to16 = static_cast<uint16_t*>(o);
      float* to32 = static_cast<float*>(o);
#ifdef TT_F16C
      if (!bf16 && has_f16c()) {
        down ? to_f16_f16c(f, to16, b, e) : from_f16_f16c(h, to32, b, e);
        return;
      }
#endif
      if (down) {
        bf16 ? to_half_loop<true>(f, to16, b, e) : to_half_loop<false>(f, to16, b, e);
      } else {
        bf16 ? from_half_loop<true>(h, to32, b, e) : from_half_loop<false>(h, to32, b, e);
      }
    });
  }, py::arg("x"), py::arg("out"), py::arg("bf16"),
     "out = x converted float32 -> float16/bfloat16 (out: their bits as uint16) or back (x: the bits).");
  m.attr("float16_casts") = float16_casts();
  m.def("copy", [](const py::array& x, py::array out) {
    if (!x.dtype().equal(out.dtype()) || x.ndim() != out.ndim() || !out.writeable()) {
      throw py::value_error("copy: expected a writeable output of x's dtype and shape");
    }
    for (py::ssize_t d = 0; d < x.ndim(); ++d) {
      if (x.shape(d) != out.shape(d)) throw py::value_error("copy: expected a writeable output of x's dtype and shape");
    }
    const int64_t n = x.size(), item = x.itemsize();
    if (n == 0) return;
    std::vector<int64_t> shape, sstr, dstr;  // dimensions of one element dropped
    for (py::ssize_t d = 0; d < x.ndim(); ++d) {
      if (x.shape(d) == 1) continue;
      shape.push_back(x.shape(d));
      sstr.push_back(x.strides(d));
      dstr.push_back(out.strides(d));
    }
    if (shape.empty()) {
      shape.push_back(1);
      sstr.push_back(item);
      dstr.push_back(item);
    }
    // Dimensions that both arrays lay out contiguously one inside the other become one (longer runs).
    for (size_t d = shape.size() - 1; d > 0; --d) {
      if (sstr[d - 1] == sstr[d] * shape[d] && dstr[d - 1] == dstr[d] * shape[d]) {
        shape[d - 1] *= shape[d];
        sstr[d - 1] = sstr[d];
        dstr[d - 1] = dstr[d];
        shape.erase(shape.begin() + d);
        sstr.erase(sstr.begin() + d);
        dstr.erase(dstr.begin() + d);
      }
    }
    const char* src = static_cast<const char*>(x.data());
    char* dst = static_cast<char*>(out.mutable_data());
    py::gil_scoped_release nogil;
    parallel_for(n, kElementGrain,
                 [&](int64_t b, int64_t e) { copy_strided(src, shape, sstr, dst, dstr, item, b, e); });
  }, py::arg("x"), py::arg("out"), "out[...] = x (same shape and dtype, any strides; the two must not overlap).");
  m.def("fill", [](py::array out, double value) {
    const Kind kind = kind_of(out, "fill");
    check({{&out, true}}, kind, "fill", -1);
    auto run = [&](auto zero) {
      using T = decltype(zero);
      T* o = data_of<T>(out);
      const T v = T(value);
      py::gil_scoped_release nogil;
      parallel_for(out.size(), kElementGrain, [&](int64_t b, int64_t e) { fill_loop(o, v, b, e); });
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("out"), py::arg("value"), "out[...] = value.");
  m.def("sum", [](const py::array& x, int64_t A, int64_t R, int64_t C, py::array out, bool norm, double scale,
                  bool squares) {
    const Kind kind = check_blocks(x, A, R, C, out, "sum");
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const T* xp = data_of<T>(x);
      T* o = data_of<T>(out);
      py::gil_scoped_release nogil;
      norm || squares ? sum_op<true>(xp, A, R, C, scale, norm, o) : sum_op<false>(xp, A, R, C, scale, false, o);
    };
    kind == Kind::f32 ? run(0.f) : run(0.0);
  }, py::arg("x"), py::arg("A"), py::arg("R"), py::arg("C"), py::arg("out"), py::arg("norm") = false,
     py::arg("scale") = 1.0, py::arg("squares") = false,
     "out (A, C) = x (A, R, C) summed over R times scale (1 / R: the mean), with squares=True its squares summed "
     "(times scale), with norm=True its 2-norms over R (float32 accumulates in float64).");
}

}  // namespace tinytorch::cpu
