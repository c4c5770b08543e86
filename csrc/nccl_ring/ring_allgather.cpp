#include <cstring>

#include "ring_algorithms.hpp"

namespace tinytorch::dist {

void ring_allgather(RingLinks* links, const CollectiveCtx& ctx, int r, int n, char* out, const char* in, size_t count) {
  const size_t es = dtype_size(ctx.dtype), block = count * es;
  if (out + r * block != in) std::memmove(out + r * block, in, block);
  if (n == 1 || links == nullptr) return;
  const size_t nseg = num_segments(block, ctx.segment_bytes);
  auto seg_off = [&](size_t j, size_t* len) {
    *len = part_size(count, nseg, j) * es;
    return part_begin(count, nseg, j) * es;
  };
  RingPlan plan;
  plan.nsend = plan.nrecv = static_cast<size_t>(n - 1) * nseg;
  plan.send_unit = [&](size_t i) {
    size_t c = ring_mod(r - long(i / nseg), n), len, off = seg_off(i % nseg, &len);
    return SendUnit{out + c * block + off, len};
  };
  plan.recv_unit = [&](size_t i) {
    size_t c = ring_mod(r - long(i / nseg) - 1, n), len, off = seg_off(i % nseg, &len);
    return RecvUnit{out + c * block + off, nullptr, len};
  };
  plan.recv_needed = [&](size_t i) { return i < nseg ? size_t(0) : i - nseg + 1; };
  run_ring(*links, ctx, plan);
}

}  // namespace tinytorch::dist
