"""DDP's Reducer: gradients bucketed into flat buffers, all-reduced asynchronously while backward runs.

The state machine follows PyTorch's reducer.cpp: a post-accumulate-grad hook per parameter marks it
ready; a bucket whose parameters are all ready is launched, strictly in bucket order on every rank; once
every bucket is launched a callback queued on the autograd engine waits for them (before backward()
returns). Buckets are rebuilt once, from the order in which gradients arrived in the first iteration.
"""
from __future__ import annotations

import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ... import _C, profiler
from ..._tensor import Tensor, _view_of, _wrap
from ...distributed import ReduceOp, all_reduce, broadcast
from ...distributed._work import Future, Work
from ...distributed.store import DistTimeoutError

DEFAULT_FIRST_BUCKET_BYTES = 1024 * 1024
DEFAULT_BUCKET_BYTES_CAP = 25 * 1024 * 1024


def _xp(a: Any) -> Any:
    """The array module (NumPy or CuPy) of an array."""
    if type(a) is np.ndarray:
        return np
    import cupy

    return cupy


def _device_key(a: Any) -> str:
    return "cpu" if type(a) is np.ndarray else f"cuda:{int(a.device.id)}"


def comm_tensor(a: np.ndarray, pg: Any) -> Tensor:
    """A host array as a tensor the group's backend can move (device memory for NCCL)."""
    if getattr(pg, "_backend_name", "ring") == "nccl":
        import cupy

        return _wrap(cupy.asarray(a))
    return _wrap(a)


def host(t: Tensor) -> np.ndarray:
    """A tensor's array on the host."""
    return t._data if type(t._data) is np.ndarray else t._data.get()


def compute_bucket_assignment_by_size(params: Sequence[Tensor], limits: Sequence[int],
                                      order: Sequence[int]) -> List[List[int]]:
    """Group parameter indices (taken in `order`) into buckets per (device, dtype); a bucket closes once it
    reaches the current limit, and each (device, dtype) moves on to the next limit (staying on the last)."""
    open_: Dict[Tuple[str, str], List[int]] = {}
    sizes: Dict[Tuple[str, str], int] = {}
    limit_at: Dict[Tuple[str, str], int] = {}
    done: List[List[int]] = []
    for i in order:
        a = params[i]._data
        key = (_device_key(a), str(a.dtype))
        open_.setdefault(key, []).append(i)
        sizes[key] = sizes.get(key, 0) + a.nbytes
        lim = limits[min(limit_at.get(key, 0), len(limits) - 1)]
        if sizes[key] >= lim:
            done.append(open_.pop(key))
            sizes[key] = 0
            limit_at[key] = limit_at.get(key, 0) + 1
    done.extend(b for b in open_.values() if b)
    pos = {p: k for k, p in enumerate(order)}
    # Bucket 0 holds the parameters that come first in `order` (first to get gradients).
    done.sort(key=lambda b: pos[b[0]])
    return done


class GradBucket:
    """What a communication hook sees: one flat gradient buffer and the parameters it holds."""

    def __init__(self, index: int, num_buckets: int, buffer: Tensor, params: List[Tensor], grads: List[Tensor],
                 offsets: List[int], lengths: List[int]) -> None:
        self._index, self._num, self._buffer = index, num_buckets, buffer
        self._params, self._grads, self._offsets, self._lengths = params, grads, offsets, lengths

    def index(self) -> int:
        """This bucket's position in launch order (changes once, when buckets are rebuilt after iteration 1)."""
        return self._index

    def buffer(self) -> Tensor:
        """The flat 1-D tensor holding every gradient of the bucket."""
        return self._buffer

    def gradients(self) -> List[Tensor]:
        """Per-parameter views into buffer(), shaped like the parameters."""
        return list(self._grads)

    def parameters(self) -> List[Tensor]:
        """The parameters whose gradients this bucket holds, in bucket order."""
        return list(self._params)

    def is_last(self) -> bool:
        """True for the last bucket to be all-reduced in the iteration."""
        return self._index == self._num - 1

    def set_buffer(self, buffer: Tensor) -> None:
        """Replace the buffer a later hook in a chain sees (the Reducer still uses the hook's future result)."""
        self._buffer = buffer

    def __repr__(self) -> str:
        return f"GradBucket(index={self._index}, params={len(self._params)}, numel={self._buffer.numel()})"


