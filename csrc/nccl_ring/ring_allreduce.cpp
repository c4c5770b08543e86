#include <cstring>

#include "ring_algorithms.hpp"

namespace tinytorch::dist {
namespace {

void small_allreduce(RingLinks& links, const CollectiveCtx& ctx, int r, int n, char* buf, size_t count,
                     std::vector<char>& scratch) {
  const size_t es = dtype_size(ctx.dtype), bytes = count * es;
  scratch.resize(static_cast<size_t>(n) * bytes);
  char* blocks = scratch.data();
  std::memcpy(blocks + r * bytes, buf, bytes);
  RingPlan plan;
  plan.nsend = plan.nrecv = static_cast<size_t>(n - 1);
  plan.send_unit = [&](size_t s) { return SendUnit{blocks + ring_mod(r - long(s), n) * bytes, bytes}; };
  plan.recv_unit = [&](size_t s) { return RecvUnit{blocks + ring_mod(r - long(s) - 1, n) * bytes, nullptr, bytes}; };
  plan.recv_needed = [](size_t s) { return s; };
  run_ring(links, ctx, plan);
  // Reducing in rank order on every rank gives bit-identical results everywhere.
  std::memcpy(buf, blocks, bytes);
  for (int k = 1; k < n; ++k) reduce_into(buf, buf, blocks + k * bytes, count, ctx.dtype, ctx.op);
  if (ctx.op == ReduceOp::AVG) divide_by(buf, count, ctx.dtype, n);
}

}  // namespace

void ring_allreduce(RingLinks* links, const CollectiveCtx& ctx, int r, int n, char* buf, size_t count,
                    size_t small_bytes, std::vector<char>& scratch) {
  const size_t es = dtype_size(ctx.dtype);
  if (n == 1 || links == nullptr) return;  // AVG over one rank divides by one
  if (count * es <= small_bytes || count < static_cast<size_t>(n)) {
    small_allreduce(*links, ctx, r, n, buf, count, scratch);
    return;
  }
  const size_t nseg = num_segments(part_size(count, n, 0) * es, ctx.segment_bytes);
  const size_t steps = 2 * static_cast<size_t>(n - 1);
  // Element range of segment j of chunk c.
  auto seg = [&](size_t c, size_t j, size_t* len) {
    size_t cb = part_begin(count, n, c), cl = part_size(count, n, c);
    *len = part_size(cl, nseg, j) * es;
    return buf + (cb + part_begin(cl, nseg, j)) * es;
  };
  RingPlan plan;
  plan.nsend = plan.nrecv = steps * nseg;
  plan.send_unit = [&](size_t i) {
    long t = long(i / nseg);
    size_t c = t < n - 1 ? ring_mod(r - t - 1, n) : ring_mod(r - (t - (n - 1)), n), len;
    char* p = seg(c, i % nseg, &len);
    return SendUnit{p, len};
  };
  plan.recv_unit = [&](size_t i) {
    long t = long(i / nseg);
    bool reducing = t < n - 1;
    size_t c = reducing ? ring_mod(r - t - 2, n) : ring_mod(r - (t - (n - 1)) - 1, n), len;
    char* p = seg(c, i % nseg, &len);
    return RecvUnit{p, reducing ? p : nullptr, len};
  };
  // Step t forwards what step t-1 received: a segment may go once its predecessor has arrived.
  plan.recv_needed = [&](size_t i) { return i < nseg ? size_t(0) : i - nseg + 1; };
  if (ctx.op == ReduceOp::AVG) {
    plan.on_recv_done = [&](size_t i) {
      if (long(i / nseg) != n - 2) return;
      size_t len;
      char* p = seg(static_cast<size_t>(r), i % nseg, &len);
      divide_by(p, len / es, ctx.dtype, n);
    };
  }
  run_ring(*links, ctx, plan);
}

}  // namespace tinytorch::dist
