// out[index[i], :] += src[i, :] with repeated indices accumulating: index_add along dim 0, which is
// embedding's backward. NumPy's np.add.at does this element by element through its generic indexing
// machinery; a row-wise loop is several times faster.
#include <string>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

namespace {

template <class T>
void index_add_rows(py::array& out, const int64_t* index, int64_t count, const py::array& src, int64_t row) {
  T* dst = data_of<T>(out);
  const T* s = data_of<T>(src);
  py::gil_scoped_release nogil;
  // One thread: repeated rows would race.
  for (int64_t i = 0; i < count; ++i) {
    T* d = dst + index[i] * row;
    const T* v = s + i * row;
    for (int64_t c = 0; c < row; ++c) d[c] += v[c];
  }
}

}  // namespace

void init_index_add(py::module_& m) {
  m.def("index_add_rows", [](py::array out, const py::array_t<int64_t, 0>& index, const py::array& src) {
    const Kind kind = kind_of(out, "index_add_rows");
    if (out.ndim() == 0) throw py::value_error("index_add_rows: out must have at least one dimension");
    if (index.ndim() != 1 || !(index.flags() & py::array::c_style)) {
      throw py::value_error("index_add_rows: index must be a contiguous 1-D int64 array");
    }
    const int64_t rows = out.shape(0), count = index.shape(0);
    const int64_t row = rows ? out.size() / rows : 0;
    check({{&out, true}}, kind, "index_add_rows", out.size());
    check({{&src, false}}, kind, "index_add_rows", count * row);
    const int64_t* idx = index.data();
    for (int64_t i = 0; i < count; ++i) {
      if (idx[i] < 0 || idx[i] >= rows) {
        throw py::index_error("index_add_rows: index " + std::to_string(idx[i]) + " is out of bounds for dimension 0 "
                              "with size " + std::to_string(rows));
      }
    }
    kind == Kind::f32 ? index_add_rows<float>(out, idx, count, src, row)
                      : index_add_rows<double>(out, idx, count, src, row);
  }, py::arg("out"), py::arg("index"), py::arg("src"),
     "out[index[i]] += src[i] along dim 0, in place; repeated indices accumulate.");
}

}  // namespace tinytorch::cpu
