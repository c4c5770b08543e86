#include <pybind11/pybind11.h>
namespace tinytorch::dist {
void bind_process_groups(pybind11::module_&) {}
}
