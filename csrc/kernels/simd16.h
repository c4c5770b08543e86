// A vector of 16 floats and the operations the convolution kernels use, for one instruction set: AVX-512
// (TT_SIMD16 == 512: one zmm register) or AVX2 with FMA (TT_SIMD16 == 256: two ymm registers). The kernels
// are written once against V and compiled once per instruction set (see conv2d_isa.h): this file is included
// inside that instruction set's namespace and `#pragma GCC target` region, so it has no include guard and no
// includes of its own (the includer brings <immintrin.h>, <cstdint>, <cstring>).
//
// Masks are 16 bits, lane i in bit i. Masked loads never touch the memory of lanes that are off. The
// product loops, where every register counts, use the native register (NV: kNL floats) directly.

using Mask = uint16_t;

#if TT_SIMD16 == 512

struct V {
  __m512 v;
};

using NV = __m512;
constexpr int kNL = 16;
inline NV nzero() { return _mm512_setzero_ps(); }
inline NV nset1(float a) { return _mm512_set1_ps(a); }
inline NV nload(const float* p) { return _mm512_load_ps(p); }
inline void nstore(float* p, NV a) { _mm512_store_ps(p, a); }
inline NV nfmadd(NV a, NV b, NV c) { return _mm512_fmadd_ps(a, b, c); }

inline V zero() { return {_mm512_setzero_ps()}; }
inline V set1(float a) { return {_mm512_set1_ps(a)}; }
inline V load(const float* p) { return {_mm512_load_ps(p)}; }
inline V loadu(const float* p) { return {_mm512_loadu_ps(p)}; }
inline V maskz_loadu(Mask m, const float* p) { return {_mm512_maskz_loadu_ps(__mmask16(m), p)}; }
inline void store(float* p, V a) { _mm512_store_ps(p, a.v); }
inline void mask_storeu(float* p, Mask m, V a) { _mm512_mask_storeu_ps(p, __mmask16(m), a.v); }
// The lanes that are on, written one after another from p.
inline void compress_storeu(float* p, Mask m, V a) { _mm512_mask_compressstoreu_ps(p, __mmask16(m), a.v); }
inline V add(V a, V b) { return {_mm512_add_ps(a.v, b.v)}; }
inline V sub(V a, V b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline V fmadd(V a, V b, V c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }

// [a0, a2, ..., a14, b0, b2, ..., b14] and [a1, a3, ..., b15]: the even and odd elements of a then b.
inline V even(V a, V b) {
  const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return {_mm512_permutex2var_ps(a.v, idx, b.v)};
}
inline V odd(V a, V b) {
  const __m512i idx = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  return {_mm512_permutex2var_ps(a.v, idx, b.v)};
}
// [a0, b0, a1, b1, ..., a7, b7] and [a8, b8, ..., a15, b15].
inline V zip_lo(V a, V b) {
  const __m512i idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  return {_mm512_permutex2var_ps(a.v, idx, b.v)};
}
inline V zip_hi(V a, V b) {
  const __m512i idx = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  return {_mm512_permutex2var_ps(a.v, idx, b.v)};
}

// In-place transpose of a 16x16 block held as 16 rows: r[i] lane j <- r[j] lane i.
inline void transpose16(V* r) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i].v, r[2 * i + 1].v);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i].v, r[2 * i + 1].v);
  }
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i + 0].v = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1].v = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2].v = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * i + 3].v = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit blocks: rows i, 4+i, 8+i, 12+i
    t[i] = _mm512_shuffle_f32x4(r[i].v, r[4 + i].v, 0x88);
    t[4 + i] = _mm512_shuffle_f32x4(r[i].v, r[4 + i].v, 0xDD);
    t[8 + i] = _mm512_shuffle_f32x4(r[8 + i].v, r[12 + i].v, 0x88);
    t[12 + i] = _mm512_shuffle_f32x4(r[8 + i].v, r[12 + i].v, 0xDD);
  }
  for (int i = 0; i < 4; ++i) {
    r[i].v = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    r[8 + i].v = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
    r[4 + i].v = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);
    r[12 + i].v = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xDD);
  }
}

// The 16 lane-sums of v[0..16) as one vector, in order: a transpose-and-add tree (unpack within 128-bit
// lanes, then across them), 15 shuffle pairs instead of 16 horizontal reductions.
inline V sum16(const V* v) {
  __m512 s[8], t[4], u[2];
  for (int i = 0; i < 8; ++i)  // lane-wise [a0+a2, b0+b2, a1+a3, b1+b3]
    s[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i].v, v[2 * i + 1].v),
                         _mm512_unpackhi_ps(v[2 * i].v, v[2 * i + 1].v));
  for (int i = 0; i < 4; ++i) {  // lane-wise [v4i, v4i+1, v4i+2, v4i+3] partial sums
    const __m512d c = _mm512_castps_pd(s[2 * i]), d = _mm512_castps_pd(s[2 * i + 1]);
    t[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c, d)), _mm512_castpd_ps(_mm512_unpackhi_pd(c, d)));
  }
  for (int i = 0; i < 2; ++i)
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0xDD));
  return {_mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xDD))};
}

