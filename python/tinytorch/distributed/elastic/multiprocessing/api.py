"""Start worker processes, capture their output, and stop them without leaving any behind.

Each worker leads its own process group (``start_new_session``), so the agent can signal the
worker and everything it spawned with one ``killpg``; on Linux each worker also asks the kernel
for SIGKILL when the agent dies (``PR_SET_PDEATHSIG``), so a SIGKILLed agent leaves no orphans.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import enum
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Optional

__all__ = ["Std", "parse_std", "WorkerProcess", "start_worker_process", "stop_processes"]

_PR_SET_PDEATHSIG = 1
_console_lock = threading.Lock()


class Std(enum.IntFlag):
    """Which streams to capture: torchrun's 0 (none), 1 (stdout), 2 (stderr), 3 (both)."""

    NONE = 0
    OUT = 1
    ERR = 2
    ALL = 3


def parse_std(spec: str, local_world_size: int) -> dict[int, Std]:
    """Parse ``"3"`` (every local rank) or ``"0:1,1:2"`` (per local rank) into {local_rank: Std}."""
    spec = (spec or "0").strip()
    try:
        if ":" not in spec:
            value = Std(int(spec))
            return {lr: value for lr in range(local_world_size)}
        result = {lr: Std.NONE for lr in range(local_world_size)}
        for item in spec.split(","):
            lr, v = item.split(":")
            result[int(lr)] = Std(int(v))
        return result
    except ValueError as e:
        raise ValueError(f"bad stream spec {spec!r}: expected 0-3 or local_rank:0-3,...") from e


def _load_prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


# Looked up once in the agent: the child between fork and exec should do as little as possible.
_prctl = _load_prctl()


def _child_preexec(parent_pid: int) -> None:
    # The death signal fires when the forking *thread* exits, so the agent starts workers only
    # from its main thread, which lives as long as the agent.
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    # The agent may have died between fork and prctl; then no signal will ever come.
    if os.getppid() != parent_pid:
        os._exit(1)


@dataclass
class WorkerProcess:
    """A started worker: its Popen, identity, log files and the threads copying its output."""

    popen: subprocess.Popen
    rank: int
    local_rank: int
    error_file: str
    stdout_path: Optional[str] = None
    stderr_path: Optional[str] = None
    threads: list[threading.Thread] = field(default_factory=list)
    files: list[IO[bytes]] = field(default_factory=list)
    exit_observed_at: Optional[float] = None

    @property
    def pid(self) -> int:
        """Return the worker's pid (also its process group id)."""
        return self.popen.pid

    def poll(self) -> Optional[int]:
        """Return the exit code (negative for a signal) or None while running."""
        code = self.popen.poll()
        if code is not None and self.exit_observed_at is None:
            self.exit_observed_at = time.time()
        return code

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the worker's whole process group; quietly skip a group that is gone."""
        try:
            os.killpg(self.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def close_logs(self, timeout: float = 2.0) -> None:
        """Wait (bounded) for the output-copying threads to drain, then close the log files."""
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        for f in self.files:
            try:
                f.close()
            except OSError:
                pass


def _copy_stream(src: IO[bytes], log: IO[bytes], console: Optional[IO[bytes]], prefix: bytes) -> None:
    # Line by line so that console lines from different ranks do not interleave mid-line.
    try:
        for line in iter(src.readline, b""):
            log.write(line)
            log.flush()
            if console is not None:
                with _console_lock:
                    console.write(prefix + line)
                    console.flush()
    except (OSError, ValueError):
        pass  # the log or console was closed under us during shutdown
    finally:
        src.close()


def start_worker_process(
    args: list[str],
    env: dict[str, str],
    rank: int,
    local_rank: int,
    log_dir: Optional[str],
    redirect: Std,
    tee: Std,
    prefix: str,
) -> WorkerProcess:
    """Start one worker in its own session; with ``log_dir`` keep stdout.log/stderr.log there.

    A stream in ``redirect`` goes only to its file; a stream in ``tee`` (or any stream when
    ``log_dir`` is given and it is not redirected) goes to the file and to the console, prefixed.
    Without ``log_dir`` nothing is captured and the worker shares the agent's console.
    """
    streams: dict[str, object] = {"stdout": None, "stderr": None}
    paths: dict[str, Optional[str]] = {"stdout": None, "stderr": None}
    plan: list[tuple[str, IO[bytes], Optional[IO[bytes]]]] = []
    files: list[IO[bytes]] = []
    if log_dir is not None:
        os.makedirs(log_dir, exist_ok=True)
        for name, flag, console in (("stdout", Std.OUT, sys.stdout), ("stderr", Std.ERR, sys.stderr)):
            path = os.path.join(log_dir, f"{name}.log")
            paths[name] = path
            f = open(path, "wb")
            files.append(f)
            if redirect & flag and not tee & flag:
                streams[name] = f
            else:
                streams[name] = subprocess.PIPE
                plan.append((name, f, getattr(console, "buffer", None)))
    parent = os.getpid()
    try:
        popen = subprocess.Popen(
            args,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=streams["stdout"],
            stderr=streams["stderr"],
            start_new_session=True,
            preexec_fn=lambda: _child_preexec(parent),
        )
    except BaseException:
        for f in files:
            f.close()
        raise
    wp = WorkerProcess(popen, rank, local_rank, env.get("TORCHELASTIC_ERROR_FILE", ""),
                       paths["stdout"], paths["stderr"], files=files)
    for name, log, console in plan:
        t = threading.Thread(target=_copy_stream, args=(getattr(popen, name), log, console, prefix.encode()),
                             name=f"tee-{name}-{rank}", daemon=True)
        t.start()
        wp.threads.append(t)
    return wp


def stop_processes(workers: list[WorkerProcess], sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
    """Send ``sig`` to every worker's process group, SIGKILL whatever is left after ``timeout``, reap all."""
    for w in workers:
        w.signal_group(sig)
        if sig != signal.SIGKILL:
            w.signal_group(signal.SIGCONT)  # a stopped worker (SIGSTOP, a hang) acts on sig only once continued
    deadline = time.monotonic() + timeout
    for w in workers:
        try:
            w.popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for w in workers:
        # Also reaches grandchildren that outlived a worker which exited on its own.
        w.signal_group(signal.SIGKILL)
    for w in workers:
        try:
            w.popen.wait(5.0)
        except subprocess.TimeoutExpired:
            pass  # unkillable (D state): nothing more a user-space agent can do
        w.poll()
        w.close_logs()