class _Bucket:
    __slots__ = ("index", "indices", "offsets", "lengths", "buffer", "views", "pending", "work", "future",
                 "launch_ns", "done_ns", "nbytes", "ready_ns")

    def __init__(self, index: int, indices: List[int], params: Sequence[Tensor]) -> None:
        self.index = index
        self.indices = indices
        first = params[indices[0]]._data
        xp = _xp(first)
        self.lengths = [int(params[i]._data.size) for i in indices]
        self.offsets = [int(o) for o in np.cumsum([0] + self.lengths[:-1])]
        flat = xp.zeros(int(sum(self.lengths)), dtype=first.dtype)
        self.buffer = _wrap(flat)
        self.views = [_view_of(self.buffer, flat[o:o + n].reshape(params[i]._data.shape))
                      for i, o, n in zip(indices, self.offsets, self.lengths)]
        self.nbytes = int(flat.nbytes)
        self.pending = len(indices)
        self.work: Optional[Work] = None
        self.future: Optional[Future] = None
        self.launch_ns = self.done_ns = self.ready_ns = 0

    def comm_span(self) -> Tuple[int, int]:
        """(start, end) of this bucket's all-reduce in monotonic ns. A collective run by tinytorch's communication
        layer carries the times its backend started and finished it; a comm hook's future only has the time its
        done-callback ran, so its span runs from the launch to then."""
        c = self.work._c if self.work is not None else None
        if c is not None:
            return (c.start_ns or self.launch_ns), c.end_ns
        return self.launch_ns, self.done_ns


