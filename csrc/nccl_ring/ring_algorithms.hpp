// Ring collectives over RingLinks; each lives in its own file. Buffers are raw host memory.
#pragma once
#include <vector>

#include "ring_pipeline.hpp"

namespace tinytorch::dist {

// In place. Messages up to small_bytes take the latency path (one full-buffer all-gather, then a
// local reduction in rank order); larger ones run reduce-scatter + all-gather in segments.
void ring_allreduce(RingLinks* links, const CollectiveCtx& ctx, int rank, int size, char* buf, size_t count,
                    size_t small_bytes, std::vector<char>& scratch);
// in: size * count elements; out: count elements (this rank's reduced block).
// With overwrite_in, partial sums are kept in `in` itself (the caller no longer needs it) instead of in
// scratch: FSDP's gradient buffer is temporary, and a scratch copy of it would double its memory.
void ring_reduce_scatter(RingLinks* links, const CollectiveCtx& ctx, int rank, int size, char* out, const char* in,
                         size_t count, std::vector<char>& scratch, bool overwrite_in = false);
// in: count elements; out: size * count elements, rank i's block at i * count.
void ring_allgather(RingLinks* links, const CollectiveCtx& ctx, int rank, int size, char* out, const char* in,
                    size_t count);
// root's buffer is copied into everyone's, pipelined along the ring.
void ring_broadcast(RingLinks* links, const CollectiveCtx& ctx, int rank, int size, char* buf, size_t count, int root);

inline size_t ring_mod(long v, int n) { return static_cast<size_t>(((v % n) + n) % n); }

inline size_t num_segments(size_t bytes, size_t segment_bytes) {
  size_t n = (bytes + segment_bytes - 1) / segment_bytes;
  return n == 0 ? 1 : n;
}

}  // namespace tinytorch::dist
