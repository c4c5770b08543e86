"""Grad modes (thread-local, kept by the C++ engine): no_grad, enable_grad, set_grad_enabled, inference_mode.

Each is a context manager and a decorator (`@no_grad()`, and like PyTorch also bare `@no_grad`).
"""
from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable

from .. import _C, _tensor

# The per-thread inference flag lives with Tensor, which reads it when it makes a tensor (is_inference()).
_inference = _tensor._inference_thread
_count_lock = threading.Lock()


def _decorate(make_ctx: Callable[[], Any], fn: Callable) -> Callable:
    """Wrap fn (or generator fn) so that each call runs inside a fresh context from make_ctx."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen_wrapper(*args, **kwargs):
            gen = fn(*args, **kwargs)
            # The mode holds only while the generator runs, not between its yields.
            with make_ctx():
                value = next(gen)
            while True:
                try:
                    sent = yield value
                except GeneratorExit:
                    with make_ctx():
                        gen.close()
                    raise
                except BaseException as exc:
                    with make_ctx():
                        value = gen.throw(exc)
                else:
                    try:
                        with make_ctx():
                            value = gen.send(sent)
                    except StopIteration as stop:
                        return stop.value
        return gen_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with make_ctx():
            return fn(*args, **kwargs)
    return wrapper


class _GradModeContext:
    """Base of no_grad/enable_grad: sets grad mode for a block; usable as (bare) decorator."""

    mode: bool = True

    def __new__(cls, orig_func: Callable | None = None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)  # bare @no_grad

    def __enter__(self) -> None:
        self._prev = _C._grad_enabled()
        _C._set_grad_enabled(self.mode)

    def __exit__(self, *exc: Any) -> None:
        _C._set_grad_enabled(self._prev)

    def __call__(self, fn: Callable) -> Callable:
        return _decorate(self.clone, fn)

    def clone(self) -> "_GradModeContext":
        return self.__class__()


class no_grad(_GradModeContext):
    """Ops inside record no graph: outputs do not require grad."""

    mode = False


class enable_grad(_GradModeContext):
    """Turn recording back on inside a no_grad region."""

    mode = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode on or off: immediately as a call, or for a block as a context manager."""

    def __new__(cls, mode: bool):
        return object.__new__(cls)

    def __init__(self, mode: bool) -> None:
        self._prev = _C._grad_enabled()
        self.mode = bool(mode)
        _C._set_grad_enabled(self.mode)

    def __enter__(self) -> None:
        pass

    def __call__(self, fn: Callable) -> Callable:
        _C._set_grad_enabled(self._prev)  # used as a decorator: don't change the mode now
        mode = self.mode
        return _decorate(lambda: set_grad_enabled(mode), fn)

    def clone(self) -> "set_grad_enabled":
        return self.__class__(self.mode)


class inference_mode(_GradModeContext):
    """Like no_grad, for code that will never be differentiated; tensors made inside are inference tensors
    (Tensor.is_inference()). tinytorch does not forbid their later use in autograd or in-place ops."""

    def __new__(cls, mode_or_fn: Any = True):
        if isinstance(mode_or_fn, bool):
            return object.__new__(cls)
        return cls(True)(mode_or_fn)  # bare @inference_mode

    def __init__(self, mode: bool = True) -> None:
        self._inference = bool(mode)
        self.mode = not self._inference

    def __enter__(self) -> None:
        super().__enter__()
        self._prev_inf = getattr(_inference, "on", False)
        _inference.on = self._inference
        if self._inference:
            _count_contexts(1)

    def __exit__(self, *exc: Any) -> None:
        if self._inference:
            _count_contexts(-1)
        _inference.on = self._prev_inf
        super().__exit__(*exc)

    def clone(self) -> "inference_mode":
        return self.__class__(self._inference)


def _count_contexts(delta: int) -> None:
    """Open or close an inference_mode(True) block in Tensor's process-wide count (threads enter concurrently)."""
    with _count_lock:
        _tensor._inference_contexts[0] += delta


class set_multithreading_enabled:
    """Per thread: whether backward runs CUDA nodes on their device threads (default) or all on the
    calling thread. Takes effect at once; as a context manager, restores the old setting on exit."""

    def __init__(self, mode: bool) -> None:
        self._prev = _C._is_multithreading_enabled()
        self.mode = bool(mode)
        _C._set_multithreading_enabled(self.mode)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        _C._set_multithreading_enabled(self._prev)

    def clone(self) -> "set_multithreading_enabled":
        return self.__class__(self.mode)


def is_multithreading_enabled() -> bool:
    """Whether this thread's backward calls use the engine's device threads."""
    return _C._is_multithreading_enabled()


def is_grad_enabled() -> bool:
    """Whether ops on this thread record the graph."""
    return _C._grad_enabled()


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside inference_mode()."""
    return getattr(_inference, "on", False)
