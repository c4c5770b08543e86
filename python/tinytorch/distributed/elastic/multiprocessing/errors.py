"""Failure reporting: the ``record`` decorator workers wrap ``main`` with, and the agent's summary.

A worker decorated with ``@record`` writes its uncaught exception to ``$TORCHELASTIC_ERROR_FILE``
as JSON in torchelastic's layout::

    {"message": {"message": "ValueError: boom",
                 "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1764675000"}}}

The agent reads that file back into a :class:`ProcessFailure`; when restarts run out it raises
:class:`ChildFailedError`, whose :meth:`ChildFailedError.format_msg` is the summary it prints.
"""
from __future__ import annotations

import faulthandler
import functools
import json
import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, TypeVar

__all__ = ["record", "ErrorHandler", "ProcessFailure", "ChildFailedError"]

ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"
_NOT_AVAILABLE = "<N/A>"

F = TypeVar("F", bound=Callable[..., Any])


class ErrorHandler:
    """Writes a worker's uncaught exception to the error file the agent named in the environment."""

    def initialize(self) -> None:
        """Dump Python stacks of all threads on fatal signals (SIGSEGV, SIGABRT...) to stderr."""
        try:
            faulthandler.enable(all_threads=True)
        except (RuntimeError, ValueError):
            pass  # no usable stderr (e.g. closed by the caller): nothing to dump to

    def error_file(self) -> Optional[str]:
        """Return the error file path the agent set for this worker, or None outside an agent."""
        return os.environ.get(ERROR_FILE_ENV) or None

    def record_exception(self, exc: BaseException) -> None:
        """Write ``exc`` and its traceback to the error file (no-op without one)."""
        path = self.error_file()
        if not path:
            return
        data = {
            "message": {
                "message": f"{type(exc).__name__}: {exc}",
                "extraInfo": {
                    "py_callstack": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
                    "timestamp": str(int(time.time())),
                },
            }
        }
        # Write-then-rename so the agent never reads half a file if this process is killed mid-write.
        tmp = f"{path}.tmp.{os.getpid()}"
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(tmp, "w") as f:
                json.dump(data, f)
            os.replace(tmp, path)
        except OSError as e:
            print(f"[tinytorch] could not write error file {path}: {e}", file=sys.stderr)


def record(fn: Optional[F] = None, error_handler: Optional[ErrorHandler] = None) -> Any:
    """Decorate a worker's ``main`` so an uncaught exception lands in its error file, then re-raises.

    Usable as ``@record`` or ``@record()``. ``SystemExit`` with code 0 or None counts as success.
    """
    handler = error_handler or ErrorHandler()

    def wrap(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            handler.initialize()
            try:
                return f(*args, **kwargs)
            except SystemExit as se:
                if se.code not in (0, None):
                    handler.record_exception(se)
                raise
            except BaseException as e:
                handler.record_exception(e)
                raise

        return wrapper  # type: ignore[return-value]

    return wrap(fn) if fn is not None else wrap


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@dataclass
class ProcessFailure:
    """One worker that exited non-zero: who, where, when, and why (from its error file if any)."""

    rank: int
    local_rank: int
    pid: int
    exitcode: int
    error_file: str = _NOT_AVAILABLE
    hostname: str = field(default_factory=socket.getfqdn)
    timestamp: float = field(default_factory=time.time)
    message: str = ""
    traceback: str = ""

    def __post_init__(self) -> None:
        if self.error_file != _NOT_AVAILABLE and os.path.isfile(self.error_file):
            self._read_error_file()
        else:
            self.error_file = _NOT_AVAILABLE
        if not self.message:
            if self.exitcode < 0:
                self.message = f"Signal {-self.exitcode} ({_signal_name(-self.exitcode)}) received by PID {self.pid}"
            else:
                self.message = ("no error file written; decorate the worker's main with "
                                "tinytorch.distributed.elastic.multiprocessing.errors.record to get its traceback")

    def _read_error_file(self) -> None:
        try:
            with open(self.error_file) as f:
                msg = json.load(f)["message"]
            self.message = str(msg.get("message", ""))
            extra = msg.get("extraInfo", {})
            self.traceback = str(extra.get("py_callstack", ""))
            # The file's timestamp is when the exception happened, which beats when the agent noticed.
            self.timestamp = float(extra.get("timestamp", self.timestamp))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            self.message = f"unreadable error file ({e})"

    def exit_description(self) -> str:
        """Return e.g. ``1`` or ``-9 (SIGKILL)``."""
        if self.exitcode < 0:
            return f"{self.exitcode} ({_signal_name(-self.exitcode)})"
        return str(self.exitcode)

    def to_dict(self) -> dict:
        """Return a JSON-serialisable copy (published to peer agents through the store)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ProcessFailure":
        """Rebuild a failure another agent published, without touching the local file system."""
        f = cls.__new__(cls)
        for k, v in d.items():
            setattr(f, k, v)
        return f


class ChildFailedError(Exception):
    """Raised by the launcher when workers failed and no restarts remain; carries every failure."""

    def __init__(self, name: str, failures: dict[int, ProcessFailure], note: str = "") -> None:
        if not failures:
            raise ValueError("ChildFailedError needs at least one failure")
        self.name = name
        self.failures = failures
        self.note = note
        super().__init__(self.format_msg())

    def get_first_failure(self) -> tuple[int, ProcessFailure]:
        """Return (rank, failure) of the root cause: the earliest failure, lowest rank on ties."""
        rank = min(self.failures, key=lambda r: (self.failures[r].timestamp, r))
        return rank, self.failures[rank]

    def format_msg(self, width: int = 60) -> str:
        """Format the failure summary box: other failures first, then the root cause."""
        root_rank, root = self.get_first_failure()
        others = [f for r, f in sorted(self.failures.items()) if r != root_rank]
        bar, sep = "=" * width, "-" * width
        lines = [bar, f"{self.name} FAILED", sep, "Failures:"]
        if others:
            for i, f in enumerate(others, start=1):
                lines += self._format_failure(i, f)
        else:
            lines.append("  <NO_OTHER_FAILURES>")
        lines += [sep, "Root Cause (first observed failure):"]
        lines += self._format_failure(0, root)
        if self.note:
            lines += [sep, self.note]
        lines.append(bar)
        return "\n".join(lines)

    @staticmethod
    def _format_failure(idx: int, f: ProcessFailure) -> list[str]:
        when = time.strftime("%Y-%m-%d_%H:%M:%S", time.localtime(f.timestamp))
        out = [
            f"[{idx}]:",
            f"  time      : {when}",
            f"  host      : {f.hostname}",
            f"  rank      : {f.rank} (local_rank: {f.local_rank})",
            f"  exitcode  : {f.exit_description()} (pid: {f.pid})",
            f"  error_file: {f.error_file}",
            f"  message   : {f.message}",
        ]
        if f.traceback:
            out.append("  traceback :")
            out += ["    " + line for line in f.traceback.rstrip().splitlines()]
        else:
            out.append("  traceback : <N/A>")
        return out
