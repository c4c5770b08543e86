"""Flight recorder: every rank keeps its last collectives and point-to-point ops in a ring buffer (C++,
csrc/nccl_ring/flight_recorder.cpp) and dumps it in PyTorch's pickle format when a collective fails (every rank
then dumps), on SIGUSR1, or when `dump()` is called. `python -m tinytorch.distributed.flight_recorder.fr_trace`
reads the dumps and says which rank stopped where.

Settings are PyTorch's environment variables, read once per process: TORCH_FR_BUFFER_SIZE (entries, 2000;
0 turns it off), TORCH_FR_DUMP_TEMP_FILE (dump file prefix; the rank is appended), TORCH_NCCL_DUMP_ON_TIMEOUT,
TORCH_INCLUDE_STACK_TRACE, TORCH_INCLUDE_ONLY_ACTIVE, TORCH_NCCL_COORD_CHECK_MILSEC,
TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC.
"""
from __future__ import annotations

import json
import pickle
from typing import Any, Dict, Optional

from tinytorch._C import _distributed as _cdist

__all__ = ["enabled", "dump", "dump_path", "trace"]


def enabled() -> bool:
    """True when this process records collectives (TORCH_FR_BUFFER_SIZE > 0, the default)."""
    return bool(_cdist._fr_enabled())


def dump_path(rank: Optional[int] = None) -> str:
    """The file rank `rank` (default: this process's global rank) dumps to: TORCH_FR_DUMP_TEMP_FILE + rank."""
    return _cdist._fr_dump_path(_global_rank() if rank is None else int(rank))


def dump(include_stack_traces: bool = True, only_active: bool = False) -> str:
    """Write this rank's flight-recorder dump to its dump file (a temporary file, then a rename); return the path.

    Training goes on; `kill -USR1 <pid>` does the same from outside the process.
    """
    if not enabled():
        raise RuntimeError("the flight recorder is off (TORCH_FR_BUFFER_SIZE=0); set TORCH_FR_BUFFER_SIZE to the "
                           "number of entries to keep (PyTorch's default is 2000) before the process starts")
    return _cdist._fr_write_dump(_global_rank(), include_stack_traces, only_active)


def trace(include_collectives: bool = True, include_stack_traces: bool = True,
          only_active: bool = False) -> Dict[str, Any]:
    """This rank's dump as a dict: version, comm_lib_version, pg_config, pg_status and entries (oldest first)."""
    return pickle.loads(_dump_nccl_trace(include_collectives, include_stack_traces, only_active))


def _global_rank() -> int:
    from ..distributed_c10d import get_rank, is_initialized

    return get_rank() if is_initialized() else 0


def _dump_nccl_trace(includeCollectives: bool = True, includeStackTraces: bool = True,  # noqa: N803 - PyTorch's
                     onlyActive: bool = False) -> bytes:
    """PyTorch's torch._C._distributed_c10d._dump_nccl_trace: the pickled dump, as bytes."""
    return _cdist._dump_fr_trace(includeCollectives, includeStackTraces, onlyActive)


_dump_fr_trace = _dump_nccl_trace


def _dump_nccl_trace_json(includeCollectives: bool = True, onlyActive: bool = False) -> str:  # noqa: N803
    """PyTorch's JSON form of the dump: the same keys without stack frames, 0 for a timestamp not reached."""
    d = pickle.loads(_dump_nccl_trace(includeCollectives, False, onlyActive))
    for e in d.get("entries", []):
        for k in ("time_discovered_started_ns", "time_discovered_completed_ns"):
            e[k] = e[k] or 0
        e["process_group"] = list(e["process_group"])
    if not d.get("entries"):
        d.pop("entries", None)
    return json.dumps(d)


_dump_fr_trace_json = _dump_nccl_trace_json


def _reset_fr_recording() -> None:
    """Forget every recorded entry (record ids go on counting, so no later entry is mistaken for an old op's)."""
    _cdist._reset_fr_recording()


def _start_watchdog(host: str, port: int, key_prefix: str, rank: int, world_size: int) -> Optional[Any]:
    """The process's dump watchdog (None with the recorder off): it dumps when another rank asks through the
    store key `<key_prefix>exception_dump`, or on SIGUSR1. Stopped (joined) by destroy_process_group."""
    if not enabled():
        return None
    return _cdist.DumpWatchdog(host, port, key_prefix, rank, world_size)
