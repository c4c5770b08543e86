// tinytorch._C: the autograd engine (csrc/engine), the communication layer (csrc/nccl_ring) and
// fused CPU kernels (csrc/kernels).
#include <pybind11/pybind11.h>

namespace tinytorch {
void init_engine(pybind11::module_& m);
void init_distributed(pybind11::module_& m);
void init_cpu_kernels(pybind11::module_& m);
}  // namespace tinytorch

PYBIND11_MODULE(_C, m) {
  m.doc() = "tinytorch's C++ core: autograd engine and communication layer";
  tinytorch::init_engine(m);
  tinytorch::init_distributed(m);
  tinytorch::init_cpu_kernels(m);
}
