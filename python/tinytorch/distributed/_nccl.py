"""NCCL backend glue: find libnccl.so.2, take stream pointers from CuPy, adapt to the ring backend's calls."""
from __future__ import annotations

import os
import sys
from typing import Any, List, Tuple

from tinytorch._C import _distributed as _cdist

# Matches ProcessGroupNCCL::Kind.
_ALLREDUCE, _REDUCE_SCATTER, _ALLGATHER, _BROADCAST, _REDUCE, _SEND, _RECV = range(7)


def library_candidates() -> List[str]:
    """Where libnccl.so.2 may be: $TINYTORCH_NCCL_LIBRARY, then nvidia-nccl-cu12/cu13 wheels on sys.path."""
    out: List[str] = []
    env = os.environ.get("TINYTORCH_NCCL_LIBRARY")
    if env:
        out.append(env)
    for base in sys.path:
        path = os.path.join(base or ".", "nvidia", "nccl", "lib", "libnccl.so.2")
        if os.path.exists(path) and path not in out:
            out.append(path)
    return out


def load_nccl() -> Tuple[str, int]:
    """Load NCCL (raises DistError naming the pip package to install); returns (library path, version code)."""
    return tuple(_cdist.nccl_load(library_candidates()))  # type: ignore[return-value]


def nccl_available() -> bool:
    """True if libnccl.so.2 can be loaded."""
    try:
        load_nccl()
        return True
    except _cdist.DistError:
        return False


def _current_stream() -> int:
    import cupy

    return int(cupy.cuda.get_current_stream().ptr)


class _NcclWorkHandle:
    """The interface Work expects, over an NcclWork: wait() makes the current stream wait (no CPU block)."""

    def __init__(self, w: Any) -> None:
        self._w = w

    def wait(self, timeout: float) -> None:
        self._w.wait_stream(_current_stream())

    def is_completed(self) -> bool:
        return self._w.is_completed()

    def is_success(self) -> bool:
        return self._w.is_success()

    def error_kind(self) -> int:
        return self._w.error_kind()

    def error_message(self) -> str:
        return self._w.error_message()

    def add_done_callback(self, fn: Any) -> None:
        self._w.add_done_callback(fn)

    @property
    def description(self) -> str:
        return self._w.description

    def synchronize(self, timeout: float = -1.0) -> None:
        self._w.synchronize(timeout)


class NcclBackend:
    """ProcessGroupNCCL with the same call shape as ProcessGroupRing (pointers are device pointers)."""

    transport = "nccl"

    def __init__(self, c: Any) -> None:
        self._c = c

    def _run(self, kind: int, send: int, recv: int, n: int, t: int, op: int, peer: int, keep: Any) -> _NcclWorkHandle:
        return _NcclWorkHandle(self._c.run(kind, send, recv, n, t, op, peer, _current_stream(), keep))

    def allreduce(self, ptr: int, n: int, t: int, op: int, keep: Any, async_op: bool) -> _NcclWorkHandle:
        return self._run(_ALLREDUCE, ptr, ptr, n, t, op, 0, keep)

    def reduce_scatter(self, out: int, inp: int, n: int, t: int, op: int, keep: Any, async_op: bool) -> _NcclWorkHandle:
        return self._run(_REDUCE_SCATTER, inp, out, n, t, op, 0, keep)

    def allgather(self, out: int, inp: int, n: int, t: int, keep: Any, async_op: bool) -> _NcclWorkHandle:
        return self._run(_ALLGATHER, inp, out, n, t, 0, 0, keep)

    def broadcast(self, ptr: int, n: int, t: int, root: int, keep: Any, async_op: bool) -> _NcclWorkHandle:
        return self._run(_BROADCAST, ptr, ptr, n, t, 0, root, keep)

    def reduce(self, ptr: int, n: int, t: int, op: int, root: int, keep: Any, async_op: bool) -> _NcclWorkHandle:
        return self._run(_REDUCE, ptr, ptr, n, t, op, root, keep)

    def send(self, ptr: int, n: int, t: int, dst: int, tag: int, keep: Any, async_op: bool) -> _NcclWorkHandle:
        return self._run(_SEND, ptr, 0, n, t, 0, dst, keep)

    def recv(self, ptr: int, n: int, t: int, src: int, tag: int, keep: Any, async_op: bool) -> _NcclWorkHandle:
        return self._run(_RECV, 0, ptr, n, t, 0, src, keep)

    def barrier(self, async_op: bool) -> _NcclWorkHandle:
        import cupy

        token = cupy.zeros(1, dtype=cupy.int32)
        w = self._run(_ALLREDUCE, int(token.data.ptr), int(token.data.ptr), 1, 4, 0, 0, token)
        # Like PyTorch's NCCL barrier: the host waits until the device has passed it.
        w.synchronize()
        return w

    def shutdown(self) -> None:
        self._c.shutdown()

    def _set_trace_group(self, name: str, desc: str, ranks: List[int]) -> None:
        self._c._set_trace_group(name, desc, ranks)


def make_nccl_backend(host: str, port: int, prefix: str, rank: int, size: int, timeout: float) -> NcclBackend:
    """Create the NCCL communicator for this rank (rank 0's unique id travels through the store)."""
    load_nccl()
    try:
        import cupy
    except ImportError:
        raise _cdist.DistError("the NCCL backend needs CuPy for CUDA tensors: pip install cupy-cuda12x "
                               "(or cupy-cuda13x)") from None
    if not cupy.cuda.is_available():
        raise _cdist.DistError("the NCCL backend needs a CUDA GPU, and none is usable here; use backend='ring'")
    cupy.cuda.runtime.free(0)  # the runtime creates the device's primary context lazily: make it current now
    return NcclBackend(_cdist.ProcessGroupNCCL(host, port, prefix, rank, size, timeout, library_candidates()))
