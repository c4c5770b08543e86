"""DistributedDataParallel: replicate a module on every rank and average gradients during backward."""
from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np

from ..._tensor import Tensor, _wrap
from ...autograd.grad_mode import is_grad_enabled
from ...distributed import all_gather_into_tensor, broadcast
from ...distributed import distributed_c10d as _c10d
from ...distributed._work import Future
from ...distributed.store import DistTimeoutError
from ..modules.module import Module
from .reducer import DEFAULT_FIRST_BUCKET_BYTES, GradBucket, Reducer, comm_tensor, host

BROADCAST_BUCKET_BYTES = 250 * 1024 * 1024
# Dtypes the collectives move as they are; others are widened for the broadcast and narrowed back.
_COMM_DTYPES = {"float16", "bfloat16", "float32", "float64", "int32", "int64"}


def _wait(work: Any, timeout: float, rank: int, what: str) -> None:
    try:
        work.wait(timeout)
    except DistTimeoutError as e:
        raise DistTimeoutError(f"rank {rank}: DistributedDataParallel: {what} did not complete within {timeout}s: "
                               f"{e}") from None


def _broadcast_coalesced(tensors: Sequence[Tensor], pg: Any, what: str, cap: int = BROADCAST_BUCKET_BYTES) -> None:
    """Overwrite `tensors` with group rank 0's values: one flat broadcast per (device, dtype) chunk of <= cap bytes."""
    groups: Dict[tuple, List[List[Tensor]]] = {}
    for t in tensors:
        a = t._data
        key = (type(a).__module__, str(a.dtype))
        chunks = groups.setdefault(key, [[]])
        if chunks[-1] and sum(x._data.nbytes for x in chunks[-1]) + a.nbytes > cap:
            chunks.append([])
        chunks[-1].append(t)
    for (_, dt), chunks in groups.items():
        for chunk in chunks:
            arrays = [t._data for t in chunk]
            xp = np if type(arrays[0]) is np.ndarray else __import__("cupy")
            comm_dt = dt if dt in _COMM_DTYPES else ("float32" if arrays[0].dtype.kind == "f" else "int32")
            flat = xp.concatenate([a.reshape(-1).astype(comm_dt) for a in arrays]) if arrays else xp.zeros(0)
            w = broadcast(_wrap(flat), group=pg, group_src=0, async_op=True)
            _wait(w, pg._timeout, pg.rank(), what)
            off = 0
            for a in arrays:
                a[...] = flat[off:off + a.size].reshape(a.shape).astype(a.dtype)
                off += a.size


def _describe(names: List[str], params: List[Tensor]) -> List[list]:
    return [[n, list(p._data.shape), str(p._data.dtype), "cpu" if type(p._data) is np.ndarray else "cuda"]
            for n, p in zip(names, params)]


