"""Process groups and collectives with torch.distributed's API, on the ring (CPU) and NCCL (CUDA) backends."""
from __future__ import annotations

import atexit
import datetime
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence
from urllib.parse import urlparse

import numpy as np

from tinytorch._C import _distributed as _cdist

from . import _arrays
from ._work import Work, completed_work
from .store import DistError, DistTimeoutError, PrefixStore, Store, TCPStore, _seconds

default_pg_timeout = datetime.timedelta(minutes=30)
default_pg_nccl_timeout = datetime.timedelta(minutes=10)


class ReduceOp:
    """Reduction operators (the values are the C++ codes)."""

    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    _NAMES = {0: "SUM", 1: "AVG", 2: "PRODUCT", 3: "MIN", 4: "MAX"}


class Backend:
    """Backend names."""

    RING = "ring"
    NCCL = "nccl"
    GLOO = "gloo"  # accepted as an alias of ring, so torch.distributed scripts run unchanged
    # Device type -> the backend init_process_group picks for it (PyTorch's map says "gloo" for cpu).
    default_device_backend_map = {"cpu": "ring", "cuda": "nccl"}

    def __new__(cls, name: str) -> str:  # type: ignore[misc]
        return _normalize_backend(name)


def _normalize_backend(name: Optional[str]) -> str:
    if name is None:
        return _default_backend()
    n = str(name).lower()
    if n in ("ring", "gloo", "cpu"):
        return "ring"
    if n in ("nccl", "cuda"):
        return "nccl"
    raise ValueError(f"unknown backend '{name}': use 'ring' (CPU), 'nccl' (CUDA) or None to choose by device")


def get_default_backend_for_device(device: Any) -> str:
    """The backend used for collectives on `device` ('cpu' -> 'ring', 'cuda' -> 'nccl'), as a lower-case string.

    PyTorch answers 'gloo' for cpu; tinytorch's CPU backend is the ring one ('gloo' is accepted as its alias).
    """
    from .._device import device as _device_cls

    dev_type = device.type if isinstance(device, _device_cls) else _device_cls(device).type
    backend = Backend.default_device_backend_map.get(dev_type)
    if backend is None:
        raise ValueError(f"Default backend not registered for device : {device}")
    return backend


def _cuda_available() -> bool:
    from tinytorch import cuda

    return bool(cuda.is_available())


def _default_backend() -> str:
    return "nccl" if _cuda_available() else "ring"


class ProcessGroup:
    """A set of ranks that run collectives together; wraps one backend (ring or NCCL)."""

    def __init__(self, backend: Any, backend_name: str, rank: int, ranks: List[int], store: Store, name: str,
                 timeout: float) -> None:
        self._backend = backend
        self._backend_name = backend_name
        self._rank = rank
        self._ranks = ranks
        self._store = store
        self._name = name
        self._timeout = timeout
        level = os.environ.get("TINYTORCH_DISTRIBUTED_DEBUG", os.environ.get("TORCH_DISTRIBUTED_DEBUG", ""))
        self._debug = level.upper() == "DETAIL"
        self._debug_seq = 0
        self._object_seq = 0
        self._lock = threading.Lock()
        self._fr_watchdog: Any = None  # the default group's flight-recorder dump watchdog

    def rank(self) -> int:
        """This process's rank within the group."""
        return self._rank

    def size(self) -> int:
        """Number of ranks in the group."""
        return len(self._ranks)

    def name(self) -> str:
        """The group's name."""
        return self._name

    @property
    def transport(self) -> str:
        """How the ring backend moves bytes between neighbours: 'shm', 'tcp', or 'none' (one rank); 'nccl' on GPUs."""
        return getattr(self._backend, "transport", self._backend_name)

    def _shutdown(self) -> None:
        self._backend.shutdown()
        if self._fr_watchdog is not None:
            self._fr_watchdog.stop()

    def _bytes_sent(self) -> int:
        """Payload bytes this rank's collectives have sent so far, counted by the ring backend (0 on NCCL)."""
        return int(getattr(self._backend, "bytes_sent", 0))

    def __repr__(self) -> str:
        return f"ProcessGroup(name={self._name}, backend={self._backend_name}, rank={self._rank}, size={self.size()})"


class _NonGroupMember:
    def __repr__(self) -> str:
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    """Sentinels, as in torch.distributed."""

    WORLD: Optional[ProcessGroup] = None
    NON_GROUP_MEMBER = _NonGroupMember()


# torch.distributed.group.WORLD
group = GroupMember

_state_lock = threading.Lock()
_default_pg: Optional[ProcessGroup] = None
_groups: Dict[str, ProcessGroup] = {}
_group_count = 0
_generation = 0
_pg_prefix = ""


# ------------------------------------------------------------------ initialization


def is_available() -> bool:
    """The distributed package is always built into tinytorch."""
    return True


def is_initialized() -> bool:
    """True between init_process_group and destroy_process_group."""
    return _default_pg is not None


def is_nccl_available() -> bool:
    """True if libnccl.so.2 can be loaded."""
    from . import _nccl

    return _nccl.nccl_available()


def _env_int(name: str) -> Optional[int]:
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"environment variable {name}={v!r} is not an integer") from None


