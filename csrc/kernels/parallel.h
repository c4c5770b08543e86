// Intra-op parallelism for every CPU kernel: one persistent pool of threads, sized by
// tinytorch.set_num_threads, and parallel_for on top of it (ATen's at::parallel_for: a range split into one
// chunk per thread, each at least `grain` items, the caller's thread taking part).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>

namespace tinytorch::cpu {

// The intra-op thread count (set_num_threads; starts at one per core).
int num_threads();
void set_num_threads(int n);

// Runs task(i) for i in [0, n): the caller runs some, pool threads the rest, each index exactly once; returns
// when all have finished. A call made while the pool is busy (from a task, or from another thread while one
// region runs) runs every index on the calling thread. An exception in a task is re-thrown here.
void run_parallel(int n, const std::function<void(int)>& task);

// Joins the pool's threads (at interpreter exit); later regions run on the caller.
void shutdown_pool();

// How many regions have been split over the pool so far (run_parallel calls with n > 1 that found it free):
// lets a test see that a kernel shares its work, whichever threads end up taking the indices.
int64_t parallel_regions();

// Elementwise kernels split at this many elements per thread (ATen's GRAIN_SIZE): below it, waking a
// thread costs more than it saves.
constexpr int64_t kElementGrain = 1 << 15;

// How many chunks parallel_for makes of n items: up to `threads` (0: num_threads()), each at least `grain`.
inline int64_t chunk_count(int64_t n, int threads, int64_t grain) {
  const int64_t t = threads > 0 ? threads : num_threads();
  return std::min<int64_t>(t, std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
}

// Runs fn(chunk, begin, end) over [0, n) split into chunk_count(n, threads, grain) contiguous chunks.
template <class F>
void parallel_chunks(int64_t n, int threads, int64_t grain, F&& fn) {
  const int64_t count = chunk_count(n, threads, grain);
  if (count <= 1) {
    if (n > 0) fn(int64_t{0}, int64_t{0}, n);
    return;
  }
  const int64_t size = (n + count - 1) / count;
  run_parallel(int(count), [&](int c) {
    const int64_t begin = c * size, end = std::min(n, begin + size);
    if (begin < end) fn(int64_t{c}, begin, end);
  });
}

// Runs fn(begin, end) over [0, n) on parallel_chunks' chunks.
template <class F>
void parallel_for(int64_t n, int threads, int64_t grain, F&& fn) {
  parallel_chunks(n, threads, grain, [&fn](int64_t, int64_t begin, int64_t end) { fn(begin, end); });
}

// The same with the thread count of set_num_threads.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& fn) {
  parallel_for(n, 0, grain, std::forward<F>(fn));
}

// Runs fn(begin, end) over [0, n) in groups of `group` consecutive indices that the threads claim one at a time:
// for items that are each large (blocks of a matrix product, attention heads). A thread whose core runs slower for
// a while (another process on it, or another machine's thread on the same physical core: on a shared VM one
// core's FMA rate was seen to swing 90-170 GFLOP/s from second to second) then takes fewer groups instead of
// holding the region back, as parallel_for's one fixed chunk per thread does.
template <class F>
void parallel_claim(int64_t n, int64_t group, F&& fn) {
  group = std::max<int64_t>(1, group);
  const int64_t groups = (n + group - 1) / group;
  const int threads = int(std::min<int64_t>(num_threads(), groups));
  if (threads <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  std::atomic<int64_t> next{0};
  run_parallel(threads, [&](int) {
    for (int64_t g = next.fetch_add(1, std::memory_order_relaxed); g < groups;
         g = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(g * group, std::min(n, (g + 1) * group));
    }
  });
}

}  // namespace tinytorch::cpu
