// Matrix products through a cblas library already loaded (_threads.py picks MKL's sequential layer when the mkl
// wheel is installed, else the OpenBLAS NumPy loaded), split over the intra-op pool: each thread calls the
// one-threaded sgemm/dgemm on its block of rows (or columns) of the product, or on whole matrices of a batch.
// OpenBLAS's own threads are turned off (set_num_threads sets it to one), so that one pool runs every kernel:
// two pools on the same cores (OpenBLAS's spinning between products, ours between elementwise ops) take the
// cores from each other. Operands are read in place through their strides: a transposed view is BLAS's
// transpose flag, never a copy.
#include <dlfcn.h>

#include <vector>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

// cblas_?gemm with 32-bit (LP64) or 64-bit (ILP64, "...64_" symbols) integers; enums are ints either way.
template <class I, class T>
using GemmFn = void (*)(int, int, int, I, I, I, T, const T*, I, const T*, I, T, T*, I);

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

struct Blas {
  void* s = nullptr;  // GemmFn<int64_t or int, float>
  void* d = nullptr;
  bool ilp64 = false;
};

Blas& blas() {
  static Blas b;
  return b;
}

// The library at `path` (already loaded by NumPy): its cblas sgemm and dgemm, ILP64 names first.
bool load_blas(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) return false;
  const char* names[][3] = {{"scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_", "1"},
                            {"cblas_sgemm64_", "cblas_dgemm64_", "1"},
                            {"cblas_sgemm", "cblas_dgemm", "0"}};
  for (auto& n : names) {
    void* s = dlsym(lib, n[0]);
    void* d = dlsym(lib, n[1]);
    if (s != nullptr && d != nullptr) {
      blas() = Blas{s, d, n[2][0] == '1'};
      return true;  // the handle stays open: NumPy keeps the library loaded for the process's life anyway
    }
  }
  dlclose(lib);
  return false;
}

template <class T>
void call_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
               T* c, int64_t ldc) {
  const Blas& bl = blas();
  void* fn = sizeof(T) == 4 ? bl.s : bl.d;
  const int at = ta ? kTrans : kNoTrans, bt = tb ? kTrans : kNoTrans;
  if (bl.ilp64) {
    reinterpret_cast<GemmFn<int64_t, T>>(fn)(kRowMajor, at, bt, m, n, k, T(1), a, lda, b, ldb, T(0), c, ldc);
  } else {
    reinterpret_cast<GemmFn<int, T>>(fn)(kRowMajor, at, bt, int(m), int(n), int(k), T(1), a, int(lda), b, int(ldb),
                                         T(0), c, int(ldc));
  }
}

// A matrix operand: rows x cols with element strides (rs, cs), as BLAS takes it (row-major, or transposed).
struct Operand {
  bool trans;
  int64_t ld;
};

// How BLAS reads a (rows x cols) matrix with element strides rs, cs, or false if it can't (no unit stride).
bool as_blas(int64_t rows, int64_t cols, int64_t rs, int64_t cs, Operand* op) {
  if (cols == 1) cs = 1;  // a stride along a dimension of one element is never used
  if (rows == 1) rs = std::max<int64_t>(cols, 1);
  if (cs == 1 && rs >= std::max<int64_t>(cols, 1)) {
    *op = {false, rs};
    return true;
  }
  if (rows == 1 || cols == 1) {  // a vector: any unit stride will do
    if (rs == 1) {
      *op = {true, std::max<int64_t>(rows, 1)};
      return true;
    }
    return false;
  }
  if (rs == 1 && cs >= rows) {
    *op = {true, cs};
    return true;
  }
  return false;
}

// Products this small run as one call on the caller (splitting them costs more than it saves).
constexpr int64_t kSplitWork = 1 << 18;

// out[i] = a[i] @ b[i] for every batch entry i (one entry for 2-D): the entries' rows (or, when there are more
// columns than rows, columns) are split so that every thread has a block.
template <class T>
void run(const py::array& a, const py::array& b, py::array& out) {
  const int nd = int(a.ndim());
  const int64_t M = a.shape(nd - 2), K = a.shape(nd - 1), N = b.shape(nd - 1), item = sizeof(T);
  Operand oa, ob;
  if (!as_blas(M, K, a.strides(nd - 2) / item, a.strides(nd - 1) / item, &oa) ||
      !as_blas(K, N, b.strides(nd - 2) / item, b.strides(nd - 1) / item, &ob)) {
    throw py::value_error("gemm: each matrix needs a unit stride in one of its two dimensions");
  }
  const std::vector<int64_t> offa = batch_offsets(a), offb = batch_offsets(b);
  const int64_t batches = int64_t(offa.size());
  const T *ap = data_of<T>(a), *bp = data_of<T>(b);
  T* cp = data_of<T>(out);
  py::gil_scoped_release nogil;
  const bool by_rows = M >= N;
  const int64_t len = by_rows ? M : N, other = (by_rows ? N : M) * K;
  // Split each product into `parts` blocks when the batch alone does not give every thread work.
  const int64_t want = std::max<int64_t>(1, (num_threads() + batches - 1) / batches);
  const int64_t parts = std::max<int64_t>(1, std::min({want, len, M * N * K / kSplitWork}));
  const int64_t block = (len + parts - 1) / parts;
  parallel_for(batches * parts, std::max<int64_t>(1, kSplitWork / std::max<int64_t>(1, block * other)),
               [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      const int64_t i = w / parts, lo = (w % parts) * block, hi = std::min(len, lo + block);
      if (lo >= hi) continue;
      const T* ai = ap + offa[i];
      const T* bi = bp + offb[i];
      T* ci = cp + i * M * N;
      if (by_rows) {  // rows lo..hi of a (row lo starts lo rows in: lo * ld, or lo when transposed)
        call_gemm<T>(oa.trans, ob.trans, hi - lo, N, K, ai + lo * (oa.trans ? 1 : oa.ld), oa.ld, bi, ob.ld,
                     ci + lo * N, N);
      } else {  // columns lo..hi of b and of the product
        call_gemm<T>(oa.trans, ob.trans, M, hi - lo, K, ai, oa.ld, bi + lo * (ob.trans ? ob.ld : 1), ob.ld, ci + lo, N);
      }
    }
  });
}

}  // namespace

void init_gemm(py::module_& m) {
  m.def("set_blas", &load_blas, py::arg("path"),
        "Use the cblas sgemm/dgemm of this already-loaded library for gemm(); False if it has none.");
  m.def("gemm", [](const py::array& a, const py::array& b, py::array out) {
    if (blas().s == nullptr) throw std::runtime_error("gemm: no BLAS was set (set_blas)");
    const Kind kind = check_product(a, b, out, 2, "gemm");
    if (out.size() == 0) return;
    kind == Kind::f32 ? run<float>(a, b, out) : run<double>(a, b, out);
  }, py::arg("a"), py::arg("b"), py::arg("out"),
     "out = a @ b by BLAS on the intra-op pool (a and b any strides with a unit stride per matrix, broadcast batch "
     "views included; out C-contiguous).");
}

}  // namespace tinytorch::cpu