def _store_from_init_method(init_method: str, rank: int, world_size: int, timeout: float) -> Store:
    url = urlparse(init_method)
    if url.scheme == "env":
        addr = os.environ.get("MASTER_ADDR")
        port = _env_int("MASTER_PORT")
        missing = [n for n, v in (("MASTER_ADDR", addr), ("MASTER_PORT", port)) if v is None]
        if missing:
            raise ValueError(f"init_method='env://' needs the environment variable(s) {', '.join(missing)}")
    elif url.scheme == "tcp":
        if not url.hostname or not url.port:
            raise ValueError(f"init_method {init_method!r} must look like tcp://host:port")
        addr, port = url.hostname, url.port
    else:
        raise ValueError(f"unsupported init_method {init_method!r}: use 'env://' or 'tcp://host:port'")
    # Under an agent that hosts the store itself (the launcher), every worker is a client.
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() in ("1", "true")
    return TCPStore(addr, port, world_size, is_master=(rank == 0 and not agent_store), timeout=timeout,
                    wait_for_workers=not agent_store)


def _unwrap_store(store: Store) -> tuple:
    prefix = ""
    s = store
    while isinstance(s, PrefixStore):
        prefix = f"{s.prefix}/{prefix}" if prefix else s.prefix
        s = s.underlying_store
    if not isinstance(s, TCPStore):
        raise TypeError(f"process groups need a TCPStore (optionally wrapped in PrefixStore), got {type(s).__name__}")
    return s, prefix


def _store_address(store: Store) -> tuple:
    """(host, port, key prefix) of the TCPStore under `store`, as the C++ side connects to it."""
    tcp, prefix = _unwrap_store(store)
    return ("127.0.0.1" if tcp.host in ("", "0.0.0.0") else tcp.host), tcp.port, prefix


def _make_backend(backend: str, store: Store, rank: int, size: int, timeout: float) -> Any:
    host, port, prefix = _store_address(store)
    if backend == "ring":
        return _cdist.ProcessGroupRing(
            host, port, prefix, rank, size, timeout,
            transport=os.environ.get("TINYTORCH_RING_TRANSPORT", "auto"),
            segment_bytes=int(os.environ.get("TINYTORCH_RING_SEGMENT_BYTES", 1 << 20)),
            small_bytes=int(os.environ.get("TINYTORCH_RING_SMALL_BYTES", 256 << 10)),
            shm_capacity=int(os.environ.get("TINYTORCH_RING_SHM_BYTES", 8 << 20)),
        )
    from . import _nccl

    return _nccl.make_nccl_backend(host, port, prefix, rank, size, timeout)


def init_process_group(
    backend: Optional[str] = None,
    init_method: Optional[str] = None,
    timeout: Optional[Any] = None,
    world_size: int = -1,
    rank: int = -1,
    store: Optional[Store] = None,
    group_name: str = "",
    pg_options: Any = None,
    device_id: Any = None,
) -> None:
    """Create the default process group (env:// reads MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, or
    under srun SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and the node list)."""
    global _default_pg, _generation, _group_count, _pg_prefix
    with _state_lock:
        if _default_pg is not None:
            raise RuntimeError("trying to initialize the default process group twice; "
                               "call destroy_process_group() first")
        backend = _normalize_backend(backend)
        if timeout is None:
            timeout = default_pg_nccl_timeout if backend == "nccl" else default_pg_timeout
        timeout_s = _seconds(timeout, 1800.0)
        if (store is None and (init_method or "env://").startswith("env:")
                and (rank is None or rank < 0) and (world_size is None or world_size < 0)):
            # A rank started by srun (one per Slurm task) has SLURM_PROCID/SLURM_NTASKS, not RANK/WORLD_SIZE.
            from .elastic import slurm as _slurm

            os.environ.update(_slurm.process_env(os.environ))
        if rank is None or rank < 0:
            rank = _env_int("RANK") if _env_int("RANK") is not None else -1
        if world_size is None or world_size < 0:
            world_size = _env_int("WORLD_SIZE") if _env_int("WORLD_SIZE") is not None else -1
        if rank < 0 or world_size < 1:
            raise ValueError(f"init_process_group needs rank and world_size (arguments or RANK/WORLD_SIZE); "
                             f"got rank={rank}, world_size={world_size}")
        if rank >= world_size:
            raise ValueError(f"rank {rank} is out of range for world_size {world_size}")
        hosts_store = False
        if store is None:
            store = _store_from_init_method(init_method or "env://", rank, world_size, timeout_s)
            hosts_store = store._is_master
        elif init_method is not None:
            raise ValueError("pass either init_method or store, not both")
        _generation += 1
        _group_count = 0
        # Under tinytorch-run the agent store outlives attempts: keys are per rendezvous round (a membership
        # change starts a round without counting as a restart); other launchers give the restart count.
        restart = os.environ.get("TINYTORCH_RDZV_ROUND") or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        _pg_prefix = f"pg{_generation}r{restart}"
        prefixed = PrefixStore(f"{_pg_prefix}/default_pg", store)
        b = _make_backend(backend, prefixed, rank, world_size, timeout_s)
        b._set_trace_group("0", "default_pg", list(range(world_size)))  # PyTorch's name for the default group
        pg = ProcessGroup(b, backend, rank, list(range(world_size)), prefixed, group_name or "default_pg", timeout_s)
        pg._fr_watchdog = _start_fr_watchdog(store, rank, world_size)
        pg._root_store = store  # keeps a hosted server alive as long as the group
        pg._hosts_store = hosts_store
        _default_pg = pg
        GroupMember.WORLD = pg
        _groups[pg._name] = pg


def _start_fr_watchdog(root: Store, rank: int, world_size: int) -> Any:
    """The flight recorder's dump watchdog of this job generation: it watches `<generation>/exception_dump` in the
    root store, so a restarted job never sees an earlier run's request (None with the recorder off)."""
    from . import flight_recorder

    host, port, prefix = _store_address(root)
    keys = f"{prefix}/{_pg_prefix}/" if prefix else f"{_pg_prefix}/"
    return flight_recorder._start_watchdog(host, port, keys, rank, world_size)


