#include <pybind11/pybind11.h>
namespace tinytorch {
void init_distributed(pybind11::module_& m) {}
}  // namespace tinytorch
