"""FSDPParamGroup: the parameters of one fully_shard call, gathered and reduced together.

One all-gather brings every rank's shards of the group into a flat buffer laid out rank after rank; the
values are then copied into the group's unsharded storage, where each unsharded parameter is a view. After
backward, the unsharded gradients are copied (in the same rank-after-rank layout) into one buffer that one
reduce-scatter averages, leaving each rank the gradient rows of its own shards. Both run over the shard group
(the mesh's last dim); with HSDP the reduced rows are then all-reduced across the replicate group (mesh dim 0),
so gradients are averaged over every data-parallel rank.

Freeing unsharded parameters (reshard): on the CPU the storage is an anonymous mapping whose pages are
handed back to the kernel with madvise(MADV_DONTNEED). Ops may keep references to the unsharded arrays for
backward; those references stay valid and the next all-gather writes the same values into the same
addresses, so nothing has to track them (PyTorch resizes the storage to zero for the same reason). On CUDA
each all-gather gets a new buffer and the old one is freed once nothing refers to it.
"""
from __future__ import annotations

import mmap
import time
from typing import Any, Callable, List, Optional

import numpy as np

from ..._dtype import dtype as tt_dtype
from .. import distributed_c10d as c10d
from ._api import MixedPrecisionPolicy, OffloadPolicy
from ._fsdp_param import FSDPParam, host_storage


def _np_dtype(d: Any) -> Optional[np.dtype]:
    if d is None:
        return None
    return d.np if isinstance(d, tt_dtype) else np.dtype(d)


DIRECT_NUMEL = 1 << 20