def destroy_process_group(group: Optional[ProcessGroup] = None) -> None:
    """Shut down a group (joining its threads); with no argument, every group and the default one."""
    global _default_pg
    with _state_lock:
        if group is None or group is _default_pg:
            victims = list(_groups.values())
            _groups.clear()
            _default_pg = None
            GroupMember.WORLD = None
        elif isinstance(group, ProcessGroup):
            victims = [group]
            _groups.pop(group._name, None)
        else:
            return
    for g in victims:
        g._shutdown()
    if group is None or group is _default_pg:
        for g in victims:
            if getattr(g, "_root_store", None) is not None:
                _exit_rendezvous(g)


def _exit_rendezvous(g: ProcessGroup) -> None:
    """Keep a store that this rank hosts alive until every rank has destroyed its groups (bounded wait)."""
    # Without this, rank 0 finishing first takes the server down while the others still read from it.
    store, key = g._root_store, f"{_pg_prefix}/destroyed"
    try:
        if store.add(key, 1) == g.size():
            store.set(key + "/all", "1")
        if getattr(g, "_hosts_store", False):
            store.wait([key + "/all"], min(10.0, g._timeout))
    except DistError:
        pass  # a rank died or the store is gone: nothing left to protect


@atexit.register
def _shutdown_at_exit() -> None:
    # Progress threads must be joined while the interpreter can still run their callbacks.
    try:
        destroy_process_group()
    except Exception:  # noqa: BLE001 - exiting anyway
        pass


def _resolve(group: Optional[Any]) -> Optional[ProcessGroup]:
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    if group is None or group is GroupMember.WORLD:
        if _default_pg is None:
            raise RuntimeError("the default process group has not been initialized; call init_process_group() first")
        return _default_pg
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"group must be a ProcessGroup, got {type(group).__name__}")
    return group


def new_group(ranks: Optional[Sequence[int]] = None, timeout: Optional[Any] = None, backend: Optional[str] = None,
              pg_options: Any = None, use_local_synchronization: bool = False, group_desc: Optional[str] = None) -> Any:
    """Create a subgroup; every rank of the default group must call it (non-members get NON_GROUP_MEMBER)."""
    global _group_count
    world = _resolve(None)
    assert world is not None
    world_size = world.size()
    ranks = sorted(set(range(world_size) if ranks is None else (int(r) for r in ranks)))
    for r in ranks:
        if r < 0 or r >= world_size:
            raise ValueError(f"new_group: rank {r} is outside the world of size {world_size}")
    if not ranks:
        raise ValueError("new_group: ranks must not be empty")
    with _state_lock:
        _group_count += 1
        uid = _group_count  # PyTorch's group name: 1, 2, ... in creation order ("0" is the default group)
        name = f"group{uid}"
    me = world.rank()
    if me not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    backend_name = _normalize_backend(backend) if backend is not None else world._backend_name
    timeout_s = _seconds(timeout, world._timeout) if timeout is not None else world._timeout
    root = getattr(world, "_root_store", world._store)
    store = PrefixStore(f"{_pg_prefix}/{name}", root)
    b = _make_backend(backend_name, store, ranks.index(me), len(ranks), timeout_s)
    b._set_trace_group(str(uid), group_desc or "undefined", ranks)
    pg = ProcessGroup(b, backend_name, ranks.index(me), ranks, store, group_desc or name, timeout_s)
    with _state_lock:
        _groups[name] = pg
    return pg


def get_rank(group: Optional[Any] = None) -> int:
    """This process's rank in the group (-1 if not a member)."""
    g = _resolve(group)
    return -1 if g is None else g.rank()


def get_world_size(group: Optional[Any] = None) -> int:
    """Number of ranks in the group (-1 if not a member)."""
    g = _resolve(group)
    return -1 if g is None else g.size()


def get_backend(group: Optional[Any] = None) -> str:
    """The group's backend name: 'ring' or 'nccl'."""
    g = _resolve(group)
    if g is None:
        raise ValueError("get_backend: this rank is not a member of the group")
    return g._backend_name


def get_process_group_ranks(group: ProcessGroup) -> List[int]:
    """Global ranks of the group's members, in group-rank order."""
    return list(group._ranks)


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    """Translate a group rank to a global rank."""
    return group._ranks[group_rank]


def get_group_rank(group: ProcessGroup, global_rank: int) -> int:
    """Translate a global rank to a group rank."""
    try:
        return group._ranks.index(global_rank)
    except ValueError:
        raise ValueError(f"global rank {global_rank} is not in group {group._name} (ranks {group._ranks})") from None


# ------------------------------------------------------------------ collectives


def _debug_check(g: ProcessGroup, fingerprint: str) -> None:
    """Under TINYTORCH_DISTRIBUTED_DEBUG=DETAIL, compare this collective with every other rank's via the store."""
    with g._lock:
        g._debug_seq += 1
        seq = g._debug_seq
    me = g.rank()
    store = g._store
    store.set(f"dbg/{seq}/{me}", fingerprint)
    if seq > 2:
        # Everyone has read call seq-2's fingerprints before writing seq-1's, which we have seen.
        store.delete_key(f"dbg/{seq - 2}/{me}")
    for r in range(g.size()):
        if r == me:
            continue
        try:
            store.wait([f"dbg/{seq}/{r}"], g._timeout)
        except DistTimeoutError:
            raise DistTimeoutError(
                f"rank {me}: TINYTORCH_DISTRIBUTED_DEBUG=DETAIL: rank {r} of group {g._name} did not issue collective "
                f"#{seq} ({fingerprint}) within {g._timeout}s") from None
        other = store.get(f"dbg/{seq}/{r}").decode()
        if other != fingerprint:
            raise DistError(
                f"rank {me}: collective mismatch in group {g._name} at call #{seq}: this rank called {fingerprint} "
                f"but rank {r} called {other} (detected by TINYTORCH_DISTRIBUTED_DEBUG=DETAIL)")