#else  // AVX2 + FMA: lanes 0-7 in lo, 8-15 in hi

struct V {
  __m256 lo, hi;
};

using NV = __m256;
constexpr int kNL = 8;
inline NV nzero() { return _mm256_setzero_ps(); }
inline NV nset1(float a) { return _mm256_set1_ps(a); }
inline NV nload(const float* p) { return _mm256_load_ps(p); }
inline void nstore(float* p, NV a) { _mm256_store_ps(p, a); }
inline NV nfmadd(NV a, NV b, NV c) { return _mm256_fmadd_ps(a, b, c); }

// The per-lane mask vector of 8 mask bits (all ones where the bit is set), as maskload/maskstore take it.
inline __m256i lane_mask(unsigned bits) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(int(bits & 0xffu)), bit), bit);
}

inline V zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline V set1(float a) { return {_mm256_set1_ps(a), _mm256_set1_ps(a)}; }
inline V load(const float* p) { return {_mm256_load_ps(p), _mm256_load_ps(p + 8)}; }
inline V loadu(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline V maskz_loadu(Mask m, const float* p) {
  if (m == 0xffff) return loadu(p);
  return {_mm256_maskload_ps(p, lane_mask(m)), _mm256_maskload_ps(p + 8, lane_mask(m >> 8))};
}
inline void store(float* p, V a) {
  _mm256_store_ps(p, a.lo);
  _mm256_store_ps(p + 8, a.hi);
}
inline void mask_storeu(float* p, Mask m, V a) {
  _mm256_maskstore_ps(p, lane_mask(m), a.lo);
  _mm256_maskstore_ps(p + 8, lane_mask(m >> 8), a.hi);
}
// The lanes that are on, written one after another from p (AVX2 has no compressing store: a full mask is two
// plain stores, any other goes lane by lane; the convolutions' masks are full but where a tile crosses a row).
inline void compress_storeu(float* p, Mask m, V a) {
  if (m == 0xffff) {
    _mm256_storeu_ps(p, a.lo);
    _mm256_storeu_ps(p + 8, a.hi);
    return;
  }
  alignas(32) float lanes[16];
  _mm256_store_ps(lanes, a.lo);
  _mm256_store_ps(lanes + 8, a.hi);
  for (int i = 0; i < 16; ++i) {
    if (m & (1u << i)) *p++ = lanes[i];
  }
}
inline V add(V a, V b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline V sub(V a, V b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
inline V fmadd(V a, V b, V c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }

// The even (odd) elements of the 16 floats x: shuffle within 128-bit lanes, then put the 64-bit pairs in order.
inline __m256 even8(__m256 lo, __m256 hi) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
}
inline __m256 odd8(__m256 lo, __m256 hi) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
}
inline V even(V a, V b) { return {even8(a.lo, a.hi), even8(b.lo, b.hi)}; }
inline V odd(V a, V b) { return {odd8(a.lo, a.hi), odd8(b.lo, b.hi)}; }
// [a0, b0, ..., a7, b7] from the 8-float halves a and b.
inline V zip8(__m256 a, __m256 b) {
  const __m256 l = _mm256_unpacklo_ps(a, b), h = _mm256_unpackhi_ps(a, b);
  return {_mm256_permute2f128_ps(l, h, 0x20), _mm256_permute2f128_ps(l, h, 0x31)};
}
inline V zip_lo(V a, V b) { return zip8(a.lo, b.lo); }
inline V zip_hi(V a, V b) { return zip8(a.hi, b.hi); }

// In-place transpose of 8 rows of 8 floats.
inline void transpose8(__m256* r) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}

// In-place transpose of a 16x16 block held as 16 rows: the four 8x8 blocks transposed, the off-diagonal two
// swapped.
inline void transpose16(V* r) {
  __m256 a[8], b[8], c[8], d[8];
  for (int i = 0; i < 8; ++i) {
    a[i] = r[i].lo;
    b[i] = r[i].hi;
    c[i] = r[8 + i].lo;
    d[i] = r[8 + i].hi;
  }
  transpose8(a);
  transpose8(b);
  transpose8(c);
  transpose8(d);
  for (int i = 0; i < 8; ++i) {
    r[i] = {a[i], c[i]};
    r[8 + i] = {b[i], d[i]};
  }
}

// Lane i of the result = the sum of the 8 lanes of s[i], for 8 vectors: two rounds of horizontal adds
// within 128-bit lanes, then the two lanes added.
inline __m256 sum8(const __m256* s) {
  const __m256 t0 = _mm256_hadd_ps(s[0], s[1]), t1 = _mm256_hadd_ps(s[2], s[3]);
  const __m256 t2 = _mm256_hadd_ps(s[4], s[5]), t3 = _mm256_hadd_ps(s[6], s[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// The 16 lane-sums of v[0..16) as one vector, in order.
inline V sum16(const V* v) {
  __m256 s[16];
  for (int i = 0; i < 16; ++i) s[i] = _mm256_add_ps(v[i].lo, v[i].hi);
  return {sum8(s), sum8(s + 8)};
}

#endif
