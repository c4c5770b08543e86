"""torch.futures: a Future holds a value (or an error) that becomes available later, such as the result of
an asynchronous collective or of a DDP communication hook; then() chains work onto it without blocking.

Callbacks run in the thread that completes the future (inline when it is already complete), in the order
they were added. As in PyTorch, an error raised by a then() callback completes the chained future with a
RuntimeError naming it, and an error raised by an add_done_callback() callback is logged, not raised.
"""
from __future__ import annotations

import logging
import threading
import traceback
from typing import Any, Callable, Generic, Iterable, List, Optional, TypeVar, Union

__all__ = ["Future", "collect_all", "wait_all"]

T = TypeVar("T")
S = TypeVar("S")

_log = logging.getLogger(__name__)


def _callback_error(exc: BaseException) -> RuntimeError:
    # PyTorch's text: the error's type and message, then where it was raised.
    frames = traceback.extract_tb(exc.__traceback__)
    where = "".join(f"  {f.filename}({f.lineno}): {f.name}\n" for f in reversed(frames))
    err = RuntimeError(f"Got the following error when running the callback: {type(exc).__name__}: {exc}\n\n"
                       f"At:\n{where}")
    err.__cause__ = exc
    return err


class Future(Generic[T]):
    """A value that becomes available later: wait() blocks for it, then() and add_done_callback() run code
    once it is there. Futures of asynchronous collectives (Work.get_future()) are of this class."""

    def __init__(self, *, devices: Optional[List[Union[int, str, Any]]] = None) -> None:
        """An empty, not yet completed Future. `devices` names the accelerator devices its value's tensors may
        live on (each with an index)."""
        from ._device import device as _device
        checked = []
        for d in devices or []:
            dev = d if isinstance(d, _device) else _device(d)
            if dev.type == "cpu":  # holds no stream to synchronize
                continue
            if dev.index is None:
                raise ValueError(f"Expected devices to have indices, got {d}")
            from . import accelerator
            if not accelerator.is_available():
                raise RuntimeError("Cannot access accelerator device when none is available.")
            checked.append(dev)
        self._devices = checked
        self._cond = threading.Condition()
        self._done = False
        self._value: Any = None
        self._exc: Optional[BaseException] = None
        self._callbacks: List[Callable[["Future[T]"], None]] = []

    def done(self) -> bool:
        """True once the future holds a value or an error."""
        with self._cond:
            return self._done

    def wait(self, timeout: Optional[float] = None) -> T:
        """Block until complete and return the value, or raise the error it was completed with. `timeout`
        (seconds; tinytorch's addition, used by DDP) raises DistTimeoutError when it runs out first."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._done, timeout):
                from ._C._distributed import DistTimeoutError
                raise DistTimeoutError(f"Future not completed within {timeout}s")
            if self._exc is not None:
                raise self._exc
            return self._value

    def value(self) -> T:
        """The value of a completed future (raising its error); only valid after wait() or inside a callback."""
        with self._cond:
            if not self._done:
                raise RuntimeError("Future.value() called before the Future completed: call wait() first, or "
                                   "read the value inside a then() callback")
            if self._exc is not None:
                raise self._exc
            return self._value

    def _complete(self, value: Any, exc: Optional[BaseException]) -> None:
        with self._cond:
            if self._done:
                raise RuntimeError("Attempting to mark a completed Future as complete again. Note that a Future "
                                   "can only be marked completed once.")
            self._value, self._exc, self._done = value, exc, True
            callbacks, self._callbacks = self._callbacks, []
            self._cond.notify_all()
        for cb in callbacks:
            self._run(cb)

    def _run(self, callback: Callable[["Future[T]"], None]) -> None:
        try:
            callback(self)
        except Exception as e:  # PyTorch logs a failing done-callback; completing the future still succeeds
            _log.error("%s", _callback_error(e))

    def set_result(self, result: T) -> None:
        """Complete the future with `result` and run its callbacks (a future completes only once)."""
        self._complete(result, None)

    def set_exception(self, result: BaseException) -> None:
        """Complete the future with an error that wait() and value() raise, and run its callbacks."""
        if not isinstance(result, Exception):
            raise AssertionError(f"{result} is of type {type(result)}, not an Exception.")
        self._complete(None, result)

    def add_done_callback(self, callback: Callable[["Future[T]"], None]) -> None:
        """Run callback(self) once complete (now, if it already is); its errors are logged, not raised."""
        if not callable(callback):
            raise TypeError(f"add_done_callback(): callback must be callable, got {type(callback).__name__}")
        with self._cond:
            if not self._done:
                self._callbacks.append(callback)
                return
        self._run(callback)

    def then(self, callback: Callable[["Future[T]"], S]) -> "Future[S]":
        """A new Future completed with callback(self) once this one completes (with a RuntimeError naming the
        callback's error if it raises, e.g. by calling wait() on a failed future)."""
        if not callable(callback):
            raise TypeError(f"then(): callback must be callable, got {type(callback).__name__}")
        child: Future[S] = Future()
        child._devices = list(self._devices)

        def run(parent: "Future[T]") -> None:
            try:
                result = callback(parent)
            except Exception as e:
                child.set_exception(_callback_error(e))
                return
            child.set_result(result)

        self.add_done_callback(run)
        return child

    def __reduce__(self) -> Any:
        raise RuntimeError("Can not pickle torch.futures.Future")

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<tinytorch.futures.Future ({state}) at {hex(id(self))}>"


def collect_all(futures: List[Future]) -> Future[List[Future]]:
    """A Future completed, once every one of `futures` is, with the list of them (or with the first error
    one of them completed with)."""
    futures = list(futures)
    for f in futures:
        if not isinstance(f, Future):
            raise TypeError(f"collect_all(): expected a list of torch.futures.Future, got an element of type "
                            f"{type(f).__name__}")
    out: Future[List[Future]] = Future()
    if not futures:
        out.set_result([])
        return out
    lock = threading.Lock()
    state = {"left": len(futures), "error": None}

    def one_done(f: Future) -> None:
        with lock:
            if f._exc is not None and state["error"] is None:
                state["error"] = f._exc
            state["left"] -= 1
            last = state["left"] == 0
        if last:
            if state["error"] is not None:
                out.set_exception(state["error"])
            else:
                out.set_result(futures)

    for f in futures:
        f.add_done_callback(one_done)
    return out


def wait_all(futures: Iterable[Future]) -> List[Any]:
    """Wait for every future and return their values, in order; raises the first error one of them holds."""
    return [f.wait() for f in collect_all(list(futures)).wait()]
