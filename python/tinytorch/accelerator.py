"""tinytorch.accelerator: device-generic queries (PyTorch 2.6+'s torch.accelerator); CUDA is the only accelerator.

On a machine without a usable GPU (no CuPy, or no device) there is no accelerator: current_accelerator()
is None, device_count() is 0, and the index functions raise as PyTorch does without one.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Iterator, Optional, Union

from . import cuda as _cuda
from ._device import device as _device

__all__ = ["current_accelerator", "current_device_idx", "current_device_index", "device_count", "device_index",
           "is_available", "set_device_idx", "set_device_index", "synchronize"]

_device_t = Union[_device, str, int, None]


def _compiled_accelerator() -> Optional[str]:
    # tinytorch's "build time" accelerator is CUDA when CuPy imports (its kernels load through it).
    try:
        import cupy  # noqa: F401
    except Exception:
        return None
    return "cuda"


def current_accelerator(check_available: bool = False) -> Optional[_device]:
    """The accelerator device type (device('cuda')) or None; with check_available, None unless one is usable."""
    kind = _compiled_accelerator()
    if kind is None or (check_available and not is_available()):
        return None
    return _device(kind)


def is_available() -> bool:
    """Whether an accelerator is present and at least one device is visible (never raises)."""
    return _compiled_accelerator() is not None and _cuda.is_available()


def device_count() -> int:
    """How many accelerator devices are visible; 0 without an accelerator."""
    return _cuda.device_count() if is_available() else 0


def _require(what: str) -> None:
    if not is_available():
        raise RuntimeError("Cannot access accelerator device when none is available.")


def _index_of(device: _device_t, what: str) -> int:
    if isinstance(device, int):
        return device
    d = _device(device)
    acc = current_accelerator(check_available=True)
    if acc is None or d.type != acc.type:
        raise RuntimeError(f"Accelerator expected: torch.accelerator.{what} got {d}, but the current accelerator is "
                           f"{acc.type if acc is not None else 'none (no accelerator is available)'}")
    return _cuda.current_device() if d.index is None else d.index


def current_device_index() -> int:
    """The index of the current accelerator device."""
    _require("current_device_index")
    return _cuda.current_device()


def current_device_idx() -> int:
    """(Deprecated) current_device_index()."""
    warnings.warn("torch.accelerator.current_device_idx() is deprecated in favor of "
                  "torch.accelerator.current_device_index() and will be removed in a future release.",
                  DeprecationWarning, stacklevel=2)
    return current_device_index()


def set_device_index(device: _device_t, /) -> None:
    """Make `device` (an index, 'cuda:i' or a device) the current accelerator device; a negative index is a no-op."""
    idx = _index_of(device, "set_device_index")
    if idx < 0:
        return
    _require("set_device_index")
    _cuda.set_device(idx)


def set_device_idx(device: _device_t, /) -> None:
    """(Deprecated) set_device_index()."""
    warnings.warn("torch.accelerator.set_device_idx() is deprecated in favor of "
                  "torch.accelerator.set_device_index() and will be removed in a future release.",
                  DeprecationWarning, stacklevel=2)
    set_device_index(device)


@contextlib.contextmanager
def device_index(device: Optional[int], /) -> Iterator[None]:
    """Make device index `device` current inside the block and restore the previous one after; None: no change."""
    if device is None:
        yield
        return
    previous = current_device_index()
    set_device_index(device)
    try:
        yield
    finally:
        set_device_index(previous)


def synchronize(device: _device_t = None, /) -> None:
    """Wait for all work queued on the accelerator device (the current one when device is None)."""
    _require("synchronize")
    _cuda.synchronize(None if device is None else _index_of(device, "synchronize"))
