// Point-to-point send/recv: a direct TCP connection per pair (made on first use), with a header
// that both sides check so a size or tag mismatch raises instead of corrupting the stream.
#include <cstring>

#include "process_group_ring.hpp"

namespace tinytorch::dist {
namespace {

constexpr uint32_t kP2PMagic = 0x50325031;

struct P2PHeader {
  uint32_t magic;
  int32_t tag;
  uint64_t seq;
  uint64_t bytes;
};

}  // namespace

std::shared_ptr<Work> ProcessGroupRing::send(const void* buf, size_t count, DType t, int dst, int tag,
                                             Keep keep, bool async_op) {
  check_rank(dst, "send");
  if (dst == rank_) throw DistError("rank " + std::to_string(rank_) + ": send to itself is not supported");
  auto desc = "send to rank " + std::to_string(dst) + " (" + std::to_string(count) + " x " + dtype_name(t) +
              ", tag " + std::to_string(tag) + ")";
  return submit(async_op, 0, desc, std::move(keep), {"send", t, count, count, dst},
                [=](const std::string& what, Deadline d) {
    Socket& s = peer(dst, d, what);
    P2PHeader h{kP2PMagic, tag, ++p2p_sent_[dst], count * dtype_size(t)};
    s.send_all(&h, sizeof(h), d, what);
    s.send_all(buf, h.bytes, d, what);
  });
}

std::shared_ptr<Work> ProcessGroupRing::recv(void* buf, size_t count, DType t, int src, int tag,
                                             Keep keep, bool async_op) {
  check_rank(src, "recv");
  if (src == rank_) throw DistError("rank " + std::to_string(rank_) + ": recv from itself is not supported");
  auto desc = "recv from rank " + std::to_string(src) + " (" + std::to_string(count) + " x " + dtype_name(t) +
              ", tag " + std::to_string(tag) + ")";
  return submit(async_op, 0, desc, std::move(keep), {"recv", t, count, count, src},
                [=](const std::string& what, Deadline d) {
    Socket& s = peer(src, d, what);
    P2PHeader h{};
    uint64_t expect_seq = ++p2p_recvd_[src];
    const uint64_t bytes = count * dtype_size(t);
    try {
      s.recv_all(&h, sizeof(h), d, what);
    } catch (const DistTimeoutError&) {
      throw DistTimeoutError(what + ": timed out waiting for rank " + std::to_string(src) + " to send");
    } catch (const DistNetworkError&) {
      throw DistNetworkError(what + ": rank " + std::to_string(src) + " closed its connection");
    }
    if (h.magic != kP2PMagic || h.seq != expect_seq)
      throw DistError(what + ": rank " + std::to_string(src) +
                      " sent something other than the matching send (it may be running a collective instead)");
    if (h.bytes != bytes || h.tag != tag)
      throw DistError(what + ": mismatched send from rank " + std::to_string(src) + ": it sent " +
                      std::to_string(h.bytes) + " bytes with tag " + std::to_string(h.tag) + ", this rank expects " +
                      std::to_string(bytes) + " bytes with tag " + std::to_string(tag));
    s.recv_all(buf, bytes, d, what);
  });
}

}  // namespace tinytorch::dist