_label = threading.local()


class _debug_label:
    """Name who issues the collectives inside the block (FSDP names its group) in DETAIL-mode fingerprints, so a
    mismatch between ranks says which module each rank was at."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __enter__(self) -> None:
        self.prev = getattr(_label, "value", None)
        _label.value = self.label

    def __exit__(self, *exc: Any) -> None:
        _label.value = self.prev


def _fingerprint(collective: str, arrays: Sequence[Any], **extra: Any) -> str:
    label = getattr(_label, "value", None)
    if label is not None:
        extra["issued_by"] = label
    parts = []
    for a in arrays:
        shape, dt, dev = _arrays.describe(a)
        parts.append(f"{list(shape)}:{dt}:{dev}")
    ex = "".join(f", {k}={v}" for k, v in extra.items())
    return f"{collective}(tensors=[{', '.join(parts)}]{ex})"


def _op_code(op: Any, name: str, dtype: Any, tensor: Any = None) -> int:
    code = int(getattr(op, "value", op))
    if code not in ReduceOp._NAMES:
        raise ValueError(f"{name}: unknown reduce op {op!r}")
    if tensor is not None and _arrays.is_complex(tensor) and code not in (ReduceOp.SUM, ReduceOp.AVG):
        raise ValueError(f"{name} does not support {ReduceOp._NAMES[code]} on complex tensors")
    if code == ReduceOp.AVG and np.dtype(dtype).kind in "iu":
        raise TypeError(f"{name}: ReduceOp.AVG needs a floating-point tensor, got {np.dtype(dtype)}")
    return code


def _issue(
    g: ProcessGroup,
    name: str,
    arrays: List[Any],
    outputs: List[Any],
    tensors: List[Any],
    issue: Callable[[List[Any], bool], Any],
    async_op: bool,
    result: Any,
    fingerprint: Callable[[], str],
    finalizers: Optional[List[Callable[[], None]]] = None,
) -> Optional[Work]:
    """Run one collective: debug check, host staging for CUDA arrays on the ring backend, then issue."""
    if g._backend_name == "nccl":
        for a in arrays:
            if not _arrays.is_cuda(a):
                raise ValueError(f"{name}: the NCCL backend needs CUDA tensors, got a cpu tensor; use a 'ring' group "
                                 "for CPU tensors")
    if g._debug:
        _debug_check(g, fingerprint())
    for t in tensors:
        _arrays.bump_version(t)
    if g._backend_name == "ring" and any(_arrays.is_cuda(a) for a in arrays):
        # The ring backend works on host memory: stage through it and copy back, synchronously.
        import cupy

        host = [cupy.asnumpy(a) if _arrays.is_cuda(a) else a for a in arrays]
        cwork = issue(host, False)
        Work(cwork).wait()
        for a, h in zip(arrays, host):
            if _arrays.is_cuda(a) and any(a is o for o in outputs):
                a.set(h)
        w = completed_work(result)
        for f in finalizers or []:
            f()
        return w if async_op else None
    work = Work(issue(arrays, async_op), result, finalizers)
    if async_op:
        return work
    work.wait()
    return None


def _same_device(name: str, *arrays: Any) -> None:
    devs = {_arrays.is_cuda(a) for a in arrays}
    if len(devs) > 1:
        raise ValueError(f"{name}: all tensors must be on the same device (got a mix of cpu and cuda)")


def all_reduce(tensor: Any, op: Any = ReduceOp.SUM, group: Optional[Any] = None, async_op: bool = False) -> Optional[Work]:
    """Reduce `tensor` across the group in place; every rank gets the result."""
    g = _resolve(group)
    if g is None:
        return None
    a = _arrays.array_of(tensor)
    _arrays.check_contiguous(a, "all_reduce", writable=True)
    t = _arrays.dtype_code(a, "all_reduce")
    code = _op_code(op, "all_reduce", a.dtype, tensor)
    return _issue(g, "all_reduce", [a], [a], [tensor],
                  lambda arr, a_: g._backend.allreduce(_arrays.data_ptr(arr[0]), arr[0].size, t, code, arr[0], a_),
                  async_op, [tensor], lambda: _fingerprint("all_reduce", [a], op=ReduceOp._NAMES[code]))


def _block_arrays(name: str, g: "ProcessGroup", output: Any, input: Any, whole: str) -> tuple:
    """The (output, input) arrays of a collective where one side (`whole`) holds world_size blocks of
    the other's size; checks contiguity, device, dtype and sizes."""
    o, i = _arrays.array_of(output), _arrays.array_of(input)
    _arrays.check_contiguous(o, name, "output", writable=True)
    _arrays.check_contiguous(i, name, "input")
    _same_device(name, o, i)
    if o.dtype != i.dtype:
        raise TypeError(f"{name}: output dtype {o.dtype} differs from input dtype {i.dtype}")
    big, small = (i, o) if whole == "input" else (o, i)
    part = "output" if whole == "input" else "input"
    if big.size != small.size * g.size():
        raise ValueError(f"{name}: {whole} has {big.size} elements but must have {part}.numel() * world_size = "
                         f"{small.size} * {g.size()} = {small.size * g.size()}")
    return o, i


