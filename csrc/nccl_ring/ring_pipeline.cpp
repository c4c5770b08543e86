#include "ring_pipeline.hpp"

#include <cstring>

namespace tinytorch::dist {
namespace {

constexpr uint32_t kWireMagic = 0x52494e47;  // "RING"

struct WireHeader {
  uint32_t magic;
  uint32_t opcode;
  uint64_t seq;
  uint64_t count;
  int32_t dtype;
  int16_t op;
  int16_t root;
};
static_assert(sizeof(WireHeader) == 32, "header travels as 32 bytes");

WireHeader header_of(const CollectiveCtx& c) {
  WireHeader h{};
  h.magic = kWireMagic;
  h.opcode = static_cast<uint32_t>(c.opcode);
  h.seq = c.seq;
  h.count = c.count;
  h.dtype = static_cast<int32_t>(c.dtype);
  h.op = static_cast<int16_t>(c.op);
  h.root = static_cast<int16_t>(c.root);
  return h;
}

std::string describe(const WireHeader& h) {
  if (h.magic != kWireMagic) return "unrecognised data (not a collective header)";
  std::string s = std::string(opcode_name(static_cast<Opcode>(h.opcode))) + " #" + std::to_string(h.seq) + " (" +
                  std::to_string(h.count) + " x " +
                  (h.dtype >= 0 && h.dtype <= 5 ? dtype_name(static_cast<DType>(h.dtype)) : "?");
  if (h.opcode == static_cast<uint32_t>(Opcode::AllReduce) || h.opcode == static_cast<uint32_t>(Opcode::ReduceScatter) ||
      h.opcode == static_cast<uint32_t>(Opcode::Reduce))
    s += std::string(", ") + (h.op >= 0 && h.op <= 4 ? reduce_op_name(static_cast<ReduceOp>(h.op)) : "?");
  if (h.opcode == static_cast<uint32_t>(Opcode::Broadcast) || h.opcode == static_cast<uint32_t>(Opcode::Reduce))
    s += ", root " + std::to_string(h.root);
  return s + ")";
}

}  // namespace

const char* opcode_name(Opcode op) {
  switch (op) {
    case Opcode::AllReduce: return "all_reduce";
    case Opcode::ReduceScatter: return "reduce_scatter";
    case Opcode::AllGather: return "all_gather";
    case Opcode::Broadcast: return "broadcast";
    case Opcode::Reduce: return "reduce";
    case Opcode::Barrier: return "barrier";
    case Opcode::P2P: return "send/recv";
  }
  return "unknown";
}

void run_ring(RingLinks& links, const CollectiveCtx& ctx, const RingPlan& plan) {
  links.begin_collective();
  const WireHeader out_hdr = header_of(ctx);
  WireHeader in_hdr{};
  const char* out_h = reinterpret_cast<const char*>(&out_hdr);
  char* in_h = reinterpret_cast<char*>(&in_hdr);
  size_t hs = 0, hr = 0;
  const size_t es = dtype_size(ctx.dtype);

  size_t si = 0, soff = 0, ri = 0, roff = 0;
  SendUnit su{nullptr, 0};
  RecvUnit ru{nullptr, nullptr, 0};
  bool su_valid = false, ru_valid = false;

  while (hs < sizeof(WireHeader) || hr < sizeof(WireHeader) || si < plan.nsend || ri < plan.nrecv) {
    bool progress = false, want_send = false, want_recv = false;

    if (hs < sizeof(WireHeader)) {
      size_t k = links.send_some(out_h + hs, sizeof(WireHeader) - hs, 1, ctx.what);
      hs += k;
      progress |= k > 0;
      want_send = k == 0;
    } else if (si < plan.nsend && ri >= plan.recv_needed(si)) {
      if (!su_valid) {
        su = plan.send_unit(si);
        su_valid = true;
      }
      size_t k = su.bytes > soff ? links.send_some(su.ptr + soff, su.bytes - soff, es, ctx.what) : 0;
      links.count_sent(k);
      soff += k;
      progress |= k > 0 || su.bytes == 0;
      want_send = k == 0 && su.bytes > 0;
      if (soff >= su.bytes) {
        ++si;
        soff = 0;
        su_valid = false;
      }
    }

    if (hr < sizeof(WireHeader)) {
      size_t k = links.recv_copy_some(in_h + hr, sizeof(WireHeader) - hr, 1, ctx.what);
      hr += k;
      progress |= k > 0;
      want_recv = k == 0;
      if (hr == sizeof(WireHeader) && std::memcmp(&in_hdr, &out_hdr, sizeof(WireHeader)) != 0)
        throw DistError(ctx.what + ": collective mismatch: this rank issued " + describe(out_hdr) + " but rank " +
                        std::to_string(links.left()) + " issued " + describe(in_hdr) +
                        "; every rank must call the same collectives in the same order with the same sizes");
    } else if (ri < plan.nrecv) {
      if (!ru_valid) {
        ru = plan.recv_unit(ri);
        ru_valid = true;
      }
      size_t k = 0;
      if (ru.bytes > roff) {
        k = ru.a ? links.recv_reduce_some(ru.dst + roff, ru.a + roff, ru.bytes - roff, ctx.dtype, ctx.op, ctx.what)
                 : links.recv_copy_some(ru.dst + roff, ru.bytes - roff, es, ctx.what);
      }
      roff += k;
      progress |= k > 0 || ru.bytes == 0;
      want_recv = k == 0 && ru.bytes > 0;
      if (roff >= ru.bytes) {
        if (plan.on_recv_done) plan.on_recv_done(ri);
        ++ri;
        roff = 0;
        ru_valid = false;
      }
    }

    if (!progress) links.wait(want_send, want_recv, ctx.deadline, ctx.what);
  }
}

}  // namespace tinytorch::dist
