"""Grad modes (thread-local, kept by the C++ engine): no_grad, enable_grad, set_grad_enabled, inference_mode."""
from __future__ import annotations

import functools
import threading

from .. import _C

_inference = threading.local()


class _GradModeContext:
    """Base of the grad-mode context managers; each also works as a decorator."""

    mode: bool = True

    def __enter__(self) -> None:
        self._prev = _C._grad_enabled()
        _C._set_grad_enabled(self.mode)

    def __exit__(self, *exc) -> None:
        _C._set_grad_enabled(self._prev)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return self.__class__()


class no_grad(_GradModeContext):
    """Ops inside record no graph: outputs do not require grad."""

    mode = False


class enable_grad(_GradModeContext):
    """Turn recording back on inside a no_grad region."""

    mode = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode on or off: immediately as a call, or for a block as a context manager."""

    def __init__(self, mode: bool) -> None:
        self._prev = _C._grad_enabled()
        self.mode = bool(mode)
        _C._set_grad_enabled(self.mode)

    def __enter__(self) -> None:
        pass

    def __call__(self, fn):
        mode = self.mode
        _C._set_grad_enabled(self._prev)  # used as a decorator: don't change the mode now

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_GradModeContext):
    """Like no_grad, for code that will never be differentiated (tinytorch treats it as no_grad)."""

    def __init__(self, mode: bool = True) -> None:
        self.mode = not mode
        self._inference = bool(mode)

    def __enter__(self) -> None:
        super().__enter__()
        self._prev_inf = getattr(_inference, "on", False)
        _inference.on = self._inference

    def __exit__(self, *exc) -> None:
        _inference.on = self._prev_inf
        super().__exit__(*exc)

    def __call__(self, fn):
        on = self._inference

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(on):
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return self.__class__(self._inference)


def is_grad_enabled() -> bool:
    """Whether ops on this thread record the graph."""
    return _C._grad_enabled()


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside inference_mode()."""
    return getattr(_inference, "on", False)