def reduce_scatter_tensor(output: Any, input: Any, op: Any = ReduceOp.SUM, group: Optional[Any] = None,
                          async_op: bool = False, *, _overwrite_input: bool = False) -> Optional[Work]:
    """Reduce `input` (world_size blocks) across the group; rank i gets block i in `output`.
    (_overwrite_input: the caller gives `input` up, so the ring may keep partial sums in it instead of a copy.)"""
    g = _resolve(group)
    if g is None:
        return None
    name = "reduce_scatter_tensor"
    o, i = _block_arrays(name, g, output, input, whole="input")
    t = _arrays.dtype_code(o, name)
    code = _op_code(op, name, o.dtype, output)
    extra = {"overwrite_input": True} if _overwrite_input and g._backend_name == "ring" else {}
    return _issue(g, name, [o, i], [o], [output],
                  lambda arr, a_: g._backend.reduce_scatter(_arrays.data_ptr(arr[0]), _arrays.data_ptr(arr[1]), arr[0].size,
                                                        t, code, (arr[0], arr[1]), a_, **extra),
                  async_op, [output], lambda: _fingerprint(name, [o, i], op=ReduceOp._NAMES[code]))


def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: Optional[Any] = None,
                           async_op: bool = False) -> Optional[Work]:
    """Gather every rank's `input_tensor` into `output_tensor` (rank i's block at position i)."""
    g = _resolve(group)
    if g is None:
        return None
    name = "all_gather_into_tensor"
    o, i = _block_arrays(name, g, output_tensor, input_tensor, whole="output")
    t = _arrays.dtype_code(o, name)
    return _issue(g, name, [o, i], [o], [output_tensor],
                  lambda arr, a_: g._backend.allgather(_arrays.data_ptr(arr[0]), _arrays.data_ptr(arr[1]), arr[1].size, t,
                                                   (arr[0], arr[1]), a_),
                  async_op, [output_tensor], lambda: _fingerprint(name, [o, i]))


def all_gather(tensor_list: List[Any], tensor: Any, group: Optional[Any] = None, async_op: bool = False) -> Optional[Work]:
    """Gather every rank's `tensor` into `tensor_list` (one tensor per rank, same shape and dtype)."""
    g = _resolve(group)
    if g is None:
        return None
    name = "all_gather"
    src = _arrays.array_of(tensor)
    outs = [_arrays.array_of(t) for t in tensor_list]
    if len(outs) != g.size():
        raise ValueError(f"{name}: tensor_list has {len(outs)} tensors but the group has {g.size()} ranks")
    for k, o in enumerate(outs):
        if o.shape != src.shape or o.dtype != src.dtype:
            raise ValueError(f"{name}: tensor_list[{k}] has shape {tuple(o.shape)} and dtype {o.dtype}, expected "
                             f"{tuple(src.shape)} and {src.dtype}")
    _same_device(name, src, *outs)
    xp = np
    if _arrays.is_cuda(src):
        import cupy as xp  # type: ignore[no-redef]
    flat = xp.empty((g.size(),) + tuple(src.shape), dtype=src.dtype)
    contiguous_src = xp.ascontiguousarray(src)
    t = _arrays.dtype_code(src, name)

    def scatter_out() -> None:
        for k, o in enumerate(outs):
            o[...] = flat[k]

    return _issue(g, name, [flat, contiguous_src], [flat], list(tensor_list),
                  lambda arr, a_: g._backend.allgather(_arrays.data_ptr(arr[0]), _arrays.data_ptr(arr[1]), arr[1].size, t,
                                                   (arr[0], arr[1]), a_),
                  async_op, list(tensor_list), lambda: _fingerprint(name, [src]), finalizers=[scatter_out])


def _group_rank_of(g: ProcessGroup, name: str, global_rank: Optional[int], group_rank: Optional[int], arg: str) -> int:
    if group_rank is not None:
        if not 0 <= group_rank < g.size():
            raise ValueError(f"{name}: group_{arg}={group_rank} is outside the group of size {g.size()}")
        return group_rank
    if global_rank is None:
        raise ValueError(f"{name}: pass {arg} (a global rank) or group_{arg}")
    try:
        return g._ranks.index(int(global_rank))
    except ValueError:
        raise ValueError(f"{name}: {arg}={global_rank} is not a member of group {g._name} (ranks {g._ranks})") from None


def broadcast(tensor: Any, src: Optional[int] = None, group: Optional[Any] = None, async_op: bool = False,
              group_src: Optional[int] = None) -> Optional[Work]:
    """Copy rank `src`'s tensor into every rank's `tensor`."""
    g = _resolve(group)
    if g is None:
        return None
    root = _group_rank_of(g, "broadcast", src, group_src, "src")
    a = _arrays.array_of(tensor)
    _arrays.check_contiguous(a, "broadcast", writable=True)
    t = _arrays.dtype_code(a, "broadcast")
    return _issue(g, "broadcast", [a], [a], [tensor],
                  lambda arr, a_: g._backend.broadcast(_arrays.data_ptr(arr[0]), arr[0].size, t, root, arr[0], a_),
                  async_op, [tensor], lambda: _fingerprint("broadcast", [a], src=root))


