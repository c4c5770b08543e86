// The intra-op thread pool. Pool threads are started on first need (up to set_num_threads - 1; the caller
// is the other one) and then wait for work: they spin for a while after a region (kSpin), then sleep on a
// condition variable. A region hands out its indices through one atomic counter, so a
// thread the OS has not scheduled yet simply finds them taken by the others.
#include "kernels/parallel.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tinytorch::cpu {

namespace {

std::atomic<int> g_threads{0};  // 0: one per core

// How long an idle pool thread polls for the next region before it sleeps. A training step's kernels follow
// each other within this (the Python between them takes microseconds); waking a sleeping thread takes tens of
// microseconds on an idle core and a scheduler tick on a busy one, long enough for the caller to have done the
// whole region alone. (libgomp, under PyTorch, spins about as long by default.)
constexpr auto kSpin = std::chrono::microseconds(1000);
constexpr int kPausePolls = 1 << 12;  // ~20-50 us of pause instructions before the polls yield

// One poll's pause: the CPU's spin-wait hint for the first polls, then a yield, so that a thread polling for
// long hands its core to any other thread that wants it (another process's, or the caller's own BLAS call).
inline void cpu_relax(int k) {
#if defined(__x86_64__)
  if (k < kPausePolls) {
    _mm_pause();
    return;
  }
#endif
  std::this_thread::yield();
}

// One parallel region, on the caller's stack: it outlives every pool thread that joined it.
struct Region {
  const std::function<void(int)>* task;
  int n;
  std::atomic<int> next{0};
  std::atomic<int> workers{0};  // pool threads inside
  std::mutex error_mutex;
  std::exception_ptr error;
};

// Claims indices of r until none is left.
void work(Region& r) {
  for (int i = r.next.fetch_add(1, std::memory_order_relaxed); i < r.n;
       i = r.next.fetch_add(1, std::memory_order_relaxed)) {
    try {
      (*r.task)(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(r.error_mutex);
      if (!r.error) r.error = std::current_exception();
    }
  }
}

class Pool {
 public:
  static Pool& get() {
    static Pool& pool = *new Pool();  // never destroyed: its threads may outlive static destruction
    // fork() copies only the calling thread: the child starts fresh threads on demand.
    static const bool fork_handlers = [] {
      pthread_atfork([] { get().sync_->m.lock(); }, [] { get().sync_->m.unlock(); }, [] { get().after_fork_child(); });
      return true;
    }();
    (void)fork_handlers;
    return pool;
  }

  void run(int n, const std::function<void(int)>& task) {
    if (n <= 0) return;
    if (n == 1 || busy_.exchange(true, std::memory_order_acquire)) {
      for (int i = 0; i < n; ++i) task(i);
      return;
    }
    regions_.fetch_add(1, std::memory_order_relaxed);
    Region r;
    r.task = &task;
    r.n = n;
    {
      std::lock_guard<std::mutex> lock(sync_->m);
      if (!stopped_) {
        grow(n - 1);
        region_ = &r;
        generation_.fetch_add(1, std::memory_order_release);
        if (sleepers_ > 0) sync_->wake.notify_all();
      }
    }
    work(r);
    {
      std::lock_guard<std::mutex> lock(sync_->m);
      region_ = nullptr;  // no thread joins from here on
    }
    // Every index is claimed; wait for the threads still running theirs.
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int k = 0; r.workers.load(std::memory_order_acquire) > 0; ++k) {
      cpu_relax(k);
      if ((k < kPausePolls ? (k & 63) == 0 : true) && std::chrono::steady_clock::now() > until) {
        std::unique_lock<std::mutex> lock(sync_->m);
        sync_->idle.wait(lock, [&] { return r.workers.load(std::memory_order_acquire) == 0; });
        break;
      }
    }
    busy_.store(false, std::memory_order_release);
    if (r.error) std::rethrow_exception(r.error);
  }

  void shutdown() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(sync_->m);
      stopped_ = true;
      generation_.fetch_add(1, std::memory_order_release);
      sync_->wake.notify_all();
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

 private:
  struct Sync {
    std::mutex m;
    std::condition_variable wake;  // a region or shutdown for sleeping pool threads
    std::condition_variable idle;  // the last pool thread left a region
  };

  // Starts pool threads until there are `count` (under sync_->m).
  void grow(int count) {
    while (int(threads_.size()) < count) {
      const uint64_t seen = generation_.load(std::memory_order_relaxed);
      threads_.emplace_back([this, seen] { loop(seen); });
    }
  }

  void loop(uint64_t seen) {
    for (;;) {
      uint64_t g = generation_.load(std::memory_order_acquire);
      const auto until = std::chrono::steady_clock::now() + kSpin;
      for (int k = 0; g == seen; ++k) {
        cpu_relax(k);
        g = generation_.load(std::memory_order_acquire);
        if ((k < kPausePolls ? (k & 63) == 0 : true) && g == seen && std::chrono::steady_clock::now() > until) break;
      }
      Region* r = nullptr;
      {
        std::unique_lock<std::mutex> lock(sync_->m);
        if (g == seen) {
          ++sleepers_;
          sync_->wake.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
          --sleepers_;
        }
        seen = generation_.load(std::memory_order_acquire);
        if (stopped_) return;
        r = region_;
        if (r != nullptr) r->workers.fetch_add(1, std::memory_order_relaxed);
      }
      if (r == nullptr) continue;
      work(*r);
      if (r->workers.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(sync_->m);
        sync_->idle.notify_all();
      }
    }
  }

  void after_fork_child() {
    // The pool's threads do not exist here: their handles must never be joined or destroyed (a joinable
    // handle's destructor terminates), and the parent's mutex and condition variables may count waiters
    // that are gone. Park them, unreachable, in storage that is never freed.
    struct Orphans {
      std::vector<std::thread> threads;
      std::vector<std::unique_ptr<Sync>> syncs;
    };
    static Orphans& orphans = *new Orphans();  // immortal by design: see above
    for (auto& t : threads_) orphans.threads.push_back(std::move(t));
    threads_.clear();
    sync_->m.unlock();
    orphans.syncs.push_back(std::move(sync_));
    sync_ = std::make_unique<Sync>();
    region_ = nullptr;
    sleepers_ = 0;
    busy_.store(false);
  }

  std::unique_ptr<Sync> sync_ = std::make_unique<Sync>();
  std::vector<std::thread> threads_;   // under sync_->m
  Region* region_ = nullptr;           // under sync_->m
  int sleepers_ = 0;                   // under sync_->m
  bool stopped_ = false;               // under sync_->m
  std::atomic<uint64_t> generation_{0};  // bumped when a region opens (or the pool stops)
  std::atomic<bool> busy_{false};        // a region is running
  std::atomic<int64_t> regions_{0};      // regions split so far

 public:
  int64_t regions() const { return regions_.load(std::memory_order_relaxed); }
};

}  // namespace

int num_threads() {
  const int t = g_threads.load(std::memory_order_relaxed);
  return t > 0 ? t : std::max(1, int(std::thread::hardware_concurrency()));
}

void set_num_threads(int n) { g_threads.store(std::max(0, n), std::memory_order_relaxed); }

void run_parallel(int n, const std::function<void(int)>& task) { Pool::get().run(n, task); }

void shutdown_pool() { Pool::get().shutdown(); }

int64_t parallel_regions() { return Pool::get().regions(); }

}  // namespace tinytorch::cpu
