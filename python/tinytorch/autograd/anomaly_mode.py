"""Anomaly detection: nodes remember the forward traceback that created them, and backward checks
every node's outputs for NaN, so the first bad node is named with where it came from.

As in PyTorch the mode is global (not per thread): the engine's worker threads read it too.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

from .. import _C


class detect_anomaly:
    """Context manager (and decorator) that turns anomaly detection on for its block."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = bool(check_nan)
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", stacklevel=2)

    def __enter__(self) -> None:
        self._prev = (_C._is_anomaly_enabled(), _C._anomaly_check_nan())
        _C._set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *exc: Any) -> None:
        _C._set_anomaly_enabled(*self._prev)

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off, now (as a call) or for a block (as a context manager)."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self._prev = (_C._is_anomaly_enabled(), _C._anomaly_check_nan())
        _C._set_anomaly_enabled(bool(mode), bool(check_nan))

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        _C._set_anomaly_enabled(*self._prev)


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on."""
    return _C._is_anomaly_enabled()


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection also checks every node's outputs for NaN."""
    return _C._anomaly_check_nan()