def reduce(tensor: Any, dst: Optional[int] = None, op: Any = ReduceOp.SUM, group: Optional[Any] = None,
           async_op: bool = False, group_dst: Optional[int] = None) -> Optional[Work]:
    """Reduce `tensor` across the group into rank `dst`'s tensor (the others' are left unchanged)."""
    g = _resolve(group)
    if g is None:
        return None
    root = _group_rank_of(g, "reduce", dst, group_dst, "dst")
    a = _arrays.array_of(tensor)
    _arrays.check_contiguous(a, "reduce", writable=True)
    t = _arrays.dtype_code(a, "reduce")
    code = _op_code(op, "reduce", a.dtype, tensor)
    return _issue(g, "reduce", [a], [a], [tensor],
                  lambda arr, a_: g._backend.reduce(_arrays.data_ptr(arr[0]), arr[0].size, t, code, root, arr[0], a_),
                  async_op, [tensor], lambda: _fingerprint("reduce", [a], op=ReduceOp._NAMES[code], dst=root))


def barrier(group: Optional[Any] = None, async_op: bool = False, device_ids: Optional[List[int]] = None) -> Optional[Work]:
    """Block until every rank of the group has reached the barrier."""
    g = _resolve(group)
    if g is None:
        return None
    return _issue(g, "barrier", [], [], [], lambda arr, a_: g._backend.barrier(a_), async_op, None, lambda: "barrier()")


def _p2p(name: str, tensor: Any, peer: int, g: ProcessGroup, tag: int, async_op: bool) -> Work:
    a = _arrays.array_of(tensor)
    if g._backend_name == "nccl" and not _arrays.is_cuda(a):
        raise ValueError(f"{name}: the NCCL backend needs CUDA tensors, got a cpu tensor")
    writable = name == "recv"
    _arrays.check_contiguous(a, name, writable=writable)
    t = _arrays.dtype_code(a, name)
    if _arrays.is_cuda(a) and g._backend_name == "ring":
        import cupy

        host = cupy.asnumpy(a)
        w = Work(getattr(g._backend, name)(_arrays.data_ptr(host), host.size, t, peer, tag, host, False))
        w.wait()
        if writable:
            a.set(host)
        return completed_work([tensor])
    if writable:
        _arrays.bump_version(tensor)
    return Work(getattr(g._backend, name)(_arrays.data_ptr(a), a.size, t, peer, tag, a, async_op), [tensor])


def isend(tensor: Any, dst: Optional[int] = None, group: Optional[Any] = None, tag: int = 0,
          group_dst: Optional[int] = None) -> Optional[Work]:
    """Start sending `tensor` to rank `dst`; returns a Work."""
    g = _resolve(group)
    if g is None:
        return None
    return _p2p("send", tensor, _group_rank_of(g, "send", dst, group_dst, "dst"), g, tag, True)


def irecv(tensor: Any, src: Optional[int] = None, group: Optional[Any] = None, tag: int = 0,
          group_src: Optional[int] = None) -> Optional[Work]:
    """Start receiving into `tensor` from rank `src`; returns a Work."""
    g = _resolve(group)
    if g is None:
        return None
    return _p2p("recv", tensor, _group_rank_of(g, "recv", src, group_src, "src"), g, tag, True)


def send(tensor: Any, dst: Optional[int] = None, group: Optional[Any] = None, tag: int = 0,
         group_dst: Optional[int] = None) -> None:
    """Send `tensor` to rank `dst` and wait until it has been handed to the transport."""
    g = _resolve(group)
    if g is not None:
        _p2p("send", tensor, _group_rank_of(g, "send", dst, group_dst, "dst"), g, tag, False).wait()


def recv(tensor: Any, src: Optional[int] = None, group: Optional[Any] = None, tag: int = 0,
         group_src: Optional[int] = None) -> int:
    """Receive into `tensor` from rank `src` (required: no wildcard receive); returns src."""
    if src is None and group_src is None:
        raise ValueError("recv: src is required (receiving from any source is not supported)")
    g = _resolve(group)
    if g is not None:
        _p2p("recv", tensor, _group_rank_of(g, "recv", src, group_src, "src"), g, tag, False).wait()
    return int(src) if src is not None else get_global_rank(_resolve(group), int(group_src))  # type: ignore[arg-type]


