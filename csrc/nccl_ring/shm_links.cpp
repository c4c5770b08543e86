// Shared-memory ring buffers between ranks on one host: the sender copies into the receiver's
// segment, the receiver reduces or copies straight out of it. Waiting uses a futex "doorbell"
// per rank that both neighbours ring, so one wait covers "data arrived" and "space freed".
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>

#include "ring_links.hpp"

namespace tinytorch::dist {

namespace {
constexpr uint64_t kShmMagic = 0x74747368'6d726e67ull;
constexpr size_t kDataOffset = 256;

struct ShmHeader {
  uint64_t magic;
  uint64_t capacity;
  alignas(64) std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> sleeping;
  alignas(64) std::atomic<uint64_t> tail;  // written by the producer (left neighbour)
  alignas(64) std::atomic<uint64_t> head;  // written by the consumer (the segment's owner)
};
static_assert(sizeof(ShmHeader) <= kDataOffset, "header must fit before the data");
static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free,
              "cross-process atomics must be lock-free");

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

inline uint64_t align64(uint64_t v) { return (v + 63) & ~uint64_t(63); }
}  // namespace

struct ShmSegment {
  std::string name;
  void* base = MAP_FAILED;
  size_t bytes = 0;
  ~ShmSegment() {
    if (base != MAP_FAILED) ::munmap(base, bytes);
  }
  ShmHeader* hdr() const { return static_cast<ShmHeader*>(base); }
  char* data() const { return static_cast<char*>(base) + kDataOffset; }
  size_t capacity() const { return bytes - kDataOffset; }
};

