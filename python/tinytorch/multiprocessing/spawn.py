"""spawn / start_processes: run fn(i, *args) in nprocs new processes and wait for them, as PyTorch's
torch.multiprocessing.spawn. The first process to fail stops the others, and its failure is raised in the
parent: ProcessRaisedException with the child's traceback when fn raised, ProcessExitedException when the
process exited with a non-zero code or was killed by a signal.

A child reports an exception by writing its formatted traceback to a file of its own, named by the parent
(a file rather than a queue: nothing is left to flush or to deadlock on when a process dies).
"""
from __future__ import annotations

import ctypes
import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
import warnings
from typing import Any, Callable, Dict, List, Optional

__all__ = ["ProcessContext", "ProcessException", "ProcessExitedException", "ProcessRaisedException", "spawn",
           "SpawnContext", "start_processes"]

_log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


class ProcessException(Exception):
    """A process started by spawn/start_processes failed: error_index is its index, error_pid its pid."""

    __slots__ = ["error_index", "error_pid"]

    def __init__(self, msg: str, error_index: int, error_pid: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.error_pid = error_pid

    def __reduce__(self) -> Any:
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """A process failed because fn raised; the message holds the child's traceback."""


class ProcessExitedException(ProcessException):
    """A process exited with a non-zero code (exit_code) or was killed by a signal (signal_name, and a
    negative exit_code)."""

    __slots__ = ["exit_code"]

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name: Optional[str] = None) -> None:
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self) -> Any:
        return type(self), (self.msg, self.error_index, self.error_pid, self.exit_code, self.signal_name)


def _die_with_parent() -> None:
    # Linux only: a child still running when its parent dies gets SIGINT (fn sees KeyboardInterrupt).
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGINT), 0, 0, 0)
        except (OSError, AttributeError):
            pass


def _wrap(fn: Callable[..., Any], i: int, args: tuple, error_file: str) -> None:
    """A child's entry point: fn(i, *args); an exception's traceback goes to error_file and exits with 1."""
    _die_with_parent()
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # stopped by the parent (SIGINT): not a failure of its own
    except Exception:
        with open(error_file, "wb") as fh:
            pickle.dump(traceback.format_exc(), fh)
        sys.exit(1)


class ProcessContext:
    """The processes started by start_processes(..., join=False): join() waits for them and raises the first
    failure."""

    def __init__(self, processes: List[Any], error_files: List[str]) -> None:
        self.error_files = error_files
        self.processes = processes
        self.sentinels: Dict[int, int] = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> List[int]:
        """The processes' pids, by index."""
        return [int(p.pid) for p in self.processes]

    def _join_all(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for p in self.processes:
            p.join(max(0.0, deadline - time.monotonic()))

    def join(self, timeout: Optional[float] = None, grace_period: Optional[float] = None) -> bool:
        """Wait up to `timeout` seconds (None: until one exits) for the processes; True once all have exited
        successfully, False while some still run. When one failed, the others get `grace_period` seconds to
        finish, then SIGTERM, then (after another grace period, 30 s by default) SIGKILL, and the failure is
        raised as ProcessRaisedException or ProcessExitedException."""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0:
                failed = index
                break
        if failed is None:
            return not self.sentinels
        self._stop_others(grace_period)
        raise self._failure(failed)

    def _stop_others(self, grace_period: Optional[float]) -> None:
        if grace_period is not None:
            self._join_all(grace_period)
        for p in self.processes:
            if p.is_alive():
                _log.warning("Terminating process %s via signal SIGTERM", p.pid)
                p.terminate()
        self._join_all(30.0 if grace_period is None else grace_period)
        for p in self.processes:
            if p.is_alive():
                _log.warning("Unable to shutdown process %s via SIGTERM , forcefully exiting via SIGKILL", p.pid)
                p.kill()
            p.join()
        self.sentinels.clear()

    def _failure(self, index: int) -> ProcessException:
        process = self.processes[index]
        error_file = self.error_files[index]
        if not os.access(error_file, os.R_OK):
            code = process.exitcode
            if code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"<Unknown signal {-code}>"
                return ProcessExitedException(f"process {index:d} terminated with signal {name}", error_index=index,
                                              error_pid=process.pid, exit_code=code, signal_name=name)
            return ProcessExitedException(f"process {index:d} terminated with exit code {code:d}", error_index=index,
                                          error_pid=process.pid, exit_code=code)
        with open(error_file, "rb") as fh:
            trace = pickle.load(fh)
        os.unlink(error_file)
        msg = f"\n\n-- Process {index:d} terminated with the following error:\n" + trace
        return ProcessRaisedException(msg, index, process.pid)


class SpawnContext(ProcessContext):
    """The former name of ProcessContext (deprecated since PyTorch 1.4)."""

    def __init__(self, processes: List[Any], error_files: List[str]) -> None:
        warnings.warn("SpawnContext is renamed to ProcessContext since 1.4 release.", stacklevel=2)
        super().__init__(processes, error_files)


def _error_file_name() -> str:
    # A fresh name the child creates only if fn raises: its existence is the signal.
    fd, name = tempfile.mkstemp(prefix="pytorch-errorfile-", suffix=".pickle")
    os.close(fd)
    os.unlink(name)
    return name


def start_processes(fn: Callable[..., Any], args: tuple = (), nprocs: int = 1, join: bool = True,
                    daemon: bool = False, start_method: str = "spawn") -> Optional[ProcessContext]:
    """Start nprocs processes with `start_method` ('spawn', 'fork' or 'forkserver'), each running
    fn(i, *args); with join, wait for all of them (raising the first failure), else return their
    ProcessContext."""
    ctx = multiprocessing.get_context(start_method)
    processes, error_files = [], []
    for i in range(nprocs):
        error_file = _error_file_name()
        process = ctx.Process(target=_wrap, args=(fn, i, args, error_file), daemon=daemon)
        process.start()
        processes.append(process)
        error_files.append(error_file)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn: Callable[..., Any], args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn") -> Optional[ProcessContext]:
    """Spawn nprocs processes running fn(i, *args) (always with the 'spawn' start method: fn must be defined
    at the top level of a module); see start_processes."""
    if start_method != "spawn":
        warnings.warn(f"This method only supports start_method=spawn (got: {start_method}).\n"
                      "To use a different start_method use:\n\t\t torch.multiprocessing.start_processes(...)",
                      FutureWarning, stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
