// torch.cat of C-contiguous arrays along one dimension (ATen's CatKernel), on the intra-op pool. Each input is
// seen as (outer, width_j) and the output as (outer, sum of widths): output row i is input j's row i for every j,
// side by side. Filling the output row after row writes each of its cache lines once; copying the inputs one
// after another into strided slices of it (NumPy's concatenate) brings every output line in once per input.
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

void init_cat(py::module_& m) {
  m.def("cat_rows", [](const std::vector<py::array>& parts, py::array out, int64_t outer) {
    if (!(out.flags() & py::array::c_style) || !out.writeable()) {
      throw py::value_error("cat_rows: out must be a writeable C-contiguous array");
    }
    const int64_t item = out.itemsize();
    std::vector<const char*> src(parts.size());
    std::vector<int64_t> width(parts.size()), offset(parts.size());
    int64_t row = 0;
    for (size_t j = 0; j < parts.size(); ++j) {
      const py::array& p = parts[j];
      if (p.dtype().not_equal(out.dtype()) || !(p.flags() & py::array::c_style)) {
        throw py::value_error("cat_rows: part " + std::to_string(j) + " must be C-contiguous, of out's dtype");
      }
      if (outer <= 0 || p.size() % outer) {
        throw py::value_error("cat_rows: part " + std::to_string(j) + " of " + std::to_string(p.size()) +
                              " elements is not " + std::to_string(outer) + " rows");
      }
      src[j] = static_cast<const char*>(p.data());
      width[j] = p.size() / outer * item;
      offset[j] = row;
      row += width[j];
    }
    if (row * outer != int64_t(out.size()) * item) {
      throw py::value_error("cat_rows: out holds " + std::to_string(out.size()) + " elements, the parts " +
                            std::to_string(row * outer / std::max<int64_t>(1, item)));
    }
    char* dst = static_cast<char*>(out.mutable_data());
    py::gil_scoped_release nogil;
    parallel_for(outer, std::max<int64_t>(1, kElementGrain * 4 / std::max<int64_t>(1, row)),
                 [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        for (size_t j = 0; j < src.size(); ++j) {
          std::memcpy(dst + i * row + offset[j], src[j] + i * width[j], size_t(width[j]));
        }
      }
    });
  }, py::arg("parts"), py::arg("out"), py::arg("outer"),
     "out (outer, sum of widths) = the C-contiguous parts, each seen as (outer, width), side by side.");
}

}  // namespace tinytorch::cpu