class FSDPParamGroup:
    """The collectives, buffers and backward bookkeeping of one fully_shard group."""

    def __init__(self, params: List[FSDPParam], mesh: Any, mp_policy: MixedPrecisionPolicy,
                 offload_policy: OffloadPolicy, label: str) -> None:
        self.fsdp_params = params
        self.mesh = mesh
        self.pg = mesh.get_group(mesh.ndim - 1)  # the shard group
        self.replicate_pg = mesh.get_group(0) if mesh.ndim == 2 else None  # HSDP
        self.world = self.pg.size()
        self.label = label
        self.mp_policy = mp_policy
        self.offload = type(offload_policy).__name__ == "CPUOffloadPolicy"
        self.param_dtype = _np_dtype(mp_policy.param_dtype)
        self.reduce_dtype = _np_dtype(mp_policy.reduce_dtype) or self.param_dtype
        self.direct = [p for p in params if p.numel >= DIRECT_NUMEL and p.rows % self.world == 0 and not self.offload]
        self.packed = [p for p in params if p not in self.direct]
        off = soff = 0
        for p in params:
            p.storage_offset = soff
            soff += p.numel
        for p in self.packed:
            p.offset = off
            off += p.padded_shard_numel
        self.block_numel = off       # one rank's piece of the flat all-gather (packed shards, padded)
        self.storage_numel = soff    # all unsharded parameters
        self.unsharded = False
        self._storage: Any = None
        self._mapping: Optional[mmap.mmap] = None
        self._ag: Optional[tuple] = None         # all-gathers in flight: (works, flat output, start time)
        self._rs: Optional[tuple] = None         # reduce-scatters in flight: (works, flat output, outputs, start)
        self.reshard_after_backward = True
        self.requires_gradient_sync = True
        self.requires_all_reduce = True
        self._partial: dict = {}  # HSDP without all-reduce: reduce-scattered gradient rows awaiting it, per param
        self.divide_factor: Optional[float] = None
        self.grads_remaining = 0
        self.in_backward = False
        self.stats: List[dict] = []              # spans of collectives, for the profiler and benchmarks
        # Called before this group issues its reduce-scatter: the root finishes the previous group's, so at
        # most two gradient buffers are alive however many groups there are.
        self.before_reduce: Optional[Callable[["FSDPParamGroup"], None]] = None
        self._hooks_registered = False

    # ------------------------------------------------------------------ dtypes and devices
    def _compute_dtype(self, p: FSDPParam) -> np.dtype:
        return self.param_dtype or p.orig_dtype

    def _is_cuda(self) -> bool:
        return self.mesh.device_type.startswith("cuda")

    def _xp(self):
        if self._is_cuda():
            import cupy
            return cupy
        return np

    def _uniform_dtype(self) -> np.dtype:
        dts = {np.dtype(self._compute_dtype(p)) for p in self.fsdp_params}
        if len(dts) > 1:
            raise TypeError(f"fully_shard({self.label}): the group's parameters have different dtypes "
                            f"{sorted(map(str, dts))}; set MixedPrecisionPolicy(param_dtype=...) or shard them in "
                            "separate groups")
        return dts.pop()

    def _shard_piece(self, p: FSDPParam, dt: np.dtype) -> Any:
        """This rank's real rows of p, flat, in dtype dt, on the collective's device."""
        piece = p.local_rows_array().reshape(-1)
        if self._is_cuda() and type(piece) is np.ndarray:  # CPU offload: the shard comes from the host
            piece = self._xp().asarray(piece)
        return piece if piece.dtype == dt else piece.astype(dt)

    # ------------------------------------------------------------------ unshard / reshard
    def lazy_init(self) -> None:
        """Before the first all-gather (the root's first forward, or an explicit unshard()): adopt parameters that
        replaced the sharded ones and refuse any still on the meta device."""
        for p in self.fsdp_params:
            p.reset_sharded_param()
        on_meta = [p.fqn for p in self.fsdp_params if p.sharded_param.device.type == "meta"]
        if on_meta:
            raise RuntimeError("FSDP parameters should be materialized from meta device before training, but the "
                               f"following were still on meta device: {on_meta}\nFor example, call "
                               "module.to_empty(device) to materialize to device and call module.reset_parameters() "
                               "on each module to initialize values, or load a checkpoint with "
                               "load_state_dict(sharded_sd, assign=True) or set_model_state_dict(...).")

    def unshard(self, async_op: bool = False) -> None:
        """Issue the group's all-gather (unless its parameters are already unsharded or on the way)."""
        if self.unsharded or self._ag is not None or not self.fsdp_params:
            return
        xp = self._xp()
        dt = self._uniform_dtype()
        if self._storage is None or self._is_cuda() or self._storage.dtype != dt:
            self._alloc_storage(dt)
        t0 = time.monotonic_ns()
        works, out = [], None
        with c10d._debug_label(f"FSDP all-gather of {self.label}"):
            if self.packed:
                src = xp.zeros(self.block_numel, dtype=dt)
                for p in self.packed:
                    piece = self._shard_piece(p, dt)
                    src[p.offset:p.offset + piece.size] = piece
                out = xp.empty(self.block_numel * self.world, dtype=dt)
                works.append(c10d.all_gather_into_tensor(out, src, group=self.pg, async_op=True))
            for p in self.direct:
                dst = self._storage[p.storage_offset:p.storage_offset + p.numel]
                piece = self._shard_piece(p, dt)
                works.append(c10d.all_gather_into_tensor(dst, xp.ascontiguousarray(piece), group=self.pg,
                                                         async_op=True))
        self._ag = (works, out, t0)
        if not async_op:
            self.wait_for_unshard()

    def wait_for_unshard(self) -> None:
        """Wait for the all-gather and register the unsharded parameters on their modules."""
        if self.unsharded or not self.fsdp_params:
            return
        if self._ag is None:
            self.unshard()
            return
        works, out, t0 = self._ag
        self._ag = None
        self._wait("all_gather", works, t0, self.storage_numel * self._storage.itemsize // self.world * (self.world - 1))
        storage = self._storage
        if out is not None:
            blocks = out.reshape(self.world, self.block_numel)
            for p in self.packed:
                full = storage[p.storage_offset:p.storage_offset + p.numel].reshape(p.rows, p.row_numel)
                for r in range(self.world):
                    a = r * p.shard_rows
                    b = min(a + p.shard_rows, p.rows)
                    if b > a:
                        full[a:b] = blocks[r, p.offset:p.offset + (b - a) * p.row_numel].reshape(b - a, p.row_numel)
            del out, blocks
        for p in self.fsdp_params:
            p.register(p.make_unsharded(storage))
        self._register_hooks()
        self.unsharded = True

    def _alloc_storage(self, dt: np.dtype) -> None:
        if self._is_cuda():
            self._storage = self._xp().empty(self.storage_numel, dtype=dt)
            self._mapping = None
        else:
            self._storage, self._mapping = host_storage(self.storage_numel, dt)

    def reshard(self) -> None:
        """Register the sharded parameters again and give the unsharded values' memory back."""
        if self._ag is not None:  # a prefetch that was never used: let it land, then drop it
            works = self._ag[0]
            self._ag = None
            for w in works:
                w.wait()
        if not self.unsharded:
            return
        for p in self.fsdp_params:
            p.register(p.sharded_param)
        if self._mapping is not None:
            self._mapping.madvise(mmap.MADV_DONTNEED)
        else:
            self._storage = None
        self.unsharded = False

    # ------------------------------------------------------------------ backward
    def _register_hooks(self) -> None:
        if self._hooks_registered:
            return
        self._hooks_registered = True
        for p in self.fsdp_params:
            if p.requires_grad:
                p.unsharded_param.register_post_accumulate_grad_hook(self._on_grad_accumulated)

    def pre_backward(self) -> None:
        """Before the group's backward: parameters unsharded, and count the gradients to wait for."""
        if not self.in_backward:
            self.in_backward = True
            self.grads_remaining = sum(1 for p in self.fsdp_params if p.requires_grad)
        self.wait_for_unshard()

    def _on_grad_accumulated(self, _param: Any) -> None:
        if not self.in_backward:
            return
        self.grads_remaining -= 1
        if self.grads_remaining == 0:
            self.post_backward()

    def post_backward(self) -> None:
        """All gradients of the group are in: start their reduce-scatter, then reshard."""
        self.grads_remaining = -1  # done for this backward (the final callback must not do it again)
        with_grad = [p for p in self.fsdp_params if p.unsharded_param is not None and p.unsharded_param._grad is not None]
        # Reshard first: the unsharded values are no longer needed, and their memory is then free for the
        # reduce-scatter's buffer (peak memory is what ZeRO-3 is for).
        if self.reshard_after_backward:
            self.reshard()
        if self.requires_gradient_sync and with_grad:
            self._reduce_scatter(with_grad)

    def _reduce_scatter(self, with_grad: List[FSDPParam]) -> None:
        xp = self._xp()
        rdt = self.reduce_dtype or self._uniform_dtype()
        if self.before_reduce is not None:
            self.before_reduce(self)  # the previous group's reduce-scatter ends (and frees its buffers) first
        op = c10d.ReduceOp.AVG if self.divide_factor is None else c10d.ReduceOp.SUM
        t0 = time.monotonic_ns()
        works, out, direct_out = [], None, []
        packed = [p for p in with_grad if p not in self.direct]
        with c10d._debug_label(f"FSDP reduce-scatter of {self.label}"):
            if packed:
                src = xp.zeros(self.world * self.block_numel, dtype=rdt)
                blocks = src.reshape(self.world, self.block_numel)
                for p in packed:
                    g = p.unsharded_param._grad._data.reshape(p.rows, p.row_numel)
                    for r in range(self.world):
                        a = r * p.shard_rows
                        b = min(a + p.shard_rows, p.rows)
                        if b > a:
                            blocks[r, p.offset:p.offset + (b - a) * p.row_numel] = g[a:b].reshape(-1)
                    p.unsharded_param._grad = None
                out = xp.empty(self.block_numel, dtype=rdt)
                works.append(c10d.reduce_scatter_tensor(out, src, op=op, group=self.pg, async_op=True,
                                                        _overwrite_input=True))
                del src, blocks
            for p in with_grad:
                if p in self.direct:
                    g = p.unsharded_param._grad._data.reshape(-1)
                    g = xp.ascontiguousarray(g) if g.dtype == rdt else g.astype(rdt)
                    p.unsharded_param._grad = None  # the collective holds the array until it is done
                    o = xp.empty(p.padded_shard_numel, dtype=rdt)
                    works.append(c10d.reduce_scatter_tensor(o, g, op=op, group=self.pg, async_op=True,
                                                            _overwrite_input=True))
                    direct_out.append((p, o))
        self._rs = (works, out, packed, direct_out, t0)

    def finish_backward(self) -> None:
        """End of backward (the root's final callback): reduce what never reached post_backward, wait for the
        reduce-scatter, write the sharded gradients, reshard."""
        if self.in_backward and self.grads_remaining > 0:
            self.post_backward()
        self.wait_reduce()
        if self.reshard_after_backward:
            self.reshard()
        self.in_backward = False
        self.grads_remaining = 0

    def wait_reduce(self) -> None:
        """Wait for the reduce-scatters in flight (if any) and write this rank's rows into the sharded .grad."""
        if self._rs is None:
            return
        works, out, packed, direct_out, t0 = self._rs
        self._rs = None
        nbytes = sum(p.padded_shard_numel for p in packed) + sum(p.padded_shard_numel for p, _ in direct_out)
        itemsize = np.dtype(self.reduce_dtype or self._uniform_dtype()).itemsize
        self._wait("reduce_scatter", works, t0, nbytes * itemsize * (self.world - 1))
        pieces = [(p, out[p.offset:p.offset + (p.local_rows[1] - p.local_rows[0]) * p.row_numel]) for p in packed]
        pieces += direct_out
        if self.replicate_pg is not None:
            pieces = self._all_reduce_replicas(pieces)
        for p, piece in pieces:
            if self.divide_factor is not None:
                piece /= self.divide_factor
            if self._is_cuda() and self.offload:
                piece = piece.get()
            p.set_sharded_grad(piece)

    def _all_reduce_replicas(self, pieces: List[tuple]) -> List[tuple]:
        """HSDP: sum (or average) the reduce-scattered rows across the replicate group, in one all-reduce. With
        set_requires_all_reduce(False) they are kept and added to the next all-reduce instead (nothing reaches
        .grad until then), as PyTorch's FSDP2."""
        xp = self._xp()
        held = dict(pieces)
        for p, q in self._partial.items():
            held[p] = held[p] + q if p in held else q
        self._partial = {}
        order = [p for p in self.fsdp_params if p in held]
        if not self.requires_all_reduce:
            self._partial = {p: xp.array(held[p], copy=True) for p in order}
            return []
        if not order:
            return []
        flat = xp.concatenate([held[p].reshape(-1) for p in order])
        op = c10d.ReduceOp.AVG if self.divide_factor is None else c10d.ReduceOp.SUM
        t0 = time.monotonic_ns()
        with c10d._debug_label(f"FSDP all-reduce of {self.label}"):
            work = c10d.all_reduce(flat, op=op, group=self.replicate_pg, async_op=True)
        n = self.replicate_pg.size()
        self._wait("all_reduce", [work], t0, 2 * flat.nbytes * (n - 1) // n)
        out, at = [], 0
        for p in order:
            size = held[p].size
            out.append((p, flat[at:at + size]))
            at += size
        return out

    # ------------------------------------------------------------------ measurement
    def _wait(self, kind: str, works: List[Any], t0: int, nbytes: int) -> None:
        """Wait for a phase's collectives; keep its span (as the backend stamped it) and how long the host blocked
        on it: the blocked part is the exposed communication, the rest was hidden under compute."""
        w0 = time.monotonic_ns()
        for w in works:
            w.wait()
        blocked = time.monotonic_ns() - w0
        cs = [getattr(w, "_c", None) for w in works]
        start = min((getattr(c, "start_ns", 0) or t0 for c in cs if c is not None), default=t0)
        end = max((getattr(c, "end_ns", 0) for c in cs if c is not None), default=0) or time.monotonic_ns()
        span = {"kind": kind, "group": self.label, "issued_ns": t0, "start_ns": start, "end_ns": end,
                "bytes": nbytes, "blocked_ns": blocked, "collectives": len(works)}
        self.stats.append(span)
        from ... import profiler
        prof = profiler._active
        if prof is not None:
            prof._add_event(f"{kind} {self.label}", "comm", start, end, profiler.TRACK_COMM, {"bytes": nbytes})
