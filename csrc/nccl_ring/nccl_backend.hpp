#pragma once
#include <pybind11/pybind11.h>
namespace tinytorch::dist {
void bind_nccl(pybind11::module_& m);
}
