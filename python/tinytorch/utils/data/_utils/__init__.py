"""The DataLoader's helpers (PyTorch's torch.utils.data._utils): collation, fetching, the worker loop,
pinning and worker-failure signals. Functions that run in worker processes live at module level so that
the spawn start method can pickle them by name."""
from __future__ import annotations

import atexit
import multiprocessing.util  # noqa: F401 - imported first so its exit handler runs after ours (LIFO)
import sys
import traceback

IS_WINDOWS = sys.platform == "win32"

MP_STATUS_CHECK_INTERVAL = 1.0
"""Seconds between checks that the other side is alive: workers check their parent, the main process its
workers (a SIGCHLD handler reports a dead worker at once when the loader runs on the main thread).
PyTorch checks every 5 s; a check costs a wake-up and a waitpid, so tinytorch checks every second."""

WORKER_JOIN_TIMEOUT = 5.0
"""Seconds a worker told to stop may take to finish its current item before it is terminated."""

python_exit_status = False
"""True once the interpreter is exiting: worker deaths are then expected, not errors."""


def _set_python_exit_flag() -> None:
    global python_exit_status
    python_exit_status = True


atexit.register(_set_python_exit_flag)


class KeyErrorMessage(str):
    """A str whose repr is itself, so a KeyError's multi-line message prints readably."""

    def __repr__(self) -> str:
        return self


class ExceptionWrapper:
    """An exception caught in a worker, carried to the main process as its type and formatted traceback
    (traceback objects cannot cross processes), and re-raised there by reraise()."""

    def __init__(self, exc_info: tuple | None = None, where: str = "in background") -> None:
        exc_info = sys.exc_info() if exc_info is None else exc_info
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self) -> None:
        """Raise the wrapped exception's type with the worker's traceback in its message."""
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = KeyErrorMessage(msg)
        try:
            exception = self.exc_type(msg)
        except Exception:  # noqa: BLE001 - a type whose constructor wants other arguments
            raise RuntimeError(msg) from None
        try:
            raise exception
        finally:
            del exception  # no frame <-> traceback cycle: the loader iterator is freed with the exception


from . import collate, fetch, pin_memory, signal_handling, worker  # noqa: E402,F401
