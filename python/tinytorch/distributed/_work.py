"""Work handles and futures returned by collectives (c10d's Work and torch.futures.Future)."""
from __future__ import annotations

import datetime
import threading
from typing import Any, Callable, List, Optional

from tinytorch._C import _distributed as _cdist
from tinytorch.futures import Future  # noqa: F401  (torch.futures.Future: what get_future() returns)

_KIND_TO_EXC = {
    1: _cdist.DistError,
    2: _cdist.DistTimeoutError,
    3: _cdist.DistNetworkError,
}


def _seconds(timeout: Any) -> float:
    if timeout is None:
        return -1.0
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


class Work:
    """Handle of an issued collective: wait(), is_completed(), exception(), get_future(), then()."""

    def __init__(self, cwork: Any, result: Any = None, finalizers: Optional[List[Callable[[], None]]] = None) -> None:
        self._c = cwork
        self._result = result
        self._finalizers = list(finalizers or [])
        self._final_lock = threading.Lock()
        self._finalized = False
        self._future: Optional[Future] = None

    def _finalize(self) -> None:
        # Runs once, on whichever thread sees completion first; the lock makes the other wait for it.
        with self._final_lock:
            if self._finalized:
                return
            self._finalized = True
            if self._c is None or self._c.is_success():
                for f in self._finalizers:
                    f()

    def wait(self, timeout: Optional[Any] = None) -> bool:
        """Block until the collective completes; raise its error, or DistTimeoutError after `timeout`."""
        if self._c is not None:
            self._c.wait(_seconds(timeout))
        self._finalize()
        return True

    def is_completed(self) -> bool:
        """True once the collective finished (successfully or not)."""
        return self._c is None or self._c.is_completed()

    def is_success(self) -> bool:
        """True once the collective finished without error."""
        return self._c is None or self._c.is_success()

    def exception(self) -> Optional[BaseException]:
        """The error the collective failed with, or None."""
        if self._c is None or not self._c.is_completed():
            return None
        kind = self._c.error_kind()
        if kind == 0:
            return None
        return _KIND_TO_EXC.get(kind, _cdist.DistError)(self._c.error_message())

    def result(self) -> Any:
        """The output tensors (as a list), after wait()."""
        return self._result

    def get_future(self) -> Future:
        """A Future completed with the output tensors when the collective finishes."""
        if self._future is None:
            fut = Future()
            self._future = fut

            def done() -> None:
                exc = self.exception()
                if exc is None:
                    self._finalize()
                    fut.set_result(self._result)
                else:
                    fut.set_exception(exc)

            if self._c is None:
                done()
            else:
                self._c.add_done_callback(done)
        return self._future

    def then(self, callback: Callable[[Future], Any]) -> Future:
        """Chain callback(future) after completion; returns the chained Future."""
        return self.get_future().then(callback)

    def __repr__(self) -> str:
        what = self._c.description if self._c is not None else "completed"
        return f"Work({what}, completed={self.is_completed()})"


def completed_work(result: Any = None) -> Work:
    """A Work that is already done (used for synchronous staging paths and trivial cases)."""
    return Work(None, result)