class P2POp:
    """One point-to-point operation for batch_isend_irecv: `op` is isend or irecv, `peer` a global rank (or
    `group_peer` a rank in `group`)."""

    def __init__(self, op: Callable, tensor: Any, peer: Optional[int] = None, group: Optional[Any] = None,
                 tag: int = 0, group_peer: Optional[int] = None) -> None:
        if op is not isend and op is not irecv:
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` or "
                             "``torch.distributed.irecv``.")
        if peer is None and group_peer is None:
            raise ValueError("P2POp: pass peer (a global rank) or group_peer")
        self.op, self.tensor, self.peer, self.group, self.tag, self.group_peer = op, tensor, peer, group, tag, group_peer

    def __repr__(self) -> str:
        who = f"peer={self.peer}" if self.peer is not None else f"group_peer={self.group_peer}"
        shape, dt, _ = _arrays.describe(_arrays.array_of(self.tensor))
        return f"P2POp({self.op.__name__}, {who}, tensor={list(shape)}:{dt}, tag={self.tag})"


def batch_isend_irecv(p2p_op_list: List[P2POp]) -> List[Work]:
    """Start every send and receive of the list and return their Works (in list order).

    The ops of one call progress together as in PyTorch, whatever order the ranks list them in: they are issued
    grouped by peer in ascending rank order, and between two ranks the lower rank's sends go before its receives
    (the higher rank receives first). Every rank then meets its peers' operations in the same order, so backends
    that run one operation at a time (the ring's progress thread, one NCCL stream) cannot deadlock on a batch.
    """
    if not isinstance(p2p_op_list, list) or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type ``torch.distributed.P2POp``.")
    if not p2p_op_list:
        return []
    groups = {id(_resolve(p.group)) for p in p2p_op_list}
    if len(groups) > 1:
        raise ValueError("batch_isend_irecv: All ops need to use the same group.")
    g = _resolve(p2p_op_list[0].group)
    if g is None:
        return []
    me = g.rank()

    def order(i: int) -> tuple:
        p = p2p_op_list[i]
        peer = _group_rank_of(g, p.op.__name__, p.peer, p.group_peer, "peer")
        sends_first = me < peer
        return (peer, 0 if (p.op is isend) == sends_first else 1, i)

    works: List[Optional[Work]] = [None] * len(p2p_op_list)
    for i in sorted(range(len(p2p_op_list)), key=order):
        p = p2p_op_list[i]
        if p.op is isend:
            works[i] = isend(p.tensor, p.peer, p.group, p.tag, group_dst=p.group_peer)
        else:
            works[i] = irecv(p.tensor, p.peer, p.group, p.tag, group_src=p.group_peer)
    return works  # type: ignore[return-value]


# ------------------------------------------------------------------ all-to-all (pairwise exchange over send/recv)

_ALL_TO_ALL_TAG = 0x7A2A  # a tag of its own, so user send/recv on the same pair never match an exchange's messages


class _WorkGroup:
    """Several C work handles seen as one (Work's interface): done when all are, failed when any failed."""

    def __init__(self, works: List[Any], description: str) -> None:
        self._works = works
        self.description = description

    def wait(self, timeout: float) -> None:
        for w in self._works:
            w.wait(timeout)

    def is_completed(self) -> bool:
        return all(w.is_completed() for w in self._works)

    def is_success(self) -> bool:
        return all(w.is_success() for w in self._works)

    def _failed(self) -> Optional[Any]:
        return next((w for w in self._works if w.is_completed() and w.error_kind() != 0), None)

    def error_kind(self) -> int:
        w = self._failed()
        return 0 if w is None else w.error_kind()

    def error_message(self) -> str:
        w = self._failed()
        return "" if w is None else w.error_message()

    def add_done_callback(self, fn: Callable[[], None]) -> None:
        left = [len(self._works)]
        lock = threading.Lock()

        def one() -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                fn()

        if not self._works:
            fn()
        for w in self._works:
            w.add_done_callback(one)


def _splits(name: str, which: str, sizes: Optional[Sequence[int]], rows: int, n: int) -> List[int]:
    if sizes is None or len(sizes) == 0:
        if rows % n != 0:
            raise ValueError(f"{name}: {which} tensor's first dimension ({rows}) must be divisible by the world size "
                             f"({n}) when {which}_split_sizes is not given")
        return [rows // n] * n
    sizes = [int(s) for s in sizes]
    if len(sizes) != n or any(s < 0 for s in sizes):
        raise ValueError(f"{name}: {which}_split_sizes must have one non-negative size per rank ({n}), got {sizes}")
    if sum(sizes) != rows:
        raise ValueError(f"{name}: {which}_split_sizes sum to {sum(sizes)} but the {which} tensor's first dimension "
                         f"is {rows}")
    return sizes


def _exchange(name: str, g: ProcessGroup, sends: List[Any], recvs: List[Any], tensors: List[Any],
              async_op: bool, result: Any, finalizers: List[Callable[[], None]], fingerprint: str) -> Optional[Work]:
    """Rank r swaps sends[p] for recvs[p] with every peer p: at step k the pairs are (r, (k - r) mod n), a perfect
    matching, and the lower rank of a pair sends first, so even blocking transports (NCCL's one stream) cannot
    deadlock. The own block is copied locally."""
    if g._debug:
        _debug_check(g, fingerprint)
    for t in tensors:
        _arrays.bump_version(t)
    me, n = g.rank(), g.size()
    works: List[Any] = []
    for k in range(n):
        peer = (k - me) % n
        if peer == me:
            recvs[me][...] = sends[me]
            continue
        order = ("send", "recv") if me < peer else ("recv", "send")
        for what in order:
            buf = sends[peer] if what == "send" else recvs[peer]
            if buf.size == 0:
                continue
            w = _p2p(what, buf, peer, g, _ALL_TO_ALL_TAG, True)
            works.append(w)
    handle = Work(_WorkGroup([w._c for w in works if w._c is not None], f"{name} over {n} ranks"), result,
                  finalizers)
    if async_op:
        return handle
    handle.wait()
    return None


def all_to_all_single(output: Any, input: Any, output_split_sizes: Optional[Sequence[int]] = None,
                      input_split_sizes: Optional[Sequence[int]] = None, group: Optional[Any] = None,
                      async_op: bool = False) -> Optional[Work]:
    """Split `input` along dim 0 and send block p to rank p; block p of `output` is what rank p sent here."""
    g = _resolve(group)
    if g is None:
        return None
    name = "all_to_all_single"
    o, i = _arrays.array_of(output), _arrays.array_of(input)
    _arrays.check_contiguous(o, name, "output", writable=True)
    _arrays.check_contiguous(i, name, "input")
    _same_device(name, o, i)
    if o.dtype != i.dtype:
        raise TypeError(f"{name}: output dtype {o.dtype} differs from input dtype {i.dtype}")
    _arrays.dtype_code(o, name)
    if o.ndim == 0 or i.ndim == 0:
        raise ValueError(f"{name}: input and output must have at least one dimension")
    if tuple(o.shape[1:]) != tuple(i.shape[1:]):
        raise ValueError(f"{name}: input shape {tuple(i.shape)} and output shape {tuple(o.shape)} must agree beyond "
                         "the first dimension")
    n = g.size()
    ins = _splits(name, "input", input_split_sizes, i.shape[0], n)
    outs = _splits(name, "output", output_split_sizes, o.shape[0], n)
    fi, fo = i.reshape(i.shape[0], -1), o.reshape(o.shape[0], -1)
    ci, co = [0] + list(np.cumsum(ins)), [0] + list(np.cumsum(outs))
    sends = [fi[ci[p]:ci[p + 1]] for p in range(n)]
    recvs = [fo[co[p]:co[p + 1]] for p in range(n)]
    fp = _fingerprint(name, [o, i], input_split_sizes=ins, output_split_sizes=outs)
    return _exchange(name, g, sends, recvs, [output], async_op, [output], [], fp)


def all_to_all(output_tensor_list: List[Any], input_tensor_list: List[Any], group: Optional[Any] = None,
               async_op: bool = False) -> Optional[Work]:
    """Send input_tensor_list[p] to rank p; output_tensor_list[p] receives what rank p sent to this rank."""
    g = _resolve(group)
    if g is None:
        return None
    name = "all_to_all"
    n = g.size()
    if len(input_tensor_list) != n or len(output_tensor_list) != n:
        raise ValueError(f"{name}: input_tensor_list and output_tensor_list need one tensor per rank ({n}), got "
                         f"{len(input_tensor_list)} and {len(output_tensor_list)}")
    ins = [_arrays.array_of(t) for t in input_tensor_list]
    outs = [_arrays.array_of(t) for t in output_tensor_list]
    for k, (o, i) in enumerate(zip(outs, ins)):
        _arrays.check_contiguous(o, name, f"output_tensor_list[{k}]", writable=True)
        _arrays.check_contiguous(i, name, f"input_tensor_list[{k}]")
        if o.dtype != i.dtype:
            raise TypeError(f"{name}: output_tensor_list[{k}] dtype {o.dtype} differs from input_tensor_list[{k}] "
                            f"dtype {i.dtype}")
        _arrays.dtype_code(o, name)
    _same_device(name, *ins, *outs)
    fp = _fingerprint(name, outs + ins)
    return _exchange(name, g, [i.reshape(-1) for i in ins], [o.reshape(-1) for o in outs], list(output_tensor_list),
                     async_op, list(output_tensor_list), [], fp)


# ------------------------------------------------------------------ Python objects (through the store)


def _next_object_seq(g: ProcessGroup) -> int:
    with g._lock:
        g._object_seq += 1
        return g._object_seq


def _object_from(g: ProcessGroup, what: str, seq: int, src: int) -> bytes:
    """Group rank src's pickled object of call seq. A timeout here is a hang like a backend's: every rank is asked
    for its flight-recorder dump, and the error names both ranks and the call."""
    try:
        return g._store.get(f"obj/{seq}/{src}")
    except DistTimeoutError:
        me = get_global_rank(g, g.rank())
        _cdist._fr_on_collective_failure(me)
        raise DistTimeoutError(f"rank {me}: {what} #{seq} of group {g._name}: rank {get_global_rank(g, src)} did not "
                               f"send its object within {g._timeout}s") from None


def all_gather_object(object_list: List[Any], obj: Any, group: Optional[Any] = None) -> None:
    """Gather a picklable object from every rank into object_list (small objects: it goes through the store)."""
    import pickle

    g = _resolve(group)
    if g is None:
        return
    if len(object_list) != g.size():
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} slots but the group has {g.size()} ranks")
    seq = _next_object_seq(g)
    g._store.set(f"obj/{seq}/{g.rank()}", pickle.dumps(obj))
    for r in range(g.size()):
        object_list[r] = pickle.loads(_object_from(g, "all_gather_object", seq, r))
    g._store.add(f"obj/{seq}/read", 1)
    if g.rank() == 0 and seq > 1:
        _cleanup_objects(g, seq - 1)


def broadcast_object_list(object_list: List[Any], src: Optional[int] = None, group: Optional[Any] = None,
                          group_src: Optional[int] = None) -> None:
    """Replace object_list's items on every rank with rank src's (picklable, small; through the store)."""
    import pickle

    g = _resolve(group)
    if g is None:
        return
    root = _group_rank_of(g, "broadcast_object_list", src, group_src, "src")
    seq = _next_object_seq(g)
    if g.rank() == root:
        g._store.set(f"obj/{seq}/{root}", pickle.dumps(list(object_list)))
    else:
        got = pickle.loads(_object_from(g, "broadcast_object_list", seq, root))
        if len(got) != len(object_list):
            raise ValueError(f"broadcast_object_list: rank {root} sent {len(got)} objects, this rank's list has "
                             f"{len(object_list)} slots")
        object_list[:] = got
    g._store.add(f"obj/{seq}/read", 1)
    if g.rank() == 0 and seq > 1:
        _cleanup_objects(g, seq - 1)


def _cleanup_objects(g: ProcessGroup, seq: int) -> None:
    # Call seq's values may go once every rank has read them (each rank bumps the counter after reading).
    if int(g._store.add(f"obj/{seq}/read", 0)) >= g.size():
        for r in range(g.size()):
            g._store.delete_key(f"obj/{seq}/{r}")
        g._store.delete_key(f"obj/{seq}/read")
