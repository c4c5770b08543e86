"""Worker deaths reported in the main process as errors rather than hangs (PyTorch's
_utils/signal_handling.py together with its DataLoader.cpp).

Each multi-process iterator registers its workers' pids. A SIGCHLD handler (installed once, on the main
thread, chaining any earlier handler) looks at those pids without reaping them (waitid with WNOWAIT, so
multiprocessing still sees the exit code) and raises for one that exited with an error or was killed. The
iterators also check their workers whenever a wait for data times out, which covers loaders driven from
other threads."""
from __future__ import annotations

import os
import signal
import threading
from typing import Dict, Optional, Tuple

from . import IS_WINDOWS

_worker_pids: Dict[int, Tuple[int, ...]] = {}
_SIGCHLD_handler_set = False
_shutting_down = 0
"""How many worker pools are shutting down right now: the handler then stays quiet, since an exception raised
inside a shutdown (perhaps one run by the garbage collector) would be lost; the iterator's own liveness check
still reports a worker that died meanwhile."""


def _set_worker_pids(key: int, pids: Tuple[int, ...]) -> None:
    if key in _worker_pids:
        raise ValueError("_set_worker_pids should be called only once for each _BaseDataLoaderIter.")
    _worker_pids[key] = tuple(pids)


def _remove_worker_pids(key: int) -> None:
    _worker_pids.pop(key, None)  # gone already when the handler reported one of them


def worker_failure(pid: int, exitcode: Optional[int]) -> Optional[str]:
    """PyTorch's message for a worker that exited with `exitcode` (negative: killed by that signal), or None."""
    if exitcode is None or exitcode == 0:
        return None
    if exitcode > 0:
        return (f"DataLoader worker (pid {pid}) exited unexpectedly with exit code {exitcode}. Details are lost due "
                "to multiprocessing. Rerunning with num_workers=0 may give better error trace.")
    signum = -exitcode
    msg = f"DataLoader worker (pid {pid}) is killed by signal: {signal.strsignal(signum) or signum}. "
    if signum == signal.SIGBUS:
        msg += ("It is possible that dataloader's workers are out of shared memory. Please try to raise your shared "
                "memory limit.")
    return msg


def _error_if_any_worker_fails() -> None:
    """Raise RuntimeError for the first registered worker that died (it stays waitable for its Process)."""
    from . import python_exit_status
    if python_exit_status or _shutting_down:
        return
    for key, pids in list(_worker_pids.items()):
        for pid in pids:
            try:
                info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # already reaped by its Process
                continue
            if info is None:
                continue
            code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
            msg = worker_failure(pid, code)
            if msg is not None:
                _worker_pids.pop(key, None)  # report each loader once; its other workers are shut down next
                raise RuntimeError(msg)


def _set_SIGCHLD_handler() -> None:
    global _SIGCHLD_handler_set
    if (IS_WINDOWS or _SIGCHLD_handler_set or not hasattr(os, "waitid")
            or threading.current_thread() is not threading.main_thread()):
        return
    previous = signal.getsignal(signal.SIGCHLD)
    previous = previous if callable(previous) else None

    def handler(signum, frame) -> None:
        _error_if_any_worker_fails()
        if previous is not None:
            previous(signum, frame)

    signal.signal(signal.SIGCHLD, handler)
    _SIGCHLD_handler_set = True
