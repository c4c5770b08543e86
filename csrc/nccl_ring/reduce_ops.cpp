#include <algorithm>
#include <cstring>

#include "dtypes.hpp"
#include "errors.hpp"

namespace tinytorch::dist {
namespace {

// bfloat16 is the top half of an IEEE float32; rounding to nearest-even keeps results equal to ml_dtypes'.
inline float bf16_to_float(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

template <typename T, typename F>
void apply(T* out, const T* a, const T* b, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

template <typename T>
void reduce_typed(T* out, const T* a, const T* b, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM:
    case ReduceOp::AVG:
      apply(out, a, b, n, [](T x, T y) { return static_cast<T>(x + y); });
      break;
    case ReduceOp::PRODUCT:
      apply(out, a, b, n, [](T x, T y) { return static_cast<T>(x * y); });
      break;
    case ReduceOp::MIN:
      apply(out, a, b, n, [](T x, T y) { return y < x ? y : x; });
      break;
    case ReduceOp::MAX:
      apply(out, a, b, n, [](T x, T y) { return y > x ? y : x; });
      break;
  }
}

// 16-bit floats reduce in float32 in blocks, rounding once per pairwise step as NumPy does.
template <typename ToF, typename FromF>
void reduce_16(uint16_t* out, const uint16_t* a, const uint16_t* b, size_t n, ReduceOp op, ToF to_f, FromF from_f) {
  constexpr size_t kBlock = 1024;
  float fa[kBlock], fb[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    size_t m = std::min(kBlock, n - base);
    for (size_t i = 0; i < m; ++i) {
      fa[i] = to_f(a[base + i]);
      fb[i] = to_f(b[base + i]);
    }
    reduce_typed(fa, fa, fb, m, op);
    for (size_t i = 0; i < m; ++i) out[base + i] = from_f(fa[i]);
  }
}

}  // namespace

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float16:
    case DType::BFloat16:
      return 2;
    case DType::Float32:
    case DType::Int32:
      return 4;
    case DType::Float64:
    case DType::Int64:
      return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::PRODUCT: return "PRODUCT";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
  }
  return "?";
}

DType dtype_from_int(int v) {
  if (v < 0 || v > 5) throw DistError("unsupported dtype code " + std::to_string(v));
  return static_cast<DType>(v);
}

ReduceOp reduce_op_from_int(int v) {
  if (v < 0 || v > 4) throw DistError("unsupported reduce op code " + std::to_string(v));
  return static_cast<ReduceOp>(v);
}

void reduce_into(void* out, const void* a, const void* b, size_t n, DType t, ReduceOp op) {
  switch (t) {
    case DType::Float32:
      reduce_typed(static_cast<float*>(out), static_cast<const float*>(a), static_cast<const float*>(b), n, op);
      break;
    case DType::Float64:
      reduce_typed(static_cast<double*>(out), static_cast<const double*>(a), static_cast<const double*>(b), n, op);
      break;
    case DType::Int32:
      reduce_typed(static_cast<int32_t*>(out), static_cast<const int32_t*>(a), static_cast<const int32_t*>(b), n, op);
      break;
    case DType::Int64:
      reduce_typed(static_cast<int64_t*>(out), static_cast<const int64_t*>(a), static_cast<const int64_t*>(b), n, op);
      break;
    case DType::Float16:
      reduce_16(static_cast<uint16_t*>(out), static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), n, op,
                [](uint16_t h) {
                  _Float16 x;
                  std::memcpy(&x, &h, 2);
                  return static_cast<float>(x);
                },
                [](float f) {
                  _Float16 x = static_cast<_Float16>(f);
                  uint16_t h;
                  std::memcpy(&h, &x, 2);
                  return h;
                });
      break;
    case DType::BFloat16:
      reduce_16(static_cast<uint16_t*>(out), static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), n, op,
                bf16_to_float, float_to_bf16);
      break;
  }
}

void divide_by(void* buf, size_t n, DType t, int d) {
  switch (t) {
    case DType::Float32: {
      auto* p = static_cast<float*>(buf);
      for (size_t i = 0; i < n; ++i) p[i] /= static_cast<float>(d);
      break;
    }
    case DType::Float64: {
      auto* p = static_cast<double*>(buf);
      for (size_t i = 0; i < n; ++i) p[i] /= static_cast<double>(d);
      break;
    }
    case DType::Float16:
    case DType::BFloat16: {
      // Reuse the 16-bit path: divide by multiplying with a broadcast reciprocal would round differently.
      auto* p = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < n; ++i) {
        if (t == DType::BFloat16) {
          p[i] = float_to_bf16(bf16_to_float(p[i]) / static_cast<float>(d));
        } else {
          _Float16 x;
          std::memcpy(&x, &p[i], 2);
          x = static_cast<_Float16>(static_cast<float>(x) / static_cast<float>(d));
          std::memcpy(&p[i], &x, 2);
        }
      }
      break;
    }
    case DType::Int32:
    case DType::Int64:
      throw DistError("ReduceOp.AVG is only defined for floating-point tensors");
  }
}

}  // namespace tinytorch::dist