def _union_ns(spans: List[Tuple[int, int]], clip_end: Optional[int] = None) -> int:
    """Length of the union of [start, end) spans, optionally clipped to end at clip_end."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(spans):
        if clip_end is not None:
            e = min(e, clip_end)
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


class Reducer:
    """Buckets, hooks and the per-iteration state machine behind DistributedDataParallel."""

    def __init__(self, params: List[Tensor], names: List[str], process_group: Any, bucket_bytes_cap: int,
                 first_bucket_bytes: int = DEFAULT_FIRST_BUCKET_BYTES, find_unused_parameters: bool = False,
                 gradient_as_bucket_view: bool = True, static_graph: bool = False) -> None:
        self.params, self.names = params, names
        self.pg = process_group
        self.rank, self.world_size = process_group.rank(), process_group.size()
        self.timeout = float(process_group._timeout)
        self.bucket_bytes_cap, self.first_bucket_bytes = int(bucket_bytes_cap), int(first_bucket_bytes)
        self.find_unused = bool(find_unused_parameters)
        self.grad_as_view = bool(gradient_as_bucket_view)
        self.static_graph = bool(static_graph)
        self._lock = threading.Lock()
        n = len(params)
        self.buckets: List[_Bucket] = []
        self.param_bucket: List[Tuple[int, int]] = [(0, 0)] * n
        self._init_buckets(list(reversed(range(n))))
        self.expect_hooks = False
        self.require_finalize = False
        self.ready = bytearray(n)
        self.next_bucket = 0
        self.first_hook_called = False
        self.unused: List[int] = []
        self.locally_used = np.zeros(n, dtype=np.int32)
        self.used_work: Optional[Work] = None
        self.used_buffer: Optional[Tensor] = None
        self.global_unused: set = set()
        self.has_rebuilt = False
        self.rebuilt_order: List[int] = []
        self.arrived = bytearray(n)
        self.num_iterations = 0
        self.num_syncs = 0
        self.comm_hook: Optional[Callable[[Any, GradBucket], Future]] = None
        self.comm_hook_state: Any = None
        self.grad_was_set = bytearray(n)
        self._delaying = False
        # static_graph: how many times each parameter's hook fires per iteration (learned in iteration 1).
        self.static_first_iter = self.static_graph
        self.hook_counts = np.zeros(n, dtype=np.int64)
        self.expected_counts: Optional[np.ndarray] = None
        self.warned_no_unused = False
        self.last_step_stats: Dict[str, Any] = {}
        self._hook_handles = []
        ref = weakref.ref(self)
        for i, p in enumerate(params):
            def hook(_var: Tensor, i: int = i) -> None:
                r = ref()
                if r is not None:
                    r._autograd_hook(i)
            self._hook_handles.append(p.register_post_accumulate_grad_hook(hook))

    # ------------------------------------------------------------------ buckets
    def _init_buckets(self, order: List[int]) -> None:
        """(Re)build buckets from `order`; gradients already held in old bucket views carry over."""
        limits = [min(self.first_bucket_bytes, self.bucket_bytes_cap), self.bucket_bytes_cap]
        assignment = compute_bucket_assignment_by_size(self.params, limits, order)
        old_views = {}
        for b in self.buckets:
            for k, i in enumerate(b.indices):
                old_views[i] = b.views[k]
        self.buckets = [_Bucket(k, idx, self.params) for k, idx in enumerate(assignment)]
        for b in self.buckets:
            for k, i in enumerate(b.indices):
                self.param_bucket[i] = (b.index, k)
                p = self.params[i]
                old = old_views.get(i)
                if old is not None and p._grad is old:
                    b.views[k]._data[...] = old._data
                    p._grad = b.views[k]

    def bucket_indices(self) -> List[List[int]]:
        """Parameter indices per bucket, in launch order."""
        return [list(b.indices) for b in self.buckets]

    def _rebuild_buckets(self) -> None:
        """Rebuild from the first iteration's gradient-arrival order, using rank 0's order on every rank."""
        n = len(self.params)
        seen = set(self.rebuilt_order)
        order = list(self.rebuilt_order) + [i for i in reversed(range(n)) if i not in seen]
        t = comm_tensor(np.asarray(order, dtype=np.int64), self.pg)
        w = broadcast(t, group=self.pg, group_src=0, async_op=True)
        self._wait_work(w, "broadcast of rank 0's gradient-ready order (rebuilding buckets)")
        self._init_buckets([int(i) for i in host(t)])
        self.has_rebuilt = True
        self.rebuilt_order = []

    # ------------------------------------------------------------------ forward side
    def prepare_for_forward(self, grad_sync: bool) -> None:
        """Start of DDP.forward: check the previous reduction finished, and rebuild buckets once."""
        if not grad_sync:
            return
        self._ensure_prior_reduction_finished()
        self.num_iterations += 1
        if not self.has_rebuilt and self.rebuilt_order and (self.static_graph or not self.find_unused):
            self._rebuild_buckets()

    def prepare_for_backward(self, outputs: Any) -> None:
        """End of DDP.forward (grad enabled, sync on): expect hooks, and find unused parameters if asked."""
        self.expect_hooks = True
        self.next_bucket = 0
        self.first_hook_called = False
        for b in self.buckets:
            b.pending = len(b.indices)
            b.work = b.future = None
            b.launch_ns = b.done_ns = b.ready_ns = 0
        self.ready = bytearray(len(self.params))
        self.unused = []
        if self.static_graph:
            self.hook_counts[:] = 0
            if self.expected_counts is not None:
                self.unused = [int(i) for i in np.nonzero(self.expected_counts == 0)[0]]
        elif self.find_unused:
            self.unused = self._search_unused(outputs)
            if not self.unused and not self.warned_no_unused:
                self.warned_no_unused = True
                import warnings

                warnings.warn(
                    "find_unused_parameters=True was specified in DDP constructor, but did not find any unused "
                    "parameters in the forward pass. This flag results in an extra traversal of the autograd graph "
                    "every iteration, which can adversely affect performance. If your model indeed never has any "
                    "unused parameters in the forward pass, consider turning this flag off.", stacklevel=3)
        if self.grad_as_view:
            self._install_grad_views()

    def _install_grad_views(self) -> None:
        """Point each parameter's .grad at its bucket view so AccumulateGrad adds straight into the bucket."""
        skip = set(self.unused)
        self.grad_was_set = bytearray(len(self.params))
        for b in self.buckets:
            fresh = [k for k, i in enumerate(b.indices) if self.params[i]._grad is None and i not in skip]
            if len(fresh) == len(b.indices):
                b.buffer._data.fill(0)
            for k, i in enumerate(b.indices):
                p = self.params[i]
                g, v = p._grad, b.views[k]
                if g is v:
                    continue
                if i in skip:
                    continue
                if g is None:
                    self.grad_was_set[i] = 1
                    if len(fresh) != len(b.indices):
                        v._data.fill(0)
                else:
                    v._data[...] = g._data
                p._grad = v

    def _search_unused(self, outputs: Any) -> List[int]:
        """Parameters whose AccumulateGrad node is unreachable from the outputs' grad_fn."""
        roots: List[Any] = []
        direct = set()  # leaves returned as outputs themselves get their gradient without a graph

        def collect(o: Any) -> None:
            if isinstance(o, Tensor):
                if o._grad_fn is not None:
                    roots.append(o._grad_fn)
                elif o._requires_grad:
                    direct.add(id(o))
            elif isinstance(o, (list, tuple)):
                for x in o:
                    collect(x)
            elif isinstance(o, dict):
                for x in o.values():
                    collect(x)

        collect(outputs)
        seen = {id(r) for r in roots}
        stack = list(roots)
        visited = list(roots)  # holds every node visited, so no id() is reused during the walk
        while stack:
            node = stack.pop()
            for nxt, _ in node.next_functions:
                if nxt is not None and id(nxt) not in seen:
                    seen.add(id(nxt))
                    stack.append(nxt)
                    visited.append(nxt)
        return [i for i, p in enumerate(self.params)
                if id(p) not in direct and (p._grad_acc is None or id(p._grad_acc) not in seen)]

    def _ensure_prior_reduction_finished(self) -> None:
        if not self.require_finalize:
            return
        missing = [i for i in range(len(self.params)) if not self.ready[i]]
        names = ", ".join(self.names[i] for i in missing)
        idx = " ".join(str(i) for i in missing)
        raise RuntimeError(
            "Expected to have finished reduction in the prior iteration before starting a new one. This error "
            "indicates that your module has parameters that were not used in producing loss. You can enable unused "
            "parameter detection by passing the keyword argument `find_unused_parameters=True` to "
            "`torch.nn.parallel.DistributedDataParallel`, and by \nmaking sure all `forward` function outputs "
            "participate in calculating loss. \nIf you already have done the above, then the distributed data "
            "parallel module wasn't able to locate the output tensors in the return value of your module's "
            "`forward` function. Please include the loss function and the structure of the return value of "
            "`forward` of your module when reporting this issue (e.g. list, dict, iterable).\n"
            f"Parameters which did not receive grad for rank {self.rank}: {names}\n"
            f"Parameter indices which did not receive grad for rank {self.rank}: {idx}")

    # ------------------------------------------------------------------ backward side
    def _autograd_hook(self, i: int) -> None:
        with self._lock:
            if self.find_unused or self.static_first_iter:
                self.locally_used[i] = 1
            if not self.expect_hooks:
                return
            if not self.first_hook_called:
                self.first_hook_called = True
                if self.static_first_iter:
                    _C._queue_callback(self._delay_all_reduce)
                else:
                    for u in self.unused:
                        self._mark_ready(u, used=False)
            if self.static_first_iter:
                self.hook_counts[i] += 1
                if not self.arrived[i]:
                    self.arrived[i] = 1
                    self.rebuilt_order.append(i)
                return
            if self.static_graph:
                self.hook_counts[i] += 1
                c, want = self.hook_counts[i], self.expected_counts[i]  # type: ignore[index]
                if c > want:
                    raise RuntimeError(
                        "Your training graph has changed in this iteration, e.g., one parameter is used twice or more "
                        "times in this iteration, or it is used in one iteration but not the other "
                        f"(parameter '{self.names[i]}', index {i}, got {c} gradient(s), expected {want}). "
                        "static_graph=True requires the same set of parameters to get gradients the same number of "
                        "times in every iteration.")
                if c < want:
                    return
            elif not self.has_rebuilt and not self.find_unused and not self.arrived[i]:
                self.arrived[i] = 1
                self.rebuilt_order.append(i)
            self._mark_ready(i, used=True)

    def _mark_ready(self, i: int, used: bool) -> None:
        if self.ready[i]:
            raise RuntimeError(
                "Expected to mark a variable ready only once. This error is caused by one of the following reasons: "
                "1) Use of a module parameter outside the `forward` function. Please make sure model parameters are "
                "not shared across multiple concurrent forward-backward passes. or try to use _set_static_graph() as "
                "a workaround if this module graph does not change during training loop.2) Reused parameters in "
                "multiple reentrant backward passes. For example, if you use multiple `checkpoint` functions to wrap "
                "the same part of your model, it would result in the same set of parameters been used by different "
                "reentrant backward passes multiple times, and hence marking a variable ready multiple times. DDP "
                "does not support such use cases in default. You can try to use _set_static_graph() as a workaround "
                "if your module graph does not change over iterations.\n"
                f"Parameter at index {i} with name {self.names[i]} has been marked as ready twice. This means that "
                "multiple autograd engine  hooks have fired for this particular parameter during this iteration.")
        self.ready[i] = 1
        self.require_finalize = True
        b_idx, k = self.param_bucket[i]
        b = self.buckets[b_idx]
        p, v = self.params[i], b.views[k]
        g = p._grad
        if g is not v:
            if g is None:
                v._data.fill(0)
            else:
                v._data[...] = g._data
                if self.grad_as_view and used:
                    p._grad = v
        b.pending -= 1
        if b.pending == 0:
            b.ready_ns = time.monotonic_ns()
            self._launch_ready_buckets()

    def _launch_ready_buckets(self) -> None:
        nb = len(self.buckets)
        while self.next_bucket < nb and self.buckets[self.next_bucket].pending == 0:
            self._launch(self.buckets[self.next_bucket])
            self.next_bucket += 1
        if self.next_bucket == nb:
            if self.find_unused:
                self.used_buffer = comm_tensor(self.locally_used.copy(), self.pg)
                self.used_work = all_reduce(self.used_buffer, ReduceOp.SUM, group=self.pg, async_op=True)
            if not self._delaying:
                _C._queue_callback(self._finalize)

    def _launch(self, b: _Bucket) -> None:
        t0 = time.monotonic_ns()
        b.launch_ns = t0
        if self.comm_hook is None:
            b.work = all_reduce(b.buffer, ReduceOp.AVG, group=self.pg, async_op=True)
            if b.work._c is None:  # done already (a group of one)
                b.done_ns = time.monotonic_ns()
        else:
            gb = GradBucket(b.index, len(self.buckets), b.buffer, [self.params[i] for i in b.indices], list(b.views),
                            b.offsets, b.lengths)
            fut = self.comm_hook(self.comm_hook_state, gb)
            if not isinstance(fut, Future):
                raise RuntimeError(f"a DDP communication hook must return a Future, got {type(fut).__name__}")
            b.future = fut

            def stamp_f(_f: Future, b: _Bucket = b, fut: Future = fut) -> None:
                if b.future is fut and b.done_ns == 0:
                    b.done_ns = time.monotonic_ns()

            fut.add_done_callback(stamp_f)
        prof = profiler._active
        if prof is not None:
            prof._add_event(f"launch bucket {b.index}", "ddp", t0, time.monotonic_ns(), profiler.TRACK_DDP,
                            {"bucket": b.index, "bytes": b.nbytes, "params": len(b.indices)})

    def _wait_work(self, work: Work, what: str) -> None:
        try:
            work.wait(self.timeout)
        except DistTimeoutError as e:
            raise DistTimeoutError(f"rank {self.rank}: DistributedDataParallel: {what} did not complete within "
                                   f"{self.timeout}s: {e}") from None

    def _wait_bucket(self, b: _Bucket) -> None:
        what = (f"all-reduce of gradient bucket {b.index} of {len(self.buckets)} ({len(b.indices)} parameters, "
                f"{b.nbytes} bytes, first '{self.names[b.indices[0]]}')")
        if b.work is not None:
            self._wait_work(b.work, what)
        else:
            assert b.future is not None
            try:
                result = b.future.wait(self.timeout)
            except DistTimeoutError as e:
                raise DistTimeoutError(f"rank {self.rank}: DistributedDataParallel: communication hook result for "
                                       f"{what} did not complete within {self.timeout}s: {e}") from None
            if isinstance(result, (list, tuple)):
                result = result[0]
            data = result._data if isinstance(result, Tensor) else result
            if data is not b.buffer._data:
                if data.size != b.buffer._data.size:
                    raise RuntimeError(f"DDP communication hook returned {data.size} elements for bucket {b.index}, "
                                       f"expected {b.buffer._data.size}")
                b.buffer._data[...] = data.reshape(-1)
            if b.done_ns == 0:  # the future's done-callback has not run yet
                b.done_ns = time.monotonic_ns()

    def _delay_all_reduce(self) -> None:
        """static_graph, iteration 1: every hook has fired; mark all ready, launch all buckets, finalize."""
        with self._lock:
            self.expected_counts = self.hook_counts.copy()
            self.unused = [int(i) for i in np.nonzero(self.expected_counts == 0)[0]]
            self._delaying = True
            try:
                for i in range(len(self.params)):
                    self._mark_ready(i, used=bool(self.expected_counts[i] > 0))
            finally:
                self._delaying = False
        self._finalize()

    def _finalize(self) -> None:
        """Final engine callback: wait for every bucket, then put the averaged gradients in place."""
        bwd_end = time.monotonic_ns()
        self.expect_hooks = False
        self.static_first_iter = False
        for b in self.buckets:
            self._wait_bucket(b)
        if self.used_work is not None:
            self._wait_work(self.used_work, "all-reduce of the used-parameter map (find_unused_parameters=True)")
            self.global_unused = {int(i) for i in np.nonzero(host(self.used_buffer) == 0)[0]}  # type: ignore[arg-type]
            self.used_work = None
        elif self.static_graph and self.expected_counts is not None and self.num_syncs == 0:
            used = comm_tensor((self.expected_counts > 0).astype(np.int32), self.pg)
            self._wait_work(all_reduce(used, ReduceOp.SUM, group=self.pg, async_op=True),
                            "all-reduce of the used-parameter map (static_graph=True)")
            self.global_unused = {int(i) for i in np.nonzero(host(used) == 0)[0]}
        for b in self.buckets:
            for k, i in enumerate(b.indices):
                if i in self.global_unused:
                    if self.grad_was_set[i]:
                        self.params[i]._grad = None
                    continue
                p, v = self.params[i], b.views[k]
                if self.grad_as_view:
                    if p._grad is not v:
                        p._grad = v
                elif p._grad is None:
                    p._grad = _wrap(v._data.copy())
                else:
                    p._grad._data[...] = v._data
        self.locally_used[:] = 0
        self.require_finalize = False
        self.num_syncs += 1
        self._record_stats(bwd_end)

    def _record_stats(self, finalize_start: int) -> None:
        # Backward's compute is over once the last gradient is ready; time spent after that (issuing the last
        # all-reduce, the engine reaching its final callback) hides nothing, so overlap is counted up to there.
        readies = [b.ready_ns for b in self.buckets]
        bwd_end = max(readies) if readies and min(readies) > 0 else finalize_start
        spans = [b.comm_span() for b in self.buckets]
        comm = _union_ns(spans)
        overlapped = _union_ns(spans, clip_end=bwd_end)
        first_launch = min(b.launch_ns for b in self.buckets) if self.buckets else bwd_end
        self.last_step_stats = {
            "comm_ms": comm / 1e6,
            "overlapped_ms": overlapped / 1e6,
            "overlap_fraction": overlapped / comm if comm > 0 else 0.0,
            "exposed_ms": (comm - overlapped) / 1e6,
            "num_buckets": len(self.buckets),
            "bucket_bytes": [b.nbytes for b in self.buckets],
            "first_launch_to_last_grad_ms": (bwd_end - first_launch) / 1e6,
        }
        prof = profiler._active
        if prof is not None:
            prev_end = 0
            for b, (start, end) in zip(self.buckets, spans):
                start = max(start, prev_end)  # a comm hook's spans are launch-to-callback and may overlap
                prof._add_event(f"all_reduce bucket {b.index}", "comm", start, end, profiler.TRACK_COMM,
                                {"bucket": b.index, "bytes": b.nbytes, "launched_ns": b.launch_ns,
                                 "queued_ms": (start - b.launch_ns) / 1e6})
                prev_end = end

    def remove_hooks(self) -> None:
        """Detach the per-parameter hooks (when the DDP wrapper goes away)."""
        for h in self._hook_handles:
            h.remove()
        self._hook_handles = []