std::shared_ptr<ShmSegment> create_shm_segment(const std::string& name, size_t capacity) {
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw DistError("shm_open(" + name + ") failed: " + std::strerror(errno));
  Socket guard(fd);  // closes the descriptor; the mapping stays
  auto seg = std::make_shared<ShmSegment>();
  seg->name = name;
  seg->bytes = kDataOffset + capacity;
  if (::ftruncate(fd, static_cast<off_t>(seg->bytes)) != 0) {
    ::shm_unlink(name.c_str());
    throw DistError("ftruncate of shared memory " + name + " failed: " + std::strerror(errno));
  }
  seg->base = ::mmap(nullptr, seg->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (seg->base == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    throw DistError("mmap of shared memory " + name + " failed: " + std::strerror(errno));
  }
  auto* h = new (seg->base) ShmHeader();
  h->capacity = capacity;
  h->magic = kShmMagic;
  return seg;
}

std::shared_ptr<ShmSegment> open_shm_segment(const std::string& name, size_t capacity, const std::string& what) {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw DistError(what + ": cannot open a neighbour's shared memory " + name + ": " + std::strerror(errno));
  Socket guard(fd);
  auto seg = std::make_shared<ShmSegment>();
  seg->name = name;
  seg->bytes = kDataOffset + capacity;
  seg->base = ::mmap(nullptr, seg->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (seg->base == MAP_FAILED) throw DistError(what + ": mmap of " + name + " failed: " + std::strerror(errno));
  if (seg->hdr()->magic != kShmMagic || seg->hdr()->capacity != capacity)
    throw DistError(what + ": shared memory " + name + " has an unexpected layout");
  return seg;
}

void unlink_shm_segment(const std::string& name) { ::shm_unlink(name.c_str()); }

namespace {

class ShmLinks final : public RingLinks {
 public:
  ShmLinks(int rank, int left, int right, std::shared_ptr<ShmSegment> mine, std::shared_ptr<ShmSegment> l,
           std::shared_ptr<ShmSegment> r, Socket* ls, Socket* rs)
      : RingLinks(rank, left, right),
        mine_(std::move(mine)),
        left_seg_(std::move(l)),
        right_seg_(std::move(r)),
        left_sock_(ls),
        right_sock_(rs),
        cap_(mine_->capacity()) {}

  const char* name() const override { return "shm"; }

  void begin_collective() override {
    out_tail_ = align64(out_tail_);
    in_head_ = align64(in_head_);
  }

  size_t send_some(const char* src, size_t n, size_t elem, const std::string&) override {
    ShmHeader* h = right_seg_->hdr();
    uint64_t used = out_tail_ - h->head.load(std::memory_order_acquire);
    // Realigning at a collective boundary can leave out_tail_ up to 63 bytes past a full ring.
    if (used >= cap_) return 0;
    size_t pos = out_tail_ % cap_;
    size_t k = std::min({n, static_cast<size_t>(cap_ - used), cap_ - pos});
    k = k / elem * elem;
    if (k == 0) return 0;
    std::memcpy(right_seg_->data() + pos, src, k);
    out_tail_ += k;
    h->tail.store(out_tail_, std::memory_order_release);
    ring(h);
    return k;
  }

  size_t recv_copy_some(char* dst, size_t n, size_t elem, const std::string&) override {
    size_t k = readable(n, elem);
    if (k == 0) return 0;
    std::memcpy(dst, mine_->data() + in_head_ % cap_, k);
    consumed(k);
    return k;
  }

  size_t recv_reduce_some(char* dst, const char* a, size_t n, DType t, ReduceOp op, const std::string&) override {
    size_t es = dtype_size(t);
    size_t k = readable(n, es);
    if (k == 0) return 0;
    reduce_into(dst, a, mine_->data() + in_head_ % cap_, k / es, t, op);
    consumed(k);
    return k;
  }

  void wait(bool want_send, bool want_recv, Deadline deadline, const std::string& what) override {
    ShmHeader* me = mine_->hdr();
    auto ready = [&] {
      return (want_recv && me->tail.load(std::memory_order_acquire) > in_head_) ||
             (want_send && out_tail_ - right_seg_->hdr()->head.load(std::memory_order_acquire) < cap_);
    };
    // A short spin catches the common case (the neighbour is mid-copy) without a syscall.
    for (int i = 0; i < 256; ++i) {
      if (ready()) return;
      cpu_relax();
    }
    uint32_t seq = me->doorbell.load();
    me->sleeping.store(1);
    bool timed_out = false;
    if (!ready()) {
      // Wake up regularly to notice a dead neighbour (its socket closes) and the deadline.
      auto left = std::min<int64_t>(ms_left(deadline), 20);
      timespec ts{0, static_cast<long>(left) * 1000000L};
      long rc = ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&me->doorbell), FUTEX_WAIT, seq, &ts, nullptr, 0);
      timed_out = rc != 0 && errno == ETIMEDOUT;
    }
    me->sleeping.store(0);
    if (!timed_out) return;
    check_alive(left_sock_, left_, what);
    if (right_sock_ != left_sock_) check_alive(right_sock_, right_, what);
    if (Clock::now() >= deadline) {
      std::string dir = want_recv ? "to receive from rank " + std::to_string(left_) : "";
      if (want_send) dir += std::string(dir.empty() ? "" : " and ") + "to send to rank " + std::to_string(right_);
      throw DistTimeoutError(what + ": timed out waiting " + dir + "; that rank is stalled, dead, or running a "
                             "different collective");
    }
  }

  void abort() override {
    left_sock_->shutdown_rw();
    right_sock_->shutdown_rw();
    ring(left_seg_->hdr());
    ring(right_seg_->hdr());
  }

 private:
  size_t readable(size_t n, size_t elem) {
    uint64_t tail = mine_->hdr()->tail.load(std::memory_order_acquire);
    if (tail <= in_head_) return 0;
    size_t k = std::min({n, static_cast<size_t>(tail - in_head_), cap_ - in_head_ % cap_});
    return k / elem * elem;
  }

  void consumed(size_t k) {
    in_head_ += k;
    mine_->hdr()->head.store(in_head_, std::memory_order_release);
    ring(left_seg_->hdr());
  }

  static void ring(ShmHeader* h) {
    h->doorbell.fetch_add(1);
    if (h->sleeping.load())
      ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&h->doorbell), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }

  static void check_alive(Socket* s, int peer, const std::string& what) {
    pollfd p{s->fd(), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return;
    char c;
    ssize_t k = ::recv(s->fd(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      throw DistNetworkError(what + ": rank " + std::to_string(peer) +
                             " closed its connection (it exited, crashed, or its process group failed)");
  }

  std::shared_ptr<ShmSegment> mine_, left_seg_, right_seg_;
  Socket* left_sock_;
  Socket* right_sock_;
  size_t cap_;
  uint64_t out_tail_ = 0;  // our view of the right neighbour's ring (we are its only producer)
  uint64_t in_head_ = 0;   // our view of our own ring (we are its only consumer)
};

}  // namespace

std::unique_ptr<RingLinks> make_shm_links(int rank, int left, int right, std::shared_ptr<ShmSegment> mine,
                                          std::shared_ptr<ShmSegment> l, std::shared_ptr<ShmSegment> r, Socket* ls,
                                          Socket* rs) {
  return std::make_unique<ShmLinks>(rank, left, right, std::move(mine), std::move(l), std::move(r), ls, rs);
}

}  // namespace tinytorch::dist
