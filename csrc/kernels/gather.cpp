// gather and scatter_add along one dimension (ATen's ScatterGatherKernel), on the intra-op pool:
//   gather:      out[p] = x[p with p[dim] = index[p]]
//   scatter_add: out[p with p[dim] = index[p]] += src[p]
// for every position p of index. NumPy does these through advanced indexing with one broadcast index array per
// dimension (and np.add.at, element by element, for the scatter); here each row of index (its last dimension)
// is one loop over offsets. x is read through its strides; index, src and out are C-contiguous.
#include <atomic>
#include <string>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

// Element strides of x (strides in bytes divided by the item size), or an error for a misaligned view.
std::vector<int64_t> element_strides(const py::array& x, const char* what) {
  std::vector<int64_t> s(x.ndim());
  for (int d = 0; d < int(x.ndim()); ++d) {
    if (x.strides(d) % x.itemsize()) throw py::value_error(std::string(what) + ": unaligned array");
    s[d] = x.strides(d) / x.itemsize();
  }
  return s;
}

// Offset of index row `row` (a position over index's leading dimensions, of sizes `shape`) in an array with
// element strides `strides`, leaving out dimension `dim` (the one index picks along).
int64_t row_offset(int64_t row, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int dim) {
  int64_t off = 0;
  for (int d = int(shape.size()) - 2; d >= 0; --d) {
    const int64_t i = row % shape[d];
    row /= shape[d];
    if (d != dim) off += i * strides[d];
  }
  return off;
}

// Whether every one of n indices lies in [0, size): one vectorised pass (the row is then in L1 for the gather).
TT_SIMD_CLONES bool in_range(const int64_t* idx, int64_t n, int64_t size) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok &= uint64_t(idx[i]) < uint64_t(size);
  return ok;
}

// One row of a gather: out[c] = base[c * step + idx[c] * along]; along the last dimension (step 0, along 1) a
// plain indexed load, which the AVX2/AVX-512 clones turn into vector gathers.
template <class T>
TT_SIMD_CLONES void gather_row(const T* base, const int64_t* idx, T* out, int64_t cols, int64_t step, int64_t along) {
  if (step == 0 && along == 1) {
    for (int64_t c = 0; c < cols; ++c) out[c] = base[idx[c]];
    return;
  }
  for (int64_t c = 0; c < cols; ++c) out[c] = base[c * step + idx[c] * along];
}

// Returns the position of a row holding an index outside [0, size) (its elements are then not read), or -1.
template <class T>
int64_t gather(const py::array& x, const py::array_t<int64_t>& index, py::array& out, int dim) {
  const int nd = int(index.ndim());
  const std::vector<int64_t> xs = element_strides(x, "gather"), shape(index.shape(), index.shape() + nd);
  const int64_t cols = index.shape(nd - 1), rows = cols ? index.size() / cols : 0, size = x.shape(dim);
  const int64_t step = dim == nd - 1 ? 0 : xs[nd - 1], along = xs[dim];
  const T* xp = static_cast<const T*>(x.data());
  const int64_t* ip = index.data();
  T* op = static_cast<T*>(out.mutable_data());
  std::atomic<int64_t> bad{-1};
  py::gil_scoped_release nogil;
  parallel_for(rows, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, cols)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t* ir = ip + r * cols;
      if (!in_range(ir, cols, size)) {
        bad.store(r, std::memory_order_relaxed);
        return;
      }
      gather_row(xp + row_offset(r, shape, xs, dim), ir, op + r * cols, cols, step, along);
    }
  });
  return bad.load();
}

// One row of a scatter_add: base[c * step + idx[c] * along] += src[c] (the indices of one row may repeat).
template <class T>
TT_SIMD_CLONES void scatter_add_row(T* base, const int64_t* idx, const T* src, int64_t cols, int64_t step,
                                    int64_t along) {
  if (step == 0 && along == 1) {
    for (int64_t c = 0; c < cols; ++c) base[idx[c]] += src[c];
    return;
  }
  for (int64_t c = 0; c < cols; ++c) base[c * step + idx[c] * along] += src[c];
}

