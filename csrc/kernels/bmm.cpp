// Batched matrix products, out[i] = a[i] b[i], on the intra-op pool: the batches (and blocks of rows of each)
// are split over the threads and each block is one small_gemm product that reads a and b through their strides.
// NumPy's matmul calls BLAS once per matrix, one matrix after another, and copies an operand whose matrices are
// not laid out for BLAS; attention's products over (batch, head) views of a (B, T, 3C) array are exactly that
// case: many small strided matrices. The Python side sends batches of small matrices here, and linear's tall
// narrow products (_ops/linalg.py: _narrow, measured faster than BLAS in the step); other large products keep
// BLAS's cache blocking.
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu_kernels.h"
#include "kernels/small_gemm.h"

namespace tinytorch::cpu {

namespace {

constexpr int64_t kRows = 96;  // rows of a per work item at most

template <class T>
void bmm(const py::array& a, const py::array& b, py::array& out) {
  const int nd = int(a.ndim());
  const int64_t M = a.shape(nd - 2), K = a.shape(nd - 1), N = b.shape(nd - 1);
  const int64_t item = sizeof(T);
  for (const py::array* x : {&a, &b}) {
    for (int d = 0; d < nd; ++d) {
      if (x->strides(d) % item) throw py::value_error("bmm: unaligned operand");
    }
  }
  const std::vector<int64_t> oa = batch_offsets(a);
  std::vector<int64_t> ob = batch_offsets(b);
  const int64_t ars = a.strides(nd - 2) / item, acs = a.strides(nd - 1) / item;
  int64_t brs = b.strides(nd - 2) / item, bcs = b.strides(nd - 1) / item;
  const T *ap = data_of<T>(a), *bp = data_of<T>(b);
  T* op = data_of<T>(out);
  const int64_t batches = int64_t(oa.size());
  if (batches == 0 || M == 0 || N == 0) return;
  // Blocks of at most kRows rows, of even height in whole 8-row (AVX-512) tiles; when there are fewer matrices than
  // threads, as many blocks as a multiple of the thread count: a (128, 768) @ (768, 128) weight gradient splits
  // 64 + 64 on two threads, not 96 + 32.
  int64_t blocks = (M + kRows - 1) / kRows;
  const int64_t threads = num_threads();
  if (batches < threads) blocks = (blocks + threads - 1) / threads * threads;
  const int64_t rows_per = ((M + blocks - 1) / blocks + 7) & ~int64_t(7);
  blocks = (M + rows_per - 1) / rows_per;
  py::gil_scoped_release nogil;
  // One matrix with a transposed B (linear's x @ W.T): B made row-major once here, rather than packed again by
  // every block of rows. Rows that would be a multiple of 128 bytes apart are put a cache line further apart: a
  // tile reads a 128-byte row of its panel per step of k, and rows a power-of-two distance apart fall into a few
  // of L1's 64 sets and evict each other before the next tile reads them again (nanoGPT's K = 128 forwards, in
  // the step: 11-15% faster padded, docs/benchmarks.md "sixth pass"). A row-major B is read in place unless its
  // rows are a multiple of 1 kB apart (W of (128, 512) in g @ W: 11-12% faster on a padded copy; at 512 bytes
  // apart the copy cost what it saved).
  std::unique_ptr<T[]> bt;  // not a vector: every element is written, zeroing it first would be a wasted pass
  const int64_t padded = N + 64 / item;
  if (batches == 1 && brs == 1 && bcs != 1 && blocks > 1) {
    const int64_t ldb = (N * item) % 128 == 0 ? padded : N;
    bt.reset(new T[K * ldb]);
    transpose(bp + ob[0], bcs, N, K, bt.get(), ldb);
    bp = bt.get();
    ob[0] = 0;
    brs = ldb;
    bcs = 1;
  } else if (batches == 1 && bcs == 1 && (brs * item) % 1024 == 0 && blocks > 1) {
    bt.reset(new T[K * padded]);
    for (int64_t p = 0; p < K; ++p) std::memcpy(bt.get() + p * padded, bp + ob[0] + p * brs, N * item);
    bp = bt.get();
    ob[0] = 0;
    brs = padded;
  }
  const int64_t work = std::max<int64_t>(1, std::min(M, rows_per) * N * K);
  parallel_claim(batches * blocks, std::max<int64_t>(1, kElementGrain * 8 / work), [&](int64_t begin, int64_t end) {
    std::vector<T> panel;
    for (int64_t w = begin; w < end; ++w) {
      const int64_t i = w / blocks, r0 = (w % blocks) * rows_per, rows = std::min(rows_per, M - r0);
      gemm<T>(rows, N, K, T(1), ap + oa[i] + r0 * ars, ars, acs, bp + ob[i], brs, bcs, T(0),
              op + (i * M + r0) * N, N, panel);
    }
  });
}

}  // namespace

void init_bmm(py::module_& m) {
  m.def("bmm", [](const py::array& a, const py::array& b, py::array out) {
    const Kind kind = check_product(a, b, out, 3, "bmm");
    kind == Kind::f32 ? bmm<float>(a, b, out) : bmm<double>(a, b, out);
  }, py::arg("a"), py::arg("b"), py::arg("out"),
     "out[i] = a[i] @ b[i] over the batch dimensions (a and b any strides, broadcast views included; out "
     "C-contiguous).");
}

}  // namespace tinytorch::cpu
