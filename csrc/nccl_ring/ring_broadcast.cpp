#include "ring_algorithms.hpp"

namespace tinytorch::dist {

void ring_broadcast(RingLinks* links, const CollectiveCtx& ctx, int r, int n, char* buf, size_t count, int root) {
  if (n == 1 || links == nullptr) return;
  const size_t es = dtype_size(ctx.dtype), bytes = count * es;
  const size_t nseg = num_segments(bytes, ctx.segment_bytes);
  // Distance from the root along the ring: the root only sends, the last rank only receives.
  const size_t d = ring_mod(r - root, n);
  auto seg = [&](size_t j) {
    return SendUnit{buf + part_begin(count, nseg, j) * es, part_size(count, nseg, j) * es};
  };
  RingPlan plan;
  plan.nsend = d + 1 < static_cast<size_t>(n) ? nseg : 0;
  plan.nrecv = d > 0 ? nseg : 0;
  plan.send_unit = seg;
  plan.recv_unit = [&](size_t j) {
    SendUnit s = seg(j);
    return RecvUnit{const_cast<char*>(s.ptr), nullptr, s.bytes};
  };
  plan.recv_needed = [&](size_t j) { return d == 0 ? size_t(0) : j + 1; };
  run_ring(*links, ctx, plan);
}

}  // namespace tinytorch::dist