template <class T>
void scatter_add(py::array& out, const py::array_t<int64_t>& index, const py::array& src, int dim) {
  const int nd = int(index.ndim());
  const std::vector<int64_t> os = element_strides(out, "scatter_add"), shape(index.shape(), index.shape() + nd);
  const int64_t cols = index.shape(nd - 1), rows = cols ? index.size() / cols : 0;
  const int64_t step = dim == nd - 1 ? 0 : os[nd - 1], along = os[dim];
  const T* sp = static_cast<const T*>(src.data());
  const int64_t* ip = index.data();
  T* op = static_cast<T*>(out.mutable_data());
  // Rows that differ in a dimension other than `dim` write disjoint parts of out; rows that differ only along
  // `dim` may write the same elements. Split over index's first dimension when that is not `dim` (every
  // thread then owns its own slices of out); otherwise one thread does it all.
  const int64_t first = nd > 1 && dim != 0 ? index.shape(0) : 1, per = rows / std::max<int64_t>(1, first);
  py::gil_scoped_release nogil;
  parallel_for(first, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, per * cols)),
               [&](int64_t begin, int64_t end) {
    for (int64_t r = begin * per; r < end * per; ++r) {
      scatter_add_row(op + row_offset(r, shape, os, dim), ip + r * cols, sp + r * cols, cols, step, along);
    }
  });
}

// The error PyTorch raises for the first index of `row` outside [0, size).
[[noreturn]] void out_of_range(const int64_t* row, int64_t cols, int64_t size, int dim) {
  int64_t c = 0;
  while (c < cols && uint64_t(row[c]) < uint64_t(size)) ++c;
  throw py::index_error("index " + std::to_string(row[c]) + " is out of bounds for dimension " + std::to_string(dim) +
                        " with size " + std::to_string(size));
}

// index and the array it picks from: the same number of dimensions (at least one), index C-contiguous and no
// larger outside `dim`.
void check_index(const py::array& x, const py::array_t<int64_t>& index, int dim, const char* what) {
  const std::string w(what);
  if (x.ndim() == 0 || index.ndim() != x.ndim() || dim < 0 || dim >= int(x.ndim())) {
    throw py::value_error(w + ": index and the array must have the same number of dimensions (at least 1), and dim "
                          "must be one of them");
  }
  if (!(index.flags() & py::array::c_style)) throw py::value_error(w + ": index must be C-contiguous");
  for (int d = 0; d < int(x.ndim()); ++d) {
    if (d != dim && index.shape(d) > x.shape(d)) {
      throw py::value_error(w + ": index is larger than the array at dimension " + std::to_string(d));
    }
  }
}

}  // namespace

void init_gather(py::module_& m) {
  m.def("gather", [](const py::array& x, const py::array_t<int64_t>& index, py::array out, int dim) {
    check_index(x, index, dim, "gather");
    if (out.dtype().not_equal(x.dtype()) || !(out.flags() & py::array::c_style) || !out.writeable() ||
        out.ndim() != index.ndim() || out.size() != index.size()) {
      throw py::value_error("gather: out must be a writeable C-contiguous array of x's dtype and index's shape");
    }
    if (index.size() == 0) return;
    int64_t bad;
    switch (x.itemsize()) {  // a gather only moves elements: their size is all that matters
      case 4: bad = gather<uint32_t>(x, index, out, dim); break;
      case 8: bad = gather<uint64_t>(x, index, out, dim); break;
      default: throw py::type_error("gather: expected 4- or 8-byte elements");
    }
    const int64_t cols = index.shape(index.ndim() - 1);
    if (bad >= 0) out_of_range(index.data() + bad * cols, cols, x.shape(dim), dim);
  }, py::arg("x"), py::arg("index"), py::arg("out"), py::arg("dim"),
     "out = x.gather(dim, index) for 4- and 8-byte elements (x any strides; index int64 and out C-contiguous).");
  m.def("scatter_add", [](py::array out, const py::array_t<int64_t>& index, const py::array& src, int dim) {
    check_index(out, index, dim, "scatter_add");
    const Kind kind = kind_of(out, "scatter_add");
    check({{&out, true}}, kind, "scatter_add", -1);
    check({{&src, false}}, kind, "scatter_add", index.size());
    if (index.size() == 0) return;
    if (!in_range(index.data(), index.size(), out.shape(dim))) out_of_range(index.data(), index.size(), out.shape(dim), dim);
    kind == Kind::f32 ? scatter_add<float>(out, index, src, dim) : scatter_add<double>(out, index, src, dim);
  }, py::arg("out"), py::arg("index"), py::arg("src"), py::arg("dim"),
     "out.scatter_add_(dim, index, src) in place (float32/float64; out, index and src C-contiguous, src of "
     "index's shape); repeated indices accumulate.");
}

}  // namespace tinytorch::cpu
