// CRC-32C (Castagnoli), the checksum distributed checkpoints record per item: the SSE4.2 crc32 instruction
// (8 bytes per instruction, ~10x zlib's CRC-32 here) where the CPU has it, a slicing-by-8 table elsewhere.
// Same values as crc32c in iSCSI, ext4, Snappy and Python's google-crc32c: crc32c(b"123456789") == 0xE3069283.
#include <Python.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/cpu_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
#define TT_HAVE_SSE42_PATH 1
#endif

namespace tinytorch::cpu {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // Castagnoli, bit-reversed

struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (kPoly & (0u - (c & 1u)));
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};

const Tables& tables() {
  static const Tables tab;
  return tab;
}

// crc is the running register (already inverted); slicing-by-8 consumes 8 bytes per step.
uint32_t crc_portable(uint32_t crc, const unsigned char* p, size_t n) {
  const auto& t = tables().t;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= crc;
    crc = t[7][v & 0xFF] ^ t[6][(v >> 8) & 0xFF] ^ t[5][(v >> 16) & 0xFF] ^ t[4][(v >> 24) & 0xFF] ^
          t[3][(v >> 32) & 0xFF] ^ t[2][(v >> 40) & 0xFF] ^ t[1][(v >> 48) & 0xFF] ^ t[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFF];
  return crc;
}

#ifdef TT_HAVE_SSE42_PATH
__attribute__((target("sse4.2"))) uint32_t crc_sse42(uint32_t crc, const unsigned char* p, size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

bool have_sse42() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}
#endif

uint32_t crc32c(uint32_t value, const unsigned char* p, size_t n, bool portable) {
  uint32_t crc = ~value;
#ifdef TT_HAVE_SSE42_PATH
  if (!portable && have_sse42()) return ~crc_sse42(crc, p, n);
#endif
  return ~crc_portable(crc, p, n);
}

// A C-contiguous view of any buffer (bytes, bytearray, memoryview, NumPy array), released on scope exit.
class ContiguousBuffer {
 public:
  explicit ContiguousBuffer(const py::object& obj) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) throw py::error_already_set();
  }
  ~ContiguousBuffer() { PyBuffer_Release(&view_); }
  ContiguousBuffer(const ContiguousBuffer&) = delete;
  ContiguousBuffer& operator=(const ContiguousBuffer&) = delete;
  const unsigned char* data() const { return static_cast<const unsigned char*>(view_.buf); }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
};

}  // namespace

void init_crc32c(py::module_& m) {
  m.def("crc32c", [](const py::object& data, uint32_t value, bool portable) {
    ContiguousBuffer buf(data);
    py::gil_scoped_release nogil;
    return crc32c(value, buf.data(), buf.size(), portable);
  }, py::arg("data"), py::arg("value") = 0, py::arg("portable") = false,
     "CRC-32C of a contiguous buffer, continuing from `value` (the CRC of the bytes before it), like "
     "zlib.crc32's second argument. portable=True takes the table loop even where SSE4.2 is present.");
}

}  // namespace tinytorch::cpu
