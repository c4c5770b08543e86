// The Python side of the flight recorder: what a binding knows about an op (shapes, Python stack).
#pragma once
#include <pybind11/pybind11.h>

#include "flight_recorder.hpp"

namespace tinytorch::dist::fr {

// Shapes of the arrays a backend call moves (`arrays`: the output array, or an (output, input) tuple, or None)
// and, under TORCH_INCLUDE_STACK_TRACE, the caller's Python stack; empty with the recorder off. Needs the GIL.
CallerInfo caller_info(pybind11::handle arrays);

}  // namespace tinytorch::dist::fr