def _exchange_bytes(payload: bytes, src: int, pg: Any, what: str) -> bytes:
    """Broadcast a byte string from group rank `src` (length first, then the bytes as int32 words)."""
    n = comm_tensor(np.array([len(payload)], dtype=np.int64), pg)
    _wait(broadcast(n, group=pg, group_src=src, async_op=True), pg._timeout, pg.rank(), what)
    size = int(host(n)[0])
    words = np.zeros((size + 3) // 4, dtype=np.int32)
    if pg.rank() == src:
        words.view(np.uint8)[:size] = np.frombuffer(payload, dtype=np.uint8)
    t = comm_tensor(words, pg)
    _wait(broadcast(t, group=pg, group_src=src, async_op=True), pg._timeout, pg.rank(), what)
    return host(t).view(np.uint8)[:size].tobytes()


def _verify_params_across_processes(names: List[str], params: List[Tensor], pg: Any) -> None:
    """Raise on every rank, naming the first mismatch and the rank, unless all ranks hold the same parameters."""
    desc = _describe(names, params)
    blob = json.dumps(desc).encode()
    digest = np.frombuffer(hashlib.sha256(blob).digest()[:16], dtype=np.int64)
    mine = comm_tensor(np.concatenate([np.array([len(params)], dtype=np.int64), digest]), pg)
    every = comm_tensor(np.zeros(3 * pg.size(), dtype=np.int64), pg)
    w = all_gather_into_tensor(every, mine, group=pg, async_op=True)
    _wait(w, pg._timeout, pg.rank(), "all-gather of parameter descriptions (checking every rank has the same model)")
    rows = host(every).reshape(pg.size(), 3)
    bad = [r for r in range(1, pg.size()) if not np.array_equal(rows[r], rows[0])]
    if not bad:
        return
    r = bad[0]
    what = "broadcast of parameter descriptions (reporting a model mismatch)"
    ref = json.loads(_exchange_bytes(blob, 0, pg, what))
    other = json.loads(_exchange_bytes(blob, r, pg, what))
    prefix = f"DDP expects same model across all ranks, but Rank {r} "
    if len(other) != len(ref):
        detail = f"has {len(other)} params, while rank 0 has inconsistent {len(ref)} params."
    else:
        detail = "has a different model"
        for k, (a, b) in enumerate(zip(ref, other)):
            if a != b:
                detail = (f"has parameter #{k} '{b[0]}' of shape {b[1]}, dtype {b[2]}, device {b[3]}, while rank 0 has "
                          f"'{a[0]}' of shape {a[1]}, dtype {a[2]}, device {a[3]}.")
                break
    raise RuntimeError(prefix + detail + f" (checked on rank {pg.rank()})")


class DistributedDataParallel(Module):
    """Data parallelism: the module is replicated on every rank and gradients are averaged during backward."""

    def __init__(self, module: Module, device_ids: Optional[List[Any]] = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: bool = True, init_sync: bool = True, process_group: Any = None,
                 bucket_cap_mb: Optional[float] = None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = True, static_graph: bool = False,
                 delay_all_reduce_named_params: Any = None, param_to_hook_all_reduce: Any = None,
                 mixed_precision: Any = None, device_mesh: Any = None, *,
                 first_bucket_cap_mb: Optional[float] = None) -> None:
        # first_bucket_cap_mb (a tinytorch extension): size limit of the first bucket formed, PyTorch's fixed
        # 1 MiB by default; pass bucket_cap_mb to get one bucket for everything at a large cap.
        super().__init__()
        if mixed_precision is not None or delay_all_reduce_named_params is not None or device_mesh is not None:
            raise NotImplementedError("tinytorch's DistributedDataParallel does not support mixed_precision, "
                                      "delay_all_reduce_named_params or device_mesh")
        self.module = module
        pg = _c10d._resolve(process_group)
        if pg is None:
            raise ValueError("DistributedDataParallel: this rank is not a member of process_group")
        self.process_group = pg
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.device_ids = device_ids
        names, params, seen = [], [], set()
        for n, p in module.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                names.append(n)
                params.append(p)
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter that "
                               "requires a gradient.")
        self._param_names = names
        self._module_buffers = [b for b in module.buffers()]
        _verify_params_across_processes(names, params, pg)
        if init_sync and pg.size() > 1:
            _broadcast_coalesced(list(module.parameters()) + self._module_buffers, pg,
                                 "broadcast of parameters and buffers from rank 0")
        cap_mb = 25 if bucket_cap_mb is None else bucket_cap_mb
        self.bucket_bytes_cap = int(cap_mb * 1024 * 1024)
        first = DEFAULT_FIRST_BUCKET_BYTES if first_bucket_cap_mb is None else int(first_bucket_cap_mb * 1024 * 1024)
        self.reducer = Reducer(params, names, pg, self.bucket_bytes_cap, first,
                               find_unused_parameters, gradient_as_bucket_view, static_graph)
        object.__setattr__(self, "_comm_hook_registered", False)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """Run the wrapped module; when grad is on and sync is required, arm the Reducer for this backward."""
        sync = is_grad_enabled() and self.require_backward_grad_sync
        self.reducer.prepare_for_forward(sync)
        if self.broadcast_buffers and self.require_forward_param_sync and self._module_buffers and \
                self.process_group.size() > 1:
            _broadcast_coalesced(self._module_buffers, self.process_group, "broadcast of buffers from rank 0")
        out = self.module(*inputs, **kwargs)
        if sync:
            self.reducer.prepare_for_backward(out)
        return out

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Skip gradient all-reduce for forward/backward passes inside this context (gradients accumulate)."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def register_comm_hook(self, state: Any, hook: Callable[[Any, GradBucket], Future]) -> None:
        """Replace the bucket all-reduce with hook(state, bucket) -> Future of the reduced flat tensor."""
        if self._comm_hook_registered:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be called once.")
        if not callable(hook):
            raise TypeError("register_comm_hook: hook must be callable as hook(state, bucket)")
        if self.reducer.num_syncs > 0:
            raise RuntimeError("register_comm_hook must be called before the first backward pass")
        object.__setattr__(self, "_comm_hook_registered", True)
        self.reducer.comm_hook = hook
        self.reducer.comm_hook_state = state

    def _set_static_graph(self) -> None:
        """Declare the graph static (same parameters used the same number of times every iteration)."""
        if self.reducer.num_syncs > 0:
            raise RuntimeError("_set_static_graph must be called before the first iteration")
        self.static_graph = True
        self.reducer.static_graph = True
        self.reducer.static_first_iter = True

    @property
    def last_step_stats(self) -> Dict[str, Any]:
        """Communication of the last synchronized backward: comm_ms (time the backend spent running the bucket
        all-reduces, from its own start and end stamps), overlapped_ms (the part before the last gradient was
        ready, i.e. hidden behind backward), overlap_fraction, exposed_ms, num_buckets, bucket_bytes,
        first_launch_to_last_grad_ms."""
        return dict(self.reducer.last_step_stats)

    def __del__(self) -> None:
        try:
            self.reducer.remove_hooks()
        except Exception:  # noqa: BLE001 - interpreter teardown
            pass
