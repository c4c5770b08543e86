#include <cstring>

#include "ring_algorithms.hpp"

namespace tinytorch::dist {

void ring_reduce_scatter(RingLinks* links, const CollectiveCtx& ctx, int r, int n, char* out, const char* in,
                         size_t count, std::vector<char>& scratch, bool overwrite_in) {
  const size_t es = dtype_size(ctx.dtype), block = count * es;
  if (n == 1 || links == nullptr) {
    if (out != in) std::memmove(out, in, block);
    if (ctx.op == ReduceOp::AVG) divide_by(out, count, ctx.dtype, 1);
    return;
  }
  // Partial sums of blocks that are still travelling live in scratch, so `in` stays untouched (or in `in`).
  char* work;
  if (overwrite_in) {
    work = const_cast<char*>(in);
  } else {
    scratch.resize(static_cast<size_t>(n) * block);
    work = scratch.data();
  }
  const size_t nseg = num_segments(block, ctx.segment_bytes);
  const size_t steps = static_cast<size_t>(n - 1);
  auto seg_off = [&](size_t j, size_t* len) {
    *len = part_size(count, nseg, j) * es;
    return part_begin(count, nseg, j) * es;
  };
  RingPlan plan;
  plan.nsend = plan.nrecv = steps * nseg;
  plan.send_unit = [&](size_t i) {
    long t = long(i / nseg);
    size_t c = ring_mod(r - t - 1, n), len, off = seg_off(i % nseg, &len);
    const char* base = t == 0 ? in : work;
    return SendUnit{base + c * block + off, len};
  };
  plan.recv_unit = [&](size_t i) {
    long t = long(i / nseg);
    size_t c = ring_mod(r - t - 2, n), len, off = seg_off(i % nseg, &len);
    char* dst = t == n - 2 ? out + off : work + c * block + off;
    return RecvUnit{dst, in + c * block + off, len};
  };
  plan.recv_needed = [&](size_t i) { return i < nseg ? size_t(0) : i - nseg + 1; };
  if (ctx.op == ReduceOp::AVG) {
    plan.on_recv_done = [&](size_t i) {
      if (long(i / nseg) != n - 2) return;
      size_t len, off = seg_off(i % nseg, &len);
      divide_by(out + off, len / es, ctx.dtype, n);
    };
  }
  run_ring(*links, ctx, plan);
}

}  // namespace tinytorch::dist
