// The engine every ring collective runs on: it moves a sequence of send units to the right and
// receive units from the left, overlapping both, where a send may depend on receives before it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "ring_links.hpp"

namespace tinytorch::dist {

enum class Opcode : uint32_t {
  AllReduce = 1,
  ReduceScatter = 2,
  AllGather = 3,
  Broadcast = 4,
  Reduce = 5,
  Barrier = 6,
  P2P = 7
};
const char* opcode_name(Opcode op);

// What every rank must agree on; exchanged with both neighbours ahead of the data.
struct CollectiveCtx {
  Opcode opcode;
  uint64_t seq;
  uint64_t count;  // elements per rank's input, as the API sees it
  DType dtype;
  ReduceOp op;
  int root;
  std::string what;  // "rank 1: all_reduce #7 (1000 x float32, SUM)" for errors
  Deadline deadline;
  size_t segment_bytes;
};

struct SendUnit {
  const char* ptr;
  size_t bytes;
};
struct RecvUnit {
  char* dst;
  const char* a;  // non-null: dst = a (op) incoming; null: plain copy
  size_t bytes;
};

struct RingPlan {
  size_t nsend = 0, nrecv = 0;
  std::function<SendUnit(size_t)> send_unit;
  std::function<RecvUnit(size_t)> recv_unit;
  // How many receive units must be complete before send unit i may go.
  std::function<size_t(size_t)> recv_needed;
  std::function<void(size_t)> on_recv_done;  // optional
};

void run_ring(RingLinks& links, const CollectiveCtx& ctx, const RingPlan& plan);

// Splits `count` elements into `parts` nearly equal ranges (the first count % parts get one more).
inline size_t part_begin(size_t count, size_t parts, size_t i) {
  size_t base = count / parts, extra = count % parts;
  return i * base + (i < extra ? i : extra);
}
inline size_t part_size(size_t count, size_t parts, size_t i) { return count / parts + (i < count % parts ? 1 : 0); }

}  // namespace tinytorch::dist
