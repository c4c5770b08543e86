// tinytorch._C._cpu: fused CPU kernels for the places where NumPy would make many passes over a large
// array. Each takes C-contiguous float32/float64 arrays, checks them, releases the GIL and splits the
// work over the intra-op thread pool (parallel.h; tinytorch.set_num_threads sizes it).
#include "kernels/cpu_kernels.h"

namespace tinytorch {

void init_cpu_kernels(pybind11::module_& m) {
  pybind11::module_ k = m.def_submodule(
      "_cpu", "Fused CPU kernels (GELU, erf, softmax, cross entropy, LayerNorm, GroupNorm, index_add, AdamW, foreach "
              "norm and mul, conv2d, BatchNorm, max pooling, LSTM cell, attention, matrix products, elementwise ops "
              "and sums) and CRC-32C");
  k.def("set_num_threads", &cpu::set_num_threads, pybind11::arg("n"),
        "The intra-op thread count of every kernel here (0: one per core).");
  k.def("get_num_threads", &cpu::num_threads, "The intra-op thread count in effect.");
  k.def("_shutdown_pool", &cpu::shutdown_pool, "Join the intra-op pool's threads (at interpreter exit).");
  k.def("parallel_regions", &cpu::parallel_regions, "How many regions have been split over the intra-op pool.");
  cpu::init_gelu(k);
  cpu::init_softmax(k);
  cpu::init_cross_entropy(k);
  cpu::init_layer_norm(k);
  cpu::init_group_norm(k);
  cpu::init_index_add(k);
  cpu::init_adamw(k);
  cpu::init_foreach(k);
  cpu::init_conv2d(k);
  cpu::init_conv2d_winograd(k);
  cpu::init_batch_norm(k);
  cpu::init_max_pool(k);
  cpu::init_lstm_cell(k);
  cpu::init_conv2d_grouped(k);
  cpu::init_attention(k);
  cpu::init_elementwise(k);
  cpu::init_bmm(k);
  cpu::init_gemm(k);
  cpu::init_crc32c(k);
  cpu::init_cumsum(k);
  cpu::init_gather(k);
  cpu::init_cat(k);
  cpu::init_activation(k);
}

}  // namespace tinytorch
