// Element types and reduction operators the collectives understand, and the CPU reduction kernels.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tinytorch::dist {

// Values match the Python side's table (tinytorch/distributed/_arrays.py).
enum class DType : int { Float16 = 0, BFloat16 = 1, Float32 = 2, Float64 = 3, Int32 = 4, Int64 = 5 };
enum class ReduceOp : int { SUM = 0, AVG = 1, PRODUCT = 2, MIN = 3, MAX = 4 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
const char* reduce_op_name(ReduceOp op);
DType dtype_from_int(int v);
ReduceOp reduce_op_from_int(int v);

// out[i] = a[i] (op) b[i]; out may alias a or b. AVG reduces as SUM (the division happens once, at the end).
void reduce_into(void* out, const void* a, const void* b, size_t count, DType t, ReduceOp op);
// buf[i] /= divisor, for AVG's final step (floating types only).
void divide_by(void* buf, size_t count, DType t, int divisor);

}  // namespace tinytorch::dist
