#include "nccl_backend.hpp"
namespace tinytorch::dist {
void bind_nccl(pybind11::module_& m) { m.def("nccl_available", [] { return false; }); }
}
