// Many tensors in one kernel call (PyTorch's multi_tensor_apply, behind its foreach and fused optimizer paths): a
// list of arrays is walked as one flat range of their elements, split over the pool like a single array. An
// optimizer step over a model's 30 parameters is then one call and one parallel region instead of 30, and the
// small parameters (a layer norm's weight) share a thread's chunk with their neighbours instead of each running
// on the caller alone.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cpu_kernels.h"

namespace tinytorch::cpu {

// The arrays of one argument of a multi-tensor kernel: `count` NumPy arrays of `kind`, C-contiguous, writeable if
// `writes`, and (when `sizes` is not empty) of those sizes. The arrays are held here, so their data stays valid
// while the kernel runs without the GIL whatever happens to the list meanwhile.
template <class T>
struct TensorList {
  std::vector<py::array> arrays;
  std::vector<T*> data;

  TensorList() = default;
  TensorList(const py::sequence& list, Kind kind, size_t count, bool writes, const std::vector<int64_t>& sizes,
             const char* what, const char* name) {
    if (list.size() != count) {
      throw py::value_error(std::string(what) + ": expected " + std::to_string(count) + " " + name + ", got " +
                            std::to_string(list.size()));
    }
    for (size_t i = 0; i < count; ++i) {
      if (!py::isinstance<py::array>(list[i])) {
        throw py::type_error(std::string(what) + ": " + name + " must hold NumPy arrays");
      }
      arrays.push_back(list[i].cast<py::array>());
      check({{&arrays.back(), writes}}, kind, what, sizes.empty() ? -1 : sizes[i]);
      data.push_back(static_cast<T*>(const_cast<void*>(arrays.back().data())));
    }
  }
};

// Runs fn(chunk, tensor, lo, hi) over elements [lo, hi) of every tensor, the tensors' elements (sizes[t] each)
// taken as one range and split into parallel_chunks' chunks: a chunk may cover the end of one tensor and the
// start of the next.
template <class F>
void for_each_tensor_chunk(const std::vector<int64_t>& sizes, int threads, int64_t grain, F&& fn) {
  std::vector<int64_t> start(sizes.size() + 1, 0);
  for (size_t t = 0; t < sizes.size(); ++t) start[t + 1] = start[t] + sizes[t];
  parallel_chunks(start.back(), threads, grain, [&](int64_t chunk, int64_t begin, int64_t end) {
    size_t t = size_t(std::upper_bound(start.begin(), start.end(), begin) - start.begin()) - 1;
    for (; t < sizes.size() && start[t] < end; ++t) {
      const int64_t lo = std::max(begin, start[t]) - start[t], hi = std::min(end, start[t + 1]) - start[t];
      if (lo < hi) fn(chunk, int64_t(t), lo, hi);
    }
  });
}

}  // namespace tinytorch::cpu
