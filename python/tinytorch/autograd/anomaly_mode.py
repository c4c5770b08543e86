"""Anomaly detection: nodes remember the forward traceback that created them, and backward checks
every node's outputs for NaN, so the first bad node is named with where it came from."""
from __future__ import annotations

from .. import _C


class detect_anomaly:
    """Context manager (and decorator) that turns anomaly detection on for its block."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self) -> None:
        self._prev = _C._is_anomaly_enabled()
        _C._set_anomaly_enabled(True)

    def __exit__(self, *exc) -> None:
        _C._set_anomaly_enabled(self._prev)

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off, now (as a call) or for a block (as a context manager)."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self._prev = _C._is_anomaly_enabled()
        _C._set_anomaly_enabled(bool(mode))

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        _C._set_anomaly_enabled(self._prev)


def is_anomaly_enabled() -> bool:
    return _C._is_anomaly_enabled()
