"""tinytorch.cpu: the CPU device module (PyTorch's torch.cpu): availability, and the deprecated cpu.amp."""
from __future__ import annotations

from . import amp  # noqa: F401


def is_available() -> bool:
    """The CPU is always available."""
    return True


def device_count() -> int:
    """One CPU device, as PyTorch counts it."""
    return 1


def current_device() -> str:
    """PyTorch's answer for the CPU device module."""
    return "cpu"


def synchronize(device=None) -> None:
    """CPU work is synchronous: nothing to wait for."""


__all__ = ["amp", "current_device", "device_count", "is_available", "synchronize"]
